#!/usr/bin/env bash
# One device call for maxsim_ring's bulk copies (RING_BULK=1: lane 0 fills each stage with
# cp.async.bulk, one mbarrier per stage, as maxsim_bulk; off by default): the tests that force
# or choose the ring kernel (tensor-core, both f32 tests, random shapes) against the float64
# reference, both sanitizers over the tensor-core and f32-split tests, then timings alternating
# with the default per-lane copies on the cases the ring kernel serves (f32 exact, d = 768,
# d = 256) and f16 d = 128 forced to the ring beside bulk. Build first with
# bench/device_build.sh; carry .dev. Log in $OUT/ring_bulk.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
RB=RING_BULK=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tests under $RB"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$RB TILEMAXSIM_KERNEL_DEFINES=$RB TILEMAXSIM_GPU_CASES=12 \
    timeout 240 .dev/test-gpu tensor_core fp32 random_shapes 2>&1 | grep -E "^test |test result|panicked"
  echo "== compute-sanitizer under $RB"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$RB TILEMAXSIM_KERNEL_DEFINES=$RB sanitize_tests tensor_core fp32_split
  echo "== timings: per-lane copies against bulk copies"
  for def in "" "$RB" "" "$RB"; do def_row "$def" --dtype f32 --docs 100000 --reps 10; done
  for def in "" "$RB" "" "$RB"; do def_row "$def" --dtype f16 --dim 768 --docs 10000 --reps 30; done
  for def in "" "$RB"; do
    def_row "$def" --dtype f16 --dim 256 --docs 100000 --reps 10
    def_row "$def" --dtype f16 --docs 100000 --reps 20 --kernel ring
    def_row "$def" --dtype f16 --docs 1000 --reps 40 --kernel ring
  done
  def_row "" --dtype f16 --docs 1000 --reps 40
} 2>&1 | tee "$OUT/ring_bulk.log"
