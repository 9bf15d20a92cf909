#!/usr/bin/env bash
# 2026-12-03 (thirty-first), device call 1: the one-warp codec kernel's per-task costs in 32
# bits (CODEC_LEAN: task indices, the gather's row sum, the L2 prefetch's bounds) and each
# group's centroid scores gathered halfway through the product before it (CODEC_GATHER_MID;
# ncu's call 3 of the thirtieth put 11% of the stall samples on the identity HMMAs waiting on
# the gather issued at their own product's start), against the kernel before
# (CODEC_LEAN=0,CODEC_GATHER_MID=0). Binaries by bench/device_build.sh, kernels by
# `bench/kernel_cache.sh CODEC_GATHER_MID=0 CODEC_LEAN=0,CODEC_GATHER_MID=0`.
# 1. Tests on the default: the one-warp codec tests, compressed top-k and search, the IVF
#    tests, memcheck of the one-warp claim test; every_codec and one_warp under the variants.
# 2. One query, 1M x U[8,124], K = 262,144: nbits 2, 1, 4 and int8, each build, one round.
# 3. Exhaustive search at 8.8M documents, batch 1, each build twice (run files compared).
# usage: OUT=$OUT bash bench/results/h200/2026-12-03e/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
L="--dtype f16 --docs 1000000 --doc-len 8:124 --centroids 262144"
V=(default CODEC_GATHER_MID=0 CODEC_LEAN=0,CODEC_GATHER_MID=0)
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  echo "-- [default] gpu_codecs (but the batched-runs and quad tests), gpu_ivf"
  timeout 150 .dev/test-gpu_codecs every_codec one_warp bf16 batched_bulk compressed residual_tensors lookup 2>&1 | grep -E "^test |test result|panicked|assert" | head -12
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED" | head -6
  echo "-- memcheck one_warp"
  TILEMAXSIM_GPU_CASES=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs one_warp 2>&1 | tail -2
  for v in "${V[@]:1}"; do
    echo "-- [$v] every_codec, one_warp"
    with "$v" timeout 100 .dev/test-gpu_codecs every_codec one_warp 2>&1 | grep -E "test result|panicked|assert" | head -4
  done
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "index build|rc" /tmp/msmarco.log | tail -2
  echo "== $(date -u +%T) one query, 1M x U[8,124]"
  for c in "--codec residual --nbits 2" "--codec residual --nbits 1" "--codec residual --nbits 4" "--codec int8"; do
    for v in "${V[@]}"; do
      echo -n "[$v]: "; with "$v" bench $L $c
    done
  done
  echo "== $(date -u +%T) exhaustive search, 8.8M documents, batch 1"
  for round in 1 2; do
    i=0
    for v in "${V[@]}"; do
      echo -n "[$v] round $round: "; with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_$i.trec --exhaustive
      i=$((i + 1))
    done
  done
  for i in 1 2; do cmp -s /tmp/e_0.trec /tmp/e_$i.trec && echo "variant $i: same run file" || echo "variant $i: run file differs"; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
