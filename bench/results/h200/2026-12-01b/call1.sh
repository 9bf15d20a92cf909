#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 1: maxsim_bulk_rows (kernels/bulk_rows.cu), the warps
# splitting the query's two m-tiles and the tile's tokens at d past 128 instead of d, against
# the engine's own kernels (maxsim_bulk's wide instantiations and maxsim_bulk_any, which split d
# over the warps and sum partials in shared memory; maxsim_span_any at d ≤ 248), f16 U[32,256]
# B = 10K: TILEMAXSIM_ROWS=0 (off) / 32 / 64 (tile tokens), and at d past 320 three blocks an SM
# against two (BULK_ROWS_MIN_BLOCKS=2: 255 registers, no spills). The rows test first, with
# memcheck and racecheck.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
rows() { local t=$1; shift; echo -n "[rows $t${V:+ $V}] "; TILEMAXSIM_ROWS=$t with "${V:-default}" bench "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 120 .dev/test-gpu_any_dim rows_kernel 2>&1 | grep -E "^test |test result|panicked|score\["
  TILEMAXSIM_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim rows_kernel 2>&1 | tail -2
  echo "memcheck exit: ${PIPESTATUS[0]}"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim rows_kernel 2>&1 | tail -2
  echo "racecheck exit: ${PIPESTATUS[0]}"
  echo "== $(date -u +%T) A/B, f16 U[32,256] B = 10K"
  for d in 256 320 384 136 200 264; do
    for t in 0 32 64; do rows $t --dtype f16 --docs 10000 --doc-len 32:256 --dim $d; done
  done
  for d in 352 384; do
    for t in 32 64; do V=BULK_ROWS_MIN_BLOCKS=2 rows $t --dtype f16 --docs 10000 --doc-len 32:256 --dim $d; done
  done
  echo "== $(date -u +%T) round 2"
  for d in 256 320 384; do
    for t in 0 32 64; do rows $t --dtype f16 --docs 10000 --doc-len 32:256 --dim $d; done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
