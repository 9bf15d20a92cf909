#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 2: ncu of the kernels behind issue 27's and 28's misses at the
# defaults (main at 1984e72): the one-warp residual kernel at one query (exhaustive search at
# batch 1), maxsim_bulk_split at f32 B = 100K, maxsim_bulk at d = 768 and at f16 B = 10K, the
# spanning kernel at d = 77; issue rates, tensor-pipe use, DRAM use, stalls per issue. Then
# d = 768 B = 10K with three stages (never measured on the H200) against the default.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  avail=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
  M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active"
  for m in sm__pipe_tensor_op_hmma_cycles_active sm__pipe_tensor_op_gmma_cycles_active sm__inst_executed_pipe_tensor_op_hmma sm__inst_executed_pipe_tensor_op_gmma; do
    echo "$avail" | grep -qx "$m" && M="$M,$m.avg.pct_of_peak_sustained_active"
  done
  for s in long_scoreboard wait barrier math_pipe_throttle short_scoreboard mio_throttle not_selected lg_throttle no_instruction; do
    M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
  done
  echo "metrics: $M"
  prof() {  # prof LABEL KERNEL-REGEX BENCH-ARGS...
    local label=$1 k=$2; shift 2
    echo "-- ncu $label ($(date -u +%T))"
    timeout 90 ncu --clock-control none -k "regex:$k" --launch-skip 2 --launch-count 1 --metrics "$M" \
      .dev/tilemaxsim bench --device cuda --reps 3 "$@" 2>&1 | grep -E "^  [a-z_0-9]+ \(|^    [a-z]+__" | sed "s/^/[$label] /"
  }
  prof codec1 maxsim_codec_residual2 --dtype f16 --codec residual --nbits 2 --docs 1000000 --doc-len 8:124 --centroids 262144
  prof codec32 maxsim_codec_wg --dtype f16 --codec residual --nbits 2 --docs 200000 --doc-len 8:124 --centroids 262144 --queries 32
  prof f32 maxsim_bulk_split --dtype f32 --docs 100000 --doc-len 128
  prof d768 maxsim_bulk --dtype f16 --docs 10000 --doc-len 128 --dim 768
  prof b10k maxsim_bulk --dtype f16 --docs 10000 --doc-len 128
  prof b100k maxsim_bulk --dtype f16 --docs 100000 --doc-len 128
  prof d77 maxsim_span --dtype f16 --docs 100000 --doc-len 32:256 --dim 77
  prof d16 maxsim_span --dtype f16 --docs 100000 --doc-len 32:256 --dim 16
  echo "== d = 768, B = 10K: stages ($(date -u +%T))"
  for r in 1 2; do
    for v in default "TILEMAXSIM_BULK=3,1 TILEMAXSIM_BULK_GRID=resident" "TILEMAXSIM_BULK=2,1 TILEMAXSIM_BULK_GRID=resident"; do
      echo -n "[$v] "
      if [ "$v" = default ]; then bench --dtype f16 --docs 10000 --doc-len 128 --dim 768
      else env $v .dev/tilemaxsim bench --device cuda --reps 30 --json --dtype f16 --docs 10000 --doc-len 128 --dim 768 2>&1 | python3 bench/bench_lines.py ceiling --dtype f16 --docs 10000 --doc-len 128 --dim 768; fi
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
