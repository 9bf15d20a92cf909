#!/usr/bin/env bash
# Device call 3 of 2026-11-29 (fourth session; nvidia-h200): the whole-document bulk kernels on
# a grid of the blocks that fit at once, each block walking its runs strided by the grid
# (TILEMAXSIM_BULK_GRID=resident, kernels/bulk.cu BulkWalk), against a block a run (the
# default), with TILEMAXSIM_BULK=2,G; first the GPU tests that run the strided walk.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29d/call3.sh
source bench/exact_split_lib.sh
T0=$(date +%s)
f16() { bench --dtype f16 --docs "$1" --doc-len 128 --dim "${2:-128}"; }
res() { local g=$1; shift; echo -n "resident g=$g "; TILEMAXSIM_BULK_GRID=resident TILEMAXSIM_BULK=2,$g "$@"; }
{
  device_header
  echo "compiled: $(( $(date +%s) - T0 )) s"
  timeout 200 .dev/test-gpu tensor_core_path every_task_of_a_large_uneven fp32_split_on_tensor 2>&1 | grep -E "^test |test result|panicked"
  echo "tests: $(( $(date +%s) - T0 )) s"
  for r in 1 2; do
    echo "== f16 B = 10K, Nd = 128 (round $r)"
    echo -n "default "; f16 10000
    for g in 1 2 4 8; do res $g f16 10000; done
    echo "== f16 d = 768, B = 10K"
    echo -n "default "; f16 10000 768
    for g in 1 2; do res $g f16 10000 768; done
  done
  echo "== f16 B = 100K"
  echo -n "default "; f16 100000
  for g in 2 8; do res $g f16 100000; done
  echo "== f16 B = 1K"
  echo -n "default "; f16 1000
  for g in 1 2; do res $g f16 1000; done
  echo "== f32 B = 100K and 10K"
  echo -n "default "; bench --dtype f32 --docs 100000 --doc-len 128
  for g in 8 32; do res $g bench --dtype f32 --docs 100000 --doc-len 128; done
  echo -n "default "; bench --dtype f32 --docs 10000 --doc-len 128
  res 2 bench --dtype f32 --docs 10000 --doc-len 128
  echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/call3.log"
