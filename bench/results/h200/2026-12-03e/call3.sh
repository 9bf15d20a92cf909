#!/usr/bin/env bash
# 2026-12-03 (thirty-first), device call 3: the landed one-warp codec kernel (32-bit task
# indices, gather row sum and prefetch bounds; a group whole inside its document loaded without
# bounds; call 2's CODEC_PREFETCH_LATE=0 variant, whose SASS it equals: nvdisasm of both builds
# compared here). Binaries by bench/device_build.sh, kernels by `bench/kernel_cache.sh`.
# 1. Tests: gpu_codecs whole with the quad kernel asked for (its prefetch changed too), the
#    default gpu_codecs, gpu_ivf and gpu_search, memcheck of the one-warp claim test.
# 2. One query, 1M x U[8,124], K = 262,144: nbits 2, 1, 4 and int8, one round.
# 3. Exhaustive search at 8.8M documents, batch 1, twice; batch 32 once.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03e/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
L="--dtype f16 --docs 1000000 --doc-len 8:124 --centroids 262144"
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  echo "-- gpu_codecs, quad kernel asked for"
  TILEMAXSIM_QUAD=1 timeout 150 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|assert" | head -20
  echo "-- gpu_codecs (default), gpu_ivf, gpu_search"
  timeout 150 .dev/test-gpu_codecs 2>&1 | grep -E "test result|panicked|assert" | head -4
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED" | head -4
  timeout 150 .dev/test-gpu_search 2>&1 | grep -E "test result|panicked|FAILED" | head -4
  echo "-- memcheck one_warp"
  TILEMAXSIM_GPU_CASES=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs one_warp 2>&1 | tail -2
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "index build|rc" /tmp/msmarco.log | tail -2
  echo "== $(date -u +%T) one query, 1M x U[8,124]"
  for c in "--codec residual --nbits 2" "--codec residual --nbits 1" "--codec residual --nbits 4" "--codec int8"; do
    bench $L $c
  done
  echo "== $(date -u +%T) exhaustive search, 8.8M documents"
  for round in 1 2; do echo -n "batch 1 round $round: "; ivf_search .dev/tilemaxsim 1 /tmp/e_$round.trec --exhaustive; done
  cmp -s /tmp/e_1.trec /tmp/e_2.trec && echo "rounds: same run file"
  echo -n "batch 32: "; ivf_search .dev/tilemaxsim 32 /tmp/e_32.trec --exhaustive
  cmp -s /tmp/e_1.trec /tmp/e_32.trec && echo "batch 32: same run file as batch 1" || echo "batch 32: run file differs from batch 1 (another kernel)"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
