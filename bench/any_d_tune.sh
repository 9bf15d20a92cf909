#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/any_d_tune.sh   (on the GPU machine, .dev carried)
# Issue 27's any-d sweep, one device call: tests/gpu_any_dim.rs (the spanning kernel at every
# row alignment) plain and under compute-sanitizer memcheck and racecheck, with the forced-kernel
# test of tests/gpu.rs beside them; then every d of the issue (f16, Nd ~ U[32,256]; B = 100K up
# to d = 128, 10K past it) at the engine's defaults, and the missed d ≤ 128 at longer runs of
# documents per block (TILEMAXSIM_BULK=stages,group). Log: $OUT/any_d_tune.log. (Run 1's
# version, with stage sweeps, ncu and the SPAN_LEAN toggle: bench/results/h100/any_d/run1.)
# The lists can be narrowed: SMALL="16 48" WIDE="" RUNS="" (d's, and TILEMAXSIM_BULK shapes);
# BF16="16 77" adds bf16 rows at those d.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
small() { bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$1"; }
wide() { bench --dtype f16 --docs 10000 --doc-len 32:256 --dim "$1"; }
tests() {
  echo "== tests/gpu_any_dim.rs"
  timeout 200 .dev/test-gpu_any_dim 2>&1 | grep -E -A3 "^test |test result|panicked"
  ( export TILEMAXSIM_SANITIZER=1
    echo "== memcheck: tests/gpu_any_dim.rs"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -4
    echo "memcheck exit: ${PIPESTATUS[0]}"
    echo "== racecheck: tests/gpu_any_dim.rs"
    timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -4
    echo "racecheck exit: ${PIPESTATUS[0]}" ) > "$OUT/sanitizers.txt" 2>&1 &
  echo "== tests/gpu.rs tensor_core_path_matches_the_reference (52 cases)"
  timeout 280 .dev/test-gpu tensor_core 2>&1 | grep -E -A3 "^test |test result|panicked"
  wait
  cat "$OUT/sanitizers.txt"
}
{
  device_header
  [ "${TESTS:-1}" = 1 ] && tests
  echo "== the d sweep at the defaults"
  for d in ${SMALL-16 48 77 80 96 100 126 127 128}; do small "$d"; done
  for d in ${BF16-}; do bench --dtype bf16 --docs 100000 --doc-len 32:256 --dim "$d"; done
  for d in ${WIDE-136 200 256 320 384 512 768 1024}; do wide "$d"; done
  echo "== longer runs per block, d <= 128 (TILEMAXSIM_BULK=stages,group)"
  for d in 16 48 77 127; do
    for sg in ${RUNS-2,16 2,32 3,16}; do
      echo -n "BULK=$sg "; TILEMAXSIM_BULK=$sg small "$d"
    done
  done
} 2>&1 | tee "$OUT/any_d_tune.log"
