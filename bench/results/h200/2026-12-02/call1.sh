#!/usr/bin/env bash
# 2026-12-02 (twenty-second), device call 1, on 7308a86's build: the any-d test on the d = 224
# plan of cc90b5d and d07bd6d's rows test (not run on the device last session), then the
# padded-pitch question of issue 27 item 2: f16 U[32,256] at each d the engine takes on masked
# or CUDA-core kernels (odd d, d past 256 not a multiple of 8) beside the d it would pad to. The
# padded corpus reads d_pad/d the bytes, so a padded d scores at rate(d_pad) * d / d_pad of
# its own read ceiling: that product is the prediction, measured here before it is built.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 90 .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked|FAILED|failed"
  echo "== $(date -u +%T) d and its padded d, f16 U[32,256] B = 100K"
  for d in 15 16 33 40 47 48 63 64 77 80 100 104 112 127 128 199 200 255 256 333 336 511 512 767 768; do
    ab "d=$d" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) the same at B = 10K, d <= 128"
  for d in 47 48 77 80 100 104 127 128; do
    ab "d=$d B=10K" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) f32 at d off the tensor-core dims beside the one it would pad to, B = 100K"
  for d in 77 96 100 127 128; do
    ab "f32 d=$d" bash -c "$BENCH" _ --dtype f32 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
