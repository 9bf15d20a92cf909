#!/usr/bin/env bash
# 2026-12-01 (twentieth), device call 5 (call 4's build): issue 27's peer rows on it, f16
# B = 10K, d = 768 and f32 B = 100K (bench/peers_gpu.sh; its tilemaxsim rows run .dev's CLI),
# and bf16 at d = 264 and 320, landed against the old choice.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01b/call5.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
{
  device_header
  for d in 264 320; do
    ab "old" TILEMAXSIM_ROWS=0 TILEMAXSIM_TAIL=0 bash -c "$BENCH" _ --dtype bf16 --docs 10000 --doc-len 32:256 --dim $d
    ab "new" bash -c "$BENCH" _ --dtype bf16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) peers"
  mkdir -p "$OUT/call5"
  OUT=$OUT/call5 timeout 400 bash bench/peers_gpu.sh --cases b10k,d768,fp32 --compile-cases none 2>&1 | tail -40
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call5.log"
