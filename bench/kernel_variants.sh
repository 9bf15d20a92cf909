#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/kernel_variants.sh   (on the GPU machine, .dev carried)
# Issue 27's misses on the H200 under kernel-constant variants, one device call: each variant
# of TILEMAXSIM_KERNEL_DEFINES is compiled first, all of them at once (one NVRTC process each,
# ~80 s), into the shared cache; then f32 (maxsim_bulk_split: SPLIT_MIN_BLOCKS, the register
# bound, and SPLIT_ROUND_BITS, the split by integer rounding) and the odd and small d
# (maxsim_span_any: SPAN_MID_BLOCKS at 2-5 chunks, SPAN_K1_BLOCKS at one) against the defaults,
# alternating so drift shows. Log: $OUT/kernel_variants.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
VARIANTS=${VARIANTS:-"SPLIT_MIN_BLOCKS=3 SPLIT_MIN_BLOCKS=3,SPLIT_ROUND_BITS=1 SPAN_MID_BLOCKS=4 SPAN_MID_BLOCKS=5 SPAN_K1_BLOCKS=8"}
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== compile every variant at once $(date -u +%T)"
  for v in default $VARIANTS; do
    ( with "$v" timeout 240 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  f32() { bench --dtype f32 --docs 100000 --doc-len 128; }
  mixed() { bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128; }
  for round in 1 2; do
    for v in default SPLIT_MIN_BLOCKS=3 SPLIT_MIN_BLOCKS=3,SPLIT_ROUND_BITS=1; do
      echo -n "[$v] "; with "$v" f32
    done
    echo -n "[default, BULK=3,8] "; TILEMAXSIM_BULK=3,8 f32
  done
  for v in default SPLIT_MIN_BLOCKS=3; do echo -n "[$v] "; with "$v" mixed; done
  for d in 48 77 100 127; do
    for v in default SPAN_MID_BLOCKS=4 SPAN_MID_BLOCKS=5 default; do
      echo -n "[$v] "; with "$v" bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"
    done
  done
  for v in default SPAN_K1_BLOCKS=8 default; do
    echo -n "[$v] "; with "$v" bench --dtype f16 --docs 100000 --doc-len 32:256 --dim 16
  done
  echo "== $(date -u +%T) done"
} 2>&1 | tee "$OUT/kernel_variants.log"
