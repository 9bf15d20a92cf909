#!/usr/bin/env bash
# Every test: the Rust workspace (`cargo test --workspace`), then the Python package installed
# with pip from crates/tilemaxsim-python (maturin builds it) into a virtualenv with torch,
# pylate, colbert-ai and Ray from PyPI, and its pytest suite (tests/test_ray.py starts a local
# Ray cluster).
# usage: bash test.sh      (TILEMAXSIM_VENV=DIR picks the virtualenv; default target/py-venv)
set -euo pipefail
cd "$(dirname "$0")"

cargo test --workspace

VENV=${TILEMAXSIM_VENV:-$PWD/target/py-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" -r crates/tilemaxsim-python/requirements-test.txt
"${PIP[@]}" --force-reinstall --no-deps ./crates/tilemaxsim-python
# colbert-ai builds its CPU extension with ninja from the virtualenv.
cd crates/tilemaxsim-python
PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pytest -q tests
