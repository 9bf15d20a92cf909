#!/usr/bin/env bash
# 2026-11-29 (seventh), device call 2 (issue 28): ivf_interaction with 16 rows in flight a lane
# and the next 16 tokens' centroids read ahead (the new default), beside variants of it and
# beside .devold (main before: 4 rows in flight, each 16's centroids read as it starts):
#  1. every variant compiled at once while the MS MARCO-shaped index is built (8.8M documents,
#     by .devold, whose kernels are in the cache);
#  2. the IVF tests and memcheck on the first stages, by the default;
#  3. IVF 8/4096 at batches 1 and 32: .dev against .devold twice, their run files compared; then
#     each variant once (TILEMAXSIM_KERNEL_DEFINES), its run files compared with the default's;
#  4. ncu's kernel durations over 16 batch-1 queries, and the new ivf_interaction profiled;
#  5. the MS MARCO index removed, then 1M documents beside fast-plaid 1.7.0 in one run
#     (bench/index_peers.py, 128 queries, batches 1 and 32).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29g/call2.sh  (carry .dev .devold .devcache .whlc)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
VARIANTS="IVF_GATHER=8 IVF_GATHER=8,IVF_MIN_BLOCKS=12 IVF_GATHER=4,IVF_PREFETCH=0"
{
  (timeout 400 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  compiles=()
  for v in default $VARIANTS; do
    ( if [ $v = default ]; then unset TILEMAXSIM_KERNEL_DEFINES; else export TILEMAXSIM_KERNEL_DEFINES=$v; fi
      timeout 300 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) & compiles+=($!)
  done
  wait "${compiles[@]}"
  echo "== compiled $(date -u +%T)"
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked"
  TILEMAXSIM_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_ivf first_stages 2>&1 | tail -2
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  wait $built
  grep -E "corpus|index|rc" /tmp/msmarco.log
  date -u +%T
  ivf_ab
  for v in $VARIANTS; do
    for b in 1 32; do
      echo -n "[$v] batch $b: "
      TILEMAXSIM_KERNEL_DEFINES=$v ivf_search .dev/tilemaxsim $b /tmp/rv_$b.trec --nprobe 8 --ndocs 4096
      cmp /tmp/rv_$b.trec /tmp/r_.dev_$b.trec && echo "  the default's run file"
    done
  done
  date -u +%T
  ivf_kernel_times
  ivf_stage_profile ivf_interaction
  rm -rf $W
  echo "== $(date -u +%T) index_peers: 1M documents beside fast-plaid 1.7.0"
  WHL=.whlc source bench/peer_wheels.sh
  PYTHONPATH=/tmp/site:bench timeout 240 python3 bench/index_peers.py --bin .dev/tilemaxsim \
    --work /tmp/index-peers --docs 1000000 --queries 128 --batches 1,32 --only "fast-plaid's,nprobe=4,exhaustive"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
