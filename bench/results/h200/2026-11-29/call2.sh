#!/usr/bin/env bash
# Device call 2 of 2026-11-29 (nvidia-h200, binaries of the scaled-query change in .dev): the
# exact GPU tests (f32 queries on f16 corpora now on the tensor cores at any magnitude, device
# memory included), memcheck and racecheck on that test, then f32 queries against f16/bf16
# corpora and f32 corpora timed, with documents a block for f32 (TILEMAXSIM_BULK=2,G).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29/call2.sh
set -uo pipefail
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  echo "== $(date -u +%T) tests/gpu.rs"
  .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked|assert|tolerance"
  echo "== $(date -u +%T) memcheck and racecheck: f32 queries on 16-bit corpora (4 cases)"
  TILEMAXSIM_GPU_CASES=4 timeout 150 compute-sanitizer --tool memcheck .dev/test-gpu f32_queries_on_16_bit 2>&1 | grep -E "ERROR SUMMARY|test result" | head -3
  TILEMAXSIM_GPU_CASES=4 timeout 150 compute-sanitizer --tool racecheck .dev/test-gpu f32_queries_on_16_bit 2>&1 | grep -E "RACECHECK SUMMARY|test result" | head -3
  echo "== $(date -u +%T) f32 queries against 16-bit corpora, f32 corpora, f16 (B = 100K)"
  for dt in f16 bf16; do
    bench --dtype $dt --query-dtype f32 --docs 100000 --doc-len 128
    bench --dtype $dt --query-dtype f32 --docs 100000 --doc-len 32:256
  done
  bench --dtype f16 --docs 100000 --doc-len 128
  bench --dtype f32 --docs 100000 --doc-len 128
  for g in 16 32 64; do TILEMAXSIM_BULK=2,$g bench --dtype f32 --docs 100000 --doc-len 128; done
  bench --dtype f16 --query-dtype f32 --docs 10000 --doc-len 128
  bench --dtype f16 --docs 10000 --doc-len 128
  tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
  date -u +%T
} 2>&1 | tee "$OUT/call2.log"
