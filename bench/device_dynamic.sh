#!/usr/bin/env bash
# One device call for maxsim_bulk's dynamic schedule (BULK_DYNAMIC=1: tasks from a counter, as
# maxsim_mma does, instead of a static stride) and the f32 whole-sector copies on this device:
# the large uneven batch test (both schedules) and the tensor-core test under it, both
# sanitizers, then timings of the static and dynamic schedules alternating. Build first with
# bench/device_build.sh; carry .dev. Log in $OUT/dynamic.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
DYN=BULK_DYNAMIC=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tests: the large uneven batch (mma dynamic, bulk static)"
  timeout 120 .dev/test-gpu persistent 2>&1 | grep -E "^test |test result|panicked"
  echo "== tests under $DYN: the large uneven batch, tensor-core"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$DYN TILEMAXSIM_KERNEL_DEFINES=$DYN TILEMAXSIM_GPU_CASES=12 \
    timeout 150 .dev/test-gpu persistent tensor_core 2>&1 | grep -E "^test |test result|panicked"
  echo "== compute-sanitizer under $DYN (the large uneven batch)"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$DYN TILEMAXSIM_KERNEL_DEFINES=$DYN sanitize_tests persistent
  echo "== timings: static against dynamic (Nq = 32, d = 128, f16)"
  for def in "" "$DYN" "" "$DYN"; do def_row "$def" --dtype f16 --docs 100000 --doc-len 32:256 --reps 20; done
  for def in "" "$DYN"; do
    def_row "$def" --dtype f16 --docs 100000 --reps 20
    def_row "$def" --dtype f16 --docs 10000 --reps 30
  done
  echo "== f32 exact (whole-sector copies) against half sectors"
  for def in "" SPLIT_SECTOR_PIECES=0; do def_row "$def" --dtype f32 --docs 100000 --reps 10; done
} 2>&1 | tee "$OUT/dynamic.log"
