#!/usr/bin/env bash
# Every test: the Rust workspace (`cargo test --workspace`), then the Python package installed
# with pip from crates/tilemaxsim-python (maturin builds it) into a virtualenv with torch,
# pylate, colbert-ai and Ray from PyPI, and its pytest suite (its client tests start the
# `tilemaxsim serve` binary cargo built: TILEMAXSIM_BIN, required, never skipped;
# tests/test_ray.py starts a local Ray cluster).
# usage: bash test.sh      (TILEMAXSIM_VENV=DIR picks the virtualenv; default target/py-venv)
set -euo pipefail
cd "$(dirname "$0")"
# colbert-ai builds C++ extensions under a lock file torch waits on forever; a run killed
# mid-build leaves it behind in ~/.cache. Every run builds in a directory of its own.
TORCH_EXTENSIONS_DIR=$(mktemp -d -t tilemaxsim-torch-ext-XXXXXX)
export TORCH_EXTENSIONS_DIR
trap 'rm -rf "$TORCH_EXTENSIONS_DIR"' EXIT

cargo test --workspace
# The binary the client tests serve with (already built by the tests above: a no-op).
cargo build -q -p tilemaxsim-cli
export TILEMAXSIM_BIN=$PWD/target/debug/tilemaxsim TILEMAXSIM_REQUIRE_SERVER=1 TILEMAXSIM_REQUIRE_RAY=1

VENV=${TILEMAXSIM_VENV:-$PWD/target/py-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" -r crates/tilemaxsim-python/requirements-test.txt
"${PIP[@]}" --force-reinstall --no-deps ./crates/tilemaxsim-python
# colbert-ai builds its CPU extension with ninja from the virtualenv.
cd crates/tilemaxsim-python
PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pytest -q --timeout 900 tests
