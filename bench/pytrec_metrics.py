"""pytrec_eval's view of a TREC run, as JSON, for comparison with `tilemaxsim eval`.

Usage: python pytrec_metrics.py QRELS RUN

Prints {"queries": n, "mean": {...}, "per_query": {qid: {...}}} with the keys of
`tilemaxsim eval --json`: ndcg_10 (ndcg_cut_10), recall_10/100/1000, map, and mrr_10:
pytrec_eval's recip_rank on the run cut to its top 10 in trec_eval's order (score descending,
ties by docid descending). Means are plain means over the queries pytrec_eval returns.
Needs `pip install pytrec-eval-terrier`.
"""
import json
import sys

import pytrec_eval

MEASURES = {"ndcg_cut_10", "recall_10", "recall_100", "recall_1000", "map"}
KEYS = {"ndcg_cut_10": "ndcg_10", "recall_10": "recall_10", "recall_100": "recall_100",
        "recall_1000": "recall_1000", "map": "map"}


def read(path, fields, value):
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            assert len(p) == fields, f"{path}: {line!r}"
            out.setdefault(p[0], {})[p[2]] = value(p)
    return out


def top10(docs):
    # trec_eval's order: score descending, then docid descending (byte order = code point order).
    by_doc = sorted(docs.items(), key=lambda d: d[0], reverse=True)
    return dict(sorted(by_doc, key=lambda d: -d[1])[:10])


def main(qrels_path, run_path):
    qrels = read(qrels_path, 4, lambda p: int(p[3]))
    run = read(run_path, 6, lambda p: float(p[4]))
    full = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    cut = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
        {q: top10(d) for q, d in run.items()})
    per_query = {}
    for q, m in full.items():
        per_query[q] = {KEYS[k]: v for k, v in m.items()}
        per_query[q]["mrr_10"] = cut[q]["recip_rank"]
    keys = sorted(KEYS.values()) + ["mrr_10"]
    mean = {k: sum(m[k] for m in per_query.values()) / len(per_query) for k in keys}
    json.dump({"queries": len(per_query), "mean": mean, "per_query": per_query}, sys.stdout)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
