#!/usr/bin/env bash
# The index build's GPU compression under kernel shapes (TILEMAXSIM_KERNEL_DEFINES: -D options
# of the NVRTC compile, e.g. WG_STAGES=3 for the assignment kernel's ring) against a base
# binary, one device call:
#  1. each shape's NVRTC compile, in parallel (a minute and a half each);
#  2. tests/gpu_compress.rs under each shape;
#  3. `index build --no-exact --device cuda` of one synthetic corpus (400K documents x 80
#     tokens, d = 128, f16: K = 65,536), the base binary and each shape in turn, twice: the
#     build's report (k-means and encode seconds), and each index's files against the base's
#     (tensors equal, or how many centroid ids differ).
# usage (GPU machine; .dev built by bench/device_build.sh and .dev/tilemaxsim-old.xz the base
# binary, carried): OUT=$OUT bash bench/compress_shapes.sh [SHAPE ...]
#   SHAPE: TILEMAXSIM_KERNEL_DEFINES, e.g. WG_STAGES=3 ("" for the defaults)
# The 2026-11-27 night run (bench/results/h100/build/assign_shapes_2026-11-27_night.log) timed
# three assignment kernels of a branch not kept: BENCHMARKS.md says what they were.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
[ -x .dev/tilemaxsim ] || xz -dkf .dev/tilemaxsim.xz
xz -dc .dev/tilemaxsim-old.xz > /tmp/base-bin && chmod +x /tmp/base-bin
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || { echo "usage: bash bench/compress_shapes.sh SHAPE ..." >&2; exit 2; }
w=/tmp/av; rm -rf $w; mkdir -p $w
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(nproc) CPUs"
  .dev/tilemaxsim corpus synth --docs 2000 --doc-len 80 --dim 128 --dtype f16 -o $w/tiny.safetensors >/dev/null 2>&1
  echo "== compiles, in parallel"
  s=$(date +%s)
  /tmp/base-bin index build --corpus $w/tiny.safetensors --device cuda --no-exact -o $w/warm-base >/dev/null 2>&1 &
  for v in "${shapes[@]}"; do
    TILEMAXSIM_KERNEL_DEFINES=$v .dev/tilemaxsim index build --corpus $w/tiny.safetensors --device cuda --no-exact -o "$w/warm-$v" >/dev/null 2>&1 &
  done
  wait
  echo "compiled in $(( $(date +%s) - s )) s"
  for v in "${shapes[@]}"; do
    echo "== gpu_compress $v"
    TILEMAXSIM_KERNEL_DEFINES=$v timeout 120 .dev/test-gpu_compress 2>&1 | grep -E "test result|panicked|token|rror" | head -8
  done
  .dev/tilemaxsim corpus synth --docs 400000 --doc-len 80 --dim 128 --dtype f16 --seed 3 -o $w/c.safetensors 2>&1 | tail -1
  for round in 1 2; do
    echo "== base, round $round"
    rm -rf $w/base; /tmp/base-bin index build --corpus $w/c.safetensors --device cuda --no-exact -o $w/base 2>&1 | grep -E "compressed" | tail -1
    for v in "${shapes[@]}"; do
      echo "== $v, round $round"
      rm -rf $w/i; TILEMAXSIM_KERNEL_DEFINES=$v .dev/tilemaxsim index build --corpus $w/c.safetensors --device cuda --no-exact -o $w/i 2>&1 | grep -E "compressed" | tail -1
      python3 - "$w/base" "$w/i" <<'PY'
import sys, numpy as np
from safetensors.numpy import load_file
for f in ("codes.safetensors", "ivf.safetensors"):
    a, b = load_file(f"{sys.argv[1]}/{f}"), load_file(f"{sys.argv[2]}/{f}")
    diff = [k for k in a if k not in b or a[k].shape != b[k].shape or not np.array_equal(a[k], b[k])]
    extra = ""
    if "codes" in diff and a["codes"].shape == b["codes"].shape:
        extra = f" ({int((a['codes'] != b['codes']).sum())} of {a['codes'].size} centroid ids differ)"
    print(f"  {f} equal to the base's: {not diff} {diff}{extra}")
PY
    done
  done
} 2>&1 | tee "$OUT/compress_shapes.log"
