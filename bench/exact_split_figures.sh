#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/exact_split_figures.sh   (on the GPU machine, .dev and .whl carried)
# The figures of the exact path's new kernels, one device call: both read ceilings, f32 on
# maxsim_bulk_split against maxsim_ring, f32 queries on 16-bit corpora, the d sweep past 128
# (maxsim_bulk_any beside the instantiated widths), then bench/peers_gpu.py's f32, B = 100K and
# d = 768 rows (LIK and flash-maxsim in the same run). Log: $OUT/exact_split_figures.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== f32 and mixed, B = 100K, Nd = 128, d = 128"
  for k in bulk ring; do bench --dtype f32 --docs 100000 --doc-len 128 --kernel "$k"; done
  for t in f16 bf16; do bench --dtype "$t" --query-dtype f32 --docs 100000 --doc-len 128; done
  echo "== d past 128 (f16, U[32,256], B = 10K)"
  for d in 136 200 256 320 768 1016; do bench --dtype f16 --docs 10000 --doc-len 32:256 --dim "$d"; done
} 2>&1 | tee "$OUT/exact_split_figures.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases fp32,b100k,d768 --budget-s 200 --compile-cases none 2>&1 | tail -30 | tee -a "$OUT/exact_split_figures.log"
