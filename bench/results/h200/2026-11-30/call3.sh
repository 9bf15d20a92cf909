#!/usr/bin/env bash
# 2026-11-30 (eleventh), device call 3: main after the f32 tests moved to tests/gpu_f32.rs (the
# three-product kernel, with the new tied-token test): the f32 tests and tests/gpu.rs, with
# memcheck and racecheck of the f32 tests beside them.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
{
  device_header
  ( TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=6 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3
    echo "f32 memcheck exit: ${PIPESTATUS[0]}"
    TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=3 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3
    echo "f32 racecheck exit: ${PIPESTATUS[0]}" ) > /tmp/sanitizers.log 2>&1 &
  echo "== tests/gpu_f32.rs"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  echo "== tests/gpu.rs"
  timeout 400 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked"; echo "tests exit: ${PIPESTATUS[0]}"
  wait
  echo "== sanitizers"; cat /tmp/sanitizers.log
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
