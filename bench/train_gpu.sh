#!/usr/bin/env bash
# The training kernels on the GPU machine: the autograd tests on CUDA tensors (float64 twins,
# poisoned outputs), then bench/train_step.py beside LIK and PyLate's torch path. Carry .whl (the
# tilemaxsim wheel from `maturin build --release -o ../../.whl` in crates/tilemaxsim-python, and
# late-interaction-kernels 0.4.5).
# usage: OUT=DIR [SANITIZE=1] bash bench/train_gpu.sh [--no-bench]   (SANITIZE=1: also the
# bf16 training tests under compute-sanitizer's memcheck and racecheck)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== pytest on CUDA tensors: autograd and maxsim"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 400 python3 -m pytest -q -x -rfs --tb=short \
    -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py tests/test_maxsim.py 2>&1 | tail -30)
  [ "${SANITIZE:-0}" = 1 ] && echo "== compute-sanitizer memcheck and racecheck: the training tests, bf16"
  [ "${SANITIZE:-0}" = 1 ] && for tool in memcheck racecheck; do
    (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 300 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider tests/test_autograd.py -k "training and bfloat16" 2>&1 | tail -4)
  done
  [ "${1:-}" = "--no-bench" ] || { echo "== training step"; timeout 300 python3 bench/train_step.py --out "$OUT"; }
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/train_gpu.log"
