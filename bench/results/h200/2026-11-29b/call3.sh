#!/usr/bin/env bash
# Device call 3 of 2026-11-29 (second session; nvidia-h200, .dev and .whl of 173fddd's kernels):
# bench/python_gpu.py's cases but f32 (measured in the first session's call 5): the single
# queries with the per-call overhead against the native entry (issue 27, item 6), varlen,
# batched, top-10 and the PyLate training step; then the host time of one call.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29b/call3.sh
set -uo pipefail
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  time .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) python_gpu.py"
  timeout 330 python3 bench/python_gpu.py --cases single,varlen,batched,top10,training --out $OUT/python 2>&1 | tail -60
  echo "== $(date -u +%T) python_overhead.py"
  timeout 80 python3 bench/python_overhead.py 2>&1 | tail -20
  date -u +%T
} 2>&1 | tee "$OUT/call3.log"
