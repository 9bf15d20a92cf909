#!/usr/bin/env bash
# 2026-12-03 (twenty-ninth), device call 2, on the landed four-documents-a-warpgroup kernel
# (call 1's staged version reverted: slower):
# 1. The GPU codec tests with the kernel asked for (TILEMAXSIM_QUAD=1), the new many-groups test
#    among them.
# 2. ncu of one launch each of the quad and the one-warp kernels (nbits 2, one query, 1M x
#    U[8,124], K = 262,144): instructions, issue, occupancy, every stall reason and pipe; then
#    the quad's SASS page with stall samples (SourceCounters), for the next session.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03c/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/seed_kernel_cache.sh
L="--dtype f16 --codec residual --docs 1000000 --doc-len 8:124 --centroids 262144 --nbits 2"
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
pipes='regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active'
base="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size"
{
  device_header
  echo "-- quad + codec tests (TILEMAXSIM_QUAD=1)"
  TILEMAXSIM_QUAD=1 timeout 200 .dev/test-gpu_codecs quad every_codec batched_bulk 2>&1 | grep -E "^test |test result|panicked|score|assert" | head -20
  for k in q4 one-warp; do
    case $k in q4) env="TILEMAXSIM_QUAD=1"; re=maxsim_codec_q4 ;; *) env="TILEMAXSIM_QUAD=0"; re=maxsim_codec_residual2 ;; esac
    echo "== $(date -u +%T) ncu $k"
    env $env timeout 120 ncu --clock-control none -k regex:$re --launch-skip 2 --launch-count 1 \
      --metrics "$base" --metrics "$stalls" --metrics "$pipes" .dev/tilemaxsim bench --device cuda --reps 3 $L > "$OUT/ncu_$k.txt" 2>&1
    echo "rc $?"; grep -vE "^==PROF==" "$OUT/ncu_$k.txt" | awk '$NF != "0" && $NF != "0.00" && $NF != "0.000"' | grep -E "[0-9]$" | head -80
  done
  echo "== $(date -u +%T) ncu q4 SourceCounters"
  TILEMAXSIM_QUAD=1 timeout 150 ncu --clock-control none -k regex:maxsim_codec_q4 --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o "$OUT/q4" .dev/tilemaxsim bench --device cuda --reps 3 $L > /dev/null 2>&1
  echo "rc $?"
  ncu -i "$OUT/q4.ncu-rep" --page source --csv --print-source sass > "$OUT/q4_sass.csv" 2> "$OUT/q4_sass.err"
  python3 bench/ncu_sass_stalls.py "$OUT/q4_sass.csv" 2>&1 | head -60
  xz -T4 "$OUT/q4_sass.csv"; rm -f "$OUT/q4.ncu-rep"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
