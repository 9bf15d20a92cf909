#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device call 8 (the machine of call 7, warm): one-warp streaming
# blocks against four, three rounds alternating, f16 U[32,256] at B = 100K (d = 16, 24) and
# B = 10K (d = 16, 32). As run (one command), with .dev carried.
source bench/exact_split_lib.sh >/dev/null 2>&1
B='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
{ for r in 1 2 3; do for c in "100000 16" "100000 24" "10000 16" "10000 32"; do set -- $c; for w in 4 1; do
  echo -n "[r$r B=$1 d=$2 w=$w] "
  TILEMAXSIM_STREAM_WARPS=$w bash -c "$B" _ --dtype f16 --docs $1 --doc-len 32:256 --dim $2 | grep -o "[0-9.]*% of [0-9]*\| [0-9.]* ms$" | tr '\n' ' '; echo
done; done; done; } 2>&1 | tee $OUT/call8.log
