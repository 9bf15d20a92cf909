#!/usr/bin/env bash
# topk_merge_groups' checks and timings in one device call (branch wip/topk-grouped-merge, not
# yet run on a GPU): the GPU top-k test (rows of 1.2M and 4.5M merged by groups in one and two
# steps) and the IVF tests, memcheck on the top-k test, then IVF search at batch 1 at 8.8M
# documents against the same search on main (.devold, its build).
# Build first with bench/device_build.sh on this branch, and main's binary into .devold/.
# usage: OUT=$OUT bash bench/topk_check.sh   (carry .dev, .devold)
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
W=/tmp/msmarco
{
  device_header
  timeout 200 .dev/test-gpu device_top_k 2>&1 | grep -E "^test |test result|panicked"
  timeout 200 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked"
  TILEMAXSIM_SANITIZER=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu device_top_k 2>&1 | tail -3
  timeout 200 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-exhaustive | grep -E "corpus|index"
  for bin in .dev/tilemaxsim .devold/tilemaxsim .dev/tilemaxsim .devold/tilemaxsim; do
    echo -n "$bin: "
    $bin index search --index $W/index --queries $W/queries.safetensors -k 10 --device cuda --batch 1 --nprobe 8 \
      --ndocs 4096 --rerank-k 0 --out /tmp/r_$(basename $(dirname $bin)).trec 2>&1 | tail -1
  done
  cmp /tmp/r_.dev.trec /tmp/r_.devold.trec && echo "same run files"
} 2>&1 | tee "$OUT/topk_check.log"
