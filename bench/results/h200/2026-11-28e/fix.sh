#!/usr/bin/env bash
# Device call 4 (nvidia-h200; NOT RUN: refused, the session's device time was spent; the next
# session's first call): call 3's two failed codec tests (bit for
# bit checks between paths that now take either batched kernel) after both sum a document's
# score alike (block_score_split), then the packed test (d = 128, runs of 128) and the rest.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  for t in residual_tensors_scored_in_place compressed_search_resident_streamed_and_sharded_agree; do
    echo "== $(date -u +%T) $t"; .dev/test-gpu_codecs $t 2>&1 | grep -E "^test |test result|panicked|assert"
  done
  echo "== $(date -u +%T) the runs test in full (every run length bit for bit alike), then the rest"
  .dev/test-gpu_codecs batched_kernel_packs 2>&1 | grep -E "^test |test result|panicked|assert"
  TILEMAXSIM_GPU_CASES=1 .dev/test-gpu_codecs --skip residual_tensors --skip compressed_search --skip batched_kernel_packs 2>&1 | grep -E "^test |test result|panicked|assert"
  date -u +%T
} 2>&1 | tee "$OUT/fix.log"
