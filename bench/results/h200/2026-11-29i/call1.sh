#!/usr/bin/env bash
# 2026-11-29 (ninth), device call 1: main's one-warp codec kernels (dcef571, not yet run on a
# GPU) under their tests, and the next task's document prefetched into L2 (CODEC_L2_AHEAD=1:
# after the first group's product; =2: at the task's start) against the default: the
# MS MARCO-shaped index (built by .devold while the variants compile) searched exhaustively at
# batch 1 under each, run files compared; `bench` at one query for four codecs under each.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29i/call1.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
VARS="CODEC_L2_AHEAD=1 CODEC_L2_AHEAD=2"
{
  (timeout 200 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  device_header
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
  timeout 90 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 batched_bulk 2>&1 | grep -E "test result|panicked|FAILED"
  timeout 40 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  date -u +%T
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for args in "--codec residual --nbits 2 $L" "--codec int8 --docs 200000 --doc-len 80" \
              "--codec fp8 --kernel mma --docs 200000 --doc-len 80" "--codec residual --nbits 4 $L"; do
    for v in default $VARS; do
      echo -n "[$v] "
      # shellcheck disable=SC2086
      with "$v" timeout 60 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
    done
  done
  date -u +%T
  for v in $VARS; do
    echo "-- [$v] tests"
    with "$v" timeout 60 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | grep -E "test result|panicked|FAILED"
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
