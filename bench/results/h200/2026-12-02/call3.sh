#!/usr/bin/env bash
# 2026-12-02 (twenty-second), device call 3: the rest of the GPU tests on the padded uploads
# (tests/gpu.rs whole, gpu_search, gpu_any_dim with the stages test told padding from not), side
# by side, then peers_gpu.sh's d = 77 and 127 rows (the padded uploads beside the peers).
# usage: OUT=$OUT bash bench/results/h200/2026-12-02/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== $(date -u +%T) tests, side by side"
  ( timeout 300 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked" > $OUT/t_gpu.txt ) &
  ( timeout 300 .dev/test-gpu_search 2>&1 | grep -E "^test |test result|panicked" > $OUT/t_search.txt ) &
  ( timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked" > $OUT/t_any.txt ) &
  wait
  cat $OUT/t_gpu.txt $OUT/t_search.txt $OUT/t_any.txt
  echo "== $(date -u +%T) peers: d = 77, 127"
  OUT=$OUT/peers timeout 240 bash bench/peers_gpu.sh --cases d77,d127 --budget-s 200 2>&1 | grep -vE "^\s*$" | tail -40
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
