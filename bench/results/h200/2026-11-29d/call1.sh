#!/usr/bin/env bash
# Device call 1 of 2026-11-29 (fourth session; nvidia-h200, .dev from bench/device_build.sh):
# (a) f32 corpora on maxsim_bulk_split: 8 tokens a warp a tile (SPLIT_F32_TW=8, half-size
#     stages: 2-4 stages at three blocks an SM, or four blocks at 128 registers) and the
#     integer split (SPLIT_ROUND_BITS=1), against the default, B = 100K and 10K, Nd = 128;
# (b) the read ceiling over the case's own bytes (--ceiling-at-case) at B = 10K and d = 768;
# (c) the k2 any kernels at four blocks an SM (SPAN_K2_ANY_BLOCKS=4, no spills) against five;
# (d) runs of the spanning kernel at d = 88, 104, 112: 8 against 32 documents.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29d/call1.sh
source bench/exact_split_lib.sh
T0=$(date +%s)
left() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }
f32() { bench --dtype f32 --docs "$1" --doc-len "${2:-128}"; }
u() { bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$1"; }
V_TW8=SPLIT_F32_TW=8
V_TW8B4=SPLIT_F32_TW=8,SPLIT_MIN_BLOCKS_F32=4
V_RB=SPLIT_ROUND_BITS=1
V_K2=SPAN_K2_ANY_BLOCKS=4
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  # Every variant's kernels compiled at once (each its own cache entry).
  for v in "" $V_TW8 $V_TW8B4 $V_RB $V_K2; do
    ( TILEMAXSIM_KERNEL_DEFINES=$v .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 > /dev/null 2>&1 ) &
  done
  wait; echo "compiled: $(( $(date +%s) - T0 )) s"
  echo "== (a) f32, Nd = 128"
  for r in 1 2; do
    echo -n "default "; f32 100000
    echo -n "TW8 2st "; TILEMAXSIM_KERNEL_DEFINES=$V_TW8 TILEMAXSIM_BULK=2,32 f32 100000
    echo -n "TW8 3st "; TILEMAXSIM_KERNEL_DEFINES=$V_TW8 TILEMAXSIM_BULK=3,32 f32 100000
    echo -n "TW8 4st "; TILEMAXSIM_KERNEL_DEFINES=$V_TW8 TILEMAXSIM_BULK=4,32 f32 100000
    echo -n "TW8 4bl 2st "; TILEMAXSIM_KERNEL_DEFINES=$V_TW8B4 TILEMAXSIM_BULK=2,32 f32 100000
    echo -n "roundbits "; TILEMAXSIM_KERNEL_DEFINES=$V_RB f32 100000
  done
  echo -n "B10K default "; f32 10000
  echo -n "B10K TW8 4st "; TILEMAXSIM_KERNEL_DEFINES=$V_TW8 TILEMAXSIM_BULK=4,8 f32 10000
  echo -n "B10K TW8 4bl "; TILEMAXSIM_KERNEL_DEFINES=$V_TW8B4 TILEMAXSIM_BULK=2,8 f32 10000
  echo "elapsed $(( $(date +%s) - T0 )) s"
  echo "== (b) the ceiling at the case's bytes"
  bench --dtype f16 --docs 10000 --ceiling-at-case
  bench --dtype f16 --docs 100000 --ceiling-at-case
  bench --dtype f16 --docs 10000 --dim 768 --ceiling-at-case
  bench --dtype f32 --docs 10000 --ceiling-at-case
  echo "elapsed $(( $(date +%s) - T0 )) s"
  echo "== (c) k2 any kernels, five blocks (default) against four"
  for r in 1 2; do
    for d in 44 52 56 63; do
      left 470 || break
      echo -n "default "; u $d
      echo -n "K2x4 "; TILEMAXSIM_KERNEL_DEFINES=$V_K2 u $d
    done
  done
  echo "elapsed $(( $(date +%s) - T0 )) s"
  echo "== (d) spanning runs, 8 against 32 documents"
  for d in 104 112 88; do
    left 540 || break
    echo -n "BULK=2,8 "; TILEMAXSIM_BULK=2,8 u $d
    echo -n "BULK=2,32 "; TILEMAXSIM_BULK=2,32 u $d
  done
  echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/call1.log"
