#!/usr/bin/env bash
# Device call 5 of 2026-11-29 (nvidia-h200; .dev and .whl of the tree where maxsim_split_parts
# splits each query once a call, before maxsim_bulk_split): tests/gpu.rs with memcheck and
# racecheck, the Python CUDA tests, the bench rows of call 4 with B = 10K and the old runs
# beside them, python_gpu.py's f32 cases.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29/call5.sh
set -uo pipefail
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
{
  device_header
  echo "== $(date -u +%T) tests/gpu.rs"
  .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked|assert|tolerance"
  TILEMAXSIM_GPU_CASES=4 timeout 120 compute-sanitizer --tool memcheck .dev/test-gpu fp32_split 2>&1 | grep -E "ERROR SUMMARY|test result" | head -3
  TILEMAXSIM_GPU_CASES=4 timeout 120 compute-sanitizer --tool memcheck .dev/test-gpu f32_queries_on 2>&1 | grep -E "ERROR SUMMARY|test result" | head -3
  TILEMAXSIM_GPU_CASES=4 timeout 120 compute-sanitizer --tool racecheck .dev/test-gpu f32_queries_on 2>&1 | grep -E "RACECHECK SUMMARY|test result" | head -3
  echo "== $(date -u +%T) Python on CUDA tensors: test_cuda.py, test_maxsim.py"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests/test_cuda.py tests/test_maxsim.py 2>&1 | tail -15)
  echo "== $(date -u +%T) bench (B = 100K)"
  for round in 1 2; do
    bench --dtype f32 --docs 100000 --doc-len 128
    TILEMAXSIM_BULK=2,8 bench --dtype f32 --docs 100000 --doc-len 128
    bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
    TILEMAXSIM_BULK=2,8 bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  done
  bench --dtype f32 --docs 10000 --doc-len 128
  bench --dtype f16 --query-dtype f32 --docs 10000 --doc-len 128
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 32:256
  bench --dtype bf16 --query-dtype f32 --docs 100000 --doc-len 128
  bench --dtype f32 --docs 100000 --doc-len 128 --raw
  bench --dtype f16 --docs 100000 --doc-len 128
  echo "== $(date -u +%T) python_gpu.py --cases f32"
  timeout 200 python3 bench/python_gpu.py --cases f32 --out $OUT/python 2>&1 | tail -20
  tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
  date -u +%T
} 2>&1 | tee "$OUT/call5.log"
