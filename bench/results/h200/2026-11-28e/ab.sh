#!/usr/bin/env bash
# Device call 2 (nvidia-h200): the batched codec kernels before (.dev/old/tilemaxsim: HEAD
# 89a80f5, each document in tiles of its own) and after (.dev/tilemaxsim: runs of documents,
# RunWalk, and the packed consumers' fold) in one process each, alternated, at 32 queries; ncu of
# both on residual nbits 2 at Nd = 128 (the shape call 1 found 18% under the 2026-11-25 figure);
# then exhaustive search at 8.8M documents (bench/msmarco_scale.py --only-exhaustive).
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  time .dev/old/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) old / new, 32 queries, B = 100K"
  for case in "128 residual --nbits 2" "8:124 residual --nbits 2" "128 int8" "8:124 int8" "128 pq --m 16"; do
    set -- $case; len=$1; shift
    for bin in old new old new; do
      b=.dev/tilemaxsim; [ $bin = old ] && b=.dev/old/tilemaxsim
      echo -n "$bin "; bench_with $b --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec "$@"
    done
  done
  echo "== $(date -u +%T) ncu, residual nbits 2, Nd = 128, 32 queries"
  for bin in old new; do
    b=.dev/tilemaxsim; [ $bin = old ] && b=.dev/old/tilemaxsim
    timeout 100 ncu --clock-control none -k regex:maxsim_codec_wg --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
      $b bench --device cuda --reps 3 --docs 100000 --codec residual --nbits 2 --queries 32 > "$OUT/ncu_$bin.txt" 2>&1
    echo "$bin: $(grep -E 'Duration|Issued Warp Per Scheduler|No Eligible|Registers Per|Warp Cycles Per Issued' "$OUT/ncu_$bin.txt" | tr -s ' ' | tr '\n' ';')"
  done
  echo "== $(date -u +%T) msmarco_scale --only-exhaustive"
  timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco --only-exhaustive
  rm -rf /tmp/msmarco
  date -u +%T
} 2>&1 | tee "$OUT/ab.log"
