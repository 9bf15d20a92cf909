#!/usr/bin/env bash
# 2026-12-02 (twenty-third), device call 1: every GPU test binary on the padded uploads, side by
# side (gpu_codecs, gpu_compress and gpu_ivf were not run after the padded pitch; gpu_search's
# streamed chunks now budget their padded rows), then the read ceiling over 8 GB at three
# bulk-copy shapes beside the 2 GB figure (each ceiling kernel's rate on every line), issue 27's
# wide d at f16 U[32,256] B = 100K, d = 1024 also against the ceiling over its own 29 GB.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02b/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests, side by side"
  for t in gpu gpu_f32 gpu_search gpu_any_dim gpu_codecs gpu_compress gpu_ivf; do
    ( timeout 330 .dev/test-$t 2>&1 | grep -E "^test |test result|panicked|differs" > $OUT/t_$t.txt; echo "rc=$?" >> $OUT/t_$t.txt ) &
  done
  wait
  for t in gpu gpu_f32 gpu_search gpu_any_dim gpu_codecs gpu_compress gpu_ivf; do echo "-- $t"; grep -vE "\.\.\. ok$" $OUT/t_$t.txt; done
  echo "== $(date -u +%T) ceilings and wide d, f16 U[32,256] B = 100K"
  for d in 96 200 256 320 384 512 768; do
    ab "d=$d" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  ab "d=1024" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim 1024 --ceiling-at-case
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
