#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/codec_lut.sh   (on the GPU machine, .dev carried)
# The paper's lookup-table PQ kernel (kernels/codec_lut.cu) beside the fused decode-and-multiply
# kernels, one device call: its GPU test (lookup_table_kernel_matches_on_pq) plain and under
# compute-sanitizer memcheck and racecheck, then `tilemaxsim bench --codec pq` with the kernel
# forced (lut, mma: the one-warp fused kernel, wgmma: the batched one) at 1 and 32 queries,
# M = 16 and 32, on the bench's shape (Nq = 32, Nd = 128, d = 128, B = 100K). Log in
# $OUT/codec_lut.log (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
bin=.dev/tilemaxsim
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== the lookup-table kernel's test"
  timeout 200 .dev/test-gpu_codecs lookup_table 2>&1 | grep -E "^test |test result|panicked|score"
  for tool in memcheck racecheck; do
    TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=2 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 \
      .dev/test-gpu_codecs --test-threads 1 lookup_table 2>&1 | tail -3
    echo "$tool exit: ${PIPESTATUS[0]}"
  done
  echo "== pq: lookup table (lut) vs fused one-warp (mma) vs batched (wgmma), M docs/s (pairs/s)"
  for m in 16 32; do
    for q in 1 32; do
      for k in lut mma wgmma; do
        timeout 90 $bin bench --device cuda --docs 100000 --reps 20 --queries $q --kernel $k --codec pq --m $m 2>&1 | grep -E "pq M=|error"
      done
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/codec_lut.log"
