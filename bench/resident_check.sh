#!/usr/bin/env bash
# The resident grid's checks and timings in one device call (kernels/bulk.cu BulkWalk, plan/bulk.rs
# bulk_resident_grid): the GPU tests that walk several runs a block (across queries, in
# maxsim_bulk and maxsim_bulk_split), compute-sanitizer memcheck and racecheck on the one whose
# stride spans whole queries, then the engine's grid against a block a run
# (TILEMAXSIM_BULK_GRID=runs) and maxsim_bulk at d = 64 at six blocks an SM against five
# (BULK_D64_MIN_BLOCKS), rounds alternating, and the peers at B = 10K and d = 768.
# Build first with bench/device_build.sh; carry .dev (and .whl for the peers).
# usage: OUT=$OUT [ROUNDS=2] [PEERS=1] bash bench/resident_check.sh
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
T0=$(date +%s)
ab() { echo -n "engine "; bench "$@"; echo -n "runs   "; TILEMAXSIM_BULK_GRID=runs bench "$@"; }
{
  device_header
  ( TILEMAXSIM_KERNEL_DEFINES=BULK_D64_MIN_BLOCKS=5 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 > /dev/null 2>&1 ) &
  timeout 240 .dev/test-gpu resident_grids every_task_of_a_large_uneven tensor_core_path fp32_split f32_queries 2>&1 |
    grep -E "^test |test result|panicked"
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool, resident_grids_step_across_queries"
    timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 .dev/test-gpu resident_grids --test-threads 1 2>&1 | tail -3
  done
  wait
  echo "tests: $(( $(date +%s) - T0 )) s"
  for r in $(seq "${ROUNDS:-2}"); do
    ab --dtype f16 --docs 10000 --doc-len 128
    ab --dtype f16 --docs 10000 --doc-len 128 --dim 768
    ab --dtype f32 --docs 10000 --doc-len 128
    ab --dtype f16 --docs 10000 --doc-len 128 --dim 64
    echo -n "d64 six  "; bench --dtype f16 --docs 100000 --doc-len 128 --dim 64
    echo -n "d64 five "; TILEMAXSIM_KERNEL_DEFINES=BULK_D64_MIN_BLOCKS=5 bench --dtype f16 --docs 100000 --doc-len 128 --dim 64
  done
  echo "benches: $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/resident_check.log"
[ "${PEERS:-1}" = 1 ] && bash bench/peers_gpu.sh --cases b10k,d768 --compile-cases none > "$OUT/peers.log" 2>&1
echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s" | tee -a "$OUT/resident_check.log"
