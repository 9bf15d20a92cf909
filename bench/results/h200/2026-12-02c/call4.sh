#!/usr/bin/env bash
# 2026-12-02 (twenty-fourth), device call 4: the final tree (the training forward's ring at two
# blocks a SM) end to end: `bash bench/python_gpu.sh` whole (PyLate 1.6.0's own tests with our
# drop-in, the colbert-ai drop-in tests, the suite on CUDA tensors, then python_gpu.py and
# python_overhead.py), then bench/train_step.py with every row.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02c/call4.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/seed_kernel_cache.sh
mkdir -p "$OUT"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  echo "== $(date -u +%T) python_gpu.sh"
  timeout 500 bash bench/python_gpu.sh > /dev/null 2>&1
  cat "$OUT/python_gpu.log"
  echo "== $(date -u +%T) train_step.py"
  PYTHONPATH=/tmp/site LIK_SUPPRESS_NORM_WARN=1 timeout 60 python3 bench/train_step.py --out "$OUT/train" 2>&1 | tail -30
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
