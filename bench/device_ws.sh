#!/usr/bin/env bash
# (Ran once, 19:31 UTC 2026-11-23, against the build that still had the WG_WS knob: bench/results/ws.log.
# The warp-specialized kernel has since become the only maxsim_wgmma and WG_WS is gone, so today
# both of its rows run the same kernel.)
# One device call for maxsim_wgmma's warp-specialized variant (WG_WS=1: a producer warp, full
# and empty mbarriers per stage, no __syncthreads per tile) against the default (WG_WS=0):
# the tensor-core, random-shape and large-uneven-batch tests and both sanitizers under WG_WS=1,
# then timings of both on 32 queries x 100K and ColPali, and WG_WS=1's stage knob. Build
# first with bench/device_build.sh; carry .dev. Log in $OUT/ws.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
export ROW_TIMEOUT=90
WS=WG_WS=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tests under $WS: tensor-core (wgmma forced where it applies), random shapes, the large uneven batch"
  TILEMAXSIM_KERNEL_DEFINES=$WS TILEMAXSIM_CACHE_DIR=/tmp/tmc-$WS TILEMAXSIM_GPU_CASES=24 timeout 200 \
    .dev/test-gpu tensor_core_path random_shapes persistent_kernels 2>&1 | grep -E "^test |test result|panicked|case"
  echo "== compute-sanitizer under $WS (tensor-core test)"
  TILEMAXSIM_KERNEL_DEFINES=$WS TILEMAXSIM_CACHE_DIR=/tmp/tmc-$WS sanitize_tests tensor_core_path
  q32=(--dtype f16 --queries 32 --docs 100000 --reps 10)
  colpali=(--dtype f16 --nq 1024 --doc-len 1024 --docs 1000 --reps 10)
  for r in 1 2; do
    echo "== 32 queries x 100K, ColPali: wgmma default, $WS"
    for def in "" $WS; do def_row "$def" "${q32[@]}" --kernel wgmma; done
    for def in "" $WS; do def_row "$def" "${colpali[@]}" --kernel wgmma; done
  done
  echo "== $WS stages"
  for s in 3 5 6; do def_row "$WS,WG_STAGES=$s" "${q32[@]}" --kernel wgmma; def_row "$WS,WG_STAGES=$s" "${colpali[@]}" --kernel wgmma; done
  echo "== bf16 32 queries, f16 d = 64"
  for def in "" $WS; do def_row "$def" --dtype bf16 --queries 32 --docs 100000 --reps 10 --kernel wgmma; done
  for def in "" $WS; do def_row "$def" --dim 64 --dtype f16 --queries 32 --docs 100000 --reps 10 --kernel wgmma; done
} 2>&1 | tee "$OUT/ws.log"
