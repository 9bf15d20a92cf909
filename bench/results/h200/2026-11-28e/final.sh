#!/usr/bin/env bash
# Device call 3 (nvidia-h200): the batched codec kernels as committed, each twice:
# maxsim_codec_wg_* (each document in tiles of its own, as before: kernel code of 89a80f5) and
# maxsim_codec_wgp_* (runs of documents, RunWalk), the host taking runs where they pay
# (`pack_pays`). The codec GPU tests; the engine's choice against TILEMAXSIM_PACK=0 (never runs)
# at 32 queries; exhaustive search at 8.8M documents; memcheck and racecheck of the packed test.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) codec GPU tests"
  timeout 200 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|assert" | head -40
  echo "== $(date -u +%T) bench, 32 queries, B = 100K: auto, PACK=0, auto, PACK=0"
  for case in "128 residual --nbits 2" "8:124 residual --nbits 2" "32:256 residual --nbits 2" "128 int8" "8:124 int8"; do
    set -- $case; len=$1; shift
    for pack in auto 0 auto 0; do
      if [ $pack = auto ]; then unset TILEMAXSIM_PACK; else export TILEMAXSIM_PACK=$pack; fi
      echo -n "pack=$pack "; bench --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec "$@"
    done
  done
  unset TILEMAXSIM_PACK
  echo "== $(date -u +%T) msmarco_scale --only-exhaustive"
  timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco --only-exhaustive
  rm -rf /tmp/msmarco
  echo "== $(date -u +%T) memcheck, racecheck: the packed test (d = 128, runs of 128 only)"
  TILEMAXSIM_GPU_CASES=1 timeout 60 compute-sanitizer --tool memcheck .dev/test-gpu_codecs batched_kernel_packs 2>&1 | tail -3
  TILEMAXSIM_GPU_CASES=1 timeout 70 compute-sanitizer --tool racecheck .dev/test-gpu_codecs batched_kernel_packs 2>&1 | tail -3
  date -u +%T
} 2>&1 | tee "$OUT/final.log"
