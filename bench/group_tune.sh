#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/group_tune.sh   (on the GPU machine, .dev and .whl carried)
# Where our memory-bound rows trail LIK and flash-maxsim by 1-2% (f32, f16, bf16 at B = 100K,
# U[32,256], d = 768): documents per block and stages (TILEMAXSIM_BULK=stages,group) beside the
# engine's choice, then the peers' rows of the same cases in the same run (bench/peers_gpu.sh);
# first the forced-kernel test and the d sweep past 128 (maxsim_bulk_any's stages now d wide).
# Log: $OUT/group_tune.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== tests/gpu.rs tensor_core_path_matches_the_reference (52 cases)"
  timeout 200 .dev/test-gpu tensor_core 2>&1 | grep -E -A3 "^test |test result|panicked"
  echo "== d past 128 (f16, U[32,256], B = 10K)"
  for d in 136 144 200 1016; do bench --dtype f16 --docs 10000 --doc-len 32:256 --dim "$d"; done
  echo "== documents per block (TILEMAXSIM_BULK=stages,group; 'auto' = the engine's choice)"
  for args in "--dtype f32 --docs 100000 --doc-len 128" "--dtype f16 --docs 100000 --doc-len 128" \
              "--dtype bf16 --docs 100000 --doc-len 128" "--dtype f16 --docs 100000 --doc-len 32:256" \
              "--dtype f16 --docs 10000 --doc-len 128 --dim 768"; do
    for sg in auto 2,1 2,2 2,4 3,1 3,2; do
      if [ "$sg" = auto ]; then unset TILEMAXSIM_BULK; else export TILEMAXSIM_BULK=$sg; fi
      echo -n "BULK=$sg "; bench $args
    done
    unset TILEMAXSIM_BULK
  done
} 2>&1 | tee "$OUT/group_tune.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases fp32,b100k,bf16,varlen,d768 --budget-s 200 --compile-cases none 2>&1 | tail -25 | tee -a "$OUT/group_tune.log"
