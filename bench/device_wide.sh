#!/usr/bin/env bash
# One device call for the wide-embedding tensor-core kernel (maxsim_wide, d = 256..1024): the
# tensor-core and random-shape tests against the float64 reference, compute-sanitizer memcheck
# and racecheck, ptxas's register count, then d = 256 / 768 / 1024 timings beside maxsim_tiled.
# Build first with bench/device_build.sh; carry .dev. Log in $OUT/wide.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
B=.dev/tilemaxsim
row() { timeout 60 $B bench --device cuda "$@" 2>&1 | sed -n 3p; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tensor-core and random-shape tests"
  TILEMAXSIM_GPU_CASES=24 timeout 240 .dev/test-gpu tensor_core random_shapes 2>&1 | tail -5
  echo "== ptxas (sm_90): maxsim_wide"
  ptxas -arch=sm_90 -v -o /dev/null "$(ls -t /tmp/tilemaxsim-cache/*.ptx | head -1)" 2>&1 | grep -A2 "entry function 'maxsim_wide_f16'" | tail -2
  echo "== compute-sanitizer memcheck / racecheck (tensor-core test, 6 cases: d = 32..768)"
  sanitize_tensor_core
  echo "== wide embeddings (f16, Nq=32, Nd=128): engine's choice vs tiled"
  row --dtype f16 --dim 768 --docs 10000 --reps 20
  row --dtype f16 --dim 768 --docs 100000 --reps 10
  row --dtype bf16 --dim 768 --docs 10000 --reps 20
  row --dtype f16 --dim 256 --docs 100000 --reps 20
  row --dtype f16 --dim 1024 --docs 10000 --reps 20
  row --dtype f16 --dim 768 --docs 10000 --doc-len 32:256 --reps 20
  row --dtype f16 --dim 768 --docs 10000 --reps 5 --kernel tiled
} 2>&1 | tee "$OUT/wide.log"
