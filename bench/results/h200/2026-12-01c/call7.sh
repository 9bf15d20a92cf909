#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device call 7, on the build of call 6 (3b92809): the streamed
# kernel's default against four and one warps a block fixed (the default must match one), then
# issue 27's d list where call 6's peers run has no row, f16 U[32,256] B = 100K (and d = 200-224
# at B = 10K: the spanning kernel against the rows kernel's two tiles), then the GPU tests.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01c/call7.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) streamed, B = 100K: default / 4 / 1 warps a block"
  for d in 16 32; do
    ab "d=$d default" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    ab "d=$d w=4" TILEMAXSIM_STREAM_WARPS=4 bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    ab "d=$d w=1" TILEMAXSIM_STREAM_WARPS=1 bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) issue 27's d list, f16 U[32,256] B = 100K"
  for d in 96 200 256 320 384 512 1024; do
    ab "d=$d" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) d = 200-224, B = 10K: engine / rows 32 / rows 64"
  for d in 200 216 224; do
    ab "d=$d engine" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "d=$d rows32" TILEMAXSIM_ROWS=32 bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "d=$d rows64" TILEMAXSIM_ROWS=64 bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) tests"
  timeout 60 .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked"
  timeout 100 .dev/test-gpu tensor_core random_shapes 2>&1 | grep -E "test result|panicked"
  timeout 60 .dev/test-gpu_f32 2>&1 | grep -E "test result|panicked"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call7.log"
