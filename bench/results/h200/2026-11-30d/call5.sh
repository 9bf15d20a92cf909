#!/usr/bin/env bash
# 2026-11-30 (fourteenth), device call 5: call 3 (gpu_check PART=1) ran past the call's 600 s
# with its results in a temporary folder, so nothing but the compile check came back. This runs
# the checks of what changed, side by side, each writing its own log under $OUT as it goes:
# tests/gpu_any_dim.rs (where `maxsim_stream` is tested against the float64 reference) plainly
# and under memcheck and racecheck, tests/gpu.rs's tensor-core, NaN and raw-memory tests, tests/gpu_f32.rs (add_planes' launch),
# and tests/gpu.rs's tensor-core and NaN tests under memcheck.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30d/call5.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 TILEMAXSIM_REQUIRE_NVRTC=1
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > "$OUT/call5.log"
.dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 >> "$OUT/call5.log"
echo "== compiled $(date -u +%T)" >> "$OUT/call5.log"
run() { local name=$1; shift; ( "$@" > "$OUT/$name.log" 2>&1; echo "exit: $? $(date -u +%T)" >> "$OUT/$name.log" ) & }
run any_dim timeout 120 .dev/test-gpu_any_dim
run gpu timeout 230 .dev/test-gpu tensor_core nan_in raw_device
run f32 timeout 200 .dev/test-gpu_f32
export TILEMAXSIM_SANITIZER=1
run any_dim_memcheck timeout 230 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim
run any_dim_racecheck timeout 230 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim
TILEMAXSIM_GPU_CASES=6 run gpu_memcheck timeout 230 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu --test-threads 1 tensor_core nan_in
wait
echo "== $(date -u +%FT%TZ) done" >> "$OUT/call5.log"
for f in any_dim gpu f32 any_dim_memcheck any_dim_racecheck gpu_memcheck; do echo "-- $f"; grep -E "^test |test result|panicked|ERROR SUMMARY|RACECHECK SUMMARY|exit:" "$OUT/$f.log" | tail -14; done
