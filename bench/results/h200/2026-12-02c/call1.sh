#!/usr/bin/env bash
# 2026-12-02 (twenty-fourth), device call 1: issue 27's Python rows (the bench half of
# bench/python_gpu.sh, not run since the seventeenth session) and the PyLate training step
# (bench/train_step.py, last on the H200 in the tenth), on the wheel of this tree; then the read
# ceiling at B = 10K's and d = 768 B = 10K's own sizes (how much of the 8 GiB ceiling a read that
# small can reach), and `maxsim_bulk_rows`'s 32- against 64-token tiles at B = 100K, d = 320 (89.8% last
# session; 64-token tiles were only measured there at B = 10K) and its neighbours.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02c/call1.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
ab() { echo -n "[$1] "; shift; env "$@"; }
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
{
  device_header
  echo "== $(date -u +%T) python_gpu.sh --no-tests"
  timeout 330 bash bench/python_gpu.sh --no-tests > /dev/null 2>&1
  cat "$OUT/python_gpu.log"
  echo "== $(date -u +%T) train_step.py"
  PYTHONPATH=/tmp/site LIK_SUPPRESS_NORM_WARN=1 timeout 150 python3 bench/train_step.py --out "$OUT/train" 2>&1 | tail -30
  echo "== $(date -u +%T) ceilings at the case's own size"
  ab "B=10K d=128" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 128 --dim 128 --ceiling-at-case
  ab "B=10K d=768" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 128 --dim 768 --ceiling-at-case
  echo "== $(date -u +%T) rows tiles, f16 U[32,256] B = 100K"
  for round in 1 2; do
    for t in 32 64 0; do
      ab "round $round rows=$t" TILEMAXSIM_ROWS=$t bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim 320
    done
  done
  for d in 264 352; do
    for t in 32 64; do
      ab "rows=$t" TILEMAXSIM_ROWS=$t bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
