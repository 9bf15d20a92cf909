#!/usr/bin/env bash
# 2026-12-02 (twenty-third), device call 3: the read ceiling over 2 GB against 8 GB in one run
# (`--ceiling-at-case` on a 2.1 GB case; the run's own ceiling is over 8 GB), then the Python
# package's pytest suite on CUDA tensors (bench/python_gpu.sh --no-bench: PyLate's own tests from
# its sdist, the colbert-ai drop-in tests against the original, the CUDA-only stream and graph
# tests) on the padded uploads, wheel of this commit.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02b/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/seed_kernel_cache.sh
{
  echo "== $(date -u +%T) the ceiling at 2 GB and at 8 GB"
  for i in 1 2; do
    .dev/tilemaxsim bench --device cuda --reps 30 --json --docs 8192 --doc-len 128 --dim 1024 --dtype f16 --ceiling-at-case 2>&1 |
      python3 bench/bench_lines.py ceiling "round $i"
  done
} 2>&1 | tee "$OUT/call3.log"
OUT=$OUT bash bench/python_gpu.sh --no-bench
