#!/usr/bin/env bash
# 2026-12-02 (twenty-sixth), device call 2: float32 on the training kernels (kernels/train.cu's
# SPLIT forward over f16 planes, f32 dQ and dD), never run before: the autograd and maxsim
# tests on CUDA (float64 twins, poisoned outputs), bench/train_step.py twice, the kernels
# alone (f32_fwd.py), ncu of the f32 forward, and memcheck / racecheck of the float32 training
# tests.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02e/call2.sh  (carry .dev .whl)
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
    -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py tests/test_maxsim.py tests/test_split.py 2>&1 | tail -30)
  echo "== $(date -u +%T) the kernels alone"
  PYTHONPATH=/tmp/site timeout 60 python3 $here/f32_fwd.py 2>&1
  for round in 1 2; do
    echo "== $(date -u +%T) round $round: train_step.py"
    PYTHONPATH=/tmp/site timeout 90 python3 bench/train_step.py --out "$OUT/train_$round" 2>&1
  done
  echo "== $(date -u +%T) ncu of the f32 forward"
  PYTHONPATH=/tmp/site timeout 120 ncu --clock-control none -k regex:maxsim_train --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
    python3 $here/f32_fwd.py --profile > "$OUT/ncu_f32.txt" 2>&1
  grep -E "maxsim_train|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall|Executed Ipc|Local" "$OUT/ncu_f32.txt" | sed 's/  */ /g' | head -24
  echo "== $(date -u +%T) sanitizers: the float32 training tests"
  for tool in memcheck racecheck; do
    (cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site TILEMAXSIM_TEST_DEVICE=cuda timeout 200 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider tests/test_autograd.py \
      -k "float32 and (training or kernels)" > "$OUT/$tool.log" 2>&1; echo "$tool exit $?" >> "$OUT/$tool.log") &
  done
  wait
  tail -4 "$OUT/memcheck.log" "$OUT/racecheck.log"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
