#!/usr/bin/env bash
# 2026-11-29 (ninth), device call 3: L2 cache hints in the one-warp codec kernels
# (CODEC_L2_HINTS=1: codes evict-first, the residual's centroid-score gathers evict-last), alone,
# with the staged kernels (CODEC_PIPE=1) and with the L2 prefetch (CODEC_L2_AHEAD=2), against the
# default: tests of each; the MS MARCO-shaped index (built by .devold while they compile)
# searched exhaustively at batch 1 by each, run files compared; `bench` at one query; ncu's DRAM
# bytes and L2 hit rate of the default and the hints.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29i/call3.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
H=CODEC_L2_HINTS=1
VARS="$H CODEC_PIPE=1,$H $H,CODEC_L2_AHEAD=2"
{
  mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
  (timeout 200 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for v in default $VARS; do
    ( with "$v" timeout 300 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  grep -E "corpus|rc" /tmp/msmarco.log | tail -2
  for v in default $VARS; do
    echo -n "[$v] exhaustive batch 1: "
    with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_$v.trec --exhaustive
  done
  for v in $VARS; do cmp /tmp/e_default.trec /tmp/e_$v.trec && echo "$v: same run file"; done
  date -u +%T
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 2 --docs 100000 --doc-len 32" "--codec int8 --docs 200000 --doc-len 80"; do
    for v in default $VARS; do
      echo -n "[$v] "
      # shellcheck disable=SC2086
      with "$v" timeout 60 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
    done
  done
  date -u +%T
  for v in default $H; do
    # shellcheck disable=SC2086
    with $v timeout 60 ncu --clock-control none -k regex:maxsim_codec_residual2 --launch-skip 2 --launch-count 1 \
      --metrics "gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum" \
      .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --codec residual --nbits 2 $L 2>&1 | grep -E "duration|bytes_read|hit_rate|inst_exec" | sed "s/^/[$v] /"
  done
  for v in $VARS; do
    echo "-- [$v] tests"
    with "$v" timeout 60 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | grep -E "test result|panicked|FAILED"
  done
  with $H timeout 30 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
