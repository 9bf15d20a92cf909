#!/usr/bin/env bash
# 2026-11-30 (eighteenth), device call 3:
# 1. maxsim_bulk_any's half-chunk kernels (a warp's slice ends in one k16 step, so d = 320 takes
#    80 dimensions a warp, not 96): tests (gpu_any_dim, now with d = 264 .. 1016; memcheck), then
#    the half-chunk d against BULK_ANY_HALF=0 (the _h kernels multiplying whole chunks, as
#    before), f16 U[32,256], B = 10K two rounds and B = 100K at d = 320.
# 2. The residual kernel's claims of 8 tasks (the new default) against 4 (CODEC_CLAIM=4): the
#    one-warp tests, then exhaustive search at 8.8M documents, batch 1 (bench/msmarco_scale.py's
#    index), run files compared.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30g/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  for v in default BULK_ANY_HALF=0; do
    echo "-- [$v] gpu_any_dim"
    with "$v" timeout 150 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  done
  echo "-- memcheck gpu_any_dim"
  TILEMAXSIM_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
  for v in default CODEC_CLAIM=4; do
    echo "-- [$v] one-warp codec tests"
    with "$v" timeout 150 .dev/test-gpu_codecs every_codec one_warp_kernels_claim 2>&1 | grep -E "^test |test result|panicked"
  done
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "corpus|index build|rc" /tmp/msmarco.log | tail -3
  echo "== $(date -u +%T) bulk_any"
  for round in 1 2; do
    for d in 264 320 392 448 648 1016; do
      for v in default BULK_ANY_HALF=0; do
        echo -n "round $round d=$d B=10K [$v]: "
        with "$v" bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
      done
    done
  done
  for v in default BULK_ANY_HALF=0; do
    echo -n "d=320 B=100K [$v]: "; with "$v" bench --dtype f16 --docs 100000 --doc-len 32:256 --dim 320
    echo -n "d=320 bf16 B=10K [$v]: "; with "$v" bench --dtype bf16 --docs 10000 --doc-len 32:256 --dim 320
  done
  echo "== $(date -u +%T) search"
  for round in 1 2; do
    for v in default CODEC_CLAIM=4; do
      echo -n "[$v] round $round exhaustive batch 1: "
      with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_${v//[^A-Za-z0-9]/_}.trec --exhaustive
    done
  done
  cmp /tmp/e_default.trec /tmp/e_CODEC_CLAIM_4.trec && echo "same run files"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
