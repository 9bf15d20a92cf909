#!/usr/bin/env bash
# Device call 5 (nvidia-h200): where IVF search at batch 1 spends a query at 8.8M documents (issue
# 28: 85 queries/s, 10.8 ms p50, against the 5x-fast-plaid target's ~130). The MS MARCO-shaped
# index of bench/msmarco_scale.py (--only-exhaustive leaves it in /tmp/msmarco/index), then
# `index search --batch 1 --nprobe 8 --ndocs 4096` over 16 of its queries: timed alone, then
# under ncu (every kernel launch's name and duration), so the kernels' sum can be set against
# the wall time a query takes.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29e/call5.sh   (carry .dev, .devcache)
# (As run in call 5 the parse took ncu's thousands separators for digits and failed; call 6 ran
# the parse as it stands here on the same /tmp/ncu.csv, on the same warm machine: ncu_ivf.txt.)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
W=/tmp/msmarco
{
  device_header
  timeout 200 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-exhaustive | grep -E "corpus|index|exhaustive \| 32"
  python3 - $W <<'PY'
import sys
from safetensors.numpy import load_file, save_file
w = sys.argv[1]
q = load_file(f"{w}/queries.safetensors")
save_file({"embeddings": q["embeddings"][: 16 * 32], "offsets": q["offsets"][:17]}, f"{w}/q16.safetensors")
PY
  s() { .dev/tilemaxsim index search --index $W/index --queries $W/$1 -k 10 --device cuda --batch 1 --nprobe 8 --ndocs 4096 --rerank-k 0 --out /tmp/r.trec 2>&1 | tail -1; }
  echo "== IVF 8/4096 batch 1, 256 queries, then 16"; s queries.safetensors; s q16.safetensors
  echo "== ncu, 16 queries"
  timeout 150 ncu --clock-control none --section SpeedOfLight --csv --print-units base \
    .dev/tilemaxsim index search --index $W/index --queries $W/q16.safetensors -k 10 --device cuda --batch 1 --nprobe 8 \
    --ndocs 4096 --rerank-k 0 --out /tmp/r.trec > /tmp/ncu.csv 2>/dev/null
  python3 - <<'PY'
import csv, collections
rows = [r for r in csv.reader(open("/tmp/ncu.csv")) if len(r) > 10]
h = rows[0]; ix = {k: i for i, k in enumerate(h)}
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows[1:]:
    if r[ix["Metric Name"]] == "Duration":
        k = r[ix["Kernel Name"]].split("(")[0]
        t[k][0] += 1; t[k][1] += float(r[ix["Metric Value"]].replace(",", ""))  # (ns, with thousands separators)
tot = sum(v[1] for v in t.values())
print(f"kernels: {sum(v[0] for v in t.values())} launches, {tot / 1e6:.3f} ms in all, {tot / 16e6:.3f} ms a query")
for k, (n, ns) in sorted(t.items(), key=lambda x: -x[1][1])[:15]:
    print(f"  {k}: {n} launches, {ns / 1e6:.3f} ms ({100 * ns / tot:.1f}%)")
PY
  date -u +%T
} 2>&1 | tee "$OUT/call5.log"
