#!/usr/bin/env bash
# One device call: maxsim_gemm's shape knobs (kernels/maxsim.cu GEMM_NH, GEMM_MINB,
# GEMM_STAGES, set through TILEMAXSIM_KERNEL_DEFINES) on the batch and ColPali cases, with
# ptxas's register count for each, after the tensor-core tests on the default. Carry .dev.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_REQUIRE_GPU=1
B=.dev/tilemaxsim
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tensor-core tests (default shape)"
  TILEMAXSIM_CACHE_DIR=/tmp/tc-default timeout 200 .dev/test-gpu tensor_core 2>&1 | tail -3
  for v in "" GEMM_STAGES=3 GEMM_NH=32 GEMM_NH=32,GEMM_MINB=2,GEMM_STAGES=3 GEMM_NH=32,GEMM_MINB=2,GEMM_STAGES=2 GEMM_NH=16,GEMM_MINB=2,GEMM_STAGES=3; do
    export TILEMAXSIM_KERNEL_DEFINES=$v TILEMAXSIM_CACHE_DIR=/tmp/tc-${v//[=,]/_}
    echo "== variant [${v:-default}]"
    timeout 60 $B bench --device cuda --dtype f16 --docs 100000 --queries 32 --reps 10 2>&1 | sed -n 3p
    timeout 60 $B bench --device cuda --dtype f16 --docs 1000 --nq 1024 --doc-len 1024 --reps 10 2>&1 | sed -n 3p
    ptxas -arch=sm_90 -v -o /dev/null "$(ls $TILEMAXSIM_CACHE_DIR/*.ptx | head -1)" 2>&1 | grep -A2 "entry function 'maxsim_gemm_f16_d128'" | tail -2 | tr '\n' ' '; echo
  done
} 2>&1 | tee "$OUT/gemm_tune.log"
