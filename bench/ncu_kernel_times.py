"""Each kernel's launches and summed duration in an ncu CSV (`ncu --section SpeedOfLight --csv
--print-units base`), largest first, and the sum per query.
usage: python3 bench/ncu_kernel_times.py NCU.csv QUERIES"""

import collections
import csv
import sys

path, queries = sys.argv[1], int(sys.argv[2])
rows = [r for r in csv.reader(open(path)) if len(r) > 10]
if not rows:
    raise SystemExit(f"no kernels in {path}")
ix = {k: i for i, k in enumerate(rows[0])}
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows[1:]:
    if r[ix["Metric Name"]] == "Duration":
        k = r[ix["Kernel Name"]].split("(")[0]
        t[k][0] += 1
        t[k][1] += float(r[ix["Metric Value"]].replace(",", ""))  # ns, with thousands separators
tot = sum(v[1] for v in t.values())
print(f"kernels: {sum(v[0] for v in t.values())} launches, {tot / 1e6:.3f} ms in all, {tot / queries / 1e6:.3f} ms a query")
for k, (n, ns) in sorted(t.items(), key=lambda x: -x[1][1])[:15]:
    print(f"  {k}: {n} launches, {ns / 1e6:.3f} ms ({100 * ns / tot:.1f}%)")
