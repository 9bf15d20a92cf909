#!/usr/bin/env bash
# maxsim_bulk as a grid of blocks, each a run of consecutive tasks (kernels/maxsim.cu), against
# the persistent per-warp rings it replaced, in one run on the device:
#   here:   git checkout <the commit before>; bash bench/device_build.sh; cp .dev/tilemaxsim /tmp/prev
#           git checkout main; bash bench/device_build.sh; cp /tmp/prev .dev/tilemaxsim-prev
#   device: bash bench/device_bulk_grid.sh   (carry .dev)
# The tests with bulk forced (several shapes) and both sanitizers on the tensor-core test first,
# then rows of `bench --device cuda` alternating the two binaries (both time calls back to back,
# with the isolated call's latency beside), then the new kernel's shapes (TILEMAXSIM_BULK).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
row() {
  local bin=$1; shift
  echo -n "$(basename "$bin") ${TILEMAXSIM_BULK:+bulk=$TILEMAXSIM_BULK }$*: "
  timeout "${ROW_TIMEOUT:-60}" "$bin" bench --device cuda --dtype f16 "$@" 2>&1 | sed -n 3p
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== GPU tests (bulk forced: default shape, 1 stage x 3 per block, 3 stages x 2; large uneven batch)"
  TILEMAXSIM_GPU_CASES=24 timeout 240 .dev/test-gpu tensor_core_path every_task random_shapes 2>&1 |
    grep -E "^test |test result|panicked|case" | head -40
  sanitize_tests tensor_core
  echo "== prev (persistent per-warp rings) against the grid, alternating"
  for a in "--docs 1000 --reps 300" "--docs 10000 --reps 100" "--docs 100000 --reps 30" \
    "--doc-len 32:256 --docs 100000 --reps 30"; do
    for i in 1 2; do row .dev/tilemaxsim-prev $a; row .dev/tilemaxsim $a; done
  done
  echo "== the grid's shapes (stages,tasks per block)"
  for a in "--docs 1000 --reps 300" "--docs 10000 --reps 100" "--docs 100000 --reps 30" \
    "--doc-len 32:256 --docs 100000 --reps 30"; do
    for s in 1,1 2,1 3,1 2,2 2,4 3,4 2,8; do TILEMAXSIM_BULK=$s row .dev/tilemaxsim $a; done
  done
  echo "== bf16 and d = 64 / 32 (engine's choice), prev then new"
  for a in "--dtype bf16 --docs 100000 --reps 30" "--dim 64 --docs 200000 --reps 30" "--dim 32 --docs 400000 --reps 30"; do
    row .dev/tilemaxsim-prev $a; row .dev/tilemaxsim $a
  done
} 2>&1 | tee "$OUT/bulk_grid.log"
