#!/usr/bin/env bash
# 2026-11-30 (eighteenth), device call 1, on ee190ef:
# 1. d = 320 reads at 69% of the ceiling (B = 10K) where d = 384 reads 82%: the any-d kernel
#    takes runs of two documents (`for_bulk_any`: `wide_least`), the built widths four.
#    TILEMAXSIM_BULK=2,4 (two stages, four tasks a block) against 2,2 and the default at
#    d = 200 and 320 (both any-d, bounds 256 and 384), B = 10K and 100K; d = 384 as control.
# 2. ncu of the residual kernel at one query (nbits 2, 1M x U[8,124], K = 262,144): every stall
#    reason and pipe's share, shared-memory wavefronts; the SASS page with stall samples.
# 3. The same for maxsim_stream at d = 16 (B = 100K).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30g/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
pipes='regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active'
base="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_lsu.sum,launch__registers_per_thread,launch__grid_size"
# `profile TAG KERNEL CMD...`: the metrics above, then a report with SourceCounters, its SASS page.
profile() {
  local tag=$1 k=$2; shift 2
  timeout 90 ncu --clock-control none -k regex:"$k" --launch-skip 2 --launch-count 1 \
    --metrics "$base" --metrics "$stalls" --metrics "$pipes" "$@" 2>&1 \
    | grep -vE "^==PROF==|^ *[-]+ *$" | awk '$NF != "0" && $NF != "0.00" && $NF != "0.000"' | grep -E "maxsim|[0-9]$" | sed "s/^/[$tag] /"
  timeout 90 ncu --clock-control none -k regex:"$k" --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o "$OUT/$tag" "$@" > /dev/null 2>&1
  ncu -i "$OUT/$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/${tag}_sass.csv" 2> "$OUT/${tag}_sass.err" \
    || ncu -i "$OUT/$tag.ncu-rep" --page details --print-details all > "$OUT/${tag}_details.txt" 2>&1
  ls -la "$OUT/$tag"* | sed "s/^/[$tag] /"
}
{
  device_header
  for round in 1 2; do
    for d in 200 320; do
      for v in default 2,4 2,2; do
        echo -n "round $round d=$d B=10K [$v]: "
        if [ $v = default ]; then bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
        else TILEMAXSIM_BULK=$v bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d; fi
      done
    done
    for v in default 2,4; do
      echo -n "round $round d=384 B=10K [$v]: "
      if [ $v = default ]; then bench --dtype f16 --docs 10000 --doc-len 32:256 --dim 384
      else TILEMAXSIM_BULK=$v bench --dtype f16 --docs 10000 --doc-len 32:256 --dim 384; fi
    done
  done
  for d in 200 320; do
    for v in default 2,4; do
      echo -n "d=$d B=100K [$v]: "
      if [ $v = default ]; then bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
      else TILEMAXSIM_BULK=$v bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; fi
    done
  done
  echo "== $(date -u +%T) ncu"
  profile codec maxsim_codec .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --codec residual --nbits 2 --docs 1000000 --doc-len 8:124 --centroids 262144
  TILEMAXSIM_STREAM=1 profile stream16 maxsim_stream .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim 16
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
