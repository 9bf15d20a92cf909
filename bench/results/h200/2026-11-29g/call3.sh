#!/usr/bin/env bash
# 2026-11-29 (seventh), device call 3 (issue 28), main at the session's end (ivf_interaction as
# 6febb63's; the first stages' pass limits): the IVF tests; 1M documents beside fast-plaid 1.7.0
# in one run (bench/index_peers.py, 128 queries, batches 1 and 32); then the MS MARCO-shaped
# index (8.8M documents): IVF 8/4096 and 4/1024 at batches 1 and 32, ncu's kernel durations
# over 16 batch-1 queries, and ivf_interaction's warp states and scheduler (why it waits).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29g/call3.sh  (carry .dev .devcache .whlc)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked"
  echo "== $(date -u +%T) index_peers: 1M documents beside fast-plaid 1.7.0"
  WHL=.whlc source bench/peer_wheels.sh
  PYTHONPATH=/tmp/site:bench timeout 260 python3 bench/index_peers.py --bin .dev/tilemaxsim \
    --work /tmp/index-peers --docs 1000000 --queries 128 --batches 1,32 \
    --only "fast-plaid's,nprobe=4,exhaustive,streamed"
  rm -rf /tmp/index-peers
  echo "== $(date -u +%T) the MS MARCO-shaped index"
  timeout 200 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build 2>&1 | grep -E "corpus|index"
  for b in 1 32; do
    echo -n "8/4096 batch $b: "; ivf_search .dev/tilemaxsim $b /tmp/r8_$b.trec --nprobe 8 --ndocs 4096
    echo -n "4/1024 batch $b: "; ivf_search .dev/tilemaxsim $b /tmp/r4_$b.trec --nprobe 4 --ndocs 1024
  done
  ivf_kernel_times
  timeout 120 ncu --clock-control none --section WarpStateStats --section SchedulerStats \
    -k "regex:ivf_interaction" --launch-skip 2 --launch-count 1 \
    .dev/tilemaxsim index search --index $W/index --queries $W/q16.safetensors -k 10 --device cuda --batch 1 \
    --nprobe 8 --ndocs 4096 --rerank-k 0 --out /tmp/r.trec 2>&1 | grep -vE "^==PROF==|queries/s"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
