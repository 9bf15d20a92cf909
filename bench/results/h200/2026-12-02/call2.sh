#!/usr/bin/env bash
# 2026-12-02 (twenty-second), device call 2: corpora stored at a padded width (plan::stored_dim,
# cuda/pitch.rs). The GPU tests first (gpu_any_dim with `padded_rows_match_the_reference`,
# memcheck on it, gpu_f32, gpu's tensor-core and random shapes), then f16 U[32,256] at each
# padded d, the engine's default against TILEMAXSIM_PAD=0 in turn (B = 100K, and B = 10K at
# d <= 128), f32 at 77, 100, 127.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "test |test result|panicked|FAILED|failed"
  timeout 60 .dev/test-gpu_f32 2>&1 | grep -E "test result|panicked"
  timeout 100 .dev/test-gpu tensor_core random_shapes 2>&1 | grep -E "test result|panicked"
  TILEMAXSIM_GPU_CASES=4 timeout 150 compute-sanitizer --tool memcheck --print-limit 5 .dev/test-gpu_any_dim padded_rows 2>&1 | grep -E "ERROR SUMMARY|test result|panicked|Invalid" | head
  echo "== $(date -u +%T) padded (default) / unpadded (TILEMAXSIM_PAD=0), f16 U[32,256] B = 100K"
  for d in 15 33 47 63 77 127 199 255 333 511 767; do
    ab "d=$d padded" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    ab "d=$d unpadded" TILEMAXSIM_PAD=0 bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) the same at B = 10K"
  for d in 47 77 127; do
    ab "d=$d B=10K padded" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "d=$d B=10K unpadded" TILEMAXSIM_PAD=0 bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) f32, B = 100K"
  for d in 77 100 127; do
    ab "f32 d=$d padded" bash -c "$BENCH" _ --dtype f32 --docs 100000 --doc-len 32:256 --dim $d
    ab "f32 d=$d unpadded" TILEMAXSIM_PAD=0 bash -c "$BENCH" _ --dtype f32 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
