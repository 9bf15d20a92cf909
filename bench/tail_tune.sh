#!/usr/bin/env bash
# The last wave at small batches (issue 27, item 3): at B = 10K (f16, d = 128, Nd = 128) the
# engine's four documents a block make 2,500 blocks, 6.31 waves of the H200's 396 resident
# blocks (132 SMs x 3), so about 0.7 of a wave's slots idle through the last one. Runs of 9, 13
# or 26 documents make 2.81, 1.94 or 0.97 waves (fewer block set-ups too). This times each
# group (TILEMAXSIM_BULK=2,G; 'auto' = the engine's choice) at B = 1K, 10K, d = 768 B = 10K and
# the wide d of the d list at B = 10K (256, 512: 75.9% and 88.4% of the ceiling on 2026-11-28),
# in ROUNDS rounds alternating, then the peers' B = 1K / 10K / d = 768 rows in the same run.
# usage: OUT=$OUT [ROUNDS=2] bash bench/tail_tune.sh   (on the GPU machine, .dev and .whl carried)
# Log: $OUT/tail_tune.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
{
  device_header
  for round in $(seq "${ROUNDS:-2}"); do
    echo "== round $round"
    for args in "--dtype f16 --docs 1000 --doc-len 128" "--dtype f16 --docs 10000 --doc-len 128" \
                "--dtype f16 --docs 10000 --doc-len 128 --dim 768" "--dtype f16 --docs 10000 --doc-len 32:256 --dim 256" \
                "--dtype f16 --docs 10000 --doc-len 32:256 --dim 512"; do
      for g in auto 4 9 13 26; do
        if [ "$g" = auto ]; then unset TILEMAXSIM_BULK; else export TILEMAXSIM_BULK=2,$g; fi
        echo -n "group=$g "; bench $args
      done
      unset TILEMAXSIM_BULK
    done
  done
} 2>&1 | tee "$OUT/tail_tune.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases b1k,b10k,d768 --budget-s 150 --compile-cases none 2>&1 | tail -20 | tee -a "$OUT/tail_tune.log"
