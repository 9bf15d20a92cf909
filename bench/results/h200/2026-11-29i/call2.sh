#!/usr/bin/env bash
# 2026-11-29 (ninth), device call 2: the residual one-warp kernels at nbits 1 and 2 staged
# through shared memory (CODEC_PIPE=1: cp.async three groups ahead, the centroid-score gathers
# one ahead), with 3 and 4 blocks an SM, against the default: their tests and sanitizers; the
# MS MARCO-shaped index (built by .devold while they compile) searched exhaustively at batch 1
# by each, run files compared; `bench` at one query.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29i/call2.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
VARS="CODEC_PIPE=1 CODEC_PIPE=1,CODEC_MIN_BLOCKS=4"
{
  mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
  (timeout 200 python3 bench/msmarco_scale.py --bin .devold/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for v in default $VARS; do
    ( with "$v" timeout 300 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  grep -E "corpus|rc" /tmp/msmarco.log | tail -2
  for v in $VARS; do
    echo "-- [$v] tests"
    with "$v" timeout 80 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 2>&1 | grep -E "test result|panicked|FAILED"
    with "$v" timeout 40 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  done
  date -u +%T
  for v in default $VARS; do
    echo -n "[$v] exhaustive batch 1: "
    with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_$v.trec --exhaustive
  done
  for v in $VARS; do cmp /tmp/e_default.trec /tmp/e_$v.trec && echo "$v: same run file"; done
  date -u +%T
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 1 $L" "--codec residual --nbits 2 --docs 100000 --doc-len 32" \
              "--codec residual --nbits 2 --docs 10000 --doc-len 8:124"; do
    for v in default $VARS; do
      echo -n "[$v] "
      # shellcheck disable=SC2086
      with "$v" timeout 60 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
    done
  done
  date -u +%T
  TILEMAXSIM_KERNEL_DEFINES=CODEC_PIPE=1 TILEMAXSIM_GPU_CASES=1 TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs every_codec one_warp 2>&1 | tail -2
  TILEMAXSIM_KERNEL_DEFINES=CODEC_PIPE=1 TILEMAXSIM_GPU_CASES=1 TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_codecs every_codec 2>&1 | tail -3
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
