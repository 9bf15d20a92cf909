#!/usr/bin/env bash
# 2026-12-02 (twenty-sixth), device call 4: the gpu_check sanitizer runs not yet finished on
# this tree's kernels, side by side: memcheck of tests/gpu_compress.rs (call 3's PART=2 ran out
# of time after the codec memcheck's 384 s) and tests/gpu_search.rs, racecheck of
# tests/gpu_any_dim.rs over every fourth d (TILEMAXSIM_GPU_CASES=9, as gpu_check.sh now runs it).
# usage: OUT=$OUT bash bench/results/h200/2026-12-02e/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 TILEMAXSIM_SANITIZER=1
source bench/seed_kernel_cache.sh
.dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
san() {  # name tool binary [args...]
  local name=$1 tool=$2; shift 2
  ( timeout 400 compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" > "$OUT/$name.log" 2>&1
    echo "$name exit $?" >> "$OUT/$name.log" ) &
}
san compress_memcheck memcheck .dev/test-gpu_compress --test-threads 1
san search_memcheck memcheck .dev/test-gpu_search --test-threads 1
TILEMAXSIM_GPU_CASES=9 san anyd_racecheck racecheck .dev/test-gpu_any_dim
wait
for f in compress_memcheck search_memcheck anyd_racecheck; do echo "== $f"; grep -E "^test result|SUMMARY|exit" "$OUT/$f.log"; done | tee "$OUT/call4.log"
