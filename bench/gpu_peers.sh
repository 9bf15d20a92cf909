#!/usr/bin/env bash
# On the device, with .dev (bench/device_build.sh) and .whl (flash-maxsim 0.3.0 wheel) carried:
#   bash bench/gpu_peers.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/flash_maxsim-0.3.0-py3-none-any.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
python3 bench/gpu_peers.py --json "$OUT/gpu_peers.json" "$@" 2>"$OUT/gpu_peers.err" | tee "$OUT/gpu_peers.md"
tail -3 "$OUT/gpu_peers.err"
