#!/usr/bin/env bash
# Device call 4 of 2026-11-29 (sixth), on an nvidia-h200-x2, as run (the run tool's command line):
# the MS MARCO-shaped index's searches on GPU 0 and split over GPUs 0 and 1, by 9c6fbfe's build
# (.dev; its kernels cached by call 3 in .devcache).
# usage: OUT=$OUT bash bench/results/h200x2/2026-11-29f/call4.sh   (carry .dev, .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh; mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR; (nvidia-smi -L; date -u +%T; timeout 250 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco --devices 0,1; date -u +%T) 2>&1 | tee $OUT/call4.log
