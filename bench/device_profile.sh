#!/usr/bin/env bash
# One device call: Nsight Compute profiles (speed of light, occupancy, launch, warp stalls) of the
# kernel the engine picks for the shapes that miss their issue-3 target, beside their timings.
# Build first with bench/device_build.sh; carry .dev. Log in $OUT/profile.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
prof() {
  echo "== ncu: $*"
  timeout 120 ncu --kernel-name regex:maxsim --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis $B bench --device cuda --reps 3 "$@" 2>&1 |
    grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Grid Size|Shared Memory Configuration Size|Dynamic Shared|Stall|cycles being stalled|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Compute \(SM\) Throughput|Bank" | head -40
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  for a in "--dtype f16 --docs 1000" "--dtype f16 --docs 10000" "--dtype f16 --docs 100000 --doc-len 32:256" \
           "--dtype f16 --docs 10000 --dim 768" "--dtype f32 --docs 100000"; do
    echo "== time: $a"; timeout 60 $B bench --device cuda $a 2>&1 | sed -n 3p
    prof $a
  done
} 2>&1 | tee "$OUT/profile.log"
