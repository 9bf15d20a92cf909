#!/usr/bin/env bash
# One device call for maxsim_ring's RING_TILES (8-token tiles per f16/bf16 stage: each query
# fragment read from shared memory feeds that many tensor-core products) and the f32
# SPLIT_SECTOR_PIECES copy pattern (0, the old half-sector copies, beside the default 1): the GPU tests and both sanitizers under the candidate, then
# timings of default and candidates side by side (alternating, so drift shows). Build first with
# bench/device_build.sh; carry .dev. Log in $OUT/tiles.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
CAND=${CAND:-RING_TILES=4,RING_STAGES=3}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  for def in "$CAND" RING_TILES=4; do
    echo "== tests under $def: tensor-core (every kernel forced, ring at d = 32..128, wide d)"
    TILEMAXSIM_CACHE_DIR=/tmp/tmc-$def TILEMAXSIM_KERNEL_DEFINES=$def TILEMAXSIM_GPU_CASES=12 \
      timeout 120 .dev/test-gpu tensor_core random_shapes 2>&1 | grep -E "^test |test result|panicked|case" | head -8
  done
  echo "== compute-sanitizer under $CAND (tensor-core test)"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-$CAND TILEMAXSIM_KERNEL_DEFINES=$CAND sanitize_tests tensor_core
  echo "== timings, default beside the candidates (Nq = 32, Nd = 128)"
  for def in "" "$CAND" RING_TILES=4 "" "$CAND"; do def_row "$def" --dtype f16 --dim 768 --docs 10000 --reps 20; done
  for def in "" "$CAND"; do
    def_row "$def" --dtype f16 --dim 256 --docs 30000 --reps 20
    def_row "$def" --dtype f16 --dim 1024 --docs 10000 --reps 20
    def_row "$def" --dtype f16 --docs 10000 --reps 30 --kernel ring
  done
  def_row "" --dtype f16 --docs 10000 --reps 30
  echo "== f32 split: whole-sector copies (default) against half sectors"
  for def in "" SPLIT_SECTOR_PIECES=0 "" SPLIT_SECTOR_PIECES=0; do def_row "$def" --dtype f32 --docs 30000 --reps 20; done
} 2>&1 | tee "$OUT/tiles.log"
