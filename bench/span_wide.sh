#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/span_wide.sh   (on the GPU machine, .dev carried)
# Issue 27's d = 129-255 in one device call: maxsim_span_any past four chunks (tokens split over
# the warps) beside maxsim_bulk_any (d split over the warps; TILEMAXSIM_SPAN=0), f16, Nd ~
# U[32,256], B = 10K as the earlier d sweep. First tests/gpu_any_dim.rs and the raw-memory test
# of tests/gpu.rs; then the sweep; then ncu's launch statistics at d = 136 and 200. SAN=1 runs
# compute-sanitizer memcheck and racecheck on tests/gpu_any_dim.rs instead.
# The compiled kernels go to $OUT/kcache.tar.xz; carried back as .dev/kcache.tar.xz they spare
# the next call its first-start compile. Knobs: DOCS (10000), TESTS=0, the d lists DIMS, BF16, ANY,
# ONE, NCU (empty skips), RUNS (TILEMAXSIM_BULK=stages,group shapes at the d's of RUNS_D).
# Log: $OUT/${LOG:-span_wide}.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
[ -f .dev/kcache.tar.xz ] && mkdir -p "$TILEMAXSIM_CACHE_DIR" && tar -xJf .dev/kcache.tar.xz -C "$TILEMAXSIM_CACHE_DIR"
at() { bench --dtype "${2:-f16}" --docs "${DOCS:-10000}" --doc-len 32:256 --dim "$1"; }
{
  device_header
  if [ "${SAN:-0}" = 1 ]; then
    export TILEMAXSIM_SANITIZER=1
    for tool in memcheck racecheck; do
      echo "== $tool: tests/gpu_any_dim.rs"
      timeout 280 compute-sanitizer --tool $tool --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -4
      echo "$tool exit: ${PIPESTATUS[0]}"
    done
    exit 0
  fi
  if [ "${TESTS:-1}" = 1 ]; then
    echo "== tests/gpu_any_dim.rs"
    timeout 200 .dev/test-gpu_any_dim 2>&1 | grep -E -A3 "^test |test result|panicked"
    echo "== tests/gpu.rs raw_device_memory_in_every_layout"
    timeout 200 .dev/test-gpu raw_device 2>&1 | grep -E -A3 "^test |test result|panicked"
  fi
  echo "== the engine's choice"
  for d in ${DIMS-129 136 144 160 200 202 224 248 250 255 256}; do at "$d"; done
  for d in ${BF16-136 200}; do at "$d" bf16; done
  echo "== maxsim_bulk_any (TILEMAXSIM_SPAN=0)"
  for d in ${ANY-136 144 160 200 224 248}; do echo -n "SPAN=0 "; TILEMAXSIM_SPAN=0 at "$d"; done
  echo "== maxsim_span_any where one block fits an SM (TILEMAXSIM_SPAN=1)"
  for d in ${ONE-248}; do echo -n "SPAN=1 "; TILEMAXSIM_SPAN=1 at "$d"; done
  for d in ${RUNS_D-}; do
    for sg in ${RUNS-2,8 2,16 3,8}; do echo -n "BULK=$sg "; TILEMAXSIM_BULK=$sg at "$d"; done
  done
  for d in ${NCU-136 200}; do
    echo "== ncu d = $d"
    timeout 120 ncu --clock-control none -k regex:maxsim_span --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats \
      .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --dim "$d" --docs "${DOCS:-10000}" --doc-len 32:256 2>&1 |
      grep -E "maxsim_span|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|DRAM Throughput|Memory Throughput|Duration|Shared Memory Config|Dynamic Shared" 
  done
} 2>&1 | tee "$OUT/${LOG:-span_wide}.log"
[ -f "$OUT/kcache.tar.xz" ] || tar -cJf "$OUT/kcache.tar.xz" -C "$TILEMAXSIM_CACHE_DIR" . 2>/dev/null
ls -la "$OUT"
