#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 7, in the last 270 s: why d = 320 (B = 10K) reads at 69%
# of the ceiling against 78% at d = 256 and 82% at 384 (call 5): which kernel runs each, its
# launch shape, occupancy, DRAM throughput and stalls (ncu, one launch each).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call7.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
m="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for d in 256 320 384; do
    timeout 70 ncu --clock-control none -k regex:"maxsim" --launch-skip 2 --launch-count 1 --metrics "$m" \
      .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 10000 --doc-len 32:256 --dim $d 2>&1 \
      | grep -E "maxsim_|duration|throughput|grid_size|block_size|registers|occupancy|warps_active|issue_active|cycles_active|stalled" | sed "s/^/[d=$d] /"
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call7.log"
