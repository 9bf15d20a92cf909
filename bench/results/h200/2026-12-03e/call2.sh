#!/usr/bin/env bash
# 2026-12-03 (thirty-first), device call 2: two changes to the one-warp codec kernel over
# call 1's (task indices and the prefetch's bounds in 32 bits, kept; the mid-product gather
# dropped): a group's loads unpredicated where all its tokens lie in the document
# (CODEC_FULL_LOADS: no bounds compares, no zeroing), and the next task's L2 prefetch issued
# after the first group's product instead of at the task's start (CODEC_PREFETCH_LATE: ncu had
# the prefetch's address waiting on the next task's offsets, 3% of the stall samples).
# Binaries by bench/device_build.sh, kernels by `bench/kernel_cache.sh CODEC_FULL_LOADS=0
# CODEC_PREFETCH_LATE=0 CODEC_FULL_LOADS=0,CODEC_PREFETCH_LATE=0`.
# 1. Tests on the default (the one-warp codec tests, compressed top-k and search, the IVF tests,
#    memcheck of the one-warp claim test); every_codec and one_warp under each variant.
# 2. One query, 1M x U[8,124], K = 262,144: nbits 2, 1, 4 and int8, each build, one round.
# 3. Exhaustive search at 8.8M documents, batch 1, each build twice (run files compared).
# usage: OUT=$OUT bash bench/results/h200/2026-12-03e/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
L="--dtype f16 --docs 1000000 --doc-len 8:124 --centroids 262144"
V=(default CODEC_FULL_LOADS=0 CODEC_PREFETCH_LATE=0 CODEC_FULL_LOADS=0,CODEC_PREFETCH_LATE=0)
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
  for i in 1 2 3; do cmp -s /tmp/e_0.trec /tmp/e_$i.trec && echo "variant $i: same run file" || echo "variant $i: run file differs"; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
