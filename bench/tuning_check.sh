#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/tuning_check.sh   (on the GPU machine, .dev and .whl carried)
# The per-device launch shapes (`Tuning` in src/cuda/plan.rs) checked on the device they are
# for, one call: the GPU tests that force and vary the bulk shapes, the wide d at the new
# default beside the old one (TILEMAXSIM_BULK=2,2), then the memory-bound rows of the peer table
# (bench/peers_gpu.sh) with LIK and flash-maxsim in the same run. Log: $OUT/tuning_check.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== tests/gpu.rs: tensor_core, random_shapes, every_task, raw_device"
  timeout 200 .dev/test-gpu tensor_core random_shapes every_task raw_device 2>&1 | grep -E -A3 "^test |test result|panicked"
  echo "== wide d (f16, Nd = 128, B = 10K): the default, then the old default's 2 stages x 2 documents"
  for d in 256 512 640 768 1024; do
    unset TILEMAXSIM_BULK; echo -n "auto "; bench --dtype f16 --docs 10000 --doc-len 128 --dim "$d"
    echo -n "BULK=2,2 "; TILEMAXSIM_BULK=2,2 bench --dtype f16 --docs 10000 --doc-len 128 --dim "$d"
  done
  echo "== d = 768, U[32,256], B = 10K; d = 64, 96 spanning (unchanged rule)"
  bench --dtype f16 --docs 10000 --doc-len 32:256 --dim 768
  for d in 64 96; do bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"; done
} 2>&1 | tee "$OUT/tuning_check.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases b1k,b10k,b100k,b500k,varlen,bf16,fp32,d768 --budget-s 300 --compile-cases none 2>&1 | tail -14 | tee -a "$OUT/tuning_check.log"
