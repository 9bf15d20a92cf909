"""Live index updates on Cranfield (issue 28), on the CPU: an index built from the first 1,000
documents, the other 400 added in batches of 100 (`Index.add`: encoded against the build's
centroids, fsync'ed), against an index built from all 1,400 at once. For each: the build and add
times, queries/s of the 225 queries one at a time (IVF with the index's defaults, reranked
exactly), and recall@10 against the float64 reference ranking (`ref_run.trec`). Then 100
documents deleted: how long that takes and that none of them comes back.

usage: python bench/index_updates.py [--data ../shared/data/cranfield] [--work /tmp/index-updates]
(with the tilemaxsim package and safetensors installed). Writes a markdown table on stdout.
"""

import argparse
import pathlib
import shutil
import time

from safetensors.numpy import load_file

import tilemaxsim


def read_run(path):
    ranked = {}
    for line in open(path):
        qid, _, doc, *_ = line.split()
        ranked.setdefault(qid, []).append(doc)
    return ranked


def recall(hits, ids, qids, exact, k=10):
    vals = []
    for q, h in zip(qids, hits):
        got = {ids[d] for d, _ in h[:k]}
        vals.append(len(got & set(exact[q][:k])) / len(exact[q][:k]))
    return sum(vals) / len(vals)


def timed_search(index, queries):
    index.search(queries[0], top_k=100)  # warm: the searcher is made once
    took, hits = [], []
    for q in queries:
        t = time.perf_counter()
        hits.append(index.search(q, top_k=100)[0])
        took.append(time.perf_counter() - t)
    took.sort()
    return hits, len(queries) / sum(took), took[len(took) // 2] * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="../shared/data/cranfield")
    p.add_argument("--work", default="/tmp/index-updates")
    a = p.parse_args()
    d, w = pathlib.Path(a.data), pathlib.Path(a.work)
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    c = load_file(str(d / "corpus.safetensors"))
    emb, off = c["embeddings"], c["offsets"]
    docs = [emb[off[j] : off[j + 1]] for j in range(len(off) - 1)]
    ids = [line.strip() for line in open(d / "doc_ids.txt")]
    q = load_file(str(d / "queries.safetensors"))
    queries = [q["embeddings"][q["offsets"][i] : q["offsets"][i + 1]] for i in range(len(q["offsets"]) - 1)]
    qids = [line.strip() for line in open(d / "query_ids.txt")]
    exact = read_run(d / "ref_run.trec")

    print("| index | build s | add s (4 × 100 documents) | queries/s | p50 ms | recall@10 vs exact |")
    print("|---|---:|---|---:|---:|---:|")
    t = time.perf_counter()
    whole = tilemaxsim.Index(w / "whole", device="cpu").create(documents_embeddings=docs, doc_ids=ids)
    build_whole = time.perf_counter() - t
    hits, qps, p50 = timed_search(whole, queries)
    r10 = recall(hits, ids, qids, exact)
    print(f"| built from all 1,400 | {build_whole:.2f} | | {qps:.1f} | {p50:.2f} | {r10:.4f} |")

    t = time.perf_counter()
    live = tilemaxsim.Index(w / "live", device="cpu").create(documents_embeddings=docs[:1000], doc_ids=ids[:1000])
    build_live = time.perf_counter() - t
    adds = []
    for start in range(1000, 1400, 100):
        t = time.perf_counter()
        live.add(docs[start : start + 100], doc_ids=ids[start : start + 100])
        adds.append(time.perf_counter() - t)
    hits, qps, p50 = timed_search(live, queries)
    add_s = ", ".join(f"{s:.3f}" for s in adds)
    print(
        f"| 1,000 built, 400 added | {build_live:.2f} | {add_s} | {qps:.1f} | {p50:.2f} | "
        f"{recall(hits, ids, qids, exact):.4f} |"
    )
    reopened = tilemaxsim.Index(w / "live", device="cpu")
    assert reopened.search(queries[0], top_k=100)[0] == hits[0], "the reopened index searches otherwise"

    gone = list(range(0, 1400, 14))
    t = time.perf_counter()
    n = live.delete(gone)
    delete_s = time.perf_counter() - t
    hits, qps, p50 = timed_search(live, queries)
    assert n == 100 and not any(d in set(gone) for h in hits for d, _ in h)
    print(
        f"\n100 documents deleted in {delete_s * 1e3:.1f} ms; after it {qps:.1f} queries/s "
        f"(p50 {p50:.2f} ms), none of them found"
    )


if __name__ == "__main__":
    main()
