#!/usr/bin/env bash
# 2026-12-03 (twenty-ninth), device call 3:
# 1. The landed kernels (.dev/landed: the gpu_codecs tests built from the landed tree, with its
#    kernel cache): the quad tests with TILEMAXSIM_QUAD=1, the new many-groups test among them.
# 2. Call 1's staged kernel (.dev: bench/results/h200/2026-12-03c/staged_quad.patch applied):
#    the same tests, then ncu's SASS page with stall samples of one launch (nbits 2, one query,
#    1M x U[8,124], K = 262,144), to see why it ran slower than the landed one.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03c/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/seed_kernel_cache.sh
for f in .dev/landed/*.xz; do xz -dc "$f" > "$TILEMAXSIM_CACHE_DIR/$(basename "${f%.xz}")"; done
L="--dtype f16 --codec residual --docs 1000000 --doc-len 8:124 --centroids 262144 --nbits 2"
{
  device_header
  echo "-- landed: quad tests (TILEMAXSIM_QUAD=1)"
  TILEMAXSIM_QUAD=1 timeout 150 .dev/landed/test-gpu_codecs quad 2>&1 | grep -E "^test |test result|panicked|score|assert|kernels" | head -20
  echo "-- staged: quad tests (TILEMAXSIM_QUAD=1)"
  TILEMAXSIM_QUAD=1 timeout 150 .dev/test-gpu_codecs quad 2>&1 | grep -E "^test |test result|panicked|score|assert" | head -20
  echo -n "staged bench: "; TILEMAXSIM_QUAD=1 bench $L
  echo "== $(date -u +%T) ncu staged q4 SourceCounters"
  TILEMAXSIM_QUAD=1 timeout 150 ncu --clock-control none -k regex:maxsim_codec_q4 --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --import-source no -f -o "$OUT/q4_staged" \
    .dev/tilemaxsim bench --device cuda --reps 3 $L > "$OUT/q4_staged_ncu.log" 2>&1
  echo "rc $?"; tail -3 "$OUT/q4_staged_ncu.log"
  ncu -i "$OUT/q4_staged.ncu-rep" --page details --print-details all > "$OUT/q4_staged_details.txt" 2>&1
  grep -E "Registers|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Ipc|Duration" "$OUT/q4_staged_details.txt" | head -12
  ncu -i "$OUT/q4_staged.ncu-rep" --page source --csv --print-source sass > "$OUT/q4_staged_sass.csv" 2> "$OUT/q4_staged_sass.err"
  python3 bench/ncu_sass_stalls.py "$OUT/q4_staged_sass.csv" 2>&1 | head -60
  xz -T4 "$OUT/q4_staged_sass.csv"; rm -f "$OUT/q4_staged.ncu-rep"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
