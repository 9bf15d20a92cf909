"""Which kernels' SASS differs between two cubins (a refactor's check without a GPU): each
function's instructions from nvdisasm, addresses and comments dropped and branch labels
renumbered within the function, compared by name.
usage: NVDISASM=nvdisasm python3 bench/sass_diff.py A.cubin B.cubin   (xz-compressed ones too)
"""
import lzma
import os
import re
import subprocess
import sys
import tempfile

def functions(path):
    data = open(path, "rb").read()
    if path.endswith(".xz"):
        data = lzma.decompress(data)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(data)
        f.flush()
        text = subprocess.run([os.environ.get("NVDISASM", "nvdisasm"), "-c", f.name],
                              check=True, capture_output=True, text=True).stdout
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^//-+ \.text\.(\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = re.match(r"^\s*/\*[0-9a-f]+\*/\s*(.*?)\s*;", line)
        if name and m:
            out[name].append(m.group(1))
    # Branch labels are numbered across the whole cubin: renumber them within each function.
    for name, body in out.items():
        seen = {}
        out[name] = [re.sub(r"\.L_x_\d+", lambda l: "L%d" % seen.setdefault(l.group(0), len(seen)), i)
                     for i in body]
    return out

a, b = functions(sys.argv[1]), functions(sys.argv[2])
same = sorted(n for n in a if n in b and a[n] == b[n])
differ = sorted(n for n in a if n in b and a[n] != b[n])
print(f"{len(same)} functions with the same SASS, {len(differ)} differing, "
      f"{len(set(a) - set(b))} only in A, {len(set(b) - set(a))} only in B")
for n in differ:
    print(f"  differs: {n} ({len(a[n])} -> {len(b[n])} instructions)")
for n in sorted(set(a) ^ set(b)):
    print(f"  only in {'A' if n in a else 'B'}: {n}")
