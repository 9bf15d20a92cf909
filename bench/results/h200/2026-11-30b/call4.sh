#!/usr/bin/env bash
# 2026-11-30 (twelfth), device call 4: the planes in the in-kernel split's k order (the same
# fragments, so the same bits: tests/gpu_f32.rs checks it), and tests/gpu_search.rs (the device
# top-k and GpuIndex, moved out of tests/gpu.rs, with an f32 d = 64 case: resident planes against
# streamed chunks split in the kernel); one bench line of the planes at B = 100K.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30b/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
{
  device_header
  echo "== tests/gpu_f32.rs"
  timeout 100 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case|differ"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  echo "== tests/gpu_search.rs"
  timeout 100 .dev/test-gpu_search 2>&1 | grep -E "^test |test result|panicked|differs"; echo "search tests exit: ${PIPESTATUS[0]}"
  bench --dtype f32 --docs 100000 --doc-len 128
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
