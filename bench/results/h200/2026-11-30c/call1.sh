#!/usr/bin/env bash
# 2026-11-30 (thirteenth), device call 1: the one-warp residual kernel's step lookups by one PRMT
# (CODEC_LUT256: 32 copies, 256 bytes an entry) and each group loaded by one call from a selected
# source (CODEC_ONE_LOAD), each alone and together, against both off (the kernel before): the
# MS MARCO-shaped index (8.8M documents) searched exhaustively at batch 1 by each, run files
# compared; `bench` at one query; ncu's instructions and duration; the codec and IVF tests.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30c/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
OFF=CODEC_LUT256=0,CODEC_ONE_LOAD=0
VARS="CODEC_LUT256=0 CODEC_ONE_LOAD=0 $OFF"
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  compile_variants default $VARS
  echo "== compiled $(date -u +%T)"
  for v in default $OFF; do
    echo "-- [$v] tests"
    with "$v" timeout 90 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | grep -E "test result|panicked|FAILED"
  done
  wait $built
  grep -E "corpus|rc" /tmp/msmarco.log | tail -2
  for round in 1 2; do
    for v in default $VARS; do
      echo -n "[$v] round $round exhaustive batch 1: "
      with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_${v//[=,]/_}.trec --exhaustive
    done
  done
  for v in $VARS; do cmp /tmp/e_default.trec /tmp/e_${v//[=,]/_}.trec && echo "$v: same run file as default"; done
  date -u +%T
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 1 $L" "--codec residual --nbits 2 --docs 100000 --doc-len 32" "--codec residual --nbits 2 --docs 100000 --doc-len 128 --dim 64"; do
    for v in default $OFF default $OFF; do
      echo -n "[$v] $args: "
      # shellcheck disable=SC2086
      with "$v" timeout 60 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
    done
  done
  date -u +%T
  for v in default $OFF; do
    # shellcheck disable=SC2086
    with $v timeout 60 ncu --clock-control none -k regex:maxsim_codec_residual2 --launch-skip 2 --launch-count 1 \
      --metrics "gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active" \
      .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --codec residual --nbits 2 $L 2>&1 | grep -E "duration|bytes_read|inst_exec|issue_active|tensor" | sed "s/^/[$v] /"
  done
  timeout 120 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
