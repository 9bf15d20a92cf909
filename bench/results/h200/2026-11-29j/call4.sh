#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 4: issue 27's "done means", part 2: bench/python_gpu.py (every
# case) and bench/python_overhead.py, with the wheel of 1984e72 (`maturin build --release` in
# crates/tilemaxsim-python) and call 2's kernel cache.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call4.sh  (carry .dev .devcache .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== $(date -u +%T) python_gpu.py"
  timeout 420 python3 bench/python_gpu.py --out $OUT/python 2>&1 | tail -80
  echo "== $(date -u +%T) python_overhead.py"
  timeout 90 python3 bench/python_overhead.py 2>&1 | tail -20
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
