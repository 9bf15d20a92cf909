#!/usr/bin/env bash
# 2026-11-30 (fifteenth), device call 4, in the 320 s of device time left: gpu_check PART=2's GPU
# tests alone (codecs, compression; no sanitizer, no NVRTC check), which call 2 lost to its own
# time limit, on this session's kernels (compiled here, .dev/kcache).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30e/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
source bench/seed_kernel_cache.sh
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  timeout 130 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked"; echo "codec tests exit: ${PIPESTATUS[0]}"
  timeout 90 .dev/test-gpu_compress 2>&1 | grep -E "^test |test result|panicked"; echo "compress tests exit: ${PIPESTATUS[0]}"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
