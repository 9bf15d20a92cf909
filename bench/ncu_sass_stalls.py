"""Where a kernel's warps stall, from ncu's SASS page with its stall samples.

The page comes from a report profiled with SourceCounters (and WarpStateStats):
    ncu --section SourceCounters --section WarpStateStats -o R ...
    ncu -i R.ncu-rep --page source --csv --print-source sass > R.csv
usage: python3 bench/ncu_sass_stalls.py R.csv [--top N]
Prints the share of samples by stall reason and by opcode, the N hottest instructions with
their top reasons, and samples by execution count (instructions run equally often are one code
site: a loop body, a per-task prologue), then shared-memory wavefronts against the ideal.
"""

import argparse
import collections
import csv

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    rows = list(csv.reader(open(a.csv)))
    head = rows[1]
    col = {h: i for i, h in enumerate(head)}
    data = [r for r in rows[2:] if len(r) >= len(head) - 1]

    def num(r, k):
        try:
            return float(r[col[k]].replace(",", ""))
        except (KeyError, ValueError):
            return 0.0

    def opcode(r):
        words = r[col["Source"]].split()
        if words and words[0].startswith("@"):
            words = words[1:]
        return words[0].split(".")[0] if words else ""

    stalls = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r, SAMPLES) for r in data) or 1.0
    executed = sum(num(r, EXECUTED) for r in data) or 1.0
    print(f"{rows[0][1] if len(rows[0]) > 1 else a.csv}: {total:.0f} samples, {executed:.0f} warp instructions")
    by_reason = collections.Counter({s: sum(num(r, s) for r in data) for s in stalls})
    for s, v in by_reason.most_common():
        if v:
            print(f"  {s:24s} {100 * v / total:5.1f}%")
    print(" by opcode (% of samples, % of instructions):")
    samples, count = collections.Counter(), collections.Counter()
    for r in data:
        samples[opcode(r)] += num(r, SAMPLES)
        count[opcode(r)] += num(r, EXECUTED)
    for op, v in samples.most_common(20):
        print(f"  {op:10s} {100 * v / total:5.1f}%  {100 * count[op] / executed:5.1f}%")
    print(f" the {a.top} hottest instructions (line, SASS, samples, top reasons):")
    index = {id(r): i for i, r in enumerate(data)}
    for r in sorted(data, key=lambda r: -num(r, SAMPLES))[: a.top]:
        top = sorted(((num(r, s), s) for s in stalls), reverse=True)[:3]
        why = " ".join(f"{s[6:]}={v:.0f}" for v, s in top if v)
        print(f"  {index[id(r)]:5d} {r[col['Source']][:56]:56s} {num(r, SAMPLES):7.0f} {why}")
    print(" by execution count (a code site: instructions, first line, % of samples):")
    site, size, first = collections.Counter(), collections.Counter(), {}
    for i, r in enumerate(data):
        e = round(num(r, EXECUTED) / 1e4) / 100
        site[e] += num(r, SAMPLES)
        size[e] += 1
        first.setdefault(e, i)
    for e, v in site.most_common(12):
        print(f"  {e:7.2f}M runs  {size[e]:4d} instructions  line {first[e]:5d}  {100 * v / total:5.1f}%")
    shared = sum(num(r, "L1 Wavefronts Shared") for r in data)
    ideal = sum(num(r, "L1 Wavefronts Shared Ideal") for r in data)
    print(f" shared-memory wavefronts {shared:.0f}, ideal {ideal:.0f}")


if __name__ == "__main__":
    main()
