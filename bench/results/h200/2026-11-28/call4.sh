#!/usr/bin/env bash
# 2026-11-28 session, device call 4: ncu on the H200 for issue 27's misses (d = 16, d = 127,
# f32), then tests/gpu_ivf.rs, tests/gpu_any_dim.rs and the Python suite on CUDA tensors side by side.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis"
prof() { local name=$1 k=$2; shift 2
  echo "== ncu $name $(date -u +%T)"
  timeout 120 ncu --clock-control none -k regex:$k --launch-skip 3 --launch-count 1 $S .dev/tilemaxsim bench --device cuda --reps 3 "$@" > $OUT/ncu_$name.txt 2>&1
  grep -E "maxsim|DRAM Throughput|Memory Throughput|Compute \(SM\)|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Instructions  |No Eligible|Eligible Warps|Block Limit" $OUT/ncu_$name.txt | head -24; }
.dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
prof d16 maxsim_span --dtype f16 --dim 16 --docs 100000 --doc-len 32:256
prof d127 maxsim_span --dtype f16 --dim 127 --docs 100000 --doc-len 32:256
prof d128 maxsim_span --dtype f16 --dim 128 --docs 100000 --doc-len 32:256
prof f32 maxsim_bulk_split --dtype f32 --dim 128 --docs 100000 --doc-len 128
echo "== tests $(date -u +%T)"
(timeout 230 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked" > $OUT/gpu_ivf.log; echo "exit ${PIPESTATUS[0]}" >> $OUT/gpu_ivf.log) &
(timeout 200 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked" > $OUT/gpu_any_dim.log; echo "exit ${PIPESTATUS[0]}" >> $OUT/gpu_any_dim.log) &
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
(cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site LIK_SUPPRESS_NORM_WARN=1 TILEMAXSIM_TEST_DEVICE=cuda timeout 230 python3 -m pytest -q -rfs --tb=short -W ignore::DeprecationWarning -p no:cacheprovider tests 2>&1 | tail -40) > $OUT/pytest_cuda.log
wait
tail -15 $OUT/pytest_cuda.log; cat $OUT/gpu_ivf.log $OUT/gpu_any_dim.log; date -u +%T
