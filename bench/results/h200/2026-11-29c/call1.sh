#!/usr/bin/env bash
# Device call 1 of 2026-11-29 (third session; nvidia-h200, .dev built at the tree after 6843853):
# the spanning kernel's B loads tested only in a row's last chunk (default) against every chunk
# (SPAN_MASK_ALL=1, the code before), odd d by aligned words and byte permutes
# (SPAN_ODD_WORDS=1), four blocks an SM at three chunks (SPAN_K3_ANY_BLOCKS=4, with and without
# B a chunk at a time), five at one chunk (SPAN_K1_BLOCKS=5); runs of 32 and 64 documents at
# d = 48, 64 at B = 10K and 100K; then tests/gpu_any_dim.rs at the defaults.
# f16, Nd ~ U[32,256], % of the read ceiling. usage: OUT=$OUT bash bench/results/h200/2026-11-29c/call1.sh
source bench/exact_split_lib.sh
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
u() { bench --dtype f16 --docs "${B:-100000}" --doc-len 32:256 --dim "$1"; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  V="SPAN_MASK_ALL=1 SPAN_ODD_WORDS=1 SPAN_K3_ANY_BLOCKS=4 SPAN_K3_ANY_BLOCKS=4,SPAN_ANY_BY_CHUNK=3 SPAN_K1_BLOCKS=5"
  for v in default $V; do
    ( with "$v" timeout 280 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  for round in 1 2; do
    for d in 16 32 48 64 77 100 127; do echo -n "[default] "; u $d; done
    for d in 48 77 100 127; do echo -n "[SPAN_MASK_ALL=1] "; with SPAN_MASK_ALL=1 u $d; done
    for d in 77 127; do echo -n "[SPAN_ODD_WORDS=1] "; with SPAN_ODD_WORDS=1 u $d; done
    echo -n "[SPAN_K3_ANY_BLOCKS=4] "; with SPAN_K3_ANY_BLOCKS=4 u 77
    echo -n "[K3=4,BY_CHUNK=3] "; with SPAN_K3_ANY_BLOCKS=4,SPAN_ANY_BY_CHUNK=3 u 77
    for d in 16 32; do echo -n "[SPAN_K1_BLOCKS=5] "; with SPAN_K1_BLOCKS=5 u $d; done
  done
  echo "== runs $(date -u +%T)"
  for B in 10000 100000; do
    for d in 48 64; do
      for sg in auto 2,32 2,64; do
        echo -n "B=$B BULK=$sg "
        if [ $sg = auto ]; then B=$B u $d; else TILEMAXSIM_BULK=$sg B=$B u $d; fi
      done
    done
  done
  echo "== gpu_any_dim $(date -u +%T)"
  timeout 150 .dev/test-gpu_any_dim 2>&1 | tail -5
  date -u +%T
} 2>&1 | tee "$OUT/call1.log"
tar -cJf "$OUT/kcache.tar.xz" -C "$TILEMAXSIM_CACHE_DIR" .
