#!/usr/bin/env bash
# One device call for the ring kernel (maxsim_ring: per-warp cp.async ring, query in shared
# memory): its tests against the float64 reference (wide d, f32 split, forced at d <= 128),
# compute-sanitizer memcheck and racecheck, ptxas's register counts, then timings beside the
# kernels it replaces or competes with, a sweep of its compile-time shape, and Nsight Compute
# profiles. SANITIZERS="" skips the sanitizers (bench/gpu_check.sh runs them on every kernel).
# Build first with bench/device_build.sh; carry .dev. Log in $OUT/ring.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
row() { timeout 60 $B bench --device cuda "$@" 2>&1 | sed -n 3p; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== tests: tensor-core (every kernel forced), random shapes, f32"
  TILEMAXSIM_GPU_CASES=24 timeout 240 .dev/test-gpu tensor_core random_shapes fp32 2>&1 | grep -E "^test |test result|panicked|case" | head -20
  echo "== the same tests under an experiment (12 warps)"
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-exp TILEMAXSIM_KERNEL_DEFINES=RING_WARPS=12 TILEMAXSIM_GPU_CASES=12 \
    timeout 200 .dev/test-gpu tensor_core fp32 2>&1 | grep -E "^test |test result|panicked|case" | head -12
  echo "== ptxas (sm_90): maxsim_ring"
  for k in maxsim_ring_f16_d128 maxsim_ring_f32_d128; do
    ptxas -arch=sm_90 -v -o /dev/null "$(ls -t /tmp/tilemaxsim-cache/*.ptx | head -1)" 2>&1 | grep -A3 "entry function '$k'" | tail -3
  done
  echo "== compute-sanitizer memcheck / racecheck (tensor-core and f32 split tests, 6 cases)"
  sanitize_tests tensor_core fp32_split
  echo "== wide embeddings (Nq=32, Nd=128): ring"
  row --dtype f16 --dim 768 --docs 10000 --reps 20
  row --dtype f16 --dim 768 --docs 100000 --reps 10
  row --dtype bf16 --dim 768 --docs 10000 --reps 20
  row --dtype f16 --dim 256 --docs 100000 --reps 20
  row --dtype f16 --dim 1024 --docs 10000 --reps 20
  row --dtype f16 --dim 768 --docs 10000 --doc-len 32:256 --reps 20
  echo "== f32 exact: ring (split) vs tiled"
  row --dtype f32 --docs 100000 --reps 10
  row --dtype f32 --docs 10000 --reps 20
  row --dtype f32 --dim 768 --docs 10000 --reps 10
  row --dtype f32 --docs 100000 --reps 3 --kernel tiled
  echo "== d = 128 f16: ring vs bulk"
  for a in "--docs 1000" "--docs 10000"; do
    row --dtype f16 $a --reps 30 --kernel ring; row --dtype f16 $a --reps 30
  done
  echo "== sweep: warps per block x ring stages; f32 split rounding"
  for def in RING_WARPS=8 RING_WARPS=12 RING_WARPS=16,RING_STAGES=2 SPLIT_SECTOR_PIECES=0 \
             RING_TILES=4,RING_STAGES=3 SPLIT_ROUND_BITS=1; do
    for a in "--dtype f16 --dim 768 --docs 10000" "--dtype f16 --dim 768 --docs 100000" "--dtype f32 --docs 100000"; do
      echo -n "$def: "; TILEMAXSIM_CACHE_DIR=/tmp/tmc-$def TILEMAXSIM_KERNEL_DEFINES=$def row $a --reps 10
    done
  done
  echo "== ncu: ring at d = 768 and f32"
  for a in "--dtype f32 --docs 20000" "--dtype f16 --dim 768 --docs 10000"; do
    echo "-- $a"
    timeout 90 ncu --kernel-name regex:maxsim --launch-skip 3 --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis $B bench --device cuda --reps 3 $a 2>&1 |
      grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Stall|stalled|Warp Cycles Per Issued|Compute \(SM\) Throughput|Issue Slots|Pipe|Executed Ipc" | head -24
  done
} 2>&1 | tee "$OUT/ring.log"
