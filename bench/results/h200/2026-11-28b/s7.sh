#!/usr/bin/env bash
# 2026-11-28 afternoon session, device call 7 (issue 27): the final binaries (queries read in
# place, the new launch bounds): python_gpu.py in full, then tests/gpu_any_dim.rs under
# compute-sanitizer memcheck.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 LIK_SUPPRESS_NORM_WARN=1
mkdir -p $TILEMAXSIM_CACHE_DIR
( time .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 ) 2>&1 &
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
wait
export PYTHONPATH=/tmp/site
echo "== $(date -u +%T) python_gpu.py"; timeout 260 python3 bench/python_gpu.py --out "$OUT" 2>&1 | tee $OUT/python_gpu.log | tail -30
echo "== $(date -u +%T) memcheck gpu_any_dim"
TILEMAXSIM_SANITIZER=1 timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -4
date -u +%T
