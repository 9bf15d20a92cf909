#!/usr/bin/env bash
# 2026-12-03 (thirtieth), device call 4: the landed commit's kernels (the late gather with raw
# ids; one load a group for the residual at nbits 4 only), checked: the one-warp codec tests
# and the IVF tests, then one bench line each at nbits 2 and 4. (Little device time was left.)
# usage: OUT=$OUT bash bench/results/h200/2026-12-03d/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
L="--dtype f16 --docs 1000000 --doc-len 8:124 --centroids 262144"
{
  device_header
  timeout 60 .dev/test-gpu_codecs every_codec one_warp bf16 2>&1 | grep -E "^test |test result|panicked|assert" | head -6
  timeout 30 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED" | head -4
  for nb in 2 4; do echo -n "nbits $nb: "; bench $L --codec residual --nbits $nb; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
