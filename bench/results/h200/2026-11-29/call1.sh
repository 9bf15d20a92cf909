#!/usr/bin/env bash
# Device call 1 of 2026-11-29 (nvidia-h200, binaries of de18b75 in .dev): the previous session's
# unrun fix.sh (the two bit-for-bit codec tests that failed before block_score_split, the runs
# test in full, the rest), racecheck on the runs test, f32 and mixed baselines with ncu's stall
# reasons for the f32 kernel; the kernel cache comes back in $OUT for later calls.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29/call1.sh
set -uo pipefail
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR
[ -e .dev/kcache.tar.xz ] && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  for t in residual_tensors_scored_in_place compressed_search_resident_streamed_and_sharded_agree; do
    echo "== $(date -u +%T) $t"; .dev/test-gpu_codecs $t 2>&1 | grep -E "^test |test result|panicked|assert"
  done
  echo "== $(date -u +%T) the runs test in full, then the rest"
  .dev/test-gpu_codecs batched_kernel_packs 2>&1 | grep -E "^test |test result|panicked|assert"
  TILEMAXSIM_GPU_CASES=1 .dev/test-gpu_codecs --skip residual_tensors --skip compressed_search --skip batched_kernel_packs 2>&1 | grep -E "^test |test result|panicked|assert"
  echo "== $(date -u +%T) baselines"
  bench --dtype f32 --docs 100000 --doc-len 128
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  bench --dtype f16 --docs 100000 --doc-len 128
  tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) ncu f32"
  timeout 120 ncu --clock-control none -k regex:maxsim_bulk_split --launch-skip 3 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f32 --docs 100000 --doc-len 128 > $OUT/ncu_f32.txt 2>&1
  grep -E "Stall|stall|Registers|Occupancy" $OUT/ncu_f32.txt | head -30
  echo "== $(date -u +%T) racecheck, runs test (d = 128, run 128)"
  TILEMAXSIM_GPU_CASES=1 timeout 200 compute-sanitizer --tool racecheck .dev/test-gpu_codecs batched_kernel_packs 2>&1 | grep -E "RACECHECK SUMMARY|hazard|test result|ERROR" | head
  date -u +%T
} 2>&1 | tee "$OUT/call1.log"
