"""Index search on Cranfield (issue 28): build an index directory (`tilemaxsim index build`,
residual nbits=2, the exact tokens kept), then search it with IVF at several nprobe / ndocs and
exhaustively, each with and without the exact second stage, and report for each: queries/s and
per-query latency (p50, p99; `index search --batch 1`), recall@10 and @100 against the float64
reference ranking (`ref_run.trec`), and nDCG@10 (trec_eval's, from `tilemaxsim eval`). Plain
Python 3; needs the release binary.

With --fast-plaid (on a GPU machine with fast-plaid 1.7.0 importable), also fast-plaid's index of
the same corpus (nbits=2, its defaults) searched one query at a time (top 100, n_ivf_probe=8,
n_full_scores=4096), with the same measures.

usage: python3 bench/index_quality.py [--bin target/release/tilemaxsim] [--data ../shared/data/cranfield]
           [--work /tmp/index-quality] [--device cpu] [--reuse] [--fast-plaid]
Writes a markdown table on stdout (the build and search logs under --work).
"""

import argparse
import pathlib
import re
import shutil

from codec_quality import read_run, recall, run

# (label, flags): IVF at the index's defaults and around them, and exhaustive.
CASES = [
    ("IVF nprobe=1 ndocs=64", ["--nprobe", "1", "--ndocs", "64"]),
    ("IVF nprobe=2 ndocs=128", ["--nprobe", "2", "--ndocs", "128"]),
    ("IVF nprobe=4 ndocs=256", ["--nprobe", "4", "--ndocs", "256"]),
    ("IVF defaults", []),
    ("IVF nprobe=16 ndocs=512", ["--nprobe", "16", "--ndocs", "512"]),
    ("exhaustive", ["--exhaustive"]),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/tilemaxsim")
    p.add_argument("--data", default="../shared/data/cranfield")
    p.add_argument("--work", default="/tmp/index-quality")
    p.add_argument("--device", default="cpu")
    p.add_argument("--reuse", action="store_true", help="search the index already in --work")
    p.add_argument("--fast-plaid", action="store_true", help="also fast-plaid 1.7.0's index (needs a GPU)")
    a = p.parse_args()
    d, w = pathlib.Path(a.data), pathlib.Path(a.work)
    index = w / "index"
    if not (a.reuse and (index / "index.json").exists()):
        shutil.rmtree(index, ignore_errors=True)
        w.mkdir(parents=True, exist_ok=True)
        r, secs = run([a.bin, "index", "build", "--corpus", d / "corpus.safetensors", "--doc-ids",
                       d / "doc_ids.txt", "--device", a.device, "-o", index], w / "build.log")
        print(f"build: {secs:.2f} s wall; {r.stderr.strip().splitlines()[-1]}")
    exact = read_run(d / "ref_run.trec")
    common = ["--index", index, "--queries", d / "queries.safetensors", "--query-ids", d / "query_ids.txt",
              "-k", "100", "--device", a.device, "--batch", "1"]
    print("| search | exact rerank | queries/s | p50 ms | p99 ms | recall@10 vs exact | recall@100 vs exact | nDCG@10 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, flags in CASES:
        for rerank in ("0", None):
            extra = ["--rerank-k", rerank] if rerank else []
            name = re.sub(r"\W+", "_", label) + ("" if rerank else "_rerank")
            out = w / f"{name}.trec"
            r, _ = run([a.bin, "index", "search", *common, *flags, *extra, "--out", out], w / f"{name}.log")
            qps = float(re.search(r"([\d.]+) queries/s", r.stderr).group(1))
            p50 = float(re.search(r"p50 ([\d.]+) ms", r.stderr).group(1))
            p99 = float(re.search(r"p99 ([\d.]+) ms", r.stderr).group(1))
            ev, _ = run([a.bin, "eval", "--qrels", d / "qrels.txt", "--run", out], w / f"{name}.eval.log")
            ndcg = float(next(l.split()[1] for l in ev.stdout.splitlines() if l.startswith("all")))
            got = read_run(out)
            print(f"| {label} | {'no' if rerank else 'top-k′ (index default)'} | {qps:.1f} | {p50:.2f} | {p99:.2f} | "
                  f"{recall(got, exact, 10):.4f} | {recall(got, exact, 100):.4f} | {ndcg:.4f} |")
    if a.fast_plaid:
        fast_plaid_row(a, d, w, exact)


def fast_plaid_row(a, d, w, exact):
    """fast-plaid's index of the corpus, searched query by query, as a row of the table."""
    import statistics
    import time

    import torch
    from fast_plaid import search
    from safetensors.torch import load_file

    c = load_file(str(d / "corpus.safetensors"))
    emb, off = c["embeddings"], c["offsets"].tolist()
    docs = [emb[off[j] : off[j + 1]].to("cuda") for j in range(len(off) - 1)]
    q = load_file(str(d / "queries.safetensors"))
    qe, qo = q["embeddings"], q["offsets"].tolist()
    qids = (d / "query_ids.txt").read_text().split()
    dids = (d / "doc_ids.txt").read_text().split()
    fp = w / "fast-plaid"
    shutil.rmtree(fp, ignore_errors=True)
    torch.cuda.synchronize()
    t = time.time()
    plaid = search.FastPlaid(index=str(fp), device="cuda")
    plaid.create(documents_embeddings=docs, nbits=2)
    torch.cuda.synchronize()
    print(f"\nfast-plaid build: {time.time() - t:.2f} s")
    queries = [qe[qo[i] : qo[i + 1]].to("cuda")[None] for i in range(len(qo) - 1)]
    plaid.search(queries_embeddings=queries[0], top_k=100, show_progress=False)  # warm
    lat, lines = [], []
    for i, Q in enumerate(queries):
        torch.cuda.synchronize()
        t = time.perf_counter()
        res = plaid.search(queries_embeddings=Q, top_k=100, n_ivf_probe=8, n_full_scores=4096, show_progress=False)
        torch.cuda.synchronize()
        lat.append(time.perf_counter() - t)
        lines += [f"{qids[i]} Q0 {dids[doc]} {r + 1} {score} fast-plaid" for r, (doc, score) in enumerate(res[0])]
    out = w / "fast_plaid.trec"
    out.write_text("\n".join(lines) + "\n")
    ev, _ = run([a.bin, "eval", "--qrels", d / "qrels.txt", "--run", out], w / "fast_plaid.eval.log")
    ndcg = float(next(l.split()[1] for l in ev.stdout.splitlines() if l.startswith("all")))
    got = read_run(out)
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    print(f"| fast-plaid 1.7.0 nprobe=8 n_full_scores=4096 | no | {len(lat) / sum(lat):.1f} | "
          f"{statistics.median(lat) * 1e3:.2f} | {p99 * 1e3:.2f} | {recall(got, exact, 10):.4f} | "
          f"{recall(got, exact, 100):.4f} | {ndcg:.4f} |")


if __name__ == "__main__":
    main()
