#!/usr/bin/env bash
# One device call for the many-query tensor-core kernel (maxsim_gemm): its register/spill
# report from ptxas, the tensor-core tests against the float64 reference (mma, bulk, gemm and
# the engine's own choice), compute-sanitizer memcheck and racecheck, then batch and ColPali
# timings beside the one-warp-per-pair kernel. Build first with bench/device_build.sh; carry
# .dev. Log in $OUT/gemm.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
row() { timeout 60 $B bench --device cuda --dtype f16 "$@" 2>&1 | sed -n 3p; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tensor-core tests (engine's choice, mma, bulk, gemm)"; timeout 200 .dev/test-gpu tensor_core 2>&1 | tail -4
  echo "== ptxas (sm_90) on the cached PTX: maxsim_gemm registers and spills"
  ptx=$(ls -t /tmp/tilemaxsim-cache/* 2>/dev/null | head -1)
  [ -n "$ptx" ] && ptxas -arch=sm_90 -v -o /dev/null "$ptx" 2>&1 | grep -A2 "maxsim_gemm_f16_d128\|maxsim_gemm_f16_d32'" | grep -v "^--" | head -8
  echo "== compute-sanitizer memcheck / racecheck (6 cases)"
  sanitize_tests
  echo "== batches (Nq=32, Nd=128, d=128, B=100K): engine's choice vs --kernel mma"
  for q in 2 4 8 16 32 64; do
    row --docs 100000 --queries $q --reps 10
    [ $q -ge 4 ] && row --docs 100000 --queries $q --reps 10 --kernel mma
  done
  row --docs 100000 --queries 32 --doc-len 32:256 --reps 10
  echo "== ColPali (Nq = Nd = 1024, B = 1000): gemm vs tiled"
  row --docs 1000 --nq 1024 --doc-len 1024 --reps 10
  row --docs 1000 --nq 1024 --doc-len 1024 --reps 3 --kernel tiled
  echo "== single query still on the memory-bound kernels"
  row --docs 100000 --reps 20
} 2>&1 | tee "$OUT/gemm.log"
