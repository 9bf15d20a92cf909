#!/usr/bin/env bash
# Registers, spills and the instruction mix of one kernel, without a GPU: NVRTC (the venv's
# nvidia-cuda-nvrtc-cu12) compiles the kernel sources to PTX, ptxas (pip nvidia-cuda-nvcc-cu12)
# to a cubin, nvdisasm (pip nvidia-cuda-nvdisasm) lists its SASS.
#   bash bench/sass.sh maxsim_ring_f32_d128 [sm_90] [DEFINE=VALUE ...]
# Needs PYTHON (a python with nvidia-cuda-nvrtc-cu12), PTXAS and NVDISASM set, or on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
fun=$1; arch=${2:-sm_90}; shift $(( $# > 1 ? 2 : 1 ))
dir=$(mktemp -d)
"${PYTHON:-python3}" bench/nvrtc_ptx.py . "$arch" "$dir/k.ptx" "$@"
"${PTXAS:-ptxas}" -arch="$arch" -v -o "$dir/k.cubin" "$dir/k.ptx" 2>&1 | grep -A3 "entry function '$fun'" | tail -2
"${NVDISASM:-nvdisasm}" -c "$dir/k.cubin" 2>/dev/null |
  awk -v f="$fun" '$0 ~ ("^//-+ [.]text[.]" f " ") {on=1; next} on && /^\/\/-+ [.]text[.]/ {on=0} on' > "$dir/f.sass"
echo "instructions: $(grep -c '^ */\*[0-9a-f]*\*/' "$dir/f.sass")"
grep '^ */\*[0-9a-f]*\*/' "$dir/f.sass" | sed -E 's|^ */\*[0-9a-f]*\*/ *(@!?U?P[0-9T]+ +)?||; s/[ .;].*//' |
  sort | uniq -c | sort -rn | head -20
echo "SASS: $dir/f.sass"
