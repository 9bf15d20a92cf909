#!/usr/bin/env bash
# Gather here, into .whl (ignored by git), what bench/python_gpu.sh and bench/train_gpu.sh carry
# to the device, which has no network: the tilemaxsim wheel (maturin, abi3, built from this
# tree), the peers' wheels (late-interaction-kernels 0.4.5, flash-maxsim 0.3.0), pylate 1.6.0
# with what `import pylate.scores` needs and the device image lacks (datasets, dill,
# multiprocess, ujson), pylate's sdist (its own tests, tests/test_pylate_suite.py), PyLate's
# pins in .whl/compat (sentence-transformers and transformers 5.3.0: the image's are newer) and
# colbert-ai 0.2.22 with bitarray, GitPython, gitdb and smmap in .whl/colbert. Versions are
# those `pip install -r crates/tilemaxsim-python/requirements-test.txt` resolves (CI's).
# usage: [MATURIN=path] bash bench/python_wheels.sh   (here; then carry .whl)
set -euo pipefail
cd "$(dirname "$0")/.."
MATURIN=${MATURIN:-maturin}
# The device's platform: CPython 3.12 on x86_64 (pure-Python wheels match any platform).
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux1_x86_64)
get() { python3 -m pip download -q --no-deps "${PLAT[@]}" "$@"; }
rm -rf .whl && mkdir -p .whl/compat .whl/colbert
(cd crates/tilemaxsim-python && "$MATURIN" build -q --release -o ../../.whl)
get -d .whl late-interaction-kernels==0.4.5 flash-maxsim==0.3.0 pylate==1.6.0 datasets==5.2.0 \
  dill==0.4.1 multiprocess==0.70.19 ujson==5.12.0
python3 -m pip download -q --no-deps --no-binary=:all: -d .whl pylate==1.6.0
get -d .whl/compat sentence-transformers==5.3.0 transformers==5.3.0
get -d .whl/colbert colbert-ai==0.2.22 bitarray==3.12.3 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3
du -sh .whl && ls .whl .whl/compat .whl/colbert
