#!/usr/bin/env bash
# Device call 3 of 2026-11-29 (nvidia-h200; .dev with the split kernel's longer runs, .whl with
# the wheel of the same tree, LIK and flash-maxsim): f32 queries against 16-bit corpora and f32
# corpora at the engine's new runs beside the old (TILEMAXSIM_BULK=2,8), the peers' f32 and f16
# rows (LIK's f32 in the same run), the Python CUDA tests that cover the mixed path.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29/call3.sh
set -uo pipefail
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  echo "== $(date -u +%T) f32 queries on 16-bit corpora, f32 corpora (B = 100K; 10K)"
  for round in 1 2; do
    bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
    TILEMAXSIM_BULK=2,8 bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
    bench --dtype f32 --docs 100000 --doc-len 128
    TILEMAXSIM_BULK=2,8 bench --dtype f32 --docs 100000 --doc-len 128
  done
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 32:256
  bench --dtype bf16 --query-dtype f32 --docs 100000 --doc-len 128
  bench --dtype f32 --docs 100000 --doc-len 32:256
  bench --dtype f16 --docs 100000 --doc-len 128
  bench --dtype f16 --query-dtype f32 --docs 10000 --doc-len 128
  bench --dtype f32 --docs 10000 --doc-len 128
  echo "== $(date -u +%T) peers: f32 and f16 at B = 100K"
  OUT=$OUT/peers timeout 240 bash bench/peers_gpu.sh --cases fp32,b100k --compile-cases none 2>&1 | tail -25
  echo "== $(date -u +%T) Python on CUDA tensors: test_cuda.py, test_maxsim.py"
  (cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site TILEMAXSIM_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests/test_cuda.py tests/test_maxsim.py 2>&1 | tail -15)
  date -u +%T
} 2>&1 | tee "$OUT/call3.log"
