#!/usr/bin/env bash
# Device call 1 (nvidia-h200; issue 28, exhaustive search at MS MARCO scale): the batched codec
# kernels taking runs of documents cut into 128-token tiles across their boundaries (RunWalk).
# 1. the kernels compiled (the cache carried back in $OUT/kcache.tar.xz);
# 2. the codec GPU tests;
# 3. `tilemaxsim bench` at 32 queries, batched kernels, documents of U[8,124] tokens (mean 66, as
#    MS MARCO passages), 128 and U[8,180]: the engine's runs against TILEMAXSIM_PACK=1 (each
#    document in tiles of its own, the tiling before), A B A B;
# 4. bench/msmarco_scale.py --only-exhaustive at 8.8M documents (fast-plaid's 26.2 queries/s at
#    batch 32 on this corpus shape: BENCHMARKS.md, "H200 ×4 and H200, 2026-11-28 (night)");
# 5. the packed test under memcheck and racecheck.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) codec GPU tests"
  timeout 150 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|assert" | head -40
  echo "== $(date -u +%T) bench, 32 queries"
  for case in "8:124 residual --nbits 2" "128 residual --nbits 2" "8:124 int8" "128 int8" "8:180 residual --nbits 2" \
              "8:124 residual --nbits 4" "8:124 pq --m 16"; do
    set -- $case; len=$1; shift
    for pack in auto 1 auto 1; do
      if [ $pack = auto ]; then unset TILEMAXSIM_PACK; else export TILEMAXSIM_PACK=$pack; fi
      echo -n "pack=$pack "; bench --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec "$@"
    done
  done
  unset TILEMAXSIM_PACK
  echo "== $(date -u +%T) msmarco_scale --only-exhaustive"
  timeout 270 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco --only-exhaustive
  rm -rf /tmp/msmarco
  echo "== $(date -u +%T) memcheck, racecheck: the packed test (d = 128, runs of 128 only)"
  TILEMAXSIM_GPU_CASES=1 timeout 60 compute-sanitizer --tool memcheck .dev/test-gpu_codecs batched_kernel_packs 2>&1 | tail -4
  TILEMAXSIM_GPU_CASES=1 timeout 60 compute-sanitizer --tool racecheck .dev/test-gpu_codecs batched_kernel_packs 2>&1 | tail -4
  date -u +%T
} 2>&1 | tee "$OUT/pack.log"
