#!/usr/bin/env bash
# One device call for the bulk-copy tensor-core kernel (maxsim_bulk, sm_90): its tests against
# the float64 reference beside maxsim_mma, compute-sanitizer, a sweep of its ring shape
# (TILEMAXSIM_BULK=stages,tile) beside maxsim_mma. The peers side by side: bench/peers_gpu.sh.
# Build first with bench/device_build.sh; carry .dev. Log in $OUT/bulk.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tensor-core tests (mma and bulk)"; timeout 150 .dev/test-gpu tensor_core 2>&1 | tail -4
  echo "== compute-sanitizer memcheck / racecheck (6 cases)"
  sanitize_tests
  echo "== ring shape sweep (f16, Nq=32, Nd=128, d=128)"
  for docs in 100000 10000; do
    timeout 30 $B bench --device cuda --dtype f16 --docs $docs --reps 20 --kernel mma 2>&1 | sed -n 3p
    for shape in 2,32 3,32 4,32 2,64 3,64 6,16 8,16; do
      echo -n "bulk $shape: "; TILEMAXSIM_BULK=$shape timeout 30 $B bench --device cuda --dtype f16 --docs $docs --reps 20 --kernel bulk 2>&1 | sed -n 3p
    done
  done
  echo -n "bulk (default shape) U[32,256]: "; timeout 30 $B bench --device cuda --dtype f16 --docs 100000 --doc-len 32:256 --reps 20 --kernel bulk 2>&1 | sed -n 3p
} 2>&1 | tee "$OUT/bulk.log"
