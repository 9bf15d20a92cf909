#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 3: bench/python_gpu.py (every case, beside LIK 0.4.5,
# flash-maxsim 0.3.0 and PyLate's torch path; CUDA events) and bench/python_overhead.py, the wheel
# of d34e60c; python_gpu.sh's bench half, run alone since the suite (call 2) fills a call.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call3.sh  (carry .dev/kcache .whl)
cd "$(dirname "$0")/../../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
source bench/seed_kernel_cache.sh
if ! python3 -c "from pylate import losses" >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site-compat .whl/compat/*.whl || exit 1
  export PYTHONPATH=/tmp/site-compat:/tmp/site
fi
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== bench"; timeout 420 python3 bench/python_gpu.py --out "$OUT"
  echo "== host time of one call"; timeout 100 python3 bench/python_overhead.py
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/python_bench.log"
