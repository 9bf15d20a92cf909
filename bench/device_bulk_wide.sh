#!/usr/bin/env bash
# maxsim_bulk at wide d (its warps split d; kernels/maxsim.cu, maxsim_bulk_wide_impl) against
# maxsim_ring, in one run on the device (.dev carried, built by bench/device_build.sh): the GPU
# tests (bulk forced at d = 256 and 768 in three shapes, random shapes up to d = 1024), both
# sanitizers on the tensor-core test, then bench rows alternating the two kernels, then bulk's
# shapes (TILEMAXSIM_BULK=stages,tasks per block).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
row() {
  echo -n "${TILEMAXSIM_BULK:+bulk=$TILEMAXSIM_BULK }$*: "
  timeout "${ROW_TIMEOUT:-60}" $B bench --device cuda "$@" 2>&1 | sed -n 3p
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== GPU tests"
  TILEMAXSIM_GPU_CASES=30 timeout 240 .dev/test-gpu tensor_core_path random_shapes every_task 2>&1 |
    grep -E "^test |test result|panicked|case" | head -40
  TILEMAXSIM_GPU_CASES=6 SANITIZER_TIMEOUT=200 sanitize_tests tensor_core
  echo "== ring against bulk (engine's choice), alternating"
  for a in "--dim 768 --docs 10000 --reps 30" "--dim 768 --docs 100000 --reps 10" "--dim 256 --docs 100000 --reps 20" \
    "--dim 1024 --docs 10000 --reps 30" "--dim 768 --doc-len 32:256 --docs 10000 --reps 30" "--dtype bf16 --dim 768 --docs 10000 --reps 30"; do
    case "$a" in *--dtype*) ;; *) a="--dtype f16 $a";; esac
    for i in 1 2; do row $a --kernel ring; row $a; done
  done
  echo "== bulk shapes at d = 768"
  for a in "--dtype f16 --dim 768 --docs 10000 --reps 30" "--dtype f16 --dim 768 --docs 100000 --reps 10"; do
    for s in 2,1 2,2 2,4 3,1 3,2; do TILEMAXSIM_BULK=$s row $a; done
  done
} 2>&1 | tee "$OUT/bulk_wide.log"
