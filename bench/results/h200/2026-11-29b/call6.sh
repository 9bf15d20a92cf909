#!/usr/bin/env bash
# Device call 6 of 2026-11-29 (second session; nvidia-h200, .dev of the tree after 173fddd, the
# same kernels, with call 3's kernel cache): stages and documents a run of the spanning kernel at
# its new windows (TILEMAXSIM_BULK=stages,group), f16 B = 100K U[32,256] at d = 16, 32, 48, 64.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29b/call6.sh
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  echo "== $(date -u +%T) $(nvidia-smi --query-gpu=name --format=csv,noheader)"
  for d in 16 32 48 64; do
    echo -n "auto "; bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    for sg in 2,32 2,64 3,16 3,32 1,16; do
      echo -n "BULK=$sg "; TILEMAXSIM_BULK=$sg bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    done
  done
  date -u +%T
} 2>&1 | tee "$OUT/call6.log"
