#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/codec_batched.sh [--no-peers]   (on the GPU machine, .dev and .whl carried)
# The batched codec kernels (kernels/codec_wgmma.cu), one device call: the codec GPU tests;
# the batched and the one-warp kernel forced side by side at 1 to 32 queries (where the engine
# switches: batched_min_blocks in src/cuda/codes.rs); then, unless --no-peers, every codec
# beside the peers (bench/peers_codecs.py) and maxsim_residual on CUDA tensors beside LIK
# (bench/residual_gpu.py). Log and JSON in $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
bin=.dev/tilemaxsim
sweep() {  # codec flags...: M docs/s (pairs/s) of each kernel per query count (QS, KS to narrow)
  for q in ${QS:-1 2 4 8 32}; do
    for k in ${KS:-mma wgmma}; do
      r=$(timeout 60 $bin bench --device cuda --docs 100000 --reps 20 --queries $q --kernel $k --json "$@" 2>&1)
      echo "$r" | python3 -c 'import sys, json
try:
    r = json.load(sys.stdin)["results"][0]
    d, t, n = r["docs_per_s"] / 1e6, r["gflop_per_s"] / 1e3, r["name"]
    print(f"  Q={sys.argv[1]:>2} {sys.argv[2]:>5}: {d:8.1f} M pairs/s {t:6.1f} TFLOP/s  {n}")
except Exception as e:
    print("  failed:", sys.argv[1:], e)' $q $k || echo "$r" | tail -3
    done
  done
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(git rev-parse --short HEAD 2>/dev/null)"
  echo "== codec GPU tests"
  timeout 300 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|score\[|tolerance" | head -40
  echo "== batched (wgmma) vs one-warp (mma) kernel, B = 100K x 128 tokens, d = 128, Nq = 32"
  for c in "--codec residual --nbits 2" "--codec residual --nbits 4" "--codec pq --m 16" "--codec int8" "--codec fp8"; do
    echo "-- $c"; sweep $c
  done
  if [ "${1:-}" != --no-peers ]; then
    echo "== codecs beside the peers"
    PYTHONPATH=/tmp/site timeout 330 python3 bench/peers_codecs.py --json "$OUT/peers_codecs.json"
    echo "== maxsim_residual beside LIK"
    PYTHONPATH=/tmp/site timeout 200 python3 bench/residual_gpu.py --json "$OUT/residual_gpu.json"
  fi
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/codec_batched.log"
