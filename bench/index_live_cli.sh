#!/usr/bin/env bash
# Live index search on the CPU through the CLI (Cranfield): an index built from the first 1,000
# documents with the other 400 added by `index add`, beside one built from all 1,400; the 225
# queries searched one at a time (`--batch 1`, IVF at the index's defaults, reranked exactly)
# by a base binary and a new one, ROUNDS times; wall seconds of each search, then recall@10 of
# each run against the float64 reference run (`ref_run.trec`).
# usage: [BASE=path/to/old/tilemaxsim] [NEW=target/release/tilemaxsim] [PY=python with numpy
#        and safetensors] [ROUNDS=2] bash bench/index_live_cli.sh   (work files in /tmp/index-live)
set -euo pipefail
cd "$(dirname "$0")/.."
C=${DATA:-../shared/data/cranfield}
NEW=$(realpath "${NEW:-target/release/tilemaxsim}")
BASE=$(realpath "${BASE:-$NEW}")
PY=${PY:-python3}
W=/tmp/index-live; rm -rf $W; mkdir -p $W
"$PY" - "$C" "$W" <<'PY'
import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file
src, work = sys.argv[1:]
f = safe_open(f"{src}/corpus.safetensors", "np")
e, o = f.get_tensor("embeddings"), f.get_tensor("offsets")
ids = [line.strip() for line in open(f"{src}/doc_ids.txt")]
for name, a, b in [("first", 0, 1000), ("rest", 1000, len(o) - 1)]:
    save_file({"embeddings": np.ascontiguousarray(e[o[a]:o[b]]), "offsets": (o[a:b + 1] - o[a]).astype(np.int64)},
              f"{work}/{name}.safetensors")
    open(f"{work}/{name}.ids", "w").write("\n".join(ids[a:b]) + "\n")
PY
"$NEW" index build --corpus $W/first.safetensors --doc-ids $W/first.ids -o $W/live --device cpu 2>&1 | tail -1
"$NEW" index add --index $W/live --corpus $W/rest.safetensors --ids $W/rest.ids 2>&1 | tail -1
"$NEW" index build --corpus $C/corpus.safetensors --doc-ids $C/doc_ids.txt -o $W/all --device cpu 2>&1 | tail -1
for round in $(seq "${ROUNDS:-2}"); do
  for b in base new; do
    bin=$NEW; [ $b = base ] && bin=$BASE
    for idx in live all; do
      s=$(date +%s.%N)
      "$bin" index search --index $W/$idx --queries $C/queries.safetensors --query-ids $C/query_ids.txt -k 10 \
        --device cpu --batch 1 --out $W/run-$b-$idx.trec 2>/dev/null
      e=$(date +%s.%N)
      echo "$b, $idx, round $round: $(awk "BEGIN {printf \"%.2f\", $e - $s}") s for the 225 queries"
    done
  done
done
"$PY" - "$C/ref_run.trec" $W/run-*.trec <<'PY'
import sys
def read(p):
    r = {}
    for line in open(p):
        q, _, d, rank, *_ = line.split()
        r.setdefault(q, []).append((int(rank), d))
    return {q: [d for _, d in sorted(v)] for q, v in r.items()}
ref = read(sys.argv[1])
for p in sys.argv[2:]:
    run = read(p)
    rs = [len(set(run.get(q, [])[:10]) & set(ref[q][:10])) / len(ref[q][:10]) for q in ref]
    print(f"{p.rsplit('/', 1)[1]}: recall@10 against exact {sum(rs) / len(rs):.4f} over {len(rs)} queries")
PY
