#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 4, the build that lands: maxsim_bulk_rows by default at
# d = 232..352 (32-token tiles) and one wave of one-task blocks at the end of block-a-run bulk
# grids. Tests (tensor-core and random shapes, any d, f32; memcheck and racecheck of the rows
# kernel's first cases), then the landed defaults against the old choice (TILEMAXSIM_ROWS=0
# TILEMAXSIM_TAIL=0) in turn, f16 U[32,256] B = 10K at the wide d of issue 27's list and the rows
# kernel's, and the tail where the grid is a block a run at B = 100K (f16 and f32, Nd = 128).
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 150 .dev/test-gpu tensor_core random_shapes 2>&1 | grep -E "^test |test result|panicked"
  timeout 60 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  timeout 60 .dev/test-gpu_f32 2>&1 | grep -E "test result|panicked"
  TILEMAXSIM_GPU_CASES=3 TILEMAXSIM_SANITIZER=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim rows_kernel 2>&1 | tail -2
  echo "memcheck exit: ${PIPESTATUS[0]}"
  TILEMAXSIM_GPU_CASES=2 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim rows_kernel 2>&1 | tail -2
  echo "racecheck exit: ${PIPESTATUS[0]}"
  echo "== $(date -u +%T) landed against old, f16 U[32,256] B = 10K"
  for d in 248 256 264 320 352 384 512 768 1024; do
    ab "old" TILEMAXSIM_ROWS=0 TILEMAXSIM_TAIL=0 bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "new" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) the tail at B = 100K, Nd = 128"
  for dt in f16 f32; do
    ab "tail 0" TILEMAXSIM_TAIL=0 bash -c "$BENCH" _ --dtype $dt --docs 100000 --doc-len 128
    ab "tail 1" bash -c "$BENCH" _ --dtype $dt --docs 100000 --doc-len 128
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
