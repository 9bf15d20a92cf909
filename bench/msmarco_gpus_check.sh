#!/usr/bin/env bash
# The MS MARCO-shaped index (8.8M documents) split over two GPUs, and the per-call centroid
# scores (codec_centroid_scores) read once a block: one device call on an nvidia-h200-x2.
# - the IVF tests and the sharded index test on both GPUs;
# - bench/msmarco_scale.py --devices 0,1 (in the background while the kernels compile):
#   exhaustive and IVF 8/4096 and 4/1024 at batches 32 and 1, each on GPU 0 and then split over
#   GPUs 0 and 1, recall against exhaustive search on GPU 0;
# - IVF at batches 1 and 32 by this build and by .devold's (the build before the centroid-score
#   change), in turn, their run files compared;
# - ncu's kernel durations over 16 batch-1 queries.
# Build first with bench/device_build.sh, the build to compare with into .devold/.
# usage: OUT=$OUT bash bench/msmarco_gpus_check.sh   (carry .dev, .devold, .devcache)
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  nvidia-smi -L
  (timeout 420 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --devices 0,1 > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  timeout 100 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked"
  timeout 100 .dev/test-gpu_search sharded 2>&1 | grep -E "^test |test result|panicked"
  timeout 120 .dev/test-gpu_codecs every_codec_on_the_gpu residual_tensors sharded 2>&1 | grep -E "^test |test result|panicked"
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  wait
  cat /tmp/msmarco.log
  date -u +%T
  ivf_ab
  date -u +%T
  ivf_kernel_times
  date -u +%T
} 2>&1 | tee "$OUT/msmarco_gpus_check.log"
