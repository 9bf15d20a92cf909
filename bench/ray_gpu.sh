#!/usr/bin/env bash
# The Ray half of the multi-GPU runs, on the GPU machine: tilemaxsim.ray's GPU-shard test
# (tests/test_ray.py, one shard per GPU) and bench/ray_gpu.py (shard scaling, a shard killed
# mid-load, the Serve application under load). Ray and Ray Serve travel as one archive, since
# the machine has neither and its wheels pass the carry limit: .whl/raysite.tar.xz (ray 2.60.0
# with its core binaries stripped and rllib/tune/train/data/llm left out, plus the
# ray[serve] dependencies; how to make it: bench/README.md), with the tilemaxsim wheel in .whl
# and .dev (bench/device_build.sh) carried too.
# usage: OUT=$OUT bash bench/ray_gpu.sh [--docs 500000] [--no-tests] [--skip shards,kill,serve]
#   Writes $OUT/ray_gpu.log, $OUT/ray/ray_gpu.json and $OUT/ray/ray_serve_*gpu.json.
set -uo pipefail
cd "$(dirname "$0")/.."
DOCS=500000 TESTS=1 SKIP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --docs) DOCS=$2; shift 2 ;;
    --no-tests) TESTS=0; shift ;;
    --skip) SKIP=$2; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
SYNTH=/tmp/synth-f16-$DOCS-128-128.safetensors
{
  echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nvidia-smi -L | wc -l) GPUs"
  [ -d /tmp/raysite ] || tar -C /tmp -xJf .whl/raysite.tar.xz || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/tilemaxsim-*.whl || exit 1
  export PYTHONPATH=/tmp/site:/tmp/raysite
  python3 -c "import ray, ray.serve, tilemaxsim; print('ray', ray.__version__, '| tilemaxsim', tilemaxsim.__version__, '| cuda', tilemaxsim.cuda_available())" || exit 1
  if [ "$TESTS" = 1 ]; then
    echo "== $(date -u +%T) tests/test_ray.py on the GPUs (the Cranfield tests skip: its corpus does not travel)"
    (cd crates/tilemaxsim-python && timeout 240 python3 -m pytest -q -rs --tb=short -p no:cacheprovider \
      -W ignore::DeprecationWarning tests/test_ray.py 2>&1 | tail -15)
  fi
  [ -f "$SYNTH" ] || .dev/tilemaxsim corpus synth --docs "$DOCS" --doc-len 128 --dim 128 --dtype f16 -o "$SYNTH" >/dev/null
  echo "== $(date -u +%T) bench/ray_gpu.py on $SYNTH"
  timeout 480 python3 bench/ray_gpu.py --corpus "$SYNTH" --out "$OUT/ray" --load .dev/serve_load --skip "$SKIP"
  echo "== $(date -u +%T) done"
} 2>&1 | tee "$OUT/ray_gpu.log"
