#!/usr/bin/env bash
# 2026-11-30 (thirteenth), device call 3, main's kernels after this session's change (the nbits-2
# step table of 32 copies, CODEC_LUT256=1; the one-query kernels and the single load taken out):
# `PART=2 bash bench/gpu_check.sh` (the codec and compression tests, memcheck and racecheck), then
# the MS MARCO-shaped index searched exhaustively at batch 1 (and 32) by main and by
# CODEC_LUT256=0 in turn, run files compared.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30c/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
PART=2 OUT=$OUT bash bench/gpu_check.sh
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  compile_variants CODEC_LUT256=0
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done
  grep -E "corpus|rc" /tmp/msmarco.log | tail -2
  for round in 1 2; do
    for v in default CODEC_LUT256=0; do
      echo -n "[$v] round $round exhaustive batch 1: "
      with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_${v//=/_}.trec --exhaustive
    done
  done
  cmp /tmp/e_default.trec /tmp/e_CODEC_LUT256_0.trec && echo "same run files"
  echo -n "[default] exhaustive batch 32: "
  ivf_search .dev/tilemaxsim 32 /tmp/e32.trec --exhaustive
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
