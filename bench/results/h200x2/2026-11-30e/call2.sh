#!/usr/bin/env bash
# 2026-11-30 (fifteenth), device call 2, on `nvidia-h200-x2`: gpu_check's two parts at once, one
# a GPU (PART=1, the exact kernels, on GPU 0; PART=2, the codec and compression kernels, on
# GPU 1), on main's kernels after this session's change (maxsim_stream's L2 prefetch at d = 24,
# 40 and 48, and one tile-products helper for the mma.sync kernels), then on GPU 1 the d sweep
# of the streamed kernel against the spanning one. Kernels compiled here (bench/kernel_cache.sh).
# usage: OUT=$OUT bash bench/results/h200x2/2026-11-30e/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
mkdir -p "$OUT/part1" "$OUT/part2"
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader > "$OUT/gpus.txt"
( CUDA_VISIBLE_DEVICES=0 PART=1 OUT=$OUT/part1 timeout 575 bash bench/gpu_check.sh > /dev/null 2>&1 ) &
( CUDA_VISIBLE_DEVICES=1 PART=2 OUT=$OUT/part2 timeout 420 bash bench/gpu_check.sh > /dev/null 2>&1
  export CUDA_VISIBLE_DEVICES=1
  source bench/exact_split_lib.sh
  {
    echo "== d sweep on GPU 1 $(date -u +%T)"
    for d in 16 24 32 40 48 56 64; do
      for s in 1 0; do
        echo -n "[stream=$s] d=$d: "
        TILEMAXSIM_STREAM=$s bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
      done
    done
    echo "== $(date -u +%FT%TZ) done"
  } > "$OUT/sweep.log" 2>&1 ) &
wait
