#!/usr/bin/env bash
# 2026-12-03 (thirtieth), device call 3: the one-warp residual kernel as landed (the late
# gather and one load a group on by default, the group's ids kept raw until the gather: call
# 2's ncu put 23% of the stall samples on the IMAD that added the query block's row to each id
# right after its load), against CODEC_ONE_LOAD=0 and against the kernel before this session
# (CODEC_LATE_GATHER=0,CODEC_ONE_LOAD=0). Binaries by bench/device_build.sh, kernels by
# `bench/kernel_cache.sh CODEC_ONE_LOAD=0 CODEC_LATE_GATHER=0,CODEC_ONE_LOAD=0`.
# 1. Tests on the default: the one-warp codec tests, compressed top-k and search, the IVF
#    tests, memcheck of the one-warp claim test; every_codec and one_warp under the variants.
# 2. One query, 1M x U[8,124], K = 262,144: nbits 2, 1, 4 and int8, each build, one round.
# 3. Exhaustive search at 8.8M documents, batch 1, each build twice (run files compared).
# 4. ncu of one launch of the default kernel (nbits 2), if time is left.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03d/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
L="--dtype f16 --docs 1000000 --doc-len 8:124 --centroids 262144"
V=(default CODEC_ONE_LOAD=0 CODEC_LATE_GATHER=0,CODEC_ONE_LOAD=0)
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  echo "-- [default] gpu_codecs (but the batched-runs and quad tests), gpu_ivf"
  timeout 150 .dev/test-gpu_codecs every_codec one_warp bf16 batched_bulk compressed residual_tensors lookup 2>&1 | grep -E "^test |test result|panicked|assert" | head -12
  timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED" | head -6
  echo "-- memcheck one_warp_kernels_claim"
  TILEMAXSIM_GPU_CASES=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs one_warp 2>&1 | tail -2
  for v in "${V[@]:1}"; do
    echo "-- [$v] every_codec, one_warp"
    with "$v" timeout 100 .dev/test-gpu_codecs every_codec one_warp 2>&1 | grep -E "test result|panicked|assert" | head -4
  done
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "index build|rc" /tmp/msmarco.log | tail -2
  echo "== $(date -u +%T) one query, 1M x U[8,124]"
  for c in "--codec residual --nbits 2" "--codec residual --nbits 1" "--codec residual --nbits 4" "--codec int8"; do
    for v in "${V[@]}"; do
      echo -n "[$v]: "; with "$v" bench $L $c
    done
  done
  echo "== $(date -u +%T) exhaustive search, 8.8M documents, batch 1"
  for round in 1 2; do
    i=0
    for v in "${V[@]}"; do
      echo -n "[$v] round $round: "; with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_$i.trec --exhaustive
      i=$((i + 1))
    done
  done
  for i in 1 2; do cmp -s /tmp/e_0.trec /tmp/e_$i.trec && echo "variant $i: same run file" || echo "variant $i: run file differs"; done
  echo "== $(date -u +%T) ncu, one launch of the default kernel"
  timeout 100 ncu --clock-control none -k regex:maxsim_codec_residual2 --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o /tmp/r3 .dev/tilemaxsim bench --device cuda --reps 3 $L --codec residual --nbits 2 > /tmp/ncu.log 2>&1
  ncu -i /tmp/r3.ncu-rep --page source --csv --print-source sass > /tmp/r3_sass.csv 2>/dev/null && xz -c /tmp/r3_sass.csv > $OUT/r3_sass.csv.xz
  python3 bench/ncu_sass_stalls.py /tmp/r3_sass.csv --top 12 2>&1 | head -50
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
