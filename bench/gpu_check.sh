#!/usr/bin/env bash
# One device call: GPU tests against the float64 reference, compute-sanitizer memcheck and
# racecheck, `info`, and `bench --device cuda`. Build first with bench/device_build.sh, then run
# this on the device with `.dev` carried. Logs land in $OUT (or ./gpu-out). The roofline's compute
# roof is COMPUTE_CEILING GFLOP/s (default: cuBLAS fp16's 735 TFLOP/s measured by peers_gpu.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 TILEMAXSIM_REQUIRE_NVRTC=1
log="$OUT/gpu_check.log"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== info"; .dev/tilemaxsim info
  echo "== kernel compile (NVRTC, sm_80 + sm_90)"; .dev/test-cuda_kernels_compile 2>&1 | tail -3
  echo "== GPU tests"; timeout 420 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked|case"
  echo "== compute-sanitizer memcheck"
  TILEMAXSIM_GPU_CASES=12 timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu --test-threads 1 2>&1 | tail -6
  echo "memcheck exit: ${PIPESTATUS[0]}"
  echo "== compute-sanitizer racecheck"
  # Every kernel, through the tests that launch them directly (the index test runs the same
  # kernels through the search pipeline and takes over 5 minutes under racecheck); few cases.
  TILEMAXSIM_GPU_CASES=3 timeout 240 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu --test-threads 1 \
    tensor_core random_shapes ablation top_k raw_device fp32 2>&1 | tail -6
  echo "racecheck exit: ${PIPESTATUS[0]}"
  echo "== second start uses the kernel cache"; .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  echo "== bench (kernel chosen per shape), roofline picture in $OUT/roofline.png"
  .dev/tilemaxsim bench --device cuda --plot "$OUT/roofline.png" --compute-ceiling "${COMPUTE_CEILING:-735000}" "$@" 2>&1
  echo "== ablation: the paper's kernel family on one shape (f16, Nq=32, Nd=128, d=128, B=100K)"
  for k in bulk mma tiled v2 v1; do .dev/tilemaxsim bench --device cuda --kernel $k --dtype f16 "$@" 2>&1 | sed -n 3p; done
  echo "== many query rows: the engine's choice, then gemm and wgmma forced (wgmma where tiles fill)"
  for a in "--queries 32 --docs 100000" "--nq 1024 --doc-len 1024 --docs 1000" \
    "--queries 16 --doc-len 32:256 --docs 100000" "--queries 32 --doc-len 64 --docs 100000"; do
    for k in "" "--kernel gemm" "--kernel wgmma"; do
      .dev/tilemaxsim bench --device cuda --dtype f16 $a $k --reps 10 2>&1 | sed -n 3p
    done
  done
  echo "== raw entry (score_raw: device memory the engine borrows, queries gathered per call) against the engine's own buffers"
  for a in "--docs 1000" "--docs 10000" "--docs 100000" "--doc-len 32:256 --docs 100000" "--dim 768 --docs 10000" "--queries 32 --docs 100000"; do
    for r in "" "--raw"; do .dev/tilemaxsim bench --device cuda --dtype f16 $a $r --reps 20 2>&1 | sed -n 3p | sed "s/^/${r:-owned} /"; done
  done
  echo "== maxsim_ring: wide d and exact f32 (split)"
  for a in "--dtype f16 --dim 768 --docs 10000" "--dtype f32 --docs 100000"; do
    .dev/tilemaxsim bench --device cuda $a --reps 20 2>&1 | sed -n 3p
  done
} 2>&1 | tee "$log"
