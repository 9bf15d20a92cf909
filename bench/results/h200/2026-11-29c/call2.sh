#!/usr/bin/env bash
# Device call 2 of 2026-11-29 (third session; nvidia-h200, .dev built at the tree after call 1:
# four blocks an SM at three chunks, odd d by words from four chunks): the d list at the new
# defaults; odd d by words off (SPAN_ODD_WORDS_KCH=9) and from three chunks (=3); documents a
# run (TILEMAXSIM_BULK=2,G) at B = 10K for d = 48, 64 and at B = 100K for d = 77, 100, 127;
# ncu (source counters by SASS line) of the spanning kernel at d = 16 and d = 100; then
# tests/gpu_any_dim.rs. f16, Nd ~ U[32,256]. usage: OUT=$OUT bash bench/results/h200/2026-11-29c/call2.sh
source bench/exact_split_lib.sh
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
u() { bench --dtype f16 --docs "${B:-100000}" --doc-len 32:256 --dim "$1"; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for v in default SPAN_ODD_WORDS_KCH=9 SPAN_ODD_WORDS_KCH=3; do
    ( with "$v" timeout 280 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  for d in 16 32 48 64 80 96 100 128; do echo -n "[default] "; u $d; done
  for round in 1 2; do
    for d in 127 201 255; do
      echo -n "[default] "; u $d
      echo -n "[WORDS_KCH=9] "; with SPAN_ODD_WORDS_KCH=9 u $d
    done
    echo -n "[default] "; u 77
    echo -n "[WORDS_KCH=3] "; with SPAN_ODD_WORDS_KCH=3 u 77
  done
  echo "== runs $(date -u +%T)"
  for d in 48 64; do for g in 8 12 16 24; do echo -n "B=10000 BULK=2,$g "; TILEMAXSIM_BULK=2,$g B=10000 u $d; done; done
  for d in 77 100 127; do for g in 8 32 64; do echo -n "B=100000 BULK=2,$g "; TILEMAXSIM_BULK=2,$g u $d; done; done
  echo "== gpu_any_dim $(date -u +%T)"
  timeout 150 .dev/test-gpu_any_dim 2>&1 | tail -3
  date -u +%T
} 2>&1 | tee "$OUT/call2.log"
for d in 16 100; do
  timeout 100 ncu --clock-control none --set full --import-source no -k regex:maxsim_span -c 1 -f -o "$OUT/ncu_d$d" \
    .dev/tilemaxsim bench --device cuda --reps 2 --dtype f16 --docs 100000 --doc-len 32:256 --dim $d > "$OUT/ncu_d$d.txt" 2>&1
  ncu -i "$OUT/ncu_d$d.ncu-rep" --page details >> "$OUT/ncu_d$d.txt" 2>&1
  ncu -i "$OUT/ncu_d$d.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_d${d}_sass.csv" 2>&1
  rm -f "$OUT/ncu_d$d.ncu-rep"
done
tar -cJf "$OUT/kcache.tar.xz" -C "$TILEMAXSIM_CACHE_DIR" .
