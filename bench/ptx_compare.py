"""Two PTX files of the kernels compared kernel by kernel, up to label numbering and register
names (both follow a kernel's position in the program, not its code), e.g. before and after a
move of the sources:
  usage: python3 bench/ptx_compare.py BEFORE.ptx AFTER.ptx
  (make each with: python3 bench/nvrtc_ptx.py REPO ARCH OUT.ptx, REPO a checkout of each commit)
Exits 1 and names the kernels whose instructions differ, or that only one file has."""
import re
import sys


def kernels(path):
    text = open(path).read()
    parts = re.split(r"(?m)^(?=(?:\.visible )?\.entry )", text)
    out = {}
    for part in parts[1:]:
        name = re.match(r"(?:\.visible )?\.entry (\w+)", part).group(1)
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", part)  # labels carry the function's index
        body = re.sub(r"%(r|rd|f|fd|p|rs|h|hh)\d+", r"%\1", body)  # register names
        out[name] = [l for l in body.splitlines() if not l.strip().startswith("// .globl")]
    return out


before, after = kernels(sys.argv[1]), kernels(sys.argv[2])
only = sorted(set(before) ^ set(after))
differ = sorted(k for k in set(before) & set(after) if before[k] != after[k])
print(f"{len(before)} kernels before, {len(after)} after; differing: {differ or 'none'}; in one file only: {only or 'none'}")
sys.exit(1 if differ or only else 0)
