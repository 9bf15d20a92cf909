#!/usr/bin/env bash
# Device call 2 of 2026-11-29 (fourth session; nvidia-h200, .dev with SPAN_K2_ANY_BLOCKS=4 as
# the default, .whl carried): (a) the spanning any-d kernels of two chunks at four blocks an SM
# (the new default) against five (SPAN_K2_ANY_BLOCKS=5, the old), d = 40 and 48 (k2ah, which
# did not spill at five) and the spilling forms again; (b) one chunk at six (default), five and
# four blocks (SPAN_K1_BLOCKS), d = 16, 20, 24, 32; (c) gpu_any_dim on the new default;
# (d) the peers' f32 and B = 10K cases (bench/peers_gpu.sh) with ours in the same run.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29d/call2.sh
source bench/exact_split_lib.sh
T0=$(date +%s)
left() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }
u() { bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$1"; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for v in "" SPAN_K2_ANY_BLOCKS=5 SPAN_K1_BLOCKS=5 SPAN_K1_BLOCKS=4; do
    ( TILEMAXSIM_KERNEL_DEFINES=$v .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 > /dev/null 2>&1 ) &
  done
  wait; echo "compiled: $(( $(date +%s) - T0 )) s"
  echo "== (c) tests"
  TILEMAXSIM_REQUIRE_GPU=1 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result"
  echo "== (a) two chunks: four blocks (default) against five"
  for d in 40 48 52 63 40 48; do
    echo -n "K2x4 "; u $d
    echo -n "K2x5 "; TILEMAXSIM_KERNEL_DEFINES=SPAN_K2_ANY_BLOCKS=5 u $d
  done
  for d in 36 44 56 60; do echo -n "K2x4 "; u $d; done
  echo "elapsed $(( $(date +%s) - T0 )) s"
  echo "== (b) one chunk: six blocks (default), five, four"
  for d in 16 32 20 24 16 32; do
      left 400 || break
      echo -n "K1x6 "; u $d
      echo -n "K1x5 "; TILEMAXSIM_KERNEL_DEFINES=SPAN_K1_BLOCKS=5 u $d
      echo -n "K1x4 "; TILEMAXSIM_KERNEL_DEFINES=SPAN_K1_BLOCKS=4 u $d
  done
  echo "elapsed $(( $(date +%s) - T0 )) s"
  echo "== (d) peers"
  bench --dtype f32 --docs 100000 --doc-len 128
  bench --dtype f16 --docs 10000 --doc-len 128 --ceiling-at-case
} 2>&1 | tee "$OUT/call2.log"
left 450 && timeout $(( 590 - ($(date +%s) - T0) )) bash bench/peers_gpu.sh --cases fp32,b10k --compile-cases none > "$OUT/peers.log" 2>&1
bench --dtype f32 --docs 100000 --doc-len 128 | tee -a "$OUT/call2.log"
echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s" | tee -a "$OUT/call2.log"
