#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 1: maxsim_stream with S = 3 register stages (two chunks
# loaded ahead of the one multiplied, b97e05d) against the landed S = 2, at d = 16..64, f16
# U[32,256] B = 100K, two rounds; S = 3 at three blocks an SM (no spills at any d) too. Tests
# under both variants, plain and under memcheck; ncu's warp stalls at d = 16 and 32. Kernels
# come compiled from here (bench/kernel_cache.sh with these variants, .dev/kcache).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
V=(default STREAM_STAGES=3 STREAM_STAGES=3,STREAM_BLOCKS=3)
{
  device_header
  ls /tmp/tilemaxsim-cache
  echo "== tests under the stage variants $(date -u +%T)"
  for v in STREAM_STAGES=3 STREAM_STAGES=3,STREAM_BLOCKS=3; do
    echo "-- $v"
    TILEMAXSIM_STREAM=1 with "$v" timeout 100 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\[|empty document"
  done
  echo "== bench $(date -u +%T)"
  for round in 1 2; do
    for d in 16 24 32 40 48 56 64; do
      for v in "${V[@]}"; do
        echo -n "[$v] round $round d=$d: "
        TILEMAXSIM_STREAM=1 with "$v" bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
      done
    done
  done
  echo "== memcheck under the stage variants $(date -u +%T)"
  for v in STREAM_STAGES=3 STREAM_STAGES=3,STREAM_BLOCKS=3; do
    echo "-- $v"
    TILEMAXSIM_STREAM=1 TILEMAXSIM_SANITIZER=1 with "$v" timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
  done
  echo "== ncu $(date -u +%T)"
  for d in 16 32; do
    for v in default STREAM_STAGES=3; do
      TILEMAXSIM_STREAM=1 with "$v" timeout 60 ncu --clock-control none -k regex:"maxsim_stream" --launch-skip 2 --launch-count 1 \
        --section WarpStateStats --metrics "gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio" \
        .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim $d 2>&1 \
        | grep -E "duration|throughput|issue_active|warps_active|registers|Stall|Warp Cycles|Issued|Eligible|stall" | sed "s/^/[d=$d $v] /"
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
