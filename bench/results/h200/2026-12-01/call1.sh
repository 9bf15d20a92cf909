#!/usr/bin/env bash
# 2026-12-01 (nineteenth), device call 1:
# 1. The one-warp codec kernels with the next document started on g1 by a flag (CODEC_NO_COPY=1)
#    against the g0 = g1 copy (the default): the one-warp codec tests under both (memcheck under
#    the flag), then one query at residual nbits 1, 2 and 4 and pq (1M x U[8,124], K = 262,144)
#    and 100K x 32 at nbits 2, three rounds; then exhaustive search at 8.8M documents, batch 1
#    (bench/msmarco_scale.py's index), two rounds each, run files compared.
# 2. ncu's stall samples by instruction of maxsim_bulk_any at d = 320 (f16 U[32,256] B = 100K), to
#    tell the tile's barrier from its partial sums through shared memory.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
L="--docs 1000000 --doc-len 8:124 --centroids 262144"
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  for v in default CODEC_NO_COPY=1; do
    echo "-- [$v] one-warp codec tests"
    with "$v" timeout 150 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | grep -E "^test |test result|panicked"
  done
  echo "-- [CODEC_NO_COPY=1] memcheck one-warp codec tests"
  TILEMAXSIM_SANITIZER=1 TILEMAXSIM_KERNEL_DEFINES=CODEC_NO_COPY=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | tail -3
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "corpus|index build|rc" /tmp/msmarco.log | tail -3
  echo "== $(date -u +%T) codec"
  for round in 1 2 3; do
    for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 1 $L" "--codec residual --nbits 4 $L" "--codec pq $L" "--codec residual --nbits 2 --docs 100000 --doc-len 32"; do
      for v in default CODEC_NO_COPY=1; do
        echo -n "round $round [$v] $args: "
        # shellcheck disable=SC2086
        with "$v" timeout 90 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
      done
    done
  done
  echo "== $(date -u +%T) search"
  for round in 1 2; do
    for v in default CODEC_NO_COPY=1; do
      echo -n "[$v] round $round exhaustive batch 1: "
      with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_${v//[^A-Za-z0-9]/_}.trec --exhaustive
    done
  done
  cmp /tmp/e_default.trec /tmp/e_CODEC_NO_COPY_1.trec && echo "same run files"
  echo "== $(date -u +%T) ncu bulk_any d = 320"
  timeout 120 ncu --clock-control none -k regex:maxsim_bulk_any --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o "$OUT/any320" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim 320 > /dev/null 2>&1
  ncu -i "$OUT/any320.ncu-rep" --page source --csv --print-source sass > "$OUT/any320_sass.csv" 2>&1
  ncu -i "$OUT/any320.ncu-rep" --page details 2>&1 | grep -iE "duration|warp cycles|stall|active warps|registers|theoretical occ|achieved occ" | head -30
  rm -f "$OUT/any320.ncu-rep"
  python3 bench/ncu_sass_stalls.py "$OUT/any320_sass.csv" 2>&1 | head -60
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
