#!/usr/bin/env bash
# The Python package on the GPU machine: its pytest suite on CUDA tensors (TILEMAXSIM_TEST_DEVICE
# =cuda, plus the CUDA-only stream and graph tests), then bench/python_gpu.py beside LIK,
# flash-maxsim and PyLate's torch path. Carry .whl (the tilemaxsim wheel from
# `maturin build --release -o .whl` in crates/tilemaxsim-python, and the peers' wheels:
# late-interaction-kernels 0.4.5, flash-maxsim 0.3.0, pylate 1.6.0 with datasets, dill and
# multiprocess, which `import pylate.scores` needs and the device lacks) and .dev (device_build.sh).
# usage: bash bench/python_gpu.sh [--no-bench]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== pytest on CUDA tensors"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 300 python3 -m pytest -q -rfs --tb=line -W ignore::DeprecationWarning -p no:cacheprovider tests 2>&1 | tail -25)
  [ "${1:-}" = "--no-bench" ] || { echo "== bench"; timeout 420 python3 bench/python_gpu.py --out "$OUT";
    echo "== host time of one call"; timeout 120 python3 bench/python_overhead.py; }
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/python_gpu.log"
