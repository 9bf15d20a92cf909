#!/usr/bin/env bash
# 2026-11-29 (seventh), device call 4 (issue 28): ivf_interaction with two bitmap words a warp
# and a quarter warp a candidate (8-byte row loads, eight rows in flight), against .devold (main
# before: one word a warp, a half warp a candidate): the IVF tests and memcheck on the first
# stages; IVF 8/4096 at batches 1 and 32 by both builds in turn, twice, run files compared; ncu's
# kernel durations over 16 batch-1 queries. The MS MARCO-shaped index is built by .devold (its
# kernels are in the cache) while this build's compile.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29g/call4.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  (timeout 300 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  device_header
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked"
  TILEMAXSIM_SANITIZER=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_ivf first_stages 2>&1 | tail -2
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  wait $built
  grep -E "corpus|index|rc" /tmp/msmarco.log
  date -u +%T
  ivf_ab
  ivf_kernel_times
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
