#!/usr/bin/env bash
# Device call 2 of 2026-11-29 (second session; nvidia-h200, .dev and .whl of the tree where
# the spanning kernel's window a warp is compiled per instantiation, SPAN_WLOG_OF): the GPU
# tests, the d list at d <= 128 at the defaults, the Python CUDA tests (last session's unrun
# checks), the peers at d = 16, 48, 64, 77 and U[32,256], racecheck on the spanning kernels.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29b/call2.sh
set -uo pipefail
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
{
  device_header
  tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) tests/gpu_any_dim.rs, tests/gpu.rs"
  timeout 100 .dev/test-gpu_any_dim 2>&1 | grep -E -A3 "^test |test result|panicked"
  timeout 150 .dev/test-gpu 2>&1 | grep -E -A3 "^test |test result|panicked"
  echo "== $(date -u +%T) the d list at the defaults"
  for d in 16 32 48 64 77 96 100 127 128; do bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"; done
  bench --dtype bf16 --docs 100000 --doc-len 32:256 --dim 48
  echo "== $(date -u +%T) Python on CUDA tensors"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests/test_cuda.py tests/test_maxsim.py tests/test_split.py 2>&1 | tail -12)
  echo "== $(date -u +%T) peers"
  timeout 170 bash bench/peers_gpu.sh --cases d16,d48,d64,d77,varlen --compile-cases none 2>&1 | grep -vE "^\s*$" | tail -60
  echo "== $(date -u +%T) racecheck: tests/gpu_any_dim.rs"
  TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim spanning 2>&1 | tail -4
  date -u +%T
} 2>&1 | tee "$OUT/call2.log"
