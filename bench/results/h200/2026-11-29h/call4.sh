#!/usr/bin/env bash
# 2026-11-29 (eighth), device call 4 (the session's last 300 s): the one-warp codec kernels as
# they land (CODEC_ILP=1 for all but pq, CODEC_MIN_BLOCKS=3): the MS MARCO-shaped index built by
# .devold while they compile, searched exhaustively at batch 1 by this build and by .devold,
# run files compared; then the codec and IVF tests.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29h/call4.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  (timeout 200 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  device_header
  wait $built
  grep -E "corpus|rc" /tmp/msmarco.log | tail -2
  date -u +%T
  for bin in .dev .devold; do
    echo -n "$bin exhaustive batch 1: "
    ivf_search $bin/tilemaxsim 1 /tmp/e_${bin#.}_1.trec --exhaustive
  done
  cmp /tmp/e_dev_1.trec /tmp/e_devold_1.trec && echo "batch 1: same run files"
  date -u +%T
  timeout 60 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 2>&1 | grep -E "test result|panicked|FAILED"
  timeout 20 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
