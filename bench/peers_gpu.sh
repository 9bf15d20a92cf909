#!/usr/bin/env bash
# GPU peers: flash-maxsim, late-interaction-kernels, the paper's V2-MQ in Triton, PyTorch, PLAID,
# torch.compile and ours, side by side (bench/peers_gpu.py). On the device, with .dev
# (bench/device_build.sh) and .whl (pip download --no-deps -d .whl flash-maxsim==0.3.0
# late-interaction-kernels==0.4.5) carried:
# usage: bash bench/peers_gpu.sh [peers_gpu.py options, e.g. --cases b100k,varlen]
# Tables and JSON go to $OUT (the device tool's folder), else bench/results/peers_gpu/.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${OUT:-bench/results/peers_gpu}; mkdir -p "$DIR"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TILEMAXSIM_CACHE_DIR=${TILEMAXSIM_CACHE_DIR:-/tmp/tilemaxsim-cache}
source bench/seed_kernel_cache.sh
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null
python3 bench/peers_gpu.py --out-dir "$DIR" "$@" 2>&1 | tee "$DIR/peers_gpu.log"
exit "${PIPESTATUS[0]}"
