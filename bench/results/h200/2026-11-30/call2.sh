#!/usr/bin/env bash
# 2026-11-30 (eleventh), device call 2: call 1's one-product f32 kernel read 52% of the ceiling
# (old three products: 87%) at 1980 MHz, so not power but latency: each group of candidates waits
# on the query rows from L2 (L1 is 28 KB beside three blocks' 212 KB of shared memory). Here the
# rows sit in shared memory (16 KB: two blocks a SM, 221 registers), candidates go eight at a
# time; variants: F32_GROUP=4, F32_FALLBACK=512 (no fallback code), F32_Q_SMEM=0 (rows from
# global memory at two blocks); .devnew1 is call 1's build (three blocks, rows from global),
# .devold main at 09929b5 (three products). Then ncu of the default.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30/call2.sh  (carry .dev .devold .devnew1)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
as() { local tag=$1 bin=$2; shift 2; "$bin" bench --device cuda --reps "${REPS:-30}" --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@" | sed "s/^/$tag: /"; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader)"
  time ( compile_variants default F32_GROUP=4 F32_FALLBACK=512 F32_Q_SMEM=0 &
         as old .devold/tilemaxsim --dtype f16 --docs 1000 >/dev/null &
         as new1 .devnew1/tilemaxsim --dtype f16 --docs 1000 >/dev/null & wait )
  echo "== f32 GPU tests (default)"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  echo "== f32 B = 100K Nd = 128"
  for rep in 1 2; do
    REPS=300 as old .devold/tilemaxsim --dtype f32 --docs 100000 --doc-len 128
    REPS=300 as new1 .devnew1/tilemaxsim --dtype f32 --docs 100000 --doc-len 128
    for v in default F32_GROUP=4 F32_FALLBACK=512 F32_Q_SMEM=0; do
      REPS=300 with $v as "$v" .dev/tilemaxsim --dtype f32 --docs 100000 --doc-len 128
    done
  done
  echo "== other shapes: old, default"
  for args in "--docs 10000 --doc-len 128" "--docs 100000 --doc-len 32:256" "--docs 100000 --doc-len 128 --dim 64" "--docs 100000 --doc-len 128 --dim 32"; do
    as old .devold/tilemaxsim --dtype f32 $args; as default .dev/tilemaxsim --dtype f32 $args
  done
  echo "== ncu: default, f32 B = 100K"
  timeout 120 ncu --clock-control none --kernel-name regex:maxsim_bulk_split_f32 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,l1tex__t_sector_hit_rate.pct,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
    .dev/tilemaxsim bench --device cuda --dtype f32 --docs 100000 --doc-len 128 --reps 3 2>&1 |
    grep -E "Duration|Throughput|Issue Slots|Eligible|Active Warps|Warp Cycles|stalled|hit_rate|inst_executed|tensor|Registers|Achieved Occupancy|Block Limit|Executed Ipc|No Eligible" | head -60
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
