#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/exact_split_tune.sh   (on the GPU machine, .dev and .whl carried)
# The knobs of maxsim_bulk_split, one device call: runs of documents per block
# (TILEMAXSIM_BULK=stages,group) and register bounds (SPLIT_MIN_BLOCKS, a recompile), on f32
# corpora and f32 queries against f16/bf16 corpora, the 16-bit engine beside them; then the d
# sweep of the exact path (f16, Nd ~ U[32,256]) as it stands. Log: $OUT/exact_split_tune.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== runs per block"
  for g in 8 16 32 64; do
    export TILEMAXSIM_BULK=2,$g
    bench --dtype f32 --docs 100000 --doc-len 128
    bench --dtype f16 --docs 100000 --doc-len 128
    bench --dtype bf16 --query-dtype f32 --docs 100000 --doc-len 128
  done
  unset TILEMAXSIM_BULK
  echo "== the d sweep (f16, U[32,256])"
  for d in 16 48 77 96 100 127; do bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"; done
  for d in 200 256 320 384 512 768 1024; do bench --dtype f16 --docs 10000 --doc-len 32:256 --dim "$d"; done
  echo "== SPLIT_MIN_BLOCKS_F32=3 (recompiles)"
  export TILEMAXSIM_KERNEL_DEFINES=SPLIT_MIN_BLOCKS_F32=3
  time .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  bench --dtype f32 --docs 100000 --doc-len 128
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  bench --dtype bf16 --query-dtype f32 --docs 100000 --doc-len 128
} 2>&1 | tee "$OUT/exact_split_tune.log"
