#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 7: the any-d tests of HEAD (98daa2f: their case setup in
# one helper, the same draws; 2a18984's kernels, comments changed since call 4's build).
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call7.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call7.log"
