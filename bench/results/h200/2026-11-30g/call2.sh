#!/usr/bin/env bash
# 2026-11-30 (eighteenth), device call 2:
# 1. The residual kernel with the next task's ids prefetched into L1 (CODEC_L1_AUX=1, the new
#    default) against L2 alone (CODEC_L1_AUX=0, the kernel before) and against claims of 8 tasks
#    (CODEC_CLAIM=8): tests, then one query at nbits 2 and 1 (1M x U[8,124], K = 262,144),
#    100K x 32, int8; two rounds; ncu's SASS page of the new default.
# 2. maxsim_bulk_any with four documents a run at 32-token bounds (the new default) against
#    two (TILEMAXSIM_BULK=2,2, the shape before) and three stages (3,4): d = 320 and 448; d = 384
#    (a built width) at three stages.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30g/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
L="--docs 1000000 --doc-len 8:124 --centroids 262144"
{
  device_header
  for v in default CODEC_L1_AUX=0 CODEC_CLAIM=8; do
    echo "-- [$v] gpu_codecs"
    with "$v" timeout 120 .dev/test-gpu_codecs 2>&1 | grep -E "test result|panicked|FAILED"
  done
  echo "-- gpu_any_dim"; timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked|FAILED"
  echo "== $(date -u +%T) codec"
  for round in 1 2; do
    for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 1 $L" "--codec residual --nbits 2 --docs 100000 --doc-len 32" "--codec int8 $L"; do
      for v in default CODEC_L1_AUX=0 CODEC_CLAIM=8; do
        echo -n "round $round [$v] $args: "
        # shellcheck disable=SC2086
        with "$v" timeout 90 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
      done
    done
  done
  echo "== $(date -u +%T) bulk_any"
  for round in 1 2; do
    for d in 320 448; do
      for v in default 2,2 3,4; do
        echo -n "round $round d=$d B=10K [$v]: "
        if [ $v = default ]; then bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
        else TILEMAXSIM_BULK=$v bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d; fi
      done
    done
    for v in default 3,4; do
      echo -n "round $round d=384 B=10K [$v]: "
      if [ $v = default ]; then bench --dtype f16 --docs 10000 --doc-len 32:256 --dim 384
      else TILEMAXSIM_BULK=$v bench --dtype f16 --docs 10000 --doc-len 32:256 --dim 384; fi
    done
  done
  for v in default 2,2 3,4; do
    echo -n "d=320 B=100K [$v]: "
    if [ $v = default ]; then bench --dtype f16 --docs 100000 --doc-len 32:256 --dim 320
    else TILEMAXSIM_BULK=$v bench --dtype f16 --docs 100000 --doc-len 32:256 --dim 320; fi
  done
  echo "== $(date -u +%T) ncu"
  # shellcheck disable=SC2086
  timeout 90 ncu --clock-control none -k regex:maxsim_codec --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o "$OUT/codec_l1" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --codec residual --nbits 2 $L > /dev/null 2>&1
  ncu -i "$OUT/codec_l1.ncu-rep" --page source --csv --print-source sass > "$OUT/codec_l1_sass.csv" 2>&1
  rm -f "$OUT/codec_l1.ncu-rep"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
