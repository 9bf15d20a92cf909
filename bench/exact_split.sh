#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/exact_split.sh   (on the GPU machine, .dev and .whl carried)
# f32 on the tensor cores, one device call: the GPU tests of the split kernels against the
# float64 reference, then `bench` rates of maxsim_bulk_split (f32 corpora; f32 queries on f16
# and bf16 corpora) beside maxsim_ring and the 16-bit engine on the same shapes, then the f32
# row of bench/peers_gpu.py (LIK and flash-maxsim in the same run). Log: $OUT/exact_split.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
log="$OUT/exact_split.log"
{
  device_header
  echo "== GPU tests: the split kernels, raw memory, every tensor-core kernel"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"
  echo "f32 tests exit: ${PIPESTATUS[0]}"
  timeout 360 .dev/test-gpu raw_device tensor_core nan_in 2>&1 |
    grep -E "^test |test result|panicked|case"
  echo "tests exit: ${PIPESTATUS[0]}"
  echo "== bench: B = 100K, Nd = 128, d = 128"
  for k in bulk ring; do bench --dtype f32 --docs 100000 --doc-len 128 --kernel "$k"; done
  bench --dtype f32 --docs 10000 --doc-len 128
  bench --dtype f32 --docs 100000 --doc-len 32:256
  for t in f16 bf16; do
    bench --dtype "$t" --docs 100000 --doc-len 128
    bench --dtype "$t" --query-dtype f32 --docs 100000 --doc-len 128
  done
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128 --dim 64
  bench --dtype f32 --docs 100000 --doc-len 128 --dim 64
  echo "== stages and runs (TILEMAXSIM_BULK=stages,group)"
  for sg in 3,8 2,4 4,8; do
    echo "TILEMAXSIM_BULK=$sg"; TILEMAXSIM_BULK=$sg bench --dtype f32 --docs 100000 --doc-len 128
  done
  echo "== peers: f32 B = 100K"
} 2>&1 | tee "$log"
OUT="$OUT" bash bench/peers_gpu.sh --cases fp32 --budget-s 200 2>&1 | tail -40 | tee -a "$log"
