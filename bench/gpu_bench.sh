#!/usr/bin/env bash
# GPU timings, one device call: `bench --device cuda` (kernel chosen per shape, roofline picture),
# the paper's kernel family on one shape, many query rows, the raw entry against the engine's
# own buffers, maxsim_ring. Build first with bench/device_build.sh; carry .dev. Log in
# $OUT/gpu_bench.log. The roofline's compute roof is COMPUTE_CEILING GFLOP/s (default: cuBLAS
# fp16's 735 TFLOP/s measured by peers_gpu.sh). Extra arguments go to the suite's and the ablation's `bench` calls.
# usage: bash bench/gpu_bench.sh [bench options]   (on the GPU machine, .dev carried)
set -uo pipefail
cd "$(dirname "$0")/.."
# Output folder, kernel cache, binary (these three lines were bench/device_common.sh's).
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=${TILEMAXSIM_CACHE_DIR:-/tmp/tilemaxsim-cache} TILEMAXSIM_REQUIRE_GPU=1
B=.dev/tilemaxsim
row() { timeout 60 $B bench --device cuda "$@" 2>&1 | sed -n 3p; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== bench (kernel chosen per shape), roofline picture in $OUT/roofline.png"
  $B bench --device cuda --plot "$OUT/roofline.png" --compute-ceiling "${COMPUTE_CEILING:-735000}" "$@" 2>&1
  echo "== ablation: the paper's kernel family on one shape (f16, Nq=32, Nd=128, d=128, B=100K)"
  for k in bulk mma tiled v2 v1; do row --kernel $k --dtype f16 --reps 10 "$@"; done
  echo "== many query rows: the engine's choice, then gemm and wgmma forced (wgmma where tiles fill)"
  for a in "--queries 32 --docs 100000" "--nq 1024 --doc-len 1024 --docs 1000" \
    "--queries 16 --doc-len 32:256 --docs 100000" "--queries 32 --doc-len 64 --docs 100000"; do
    for k in "" "--kernel gemm" "--kernel wgmma"; do row --dtype f16 $a $k --reps 10; done
  done
  echo "== raw entry (score_raw: device memory the engine borrows, queries gathered per call) against the engine's own buffers"
  for a in "--docs 1000" "--docs 10000" "--docs 100000" "--doc-len 32:256 --docs 100000" "--dim 768 --docs 10000" "--queries 32 --docs 100000"; do
    for r in "" "--raw"; do row --dtype f16 $a $r --reps 20 | sed "s/^/${r:-owned} /"; done
  done
  echo "== maxsim_ring: wide d and exact f32 (split)"
  for a in "--dtype f16 --dim 768 --docs 10000" "--dtype f32 --docs 100000"; do row $a --reps 20; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/gpu_bench.log"
