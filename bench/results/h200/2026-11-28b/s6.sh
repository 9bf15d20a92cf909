#!/usr/bin/env bash
# 2026-11-28 afternoon session, device call 6 (issue 27): the adopted launch bounds against the
# old ones on one machine (TILEMAXSIM_KERNEL_DEFINES restores them), alternating.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export OUT
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
OLD=SPLIT_MIN_BLOCKS_F32=1,SPAN_K2_ANY_BLOCKS=3,SPAN_K3_ANY_BLOCKS=3
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader)"
( TILEMAXSIM_KERNEL_DEFINES=$OLD timeout 200 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 ) &
.dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
wait
{
  for r in 1 2; do
    for v in new old; do
      for a in "--dtype f32 --docs 100000 --doc-len 128" "--dtype f16 --query-dtype f32 --docs 100000 --doc-len 128" \
               "--dtype f16 --docs 100000 --doc-len 32:256 --dim 48" "--dtype f16 --docs 100000 --doc-len 32:256 --dim 77" \
               "--dtype f16 --docs 100000 --doc-len 32:256 --dim 128"; do
        echo -n "[$v] "
        if [ $v = old ]; then TILEMAXSIM_KERNEL_DEFINES=$OLD bench $a; else bench $a; fi
      done
    done
  done
} 2>&1 | tee $OUT/bounds_ab.log
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
date -u +%T
