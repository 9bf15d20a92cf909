#!/usr/bin/env bash
# Device call 3 (nvidia-h200): the new batched codec kernels under compute-sanitizer (memcheck,
# racecheck: the runs test at d = 128, runs of 128), exhaustive search at 8.8M documents by the
# old build (.devold, b3e42b7) and the new one (.dev) on the same index, alternated (their
# rankings compared), and a second round of call 2's old / new benches.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29e/call3.sh   (carry .dev, .devold, .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
T0=$(date +%s)
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  echo "== $(date -u +%T) memcheck, racecheck: the runs test (d = 128, runs of 128)"
  TILEMAXSIM_GPU_CASES=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs batched_kernel_packs 2>&1 | tail -3
  TILEMAXSIM_GPU_CASES=1 timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_codecs batched_kernel_packs 2>&1 | tail -3
  echo "== $(date -u +%T) msmarco_scale --only-exhaustive, new (.dev) and old (.devold) alternated"
  timeout 300 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --other .devold/tilemaxsim --work /tmp/msmarco --only-exhaustive
  rm -rf /tmp/msmarco
  echo "== $(date -u +%T) old / new, 32 queries, B = 100K (second round)"
  for case in "8:124 residual --nbits 2" "128 residual --nbits 2" "32:256 residual --nbits 2" "8:124 int8" "8:124 pq --m 16"; do
    set -- $case; len=$1; shift
    for bin in new old; do
      b=.dev/tilemaxsim; [ $bin = old ] && b=.devold/tilemaxsim
      echo -n "$bin "; bench_with $b --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec "$@"
    done
  done
  echo "== $(date -u +%T) ncu, new, residual nbits 2, U[8,124], 32 queries"
  timeout 120 ncu --clock-control none --kernel-name regex:maxsim_codec_wgp_residual2 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section InstructionStats \
    --import-source no -o /tmp/wgp -f \
    .dev/tilemaxsim bench --device cuda --reps 3 --docs 100000 --doc-len 8:124 --queries 32 --kernel wgmma --codec residual --nbits 2 > /dev/null 2>&1
  ncu -i /tmp/wgp.ncu-rep --print-summary none 2>&1 | grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Executed Instructions  " 
  ncu -i /tmp/wgp.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -6 > "$OUT/wgp_sass_new.csv.xz"
  echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/call3.log"
