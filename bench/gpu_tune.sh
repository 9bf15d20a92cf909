#!/usr/bin/env bash
# Device experiment: the tensor-core kernel's main cases under kernel macro overrides
# (TILEMAXSIM_KERNEL_DEFINES), each variant timed in the same run. Build with
# bench/device_build.sh first; carry .dev.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
for defines in "${@:-MMA_TILES=4}"; do
  echo "== $defines"
  for args in "--dtype f16 --docs 100000" "--dtype f16 --docs 500000" "--dtype f16 --doc-len 32:256 --docs 100000" "--dtype f16 --docs 10000"; do
    TILEMAXSIM_KERNEL_DEFINES=$defines .dev/tilemaxsim bench --device cuda --reps 20 $args 2>&1 | sed -n 3p
  done
done 2>&1 | tee "$OUT/gpu_tune.log"
