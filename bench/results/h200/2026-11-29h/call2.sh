#!/usr/bin/env bash
# 2026-11-29 (eighth), device call 2 (issue 28, exhaustive search at batch 1): the one-warp codec
# kernels rewritten (a k16 step's two f16 pairs by one 8-byte lookup at nbits 1-2; one address
# per array a group, kept in registers; groups in turn in two buffers, none copied but at a
# document's end; tasks claimed four at a time from the counter; 32-bit task division) against
# .devold (main before, same codec kernels as fdd9d27): the codec and IVF tests and memcheck
# on the new counter test; `bench` at MS MARCO's shape by both; the MS MARCO-shaped index
# (built by .devold while this build's kernels compile) searched exhaustively at batches 1 and
# 32 by both builds in turn, run files compared; ncu of the new kernel.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29h/call2.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
SHAPE="--codec residual --nbits 2 --docs 1000000 --doc-len 8:124 --centroids 262144"
{
  (timeout 400 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  device_header
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  timeout 200 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 batched_bulk 2>&1 | grep -E "^test |test result|panicked|FAILED"
  timeout 100 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  TILEMAXSIM_GPU_CASES=1 TILEMAXSIM_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs every_codec 2>&1 | tail -2
  date -u +%T
  for round in 1 2; do
    for bin in .dev .devold; do
      echo -n "[$bin] "
      # shellcheck disable=SC2086
      timeout 120 $bin/tilemaxsim bench --device cuda --reps 20 --dtype f16 $SHAPE 2>&1 | grep -E "^residual" | tail -1
    done
  done
  wait $built
  grep -E "corpus|index|rc" /tmp/msmarco.log | tail -4
  date -u +%T
  for b in 1 32; do
    for bin in .dev .devold .dev .devold; do
      echo -n "$bin exhaustive batch $b: "
      ivf_search $bin/tilemaxsim $b /tmp/e_${bin#.}_$b.trec --exhaustive
    done
    cmp /tmp/e_dev_$b.trec /tmp/e_devold_$b.trec && echo "batch $b: same run files"
  done
  date -u +%T
  # shellcheck disable=SC2086
  timeout 120 ncu --clock-control none -k regex:maxsim_codec_residual2 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics "smsp__inst_executed.sum,smsp__cycles_active.avg,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 $SHAPE > "$OUT/ncu_new.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|inst_executed|cycles_active|Compute \(SM\)|long_scoreboard|_wait_|short_scoreboard|math_pipe" "$OUT/ncu_new.txt"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
