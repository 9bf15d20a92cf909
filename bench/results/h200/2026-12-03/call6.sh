#!/usr/bin/env bash
# 2026-12-03 (twenty-seventh), device call 6: the training forward's ring in as many stages as fit
# 99 KB (the f32 forward at d > 96 now two stages of 64 rows, 72 KB, where it asked 108 KB, more
# than sm_86/89/120 allow): the autograd, maxsim and split tests on CUDA (float64 twins,
# poisoned outputs; float32 at d = 128 takes the two-stage ring), memcheck and racecheck of the
# float32 training tests, then bench/train_step.py (the f32 forward was 0.602 ms with three
# stages in call 3).
# usage: OUT=$OUT bash bench/results/h200/2026-12-03/call6.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
source bench/seed_kernel_cache.sh
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 120 python3 -m pytest -q -rfs --tb=short \
    -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py tests/test_maxsim.py tests/test_split.py 2>&1 | tail -6)
  for tool in memcheck racecheck; do
    echo "== $(date -u +%T) $tool: the float32 training tests"
    (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 100 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider tests/test_autograd.py \
      -k "float32 and (training or kernels)" 2>&1 | tail -3; echo "$tool exit ${PIPESTATUS[0]}")
  done
  echo "== $(date -u +%T) train_step.py"
  timeout 90 python3 bench/train_step.py --out "$OUT/train" 2>&1 | grep -E "float32|bfloat16 in-batch.*(maxsim |kernel: forward \+)"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call6.log"
