#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device call 5: maxsim_stream with one or two warps a block
# (TILEMAXSIM_STREAM_WARPS=1/2) against four, each warp's share of a run the same. The any-d
# tests (their streamed scorers at one and two warps a block), memcheck on the empty-document
# test, then f16 U[32,256] at the streamed d, B = 100K and 10K, the three alternating.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01c/call5.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim empty_raw 2>&1 | tail -2
  echo "memcheck exit: ${PIPESTATUS[0]}"
  for B in 100000 10000; do
    echo "== $(date -u +%T) f16 U[32,256] B = $B: warps a block 4 / 2 / 1"
    for d in 16 24 32 40 48 56; do
      for w in 4 2 1; do
        ab "d=$d w=$w" TILEMAXSIM_STREAM_WARPS=$w bash -c "$BENCH" _ --dtype f16 --docs $B --doc-len 32:256 --dim $d
      done
    done
  done
  echo "== $(date -u +%T) d = 64, B = 100K: spanning tiles / streamed at 4 and 1"
  ab "d=64 span" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim 64
  ab "d=64 stream w=4" TILEMAXSIM_STREAM=1 bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim 64
  ab "d=64 stream w=1" TILEMAXSIM_STREAM=1 TILEMAXSIM_STREAM_WARPS=1 bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim 64
  echo "== $(date -u +%T) round 2 at B = 100K, d = 16 and 48"
  for d in 16 48; do for w in 1 4; do
    ab "d=$d w=$w" TILEMAXSIM_STREAM_WARPS=$w bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call5.log"
