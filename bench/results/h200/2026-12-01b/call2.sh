#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 2: (1) a tail of one-task blocks at the end of the
# whole-document bulk grids (kernels/bulk.cu BulkRun, plan/bulk.rs bulk_tail: the last N waves
# of resident blocks take one task each instead of a run), TILEMAXSIM_TAIL=0/1/2 at B = 10K,
# f16, where the grid is a block a run (U[32,256] at the wide d, and maxsim_bulk_rows); (2)
# maxsim_bulk_rows against the engine's kernels at B = 100K, U[32,256] (its steady state: call
# 1's B = 10K rows were level at 256 and 320); tests first (the rows kernel, the tensor-core
# kernels and f32 with the tail forced).
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
# `bench` of bench/exact_split_lib.sh in a child under `env`'s variables.
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 120 .dev/test-gpu_any_dim rows_kernel 2>&1 | grep -E "test result|panicked|score\["
  timeout 200 .dev/test-gpu tensor_core 2>&1 | grep -E "test result|panicked"
  timeout 120 .dev/test-gpu_f32 2>&1 | grep -E "test result|panicked"
  echo "== $(date -u +%T) tail, B = 10K"
  for args in "--doc-len 32:256 --dim 256" "--doc-len 32:256 --dim 320" "--doc-len 32:256 --dim 384" "--doc-len 32:256 --dim 768" "--doc-len 32:256 --dim 512"; do
    for w in 0 1 2; do
      # shellcheck disable=SC2086
      ab "tail $w" TILEMAXSIM_TAIL=$w bash -c "$BENCH" _ --dtype f16 --docs 10000 $args
    done
  done
  for w in 0 1 2; do
    ab "rows 32 tail $w" TILEMAXSIM_ROWS=32 TILEMAXSIM_TAIL=$w bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim 264
  done
  echo "== $(date -u +%T) rows, B = 100K"
  for d in 256 320 264; do
    for t in 0 32 64; do
      ab "rows $t" TILEMAXSIM_ROWS=$t bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    done
  done
  for t in 0 64; do
    ab "rows $t" TILEMAXSIM_ROWS=$t bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim 384
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
