#!/usr/bin/env bash
# Device call 4 of 2026-11-29 (third session; nvidia-h200, the .dev of call 3): documents a run
# of the spanning kernel by d, the old rule's (nine tiles: 8 documents at 128-token tiles, 16
# at 256) against 36 tiles (32, 64), TILEMAXSIM_BULK=2,G, f16 U[32,256] B = 100K; d = 80 and 96
# again. usage: OUT=$OUT bash bench/results/h200/2026-11-29c/call4.sh
source bench/exact_split_lib.sh
u() { bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$1"; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for dg in 40:16:64 56:16:64 66:8:32 72:8:32 80:8:32 88:8:32 96:16:64 104:8:32 112:8:32 120:8:32; do
    IFS=: read -r d old new <<< "$dg"
    echo -n "BULK=2,$old "; TILEMAXSIM_BULK=2,$old u $d
    echo -n "BULK=2,$new "; TILEMAXSIM_BULK=2,$new u $d
  done
  date -u +%T
} 2>&1 | tee "$OUT/call4.log"
