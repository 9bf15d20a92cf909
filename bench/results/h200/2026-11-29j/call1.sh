#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 1: one variant V against the defaults. V holds two changes to
# different kernels: CODEC_IDS_AHEAD=1 (the one-warp residual kernels load a group's ids one
# group before its codes; batch 1) and CODEC_WG_L2_HINTS=1 (the batched kernels' codes
# evict-first, centroid gathers evict-last; batch 32). The MS MARCO-shaped index (built while the
# kernels compile) searched exhaustively at batches 1 and 32 by each, run files compared; `bench`
# at 1 and 32 queries; V's codec and IVF tests.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
V=CODEC_IDS_AHEAD=1,CODEC_WG_L2_HINTS=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  (timeout 400 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) & built=$!
  compile_variants default $V
  echo "== compiled $(date -u +%T)"
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 2 $L --queries 32" "--codec residual --nbits 2 --docs 100000 --doc-len 32" "--codec residual --nbits 1 $L" "--codec residual --nbits 4 $L"; do
    for r in 1 2; do
      for v in default $V; do
        echo -n "[$v] "
        # shellcheck disable=SC2086
        with "$v" timeout 60 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
      done
    done
  done
  date -u +%T
  wait $built  # (as run: "not a child of this shell"; the build had finished by then)
  grep -E "corpus|index build|rc" /tmp/msmarco.log | tail -3
  for b in 1 32; do
    for v in default $V; do
      echo -n "[$v] exhaustive batch $b: "
      with "$v" ivf_search .dev/tilemaxsim $b /tmp/e_${b}_$v.trec --exhaustive
    done
    cmp /tmp/e_${b}_default.trec /tmp/e_${b}_$V.trec && echo "batch $b: same run file"
  done
  date -u +%T
  echo "-- [$V] tests"
  with "$V" timeout 150 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 batched_bulk 2>&1 | grep -E "test result|panicked|FAILED"
  with "$V" timeout 60 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
