#!/usr/bin/env bash
# ncu evidence for the H200 targets the exact path misses (BENCHMARKS.md, "H200: the GPU engine beside the GPU peers"): one profiled pass
# of each case's kernels under `tilemaxsim bench`, clocks left alone (--clock-control none, as
# ../.library/device/METHOD.md asks), with the sections that say whether a kernel is held by
# DRAM, by issue, by occupancy or by its launch: d = 77 packed U[32,256] (any-d target 90%),
# f32 (95% of the f32 read ceiling), d = 768 at B = 10K (99%), B = 10K at d = 128 (small
# batches), 32 queries (3x the best peer).
# usage: on the GPU machine after bench/device_build.sh, with .dev carried:
#   OUT=$OUT bash bench/ncu_misses.sh      (reports in $OUT/ncu_<case>.txt, summary on stdout)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
NCU=(ncu --clock-control none -k regex:maxsim --launch-skip 4 --launch-count 2
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy
  --section LaunchStats --section SchedulerStats --section WarpStateStats)
prof() {
  local name=$1; shift
  echo "== $name: tilemaxsim bench --device cuda --reps 3 $*"
  timeout 120 "${NCU[@]}" .dev/tilemaxsim bench --device cuda --reps 3 "$@" >"$OUT/ncu_$name.txt" 2>&1
  grep -E "^  [a-z_]+maxsim|^  maxsim|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Issue Slot|No Eligible|Grid Size|Block Size|Dynamic Shared" \
    "$OUT/ncu_$name.txt" | sed 's/  */ /g' | head -40
}
prof d77 --dtype f16 --dim 77 --doc-len 32:256
prof f32 --dtype f32 --doc-len 128
prof d768 --dtype f16 --dim 768 --doc-len 128 --docs 10000
prof b10k --dtype f16 --doc-len 128 --docs 10000
prof q32 --dtype f16 --doc-len 128 --queries 32
