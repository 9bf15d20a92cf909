#!/usr/bin/env bash
# Device call 4 (nvidia-h200): the MS MARCO-shaped index on one H200 (bench/msmarco_scale.py, every
# row: exhaustive, IVF at batches 1 and 32, codes streamed) with this session's batched codec
# kernels, against the same script's rows of 2026-11-28 (BENCHMARKS.md).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29e/call4.sh   (carry .dev, .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  timeout 480 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco
  date -u +%T
} 2>&1 | tee "$OUT/call4.log"
