#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 3 (call 2's build): maxsim_bulk_rows against the engine's
# own kernel at the d where call 2 did not look (232 and 248: maxsim_span_any or
# maxsim_bulk_any; 328 and 352: maxsim_bulk_any), B = 10K (and 100K at 248 and 352); two more rounds of the
# tail of one-task blocks (TILEMAXSIM_TAIL=0/1/2) at B = 10K; the whole any-d test first.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 200 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  echo "== $(date -u +%T) rows"
  for d in 232 248 328 352; do
    for b in 10000 $(case $d in 248|352) echo 100000;; esac); do
      for t in 0 32; do
        ab "rows $t" TILEMAXSIM_ROWS=$t bash -c "$BENCH" _ --dtype f16 --docs $b --doc-len 32:256 --dim $d
      done
      [ $d = 352 ] && ab "rows 64" TILEMAXSIM_ROWS=64 bash -c "$BENCH" _ --dtype f16 --docs $b --doc-len 32:256 --dim $d
    done
  done
  echo "== $(date -u +%T) tail, B = 10K, two rounds"
  for round in 1 2; do
    for d in 256 320 512 768; do
      for w in 0 1 2; do
        ab "tail $w" TILEMAXSIM_TAIL=$w bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
      done
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
