#!/usr/bin/env bash
# 2026-11-30 (twelfth), device call 2: where the f32 planes' kernel (maxsim_bulk_planes) loses
# its last 4% at B = 100K (95.6% there, 98.0% at B = 500K: a fixed cost a call?): the launch
# shape swept (TILEMAXSIM_BULK=stages,group; TILEMAXSIM_BULK_GRID) at d = 128, 64, 32, one
# launch under ncu; then the f32 GPU tests with memcheck and racecheck, and tests/gpu.rs.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30b/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
{
  device_header
  ( TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=6 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3
    echo "f32 memcheck exit: ${PIPESTATUS[0]}"
    TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=3 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3
    echo "f32 racecheck exit: ${PIPESTATUS[0]}" ) > /tmp/sanitizers.log 2>&1 &
  echo "== tests/gpu_f32.rs"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  echo "== tests/gpu.rs"
  timeout 300 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked"; echo "tests exit: ${PIPESTATUS[0]}"
  wait
  echo "== sanitizers"; cat /tmp/sanitizers.log
  echo "== launch shapes, f32 planes (default, then TILEMAXSIM_BULK=stages,group, then the resident grid)"
  for dim in 128 64 32; do
    a="--dtype f32 --docs 100000 --doc-len 128 --dim $dim"
    bench $a | sed 's/^/default: /'
    for sg in 2,4 2,8 2,16 2,32 2,64 1,16; do TILEMAXSIM_BULK=$sg bench $a | sed "s/^/$sg: /"; done
    TILEMAXSIM_BULK_GRID=resident bench $a | sed 's/^/resident: /'
    TILEMAXSIM_BULK_GRID=runs bench $a | sed 's/^/runs: /'
  done
  bench --dtype f32 --docs 500000 --doc-len 128 | sed 's/^/default: /'
  echo "== ncu: one launch of maxsim_bulk_planes_d128 and of maxsim_split_parts, B = 100K"
  timeout 150 ncu --clock-control none --kernel-name regex:"maxsim_bulk_planes|maxsim_split_parts" --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section LaunchStats --metrics smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
    .dev/tilemaxsim bench --device cuda --dtype f32 --docs 100000 --doc-len 128 --reps 3 2>&1 |
    grep -E "maxsim_|Duration|DRAM Throughput|Memory Throughput|inst_executed|tensor|SM Frequency|Grid Size|Waves" | head -30
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
