#!/usr/bin/env bash
# The Python package on the GPU machine: its pytest suite on CUDA tensors (TILEMAXSIM_TEST_DEVICE
# =cuda, plus the CUDA-only stream and graph tests), then bench/python_gpu.py beside LIK,
# flash-maxsim and PyLate's torch path. Carry .whl (the tilemaxsim wheel from
# `maturin build --release -o .whl` in crates/tilemaxsim-python, and the peers' wheels:
# late-interaction-kernels 0.4.5, flash-maxsim 0.3.0, pylate 1.6.0 with datasets, dill and
# multiprocess, which `import pylate.scores` needs and the device lacks; ujson; .whl/compat:
# sentence-transformers and transformers 5.3.0, PyLate's pins; .whl/pylate-1.6.0.tar.gz, the sdist
# whose tests tests/test_pylate_suite.py runs) and .dev (device_build.sh).
# usage: bash bench/python_gpu.sh [--no-bench | --no-tests]   (--no-tests: the bench half alone)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
# colbert-ai 0.2.22 and the dependencies the device lacks (.whl/colbert: bitarray, GitPython, gitdb,
# smmap), so the colbert drop-in tests run against the original on CUDA too.
if ls .whl/colbert/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/colbert/*.whl || exit 1
  export GIT_PYTHON_REFRESH=quiet
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
source bench/seed_kernel_cache.sh
# PyLate's losses import sentence-transformers' models: where the machine's version does not fit
# pylate 1.6.0, the pinned ones carried in .whl/compat (sentence-transformers and transformers
# 5.3.0) go first on the path.
if ! python3 -c "from pylate import losses" >/dev/null 2>&1 && ls .whl/compat/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site-compat .whl/compat/*.whl || exit 1
  export PYTHONPATH=/tmp/site-compat:/tmp/site
fi
# PyLate's own tests (tests/test_pylate_suite.py) read its sdist from here: no network there.
sdist=$(ls "$PWD"/.whl/pylate-*.tar.gz 2>/dev/null | head -1)
[ -n "$sdist" ] && export TILEMAXSIM_PYLATE_SDIST=$sdist
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  [ "${1:-}" = "--no-tests" ] || { echo "== pytest on CUDA tensors"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 480 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests 2>&1 | tail -60); }
  [ "${1:-}" = "--no-bench" ] || { echo "== bench"; timeout 420 python3 bench/python_gpu.py --out "$OUT";
    echo "== host time of one call"; timeout 120 python3 bench/python_overhead.py; }
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/python_gpu.log"
