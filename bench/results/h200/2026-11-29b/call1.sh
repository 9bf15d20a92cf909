#!/usr/bin/env bash
# Device call 1 of 2026-11-29 (second session; nvidia-h200, the binaries in .dev): the spanning
# kernel's windows a warp. tests/gpu_any_dim.rs (windows of 32, 64 and 256 tokens forced beside
# the defaults), then the d list at d <= 128 (f16, B = 100K, Nd ~ U[32,256]) at each window
# (TILEMAXSIM_SPAN_WINDOW = log2 of 32-token chunks), then tests/gpu.rs (last session's unrun
# checks and the new window cases); the kernel cache comes back in $OUT. It ran an intermediate
# tree where the window was a launch argument (TILEMAXSIM_SPAN_WINDOW, since removed: the window
# is compiled per instantiation, kernels/span.cu SPAN_WLOG_OF); its two test failures were
# that tree's own test shapes (windows of 256 tokens at d = 77 with two stages do not fit).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29b/call1.sh
set -uo pipefail
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR
[ -e .dev/kcache.tar.xz ] && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  device_header
  tar -cJf $OUT/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) tests/gpu_any_dim.rs"
  timeout 150 .dev/test-gpu_any_dim 2>&1 | grep -E -A3 "^test |test result|panicked"
  echo "== $(date -u +%T) the d list by window"
  for d in ${DIMS:-16 48 77 100 127 128 32 64 96}; do
    for w in ${WINDOWS:-0 1 2 3}; do
      echo -n "W=$w "; TILEMAXSIM_SPAN_WINDOW=$w bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"
    done
    echo -n "auto "; bench --dtype f16 --docs 100000 --doc-len 32:256 --dim "$d"
  done
  echo "== $(date -u +%T) tests/gpu.rs"
  timeout 240 .dev/test-gpu 2>&1 | grep -E -A3 "^test |test result|panicked"
  date -u +%T
} 2>&1 | tee "$OUT/call1.log"
