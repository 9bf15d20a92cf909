#!/usr/bin/env bash
# 2026-12-02 (twenty-fifth), device call 1: the training kernels of 2765e37 and f8e3e3b (the
# forward's tile products and fold moved into helpers; never run on a GPU before) on this tree's
# wheel: the autograd and maxsim tests on CUDA tensors (float64 twins, poisoned outputs), the
# bf16 training tests under memcheck and racecheck, bench/train_step.py twice; then the bench
# half of bench/python_gpu.sh (issue 27's Python rows and python_overhead.py), and ncu of the
# d-list misses at the engine's shape (f16 U[32,256], B = 100K: d = 16, 48, 77, 100) and f32.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02d/call1.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
NCU=(ncu --clock-control none -k regex:maxsim --launch-skip 4 --launch-count 1
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy
  --section LaunchStats --section SchedulerStats --section WarpStateStats)
prof() {
  local name=$1; shift
  echo "== $(date -u +%T) ncu $name: tilemaxsim bench --device cuda --reps 3 $*"
  timeout 90 "${NCU[@]}" .dev/tilemaxsim bench --device cuda --reps 3 "$@" >"$OUT/ncu_$name.txt" 2>&1
  grep -E "^  [a-z_]+maxsim|^  maxsim|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Issue Slots Busy|No Eligible|Grid Size|Block Size|Dynamic Shared|Stall|Warp Cycles Per Issued" \
    "$OUT/ncu_$name.txt" | sed 's/  */ /g' | head -30
}
{
  device_header
  echo "== $(date -u +%T) autograd and maxsim tests on CUDA"
  (cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site TILEMAXSIM_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -rfs --tb=short \
    -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py tests/test_maxsim.py 2>&1 | tail -8)
  echo "== $(date -u +%T) sanitizers: the training tests, bf16"
  for tool in memcheck racecheck; do
    (cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site TILEMAXSIM_TEST_DEVICE=cuda timeout 100 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider tests/test_autograd.py \
      -k "training and bfloat16" 2>&1 | tail -3; echo "$tool exit ${PIPESTATUS[0]}")
  done
  for round in 1 2; do
    echo "== $(date -u +%T) round $round: train_step.py"
    PYTHONPATH=/tmp/site timeout 60 python3 bench/train_step.py --out "$OUT/train_$round" 2>&1 | tail -24
  done
  echo "== $(date -u +%T) python_gpu.sh --no-tests"
  timeout 200 bash bench/python_gpu.sh --no-tests > /dev/null 2>&1
  cat "$OUT/python_gpu.log"
  for d in 16 48 77 100; do prof d$d --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; done
  prof f32 --dtype f32 --docs 100000 --doc-len 128
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
