#!/usr/bin/env bash
# Compile the kernels here, ahead of a device call, into .dev/kcache (carried with .dev): the
# default program and each TILEMAXSIM_KERNEL_DEFINES variant named, for sm_90a (the H100 and
# H200), by NVRTC 13.0 (the device's major.minor, which the cache key holds), xz-compressed.
# The device scripts unpack them with bench/seed_kernel_cache.sh, so a call starts from the
# cubins instead of spending about 150 s of device time in NVRTC. Two compiles at a time.
# usage: [NVRTC13=DIR] bash bench/kernel_cache.sh [VARIANT...]
#   (after bench/device_build.sh, so the binaries carried embed the same sources). NVRTC13: a lib
#   folder holding libnvrtc.so -> libnvrtc.so.13; by default the nvidia-cuda-nvrtc 13.0.88 wheel
#   fetched once by pip into ~/.cache/tilemaxsim-nvrtc13.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${NVRTC13:-}" ]; then
  root=${XDG_CACHE_HOME:-$HOME/.cache}/tilemaxsim-nvrtc13
  NVRTC13=$root/nvidia/cu13/lib
  if [ ! -e "$NVRTC13/libnvrtc.so" ]; then
    mkdir -p "$root"
    python3 -m pip download -q --no-deps -d "$root" nvidia-cuda-nvrtc==13.0.88
    (cd "$root" && python3 -m zipfile -e nvidia_cuda_nvrtc-13.0.88-*.whl .)
    ln -sf libnvrtc.so.13 "$NVRTC13/libnvrtc.so"
  fi
fi
cargo build -q --release -p tilemaxsim --features cuda --example kernel_cache
rm -rf .dev/kcache; mkdir -p .dev/kcache
one() {
  local v=$1 dir; dir=$(mktemp -d)
  if [ "$v" = default ]; then
    TILEMAXSIM_CACHE_DIR=$dir LD_LIBRARY_PATH=$NVRTC13 target/release/examples/kernel_cache sm_90a
  else
    TILEMAXSIM_KERNEL_DEFINES=$v TILEMAXSIM_CACHE_DIR=$dir LD_LIBRARY_PATH=$NVRTC13 target/release/examples/kernel_cache sm_90a
  fi | sed "s/^/$v: /"
  for f in "$dir"/*; do xz -T1 -6 -c "$f" > ".dev/kcache/$(basename "$f").xz"; done
  rm -rf "$dir"
}
variants=(default "$@")
for ((i = 0; i < ${#variants[@]}; i += 2)); do
  pids=()
  one "${variants[i]}" & pids+=($!)
  if ((i + 1 < ${#variants[@]})); then one "${variants[i + 1]}" & pids+=($!); fi
  for p in "${pids[@]}"; do wait "$p" || { echo "kernel_cache.sh: a compile failed" >&2; exit 1; }; done
done
ls -la .dev/kcache
