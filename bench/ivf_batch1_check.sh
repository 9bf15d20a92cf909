#!/usr/bin/env bash
# IVF search at batch 1 at 8.8M documents, its stages spread over the GPU (issue 28): the checks
# and timings of one device call. The grouped top-k merge (topk_merge_groups) and the probe's
# register lists and merge steps (ivf_probe_pP, ivf_probe_merge_pP) and the split marking
# (ivf_mark) are new. Runs:
# - the GPU top-k test (rows of 1.2M and 4.5M: the merge by groups in one and two steps) and
#   the IVF tests (the probe against float64 at K = 8,500, every list size); memcheck on both;
# - the residual codec tests (the per-call centroid scores, codec_centroid_scores);
# - the MS MARCO-shaped index of bench/msmarco_scale.py (--only-build, in the background while
#   the kernels compile);
# - IVF 8/4096 at batch 1 and 32 by this build and by .devold's (main before), in turn, with
#   their run files compared; then this build's IVF 4/1024 and 8/4096 with the codes streamed;
# - ncu's kernel durations over 16 batch-1 queries: where a query's time goes now; then one
#   launch of ivf_interaction profiled (speed of light, memory, occupancy).
# Build first with bench/device_build.sh, and the build to compare with into .devold/.
# usage: OUT=$OUT bash bench/ivf_batch1_check.sh   (carry .dev, .devold, .devcache)
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  (timeout 400 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  timeout 120 .dev/test-gpu_search device_top_k 2>&1 | grep -E "^test |test result|panicked"
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked"
  timeout 120 .dev/test-gpu_codecs every_codec_on_the_gpu residual_tensors sharded 2>&1 | grep -E "^test |test result|panicked"
  TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_search device_top_k 2>&1 | tail -2
  TILEMAXSIM_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_ivf many_centroids 2>&1 | tail -2
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  wait
  grep -E "corpus|index|exhaustive|rc" /tmp/msmarco.log
  date -u +%T
  ivf_ab
  for b in 1 32; do  # IVF 4/1024 (fast-plaid's recall at 8.8M in the x4 run), and the codes streamed
    echo -n "4/1024 batch $b: "; ivf_search .dev/tilemaxsim $b /tmp/r4_$b.trec --nprobe 4 --ndocs 1024
    echo -n "8/4096 streamed batch $b: "
    ivf_search .dev/tilemaxsim $b /tmp/rs_$b.trec --nprobe 8 --ndocs 4096 --residency stream
  done
  date -u +%T
  ivf_kernel_times
  ivf_stage_profile ivf_interaction  # the largest stage at batch 1 since 2026-11-29 (sixth)
  date -u +%T
} 2>&1 | tee "$OUT/ivf_batch1_check.log"
