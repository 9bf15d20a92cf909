#!/usr/bin/env python3
"""Compare two TREC run files: same queries, same lengths, scores within 1e-4, and the same
document at every rank except where the reference has another document within --tie of the
score at that rank (then either order is exact up to rounding). Exit 1 on any difference.
The Cranfield check of GPU search: each GPU mode's `tilemaxsim search` run against ref_run.trec.
usage: python3 bench/compare_runs.py GOT.trec REFERENCE.trec [--tie 1e-6]
"""
import argparse, collections, sys

p = argparse.ArgumentParser()
p.add_argument("got")
p.add_argument("want")
p.add_argument("--tie", type=float, default=1e-6)
a = p.parse_args()


def read(path):
    run = collections.OrderedDict()
    for line in open(path):
        q, _, doc, rank, score, _ = line.split()
        run.setdefault(q, []).append((doc, float(score)))
    return run


got, want = read(a.got), read(a.want)
bad = []
if sorted(got) != sorted(want):
    bad.append(f"different queries: {len(got)} vs {len(want)}")
for q, w in want.items():
    g = got.get(q, [])
    if len(g) != len(w):
        bad.append(f"query {q}: {len(g)} hits vs {len(w)}")
        continue
    for i, (gh, wh) in enumerate(zip(g, w)):
        if abs(gh[1] - wh[1]) > 1e-4:
            bad.append(f"query {q} rank {i + 1}: score {gh[1]} vs {wh[1]}")
        elif gh[0] != wh[0] and not any(x[0] == gh[0] and abs(x[1] - wh[1]) <= a.tie for x in w):
            bad.append(f"query {q} rank {i + 1}: {gh[0]} instead of {wh[0]} (score {wh[1]})")
print(f"{a.got} vs {a.want}: {len(want)} queries, "
      + ("identical rankings (ties within %g aside)" % a.tie if not bad else f"{len(bad)} differences"))
for b in bad[:10]:
    print("  " + b)
sys.exit(1 if bad else 0)
