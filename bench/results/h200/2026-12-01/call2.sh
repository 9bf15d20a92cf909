#!/usr/bin/env bash
# 2026-12-01 (nineteenth), device call 2: the wide bulk kernels (maxsim_bulk_wide_impl: the
# built widths 256-1024 and maxsim_bulk_any) and maxsim_bulk_impl with fewer instructions a tile
# (call 1's ncu: d = 320 ran 400 warp instructions a 32-token tile, 10% of them HMMA): the stage
# and barrier phase stepped rather than divided out of the tile count, the partials stored at
# constant offsets from one address a lane, and, where every lane's slice lies inside d, the
# tile's loads unpredicated. Tests (gpu, gpu_any_dim; memcheck and racecheck of gpu_any_dim),
# then .dev's build against .devold's (call 1's build: main at bda6aec with the CODEC_NO_COPY
# switch, off) in turn, two rounds, f16 U[32,256] B = 10K at the any-d and built widths, d = 768 and d = 128 rows
# of issue 27; ncu's SASS page of d = 320 again.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01/call2.sh  (carry .dev .devold)
cd "$(dirname "$0")/../../../.."
cp .devold/kcache/*.xz .dev/kcache/ 2>/dev/null
source bench/exact_split_lib.sh
old() { .devold/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@" | sed 's/^/old: /'; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 200 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked"
  timeout 150 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  TILEMAXSIM_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -2
  echo "memcheck exit: ${PIPESTATUS[0]}"
  timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -2
  echo "racecheck exit: ${PIPESTATUS[0]}"
  echo "== $(date -u +%T) A/B"
  for round in 1 2; do
    for d in 264 320 392 448 648 1016 256 384 512 768 1024; do
      old --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
      bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    done
    for args in "--docs 10000 --doc-len 128 --dim 768" "--docs 100000 --doc-len 128 --dim 768" "--docs 10000 --doc-len 128" "--docs 100000 --doc-len 128" "--docs 100000 --doc-len 32:256 --dim 320"; do
      # shellcheck disable=SC2086
      old --dtype f16 $args
      # shellcheck disable=SC2086
      bench --dtype f16 $args
    done
  done
  old --dtype bf16 --docs 10000 --doc-len 32:256 --dim 320
  bench --dtype bf16 --docs 10000 --doc-len 32:256 --dim 320
  echo "== $(date -u +%T) ncu d = 320"
  timeout 120 ncu --clock-control none -k regex:maxsim_bulk_any --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o "$OUT/any320" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim 320 > /dev/null 2>&1
  ncu -i "$OUT/any320.ncu-rep" --page source --csv --print-source sass > "$OUT/any320_sass.csv" 2>&1
  rm -f "$OUT/any320.ncu-rep"
  python3 bench/ncu_sass_stalls.py "$OUT/any320_sass.csv" 2>&1 | head -40
  xz -T4 "$OUT/any320_sass.csv"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
