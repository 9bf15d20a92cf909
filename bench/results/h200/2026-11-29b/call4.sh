#!/usr/bin/env bash
# Device call 4 of 2026-11-29 (second session; nvidia-h200, .dev of 173fddd's kernels and the
# kernel cache of call 3): compute-sanitizer memcheck on the spanning kernels' tests.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29b/call4.sh
set -uo pipefail
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 TILEMAXSIM_SANITIZER=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  echo "== $(date -u +%T) memcheck: tests/gpu_any_dim.rs spanning"
  timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim spanning 2>&1 | tail -4
  echo "== $(date -u +%T) memcheck: tests/gpu.rs tensor_core (4 cases)"
  TILEMAXSIM_GPU_CASES=4 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu tensor_core 2>&1 | tail -4
  date -u +%T
} 2>&1 | tee "$OUT/call4.log"
