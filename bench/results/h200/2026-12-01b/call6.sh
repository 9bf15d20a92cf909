#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 6 (call 4's build, the landed code): maxsim_bulk_rows
# where it is not the default, against the engine's choice there: d = 360 and 376 (twelve
# chunks, two blocks an SM, against maxsim_bulk_any) and d = 200, 216, 224 (against
# maxsim_span_any), f16 U[32,256], B = 10K and 100K, 32- and 64-token tiles.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call6.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  for d in 360 376 200 216 224; do
    for b in 10000 $(case $d in 376|216) echo 100000;; esac); do
      for t in 0 32 64; do
        ab "rows $t" TILEMAXSIM_ROWS=$t bash -c "$BENCH" _ --dtype f16 --docs $b --doc-len 32:256 --dim $d
      done
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call6.log"
