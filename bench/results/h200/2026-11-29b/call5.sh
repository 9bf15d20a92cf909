#!/usr/bin/env bash
# Device call 5 of 2026-11-29 (second session; the machine of calls 3 and 4, kept warm; .dev of
# 173fddd with call 3's kernel cache): the d list at d <= 128 at the defaults, and f16 Nd = 128
# at B = 10K and 100K, on the machine whose read ceiling matches 2026-11-28's (4666-4671 GB/s).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29b/call5.sh
source bench/exact_split_lib.sh; mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR; { echo "== $(date -u +%T) d list, defaults (call 5: the machine of calls 3-4)"; for d in 16 32 48 64 77 96 100 127 128; do bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"; done; bench --dtype f16 --docs 10000 --doc-len 128; bench --dtype f16 --docs 100000 --doc-len 128; date -u +%T; } 2>&1 | tee $OUT/call5.log
