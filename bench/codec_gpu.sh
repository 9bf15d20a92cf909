#!/usr/bin/env bash
# usage: bash bench/codec_gpu.sh   (on the GPU machine, .dev and .whl carried)
# Compressed corpora on the GPU, one device call: the codec GPU tests (fused kernels and the
# decode-then-exact path against the float64 reference and the CPU twin), then every codec
# timed beside the peers (bench/peers_codecs.py), then the drop-in's gradient error
# (bench/grad_error.py). Log and JSON in $OUT (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(git rev-parse --short HEAD 2>/dev/null)"
  echo "== codec GPU tests"
  timeout 240 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|score\[" | head -40
  echo "== codecs beside the peers"
  PYTHONPATH=/tmp/site timeout 330 python3 bench/peers_codecs.py --json "$OUT/peers_codecs.json"
  echo "== gradient error of the PyLate drop-in"
  PYTHONPATH=/tmp/site timeout 90 python3 bench/grad_error.py
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/codec_gpu.log"
