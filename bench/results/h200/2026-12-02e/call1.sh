#!/usr/bin/env bash
# 2026-12-02 (twenty-sixth), device call 1: the twenty-fifth session's float32 training path
# (`_autograd.MaxSim` through float16 parts, embedding_bag gradients; never run on a GPU) on
# this tree's Python files over the 16:50 wheel (no Rust change since): the autograd and maxsim
# tests on CUDA, bench/train_step.py twice, the f32 step's stages and kernels
# (f32_profile.py); then racecheck of tests/gpu_any_dim.rs (timed out at 200 s beside PART=1).
# usage: OUT=$OUT bash bench/results/h200/2026-12-02e/call1.sh  (carry .dev .whl)
here=bench/results/h200/2026-12-02e
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
cp crates/tilemaxsim-python/python/tilemaxsim/*.py /tmp/site/tilemaxsim/
{
  device_header
  echo "== $(date -u +%T) autograd and maxsim tests on CUDA"
  (cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site TILEMAXSIM_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -rfs --tb=short \
    -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py tests/test_maxsim.py 2>&1 | tail -8)
  for round in 1 2; do
    echo "== $(date -u +%T) round $round: train_step.py"
    PYTHONPATH=/tmp/site timeout 90 python3 bench/train_step.py --out "$OUT/train_$round" 2>&1
  done
  echo "== $(date -u +%T) f32_profile.py"
  PYTHONPATH=/tmp/site timeout 90 python3 $here/f32_profile.py 2>&1
  echo "== $(date -u +%T) racecheck of gpu_any_dim"
  TILEMAXSIM_SANITIZER=1 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -4
  echo "any-d racecheck exit: ${PIPESTATUS[0]}"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
