#!/usr/bin/env bash
# Device call 5 of 2026-11-29 (third session; nvidia-h200, .dev built at 4badf5e, the final
# run rule): the d at which the rule changed in 4badf5e, at the defaults, and
# tests/gpu_any_dim.rs. usage: OUT=$OUT bash bench/results/h200/2026-11-29c/call5.sh
source bench/exact_split_lib.sh
u() { bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$1"; }
{
  device_header
  for d in 72 80 96 104; do u $d; done
  timeout 60 .dev/test-gpu_any_dim 2>&1 | grep -E "test result"
  date -u +%T
} 2>&1 | tee "$OUT/call5.log"
