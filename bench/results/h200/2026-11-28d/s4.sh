#!/usr/bin/env bash
# Device call 4 (nvidia-h200; issue 27, items 2 and 3): stages and documents per block of the
# wide-d bulk kernels on the H200 (TILEMAXSIM_BULK=stages,group; `auto` the engine's choice).
# Three stages at wide d were measured on the H100 only (Tuning::wide_three_stages); on the H200
# d = 256, 320 and 384 read 73-80% of the ceiling at B = 100K in call 2 (wide_100k.log), d = 768
# 99.2%, which the bytes in flight a block would explain (a 16 KB stage at d = 256 against 24 KB
# at d = 768). Each shape: auto, then 2-4 stages x 1, 2, 4 documents a block, then auto again.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
source bench/exact_split_lib.sh
{
  device_header
  for args in "--docs 100000 --doc-len 32:256 --dim 256" "--docs 100000 --doc-len 32:256 --dim 384" \
              "--docs 100000 --doc-len 32:256 --dim 320" "--docs 100000 --doc-len 32:256 --dim 512" \
              "--docs 10000 --doc-len 128 --dim 768" "--docs 100000 --doc-len 32:256 --dim 144"; do
    echo "== $(date -u +%T) $args"
    for g in auto 2,1 2,2 2,4 3,1 3,2 3,4 4,1 4,2 4,4 auto; do
      if [ "$g" = auto ]; then unset TILEMAXSIM_BULK; else export TILEMAXSIM_BULK=$g; fi
      echo -n "bulk=$g "; bench --dtype f16 $args
    done
    unset TILEMAXSIM_BULK
  done
  date -u +%T
} 2>&1 | tee "$OUT/stages.log" | grep -E "^==|failed" 
