#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 5: issue 27's d list on the H200 at d34e60c, two rounds:
# f16 Nd ~ U[32,256], B = 100K up to d = 127 and B = 10K past it (as the H100 sweeps), and
# B = 100K at d = 200, 256 and 384 once; % of the bulk-copy read ceiling at each case's bytes.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call5.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  for round in 1 2; do
    for d in 16 48 77 96 100 127; do echo -n "round $round d=$d: "; bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; done
    for d in 200 256 320 384 512 768 1024; do echo -n "round $round d=$d: "; bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d; done
  done
  for d in 200 256 384; do echo -n "B=100K d=$d: "; bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call5.log"
