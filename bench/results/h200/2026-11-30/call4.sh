#!/usr/bin/env bash
# 2026-11-30 (eleventh), device call 4: ncu of the kept f32 kernel (maxsim_bulk_split_f32_d128,
# three products) at B = 100K, Nd = 128, with the same metrics as call 2's variant (instructions,
# issue, stall reasons), and its rate with the clock and throttle reasons sampled.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  nvidia-smi --query-gpu=clocks.sm,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > /tmp/smi.csv 2>&1 & smi=$!
  bench --dtype f32 --docs 100000 --doc-len 128 --reps 2000
  kill $smi; sleep 0.2
  python3 - /tmp/smi.csv <<'PY'
import sys, collections
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 1]
clk = sorted(int(r[0].split()[0]) for r in rows)
print(f"  {len(rows)} samples: SM clock median {clk[len(clk)//2]} MHz (min {clk[0]}, max {clk[-1]}); throttle reasons", dict(collections.Counter(r[1] for r in rows)))
PY
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  echo "== ncu: the kept f32 kernel, B = 100K"
  timeout 150 ncu --clock-control none --kernel-name regex:maxsim_bulk_split_f32 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --metrics $(for r in long_scoreboard short_scoreboard barrier wait mio_throttle lg_throttle math_pipe_throttle not_selected selected dispatch_stall no_instruction branch_resolving; do printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' $r; done)smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor.sum \
    .dev/tilemaxsim bench --device cuda --dtype f32 --docs 100000 --doc-len 128 --reps 3 2>&1 |
    grep -E "Duration|Throughput|Eligible|Active Warps|Warp Cycles|stalled|inst_executed|tensor|Achieved Occupancy|Block Limit|Executed Ipc|SM Frequency" | head -50
  echo "== ncu: f32 queries on f16 (the same kernel family), B = 100K"
  timeout 120 ncu --clock-control none --kernel-name regex:maxsim_bulk_split_f16 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
    .dev/tilemaxsim bench --device cuda --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128 --reps 3 2>&1 |
    grep -E "Duration|Throughput|Warp Cycles|inst_executed|tensor|SM Frequency" | head -20
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
