#!/usr/bin/env bash
# 2026-11-30 (fifteenth), device call 1: maxsim_stream with more bytes in flight. The L2 prefetch
# of the warp's tokens 1-4 chunks ahead (a line a lane, or one cp.async.bulk.prefetch.L2), and 16
# tiles a chunk at four blocks for d <= 16, against the landed kernel, at d = 16..64, f16
# U[32,256] B = 100K (and 10K), two rounds. The kernels come compiled from here
# (bench/kernel_cache.sh with these variants), so no NVRTC time is spent on the device.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30e/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
V=(default STREAM_PREFETCH=1 STREAM_PREFETCH=2 STREAM_PREFETCH=4 STREAM_PREFETCH=2,STREAM_PREFETCH_BULK=1
   STREAM_D16_TILES=16,STREAM_D16_BLOCKS=4)
{
  device_header
  ls /tmp/tilemaxsim-cache
  echo "== tests under the prefetch variants $(date -u +%T)"
  for v in STREAM_PREFETCH=2 STREAM_PREFETCH=2,STREAM_PREFETCH_BULK=1 STREAM_D16_TILES=16,STREAM_D16_BLOCKS=4; do
    echo "-- $v"
    with "$v" timeout 100 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\[|empty document"
  done
  echo "== bench $(date -u +%T)"
  for round in 1 2; do
    for d in 16 24 32 40 48 56 64; do
      for v in "${V[@]}"; do
        echo -n "[$v] round $round d=$d: "
        TILEMAXSIM_STREAM=1 with "$v" bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
      done
    done
    echo -n "[span] round $round d=64: "; TILEMAXSIM_STREAM=0 bench --dtype f16 --docs 100000 --doc-len 32:256 --dim 64
  done
  echo "== B = 10K and 500K $(date -u +%T)"
  for args in "--docs 10000 --dim 16" "--docs 10000 --dim 48" "--docs 500000 --dim 16"; do
    for v in "${V[@]}"; do
      echo -n "[$v] $args: "
      # shellcheck disable=SC2086
      TILEMAXSIM_STREAM=1 with "$v" bench --dtype f16 --doc-len 32:256 $args
    done
  done
  echo "== memcheck under STREAM_PREFETCH=2 $(date -u +%T)"
  TILEMAXSIM_SANITIZER=1 with STREAM_PREFETCH=2 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
  echo "== ncu $(date -u +%T)"
  for d in 16 32; do
    for v in default STREAM_PREFETCH=2; do
      TILEMAXSIM_STREAM=1 with "$v" timeout 60 ncu --clock-control none -k regex:"maxsim_stream" --launch-skip 2 --launch-count 1 \
        --metrics "gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,launch__registers_per_thread" \
        .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim $d 2>&1 \
        | grep -E "duration|throughput|inst_exec|issue_active|hit_rate|registers" | sed "s/^/[d=$d $v] /"
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
