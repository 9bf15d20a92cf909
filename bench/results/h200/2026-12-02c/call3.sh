#!/usr/bin/env bash
# 2026-12-02 (twenty-fourth), device call 3: the training forward's ring (kernels/train.cu) by
# launch shape: the default (three stages of 64 rows, one block a SM by registers) against two
# blocks a SM (TRAIN_FWD_MIN_BLOCKS=2), two stages of 96 rows, six of 32, and the kernel before
# (TRAIN_SMEM=0). The group-0 autograd tests under each (float64 twins, poisoned outputs), the
# sanitizers on the default, then bench/train_step.py under each, two rounds.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02c/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
source bench/seed_kernel_cache.sh
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
mkdir -p "$OUT"
V=(default TRAIN_FWD_MIN_BLOCKS=2 TRAIN_TILE=96,TRAIN_STAGES=2 TRAIN_TILE=32,TRAIN_STAGES=6 TRAIN_SMEM=0)
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== $(date -u +%T) autograd tests on CUDA"
  for v in "${V[@]}"; do
    echo -n "[$v] "
    (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda with "$v" timeout 120 python3 -m pytest -q -x --tb=short \
      -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py 2>&1 | tail -1)
  done
  echo "== $(date -u +%T) sanitizers: the in-batch training tests, bf16"
  for tool in memcheck racecheck; do
    (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 150 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider tests/test_autograd.py \
      -k "training and bfloat16 and (all or holes)" 2>&1 | tail -3; echo "$tool exit ${PIPESTATUS[0]}")
  done
  for round in 1 2; do
    for v in "${V[@]}"; do
      echo "== $(date -u +%T) round $round [$v] train_step.py"
      with "$v" timeout 90 python3 bench/train_step.py --out "$OUT/train_$round" 2>&1 | grep -E "in-batch.*(tilemaxsim|LIK|kernel: forward)"
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
