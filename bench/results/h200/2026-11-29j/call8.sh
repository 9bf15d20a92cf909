#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 8: main's codec kernels at their defaults (1984e72's kernel
# text: call 7's test binaries, whose host change touches only the exact path's resident grid):
# the codec tests last run under a variant (bf16_and_f16, batched_bulk) and the IVF tests, then
# compute-sanitizer memcheck of every_codec (the ninth session's L2 hints and prefetch were not
# run under it).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call8.sh  (carry .dev .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  timeout 60 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 batched_bulk 2>&1 | grep -E "^test |test result|panicked"
  timeout 30 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked"
  echo "-- memcheck ($(date -u +%T))"
  TILEMAXSIM_GPU_CASES=3 timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs every_codec 2>&1 | grep -E "ERROR SUMMARY|test result|panicked|Invalid" | head; echo "memcheck rc ${PIPESTATUS[0]}"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call8.log"
