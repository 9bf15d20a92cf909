#!/usr/bin/env bash
# 2026-11-28 evening session, device call 1 (nvidia-h200; issue 27): what 0273e8e changed and no
# GPU had run (queries read in place from their own first row, pairs mode): tests/gpu.rs whole,
# the Python suite on CUDA tensors, the host time of one call; the kernel cache kept for the
# MS MARCO run (kcache.tar.xz).
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 LIK_SUPPRESS_NORM_WARN=1
mkdir -p $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site-compat .whl/compat/*.whl || exit 1
export PYTHONPATH=/tmp/site:/tmp/site-compat TILEMAXSIM_PYLATE_SDIST=$PWD/.whl/pylate-1.6.0.tar.gz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== $(date -u +%T) kernels compiled"; time .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | tail -2
tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
echo "== $(date -u +%T) tests/gpu.rs"
(TILEMAXSIM_REQUIRE_GPU=1 timeout 300 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked|assert" > $OUT/gpu_rs.log; echo "exit ${PIPESTATUS[0]}" >> $OUT/gpu_rs.log) &
(cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 330 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests 2>&1 | tail -50) > $OUT/pytest_cuda.log
wait
echo "== $(date -u +%T) python_overhead.py"; timeout 60 python3 bench/python_overhead.py 2>&1 | tee $OUT/python_overhead.log
tail -8 $OUT/pytest_cuda.log; grep -v "^test .* ok$" $OUT/gpu_rs.log | tail -15; date -u +%T
