#!/usr/bin/env bash
# 2026-11-28 afternoon session, device call 1 (issue 27): the Python call's overhead with the
# queries read in place (python_overhead.py, python_gpu.py single), then the raw-layout GPU
# tests and the Python suite on CUDA tensors.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 LIK_SUPPRESS_NORM_WARN=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
.dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
echo "== $(date -u +%T) python_overhead.py"; timeout 60 python3 bench/python_overhead.py 2>&1 | tee $OUT/python_overhead.log
echo "== $(date -u +%T) python_gpu.py single"; timeout 200 python3 bench/python_gpu.py --cases single --out "$OUT" 2>&1 | tee $OUT/python_gpu.log
echo "== $(date -u +%T) tests"
(TILEMAXSIM_REQUIRE_GPU=1 timeout 220 .dev/test-gpu raw_device_memory_in_every_layout errors_not_panics 2>&1 | grep -E "^test |test result|panicked|assert" > $OUT/gpu_raw.log; echo "exit ${PIPESTATUS[0]}" >> $OUT/gpu_raw.log) &
(cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests 2>&1 | tail -40) > $OUT/pytest_cuda.log
wait
tail -8 $OUT/pytest_cuda.log; cat $OUT/gpu_raw.log; date -u +%T
