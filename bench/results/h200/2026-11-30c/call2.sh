#!/usr/bin/env bash
# 2026-11-30 (thirteenth), device call 2: the one-query residual kernels (maxsim_codec_q1_*: the
# query's A fragments in shared memory, four blocks an SM at 128 registers; CODEC_Q1_BLOCKS=5:
# five at 96, with spills) against the one-warp kernel with the PRMT lookups
# (TILEMAXSIM_CODEC_Q1=0) and the kernel before this session (that and CODEC_LUT256=0): tests
# with one query block; the MS MARCO-shaped index searched exhaustively at batch 1 by each, run
# files compared; `bench` at one query; ncu of the one-query kernel.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30c/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
# A variant: "kernel defines|host environment".
run_v() {
  local v=$1; shift; local d=${v%%|*} e=${v#*|}
  ( export $e; if [ -n "$d" ]; then export TILEMAXSIM_KERNEL_DEFINES=$d; fi; "$@" )
}
tag() { echo "$1" | tr -c 'A-Za-z0-9' _; }
VS="|X=1 CODEC_Q1_BLOCKS=5|X=1 |TILEMAXSIM_CODEC_Q1=0 CODEC_LUT256=0|TILEMAXSIM_CODEC_Q1=0"
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  compile_variants default CODEC_Q1_BLOCKS=5 CODEC_LUT256=0
  echo "== compiled $(date -u +%T)"
  for v in "|X=1" "CODEC_Q1_BLOCKS=5|X=1"; do
    echo "-- [$v] tests"
    run_v "$v" timeout 120 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | grep -E "test result|panicked|FAILED"
  done
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done
  grep -E "corpus|rc" /tmp/msmarco.log | tail -2
  for round in 1 2; do
    for v in $VS; do
      echo -n "[$v] round $round exhaustive batch 1: "
      run_v "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_$(tag "$v").trec --exhaustive
    done
  done
  for v in $VS; do cmp /tmp/e_$(tag "|X=1").trec /tmp/e_$(tag "$v").trec && echo "[$v]: same run file as [|X=1]"; done
  date -u +%T
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 1 $L" "--codec residual --nbits 2 --docs 100000 --doc-len 32" "--codec residual --nbits 2 --docs 100000 --doc-len 128 --dim 64"; do
    for v in $VS; do
      echo -n "[$v] $args: "
      # shellcheck disable=SC2086
      run_v "$v" timeout 60 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
    done
  done
  date -u +%T
  timeout 60 ncu --clock-control none -k regex:maxsim_codec --launch-skip 2 --launch-count 1 \
    --metrics "gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --codec residual --nbits 2 $L 2>&1 | grep -E "maxsim_codec|duration|inst_exec|issue_active|warps_active|registers|limit" | sed "s/^/[q1] /"
  timeout 120 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
