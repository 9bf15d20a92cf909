#!/usr/bin/env bash
# 2026-11-30 (twelfth), device call 1: f32 corpora split once at upload into f16 planes
# (`maxsim_bulk_planes`, `split_f32_planes`) against the in-kernel split (TILEMAXSIM_F32_PLANES=0),
# in one run: the f32 GPU tests and memcheck, then B = 100K interleaved with clocks and instant
# power sampled, other shapes, and the f32 row of the peers (LIK, flash-maxsim).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30b/call1.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
f32() { bench --dtype f32 "$@"; }
split() { TILEMAXSIM_F32_PLANES=0 bench --dtype f32 "$@" | sed 's/^/in-kernel split: /'; }
long() { .dev/tilemaxsim bench --device cuda --reps 1000 --json --dtype f32 --docs 100000 --doc-len 128 2>&1 | python3 bench/bench_lines.py ceiling --dtype f32 --docs 100000 --doc-len 128; }
{
  device_header
  echo "== f32 GPU tests"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=4 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3; echo "f32 memcheck exit: ${PIPESTATUS[0]}"
  echo "== A/B: f32 B = 100K Nd = 128 (d = 128), 1000 calls each, with power"
  for rep in 1 2; do
    powered "planes" long
    TILEMAXSIM_F32_PLANES=0 powered "in-kernel split" long
  done
  echo "== A/B: other shapes"
  for args in "--docs 10000 --doc-len 128" "--docs 100000 --doc-len 32:256" "--docs 500000 --doc-len 128" "--docs 100000 --doc-len 128 --dim 64" "--docs 100000 --doc-len 128 --dim 32" "--docs 100000 --doc-len 128 --dim 96" "--docs 100000 --doc-len 128 --queries 8"; do
    split $args; f32 $args
  done
  echo "== f16 (unchanged kernel)"
  bench --dtype f16 --docs 100000 --doc-len 128
  echo "== $(date -u +%FT%TZ) peers: f32 B = 100K"
} 2>&1 | tee "$OUT/call1.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases fp32 --budget-s 150 2>&1 | tail -30 | tee -a "$OUT/call1.log"
