#!/usr/bin/env bash
# One device call for maxsim_wgmma (kernels/wgmma.cu: maxsim_gemm's work on warpgroup MMA,
# sm_90a), chosen only by name until this has passed: the tensor-core test (it forces every
# kernel, wgmma included, at d = 64 and 128, batches and long queries, candidates, long
# documents), both sanitizers over it, then timings beside maxsim_gemm on the two many-row
# targets (32 queries x 100K, ColPali Nq = Nd = 1024 x 1000) and its shape knobs. Build first
# with bench/device_build.sh; carry .dev. Log in $OUT/wgmma.log. KNOBS="" skips the knob sweep.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
export ROW_TIMEOUT=90
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== ptxas (sm_90a): maxsim_wgmma"
  ptxas -arch=sm_90a -v -o /dev/null "$(ls -t /tmp/tilemaxsim-cache/*.ptx 2>/dev/null | head -1)" 2>&1 |
    grep -A3 "entry function 'maxsim_wgmma_f16_d128'" | tail -2
  echo "== tests: tensor-core (wgmma forced where it applies)"
  TILEMAXSIM_GPU_CASES=24 timeout 150 .dev/test-gpu tensor_core_path 2>&1 | grep -E "^test |test result|panicked|case"
  echo "== compute-sanitizer (tensor-core test)"
  sanitize_tests tensor_core_path
  echo "== 32 queries x 100K (Nq = 32, Nd = 128, d = 128, f16): gemm against wgmma"
  for k in gemm wgmma gemm wgmma; do def_row "" --dtype f16 --queries 32 --docs 100000 --reps 10 --kernel $k; done
  echo "== ColPali Nq = Nd = 1024, B = 1000: gemm against wgmma"
  for k in gemm wgmma; do def_row "" --dtype f16 --nq 1024 --doc-len 1024 --docs 1000 --reps 10 --kernel $k; done
  echo "== wgmma knobs: blocks per SM bound, ring stages"
  for def in ${KNOBS-WG_MINB=1 WG_STAGES=2 WG_STAGES=4}; do
    def_row "$def" --dtype f16 --queries 32 --docs 100000 --reps 10 --kernel wgmma
  done
} 2>&1 | tee "$OUT/wgmma.log"
