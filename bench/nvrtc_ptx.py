"""The repository's kernel source (as compile.rs assembles it) compiled by NVRTC to PTX, with
the same options and extra -D defines: python3 bench/nvrtc_ptx.py REPO ARCH OUT.ptx [NAME=VALUE ...].
Uses the libnvrtc of the nvidia-cuda-nvrtc-cu12 wheel installed beside this python."""
import ctypes, glob, os, sys

import nvidia.cuda_nvrtc

repo, arch, out, defines = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
k = os.path.join(repo, "crates/tilemaxsim/kernels")
def source(name, seen):
    """kernels/all.cu with each `#include "name"` replaced by that file, once (as compile.rs does)."""
    if name in seen:
        return ""
    seen.add(name)
    out = []
    for line in open(os.path.join(k, name)).read().splitlines():
        s = line.strip()
        if s.startswith('#include "') and s.endswith('"'):
            out.append(source(s[len('#include "'):-1], seen))
        elif s != "#pragma once":
            out.append(line + "\n")
    return "".join(out)
src = source("all.cu", set())
lib = ctypes.CDLL(sorted(glob.glob(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib", "libnvrtc.so*")))[0])
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
opts = [f"--gpu-architecture={arch}", "--std=c++17", "-default-device", "--fmad=true"] + [f"-D{d}" for d in defines]
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
r = lib.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
if r != 0: print(log.value.decode()); sys.exit(1)
lib.nvrtcGetPTXSize(prog, ctypes.byref(n)); ptx = ctypes.create_string_buffer(n.value); lib.nvrtcGetPTX(prog, ptx)
open(out, "wb").write(ptx.value)
