#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device call 9, on 3b92809's build: d = 216 and 224 at B = 30K and
# 100K, the spanning kernel (the engine's) against the rows kernel's tiles (call 7 has B = 10K).
# usage: OUT=$OUT bash bench/results/h200/2026-12-01c/call9.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  for B in 30000 100000; do
    ab "B=$B d=216 engine" bash -c "$BENCH" _ --dtype f16 --docs $B --doc-len 32:256 --dim 216
    ab "B=$B d=216 rows64" TILEMAXSIM_ROWS=64 bash -c "$BENCH" _ --dtype f16 --docs $B --doc-len 32:256 --dim 216
    ab "B=$B d=224 engine" bash -c "$BENCH" _ --dtype f16 --docs $B --doc-len 32:256 --dim 224
    ab "B=$B d=224 rows32" TILEMAXSIM_ROWS=32 bash -c "$BENCH" _ --dtype f16 --docs $B --doc-len 32:256 --dim 224
    ab "B=$B d=224 rows64" TILEMAXSIM_ROWS=64 bash -c "$BENCH" _ --dtype f16 --docs $B --doc-len 32:256 --dim 224
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call9.log"
