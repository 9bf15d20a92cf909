#!/usr/bin/env bash
# usage: OUT=$OUT [VARIANTS="A=1,B=2 C=3"] [CASES="args|args"] [ROUNDS=2] bash bench/kernel_variants.sh
#        (on the GPU machine, .dev carried)
# Kernel constants tried against the defaults in one device call: every variant of
# TILEMAXSIM_KERNEL_DEFINES (space-separated; commas within one) is compiled first, all at once
# (one NVRTC process each, about 100 s for six on the H200), into the shared cache; then each
# case (`tilemaxsim bench` arguments, `|`-separated) is timed under the defaults and every
# variant in turn, ROUNDS times, so drift between machines or over the call shows. The default
# variants restore the launch bounds before 63c7544, the cases are issue 27's f32 and d rows.
# (The run of bench/results/h200/2026-11-28b/kernel_variants.log used 63c7544's version of this
# script, with its variant lists written out.) Log: $OUT/kernel_variants.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
VARIANTS=${VARIANTS:-"SPLIT_MIN_BLOCKS_F32=1,SPAN_K2_ANY_BLOCKS=3"}
CASES=${CASES:-"--dtype f32 --docs 100000 --doc-len 128|--dtype f16 --docs 100000 --doc-len 32:256 --dim 48|--dtype f16 --docs 100000 --doc-len 32:256 --dim 77|--dtype f16 --docs 100000 --doc-len 32:256 --dim 128"}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== compile every variant at once $(date -u +%T)"
  # shellcheck disable=SC2086  # the variants split on spaces
  compile_variants default $VARIANTS
  echo "== compiled $(date -u +%T)"
  IFS='|' read -r -a cases <<< "$CASES"
  for round in $(seq "${ROUNDS:-2}"); do
    for c in "${cases[@]}"; do
      for v in default $VARIANTS; do
        echo -n "[$v] "
        # shellcheck disable=SC2086  # the case's arguments split on spaces
        with "$v" bench $c
      done
    done
  done
  echo "== $(date -u +%T) done"
} 2>&1 | tee "$OUT/kernel_variants.log"
