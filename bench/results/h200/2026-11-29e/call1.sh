#!/usr/bin/env bash
# Device call 1 (nvidia-h200): the last session's unrun checks (bench/resident_check.sh: the
# resident grid's tests, memcheck and racecheck, grid A/B, d = 64 at six blocks against five,
# the peers at B = 10K and d = 768), then where the batched residual codec kernel spends its
# time at MS MARCO's shape (32 queries, U[8,124]): ncu's warp states and per-SASS stall samples.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29e/call1.sh   (carry .dev, .whl)
cd "$(dirname "$0")/../../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
T0=$(date +%s)
OUT=$OUT bash bench/resident_check.sh
source bench/exact_split_lib.sh
{
  echo "== $(date -u +%T) codec batched, 32 queries, B = 100K"
  for len in 8:124 128; do
    bench --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec residual --nbits 2
    bench --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec int8
  done
  echo "== $(date -u +%T) ncu"
  timeout 200 ncu --clock-control none --kernel-name regex:maxsim_codec_wgp_residual2 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section InstructionStats --section Occupancy \
    --import-source no -o /tmp/wgp -f \
    .dev/tilemaxsim bench --device cuda --reps 3 --docs 100000 --doc-len 8:124 --queries 32 --kernel wgmma --codec residual --nbits 2 > /dev/null 2>&1
  ncu -i /tmp/wgp.ncu-rep --print-summary none 2>&1 | grep -vE "^\s*$" | head -150
  ncu -i /tmp/wgp.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -6 > "$OUT/wgp_sass.csv.xz"
  ls -la "$OUT"
  echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/call1.log"
