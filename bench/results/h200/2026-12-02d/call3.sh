#!/usr/bin/env bash
# 2026-12-02 (twenty-fifth), device call 3: gpu_check PART=2 on the final kernels (last clean
# in the seventeenth session; the codec kernels' claims of eight tasks came after it): the
# NVRTC compile check, tests/gpu_codecs.rs and gpu_compress, and their memcheck and racecheck
# runs side by side; beside them, the two memcheck runs call 2 had no time left for
# (gpu_any_dim, then gpu_search). Five sanitizer processes on one GPU and 16 cores made every
# run slower: the codec memcheck and racecheck and the search memcheck hit their timeouts, and
# the compress memcheck never started (call3/).
# usage: OUT=$OUT bash bench/results/h200/2026-12-02d/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
( TILEMAXSIM_SANITIZER=1 timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim \
    > "$OUT/anyd_memcheck.log" 2>&1; echo "exit $?" >> "$OUT/anyd_memcheck.log"
  TILEMAXSIM_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_search \
    --test-threads 1 > "$OUT/search_memcheck.log" 2>&1; echo "exit $?" >> "$OUT/search_memcheck.log" ) &
PART=2 timeout 560 bash bench/gpu_check.sh
