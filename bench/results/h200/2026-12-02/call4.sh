#!/usr/bin/env bash
# 2026-12-02 (twenty-second), device call 4: streamed index chunks stored padded too (their rows
# re-pitched on the copy stream as they come in), so resident and streamed shards score the
# same bits at d = 77 and f32 d = 33: gpu_search (call 3 failed there), its memcheck, the any-d
# tests; then issue 27's d list at f16 U[32,256] B = 100K in one run on the padded uploads.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 200 .dev/test-gpu_search 2>&1 | grep -E "^test |test result|panicked|differs"
  timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked"
  TILEMAXSIM_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck --print-limit 5 .dev/test-gpu_search gpu_index 2>&1 | grep -E "ERROR SUMMARY|test result|panicked|Invalid" | head
  echo "== $(date -u +%T) issue 27's d list, f16 U[32,256] B = 100K"
  for d in 16 48 77 96 100 127 200 256 320 384 512 768 1024; do
    ab "d=$d" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
