#!/usr/bin/env bash
# One device call for maxsim_ring's copies: bulk (cp.async.bulk, lane 0 fills each stage, one
# mbarrier per stage, as maxsim_bulk; the default for f32 since the 17:30 run of this script,
# bench/results/ring_bulk.log) against per-lane cp.async (RING_BULK=0; f16/bf16 always use
# them). The tests that force or choose the ring kernel (tensor-core, both f32 tests, random
# shapes) against the float64 reference under RING_BULK=0, both sanitizers over the
# tensor-core and f32-split tests, then timings alternating the two on f32 (exact) and, as a
# check that nothing else moved, f16 at d = 768 and 256. Build first with bench/device_build.sh;
# carry .dev. Log in $OUT/ring_bulk.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
RB=RING_BULK=0
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tests under $RB"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$RB TILEMAXSIM_KERNEL_DEFINES=$RB TILEMAXSIM_GPU_CASES=12 \
    timeout 240 .dev/test-gpu tensor_core fp32 random_shapes 2>&1 | grep -E "^test |test result|panicked"
  echo "== compute-sanitizer under $RB"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$RB TILEMAXSIM_KERNEL_DEFINES=$RB sanitize_tests tensor_core fp32_split
  echo "== timings: bulk copies (default) against per-lane copies ($RB)"
  for def in "" "$RB" "" "$RB"; do def_row "$def" --dtype f32 --docs 100000 --reps 10; done
  for def in "" "$RB" "" "$RB"; do def_row "$def" --dtype f16 --dim 768 --docs 10000 --reps 30; done
  for def in "" "$RB"; do def_row "$def" --dtype f16 --dim 256 --docs 100000 --reps 10; done
} 2>&1 | tee "$OUT/ring_bulk.log"
