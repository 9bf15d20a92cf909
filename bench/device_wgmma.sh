#!/usr/bin/env bash
# One device call for maxsim_wgmma (kernels/wgmma.cu: maxsim_gemm's work on warpgroup MMA,
# sm_90a) and maxsim_gemm: the tensor-core test (it forces every kernel, wgmma included, at
# d = 64 and 128, batches and long queries, candidates, long documents), the random-shape test
# and the large uneven batch, both sanitizers over the first, then timings of gemm and wgmma
# (and, where .dev/tilemaxsim-prev exists, of a previous build's: copy the old binary there
# before rebuilding) on the two many-row targets (32 queries x 100K, ColPali Nq = Nd = 1024 x
# 1000), uneven documents, d = 64, and wgmma's stage knob. Build first with
# bench/device_build.sh; carry .dev (without .dev/cranfield if the carry is over 64 MiB). Log
# in $OUT/wgmma.log. KNOBS="" skips the knob sweep.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
export ROW_TIMEOUT=90
prev() {  # a row of the previous build (its own kernel cache)
  [ -x .dev/tilemaxsim-prev ] || return 0
  echo -n "prev: "
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-prev timeout "$ROW_TIMEOUT" .dev/tilemaxsim-prev bench --device cuda "$@" 2>&1 | sed -n 3p
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tests: tensor-core (wgmma forced where it applies), random shapes, the large uneven batch"
  TILEMAXSIM_GPU_CASES=24 timeout 200 .dev/test-gpu tensor_core_path random_shapes persistent_kernels 2>&1 |
    grep -E "^test |test result|panicked|case"
  echo "== ptxas (sm_90a): maxsim_wgmma"
  ptxas -arch=sm_90a -v -o /dev/null "$(ls -t $TILEMAXSIM_CACHE_DIR/*.ptx 2>/dev/null | head -1)" 2>&1 |
    grep -A3 "entry function 'maxsim_wgmma_f16_d128'" | tail -2
  echo "== compute-sanitizer (tensor-core test)"
  sanitize_tests tensor_core_path
  q32=(--dtype f16 --queries 32 --docs 100000 --reps 10)
  colpali=(--dtype f16 --nq 1024 --doc-len 1024 --docs 1000 --reps 10)
  echo "== 32 queries x 100K (Nq = 32, Nd = 128, d = 128, f16): gemm and wgmma, this build and the previous"
  for r in 1 2; do
    for k in gemm wgmma; do def_row "" "${q32[@]}" --kernel $k; prev "${q32[@]}" --kernel $k; done
  done
  echo "== ColPali Nq = Nd = 1024, B = 1000: gemm and wgmma, this build and the previous"
  for r in 1 2; do
    for k in gemm wgmma; do def_row "" "${colpali[@]}" --kernel $k; prev "${colpali[@]}" --kernel $k; done
  done
  echo "== 16 queries, U[32,256], B = 100K; bf16 d = 64 (32 queries)"
  for k in gemm wgmma; do def_row "" --dtype f16 --queries 16 --doc-len 32:256 --docs 100000 --reps 10 --kernel $k; done
  prev --dtype f16 --queries 16 --doc-len 32:256 --docs 100000 --reps 10 --kernel wgmma
  for k in gemm wgmma; do def_row "" --dtype bf16 --dim 64 --queries 32 --docs 100000 --reps 10 --kernel $k; done
  echo "== wgmma ring stages"
  for def in ${KNOBS-WG_STAGES=3 WG_STAGES=6}; do def_row "$def" "${q32[@]}" --kernel wgmma; done
} 2>&1 | tee "$OUT/wgmma.log"
