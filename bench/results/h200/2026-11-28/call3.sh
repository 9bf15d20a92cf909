#!/usr/bin/env bash
# 2026-11-28 session, device call 3 (issue 27): Python on CUDA tensors: python_gpu.py (single,
# varlen, batched, top10, training), the host time of a call, then the PyLate training step.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
mkdir -p /tmp/tilemaxsim-cache && tar -xJf .dev/kcache.tar.xz -C /tmp/tilemaxsim-cache
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
echo "== $(date -u +%T) python_gpu.py"; timeout 300 python3 bench/python_gpu.py --out "$OUT" 2>&1 | tee $OUT/python_gpu.log
echo "== $(date -u +%T) python_overhead.py"; timeout 60 python3 bench/python_overhead.py 2>&1 | tee $OUT/python_overhead.log
echo "== $(date -u +%T) train_step.py"; timeout 150 python3 bench/train_step.py --out "$OUT" 2>&1 | tee $OUT/train_step.log
date -u +%T
