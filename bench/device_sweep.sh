#!/usr/bin/env bash
# One device call: what bounds the cases that still miss their issue-3 target. (1) the best a
# read-only kernel does on the B = 1K / 10K byte counts, rotated, launch included
# (bench/read_patterns.cu, nvcc on the device); (2) f32's ring depth and warps per block at
# B = 100K; (3) Nsight Compute on the many-query kernels (maxsim_gemm, maxsim_wgmma): tensor
# pipes, warp stalls, L2. Build first with bench/device_build.sh; carry .dev. Log in
# $OUT/sweep.log, the full ncu reports in $OUT/ncu_*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== read-only bounds (bench/read_patterns.cu small)"
  nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/rp bench/read_patterns.cu 2>&1 | grep -i error
  /tmp/rp small
  echo "== ours at the same sizes"
  def_row "" --dtype f16 --docs 1000 --reps 40
  def_row "" --dtype f16 --docs 10000 --reps 40
  echo "== f32 exact, B = 100K: ring depth and warps"
  for def in "" RING_STAGES=3 RING_STAGES=6 RING_STAGES=8 RING_WARPS=4 RING_WARPS=12 "RING_WARPS=12,RING_STAGES=3"; do
    def_row "$def" --dtype f32 --docs 100000 --reps 10
  done
  echo "== ncu: 32 queries x 20K, gemm and wgmma"
  for k in gemm wgmma; do
    timeout 150 ncu --kernel-name regex:maxsim --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section Occupancy --print-details all \
      $B bench --device cuda --dtype f16 --queries 32 --docs 20000 --reps 3 --kernel $k > "$OUT/ncu_$k.txt" 2>&1
    grep -E "Duration|Throughput|Pipe|Stall|stalled|Issued|Occupancy|L2 Hit|Registers" "$OUT/ncu_$k.txt" | head -40
  done
} 2>&1 | tee "$OUT/sweep.log"
