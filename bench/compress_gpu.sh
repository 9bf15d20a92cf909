#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/compress_gpu.sh   (on the GPU machine; .dev built with
#        TILEMAXSIM_DEVICE_DATA=1 bash bench/device_build.sh, and .whl holding fast-plaid,
#        fastkmeans and joblib (here .whlc: pip download --no-deps fast-plaid==1.7.0.2110
#        fastkmeans==0.5.0 joblib with the device platform flags), carried)
# Compression on the GPU, one device call:
#  1. tests/gpu_compress.rs (k-means determinism, codes against the CPU's, errors), plain and
#     under compute-sanitizer memcheck and racecheck;
#  2. Cranfield: `corpus compress --device cuda` end to end (cold: NVRTC compiles; warm: cached)
#     and every codec's quality, compressed and searched on the GPU (bench/codec_quality.py);
#  3. 16M tokens (200K documents x 80, d = 128, f16, clustered), residual nbits = 2:
#     `corpus compress --device cuda` against fast-plaid 1.7.0's `create`, in the same run
#     (bench/compress_peers.py).
# Logs in $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
source bench/peer_wheels.sh
bash bench/device_data.sh || exit 1
# A kernel cache from an earlier run of the same sources, where one was carried (.devcache).
[ -f .devcache/kernel-cache.tar.xz ] && tar -C /tmp -xJf .devcache/kernel-cache.tar.xz
bin=.dev/tilemaxsim
cran=.dev/cranfield
work=/tmp/compress; mkdir -p "$work"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(git rev-parse --short HEAD 2>/dev/null) $(nproc) CPUs"
  echo "== Cranfield residual-2 on the GPU, end to end (the first start compiles the kernels)"
  for run in cold warm warm; do
    s=$(date +%s.%N)
    $bin corpus compress --corpus $cran/corpus.safetensors --codec residual --nbits 2 --device cuda -o "$work/r2.safetensors" 2>&1 | grep -E "compressed|codec|error" | head -3
    echo "$run: $(python3 -c "import time; print(f'{time.time() - $s:.2f}')") s wall"
  done
  echo "== the same on the CPU ($(nproc) cores)"
  s=$(date +%s.%N)
  $bin corpus compress --corpus $cran/corpus.safetensors --codec residual --nbits 2 --device cpu -o "$work/r2cpu.safetensors" 2>&1 | grep -E "compressed" | head -2
  echo "cpu: $(python3 -c "import time; print(f'{time.time() - $s:.2f}')") s wall"
  echo "== compression tests"
  timeout 240 .dev/test-gpu_compress 2>&1 | grep -E "^test |test result|panicked|token|code" | head -30
  echo "== memcheck"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_compress --test-threads 1 2>&1 | tail -4
  echo "memcheck exit: ${PIPESTATUS[0]}"
  echo "== racecheck"
  timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_compress --test-threads 1 residual 2>&1 | tail -4
  echo "racecheck exit: ${PIPESTATUS[0]}"
  echo "== 16M tokens: tilemaxsim against fast-plaid"
  PYTHONPATH=/tmp/site timeout 420 python3 bench/compress_peers.py --bin $bin --work "$work"
  echo "== Cranfield quality, compressed and searched on the GPU"
  timeout 300 python3 bench/codec_quality.py --bin $bin --data $cran --work "$work/quality" --device cuda
  # The kernel cache, for a later run of the same sources to skip NVRTC's minute.
  tar -C /tmp -cJf "$OUT/kernel-cache.tar.xz" tilemaxsim-cache 2>/dev/null
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/compress_gpu.log"
