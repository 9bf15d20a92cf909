"""Quality and IO of compressed corpora on Cranfield (issue 19, item 6): for each codec, with
and without exact reranking, bytes per token, CPU M docs/s of `tilemaxsim search`, recall@10
and @100 against the exact ranking, nDCG@10 (trec_eval's, from `tilemaxsim eval`) and its
delta from exact scoring. Plain Python 3, no packages; needs the release binary.

usage: python3 bench/codec_quality.py [--bin target/release/tilemaxsim] [--data ../shared/data/cranfield]
           [--work /tmp/codec-quality] [--rerank-k 200] [--codecs residual1,residual2,...] [--device cpu|cuda]
--device is where the corpora are compressed and searched (the rate column is that device's).
Writes a markdown table on stdout (and the compress/search logs under --work).
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

CODECS = {
    "residual1": ["--codec", "residual", "--nbits", "1"],
    "residual2": ["--codec", "residual", "--nbits", "2"],
    "residual4": ["--codec", "residual", "--nbits", "4"],
    "pq16": ["--codec", "pq", "--m", "16"],
    "pq32": ["--codec", "pq", "--m", "32"],
    "pq64": ["--codec", "pq", "--m", "64"],
    "int8": ["--codec", "int8"],
    "fp8": ["--codec", "fp8"],
}


def run(cmd, log):
    t = time.time()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    log.write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(f"failed ({log}): {' '.join(map(str, cmd))}\n{r.stderr}")
    return r, time.time() - t


def read_run(path):
    ranked = {}
    for line in open(path):
        qid, _, doc, rank, score, _ = line.split()
        ranked.setdefault(qid, []).append(doc)
    return ranked


def recall(got, exact, k):
    vals = [len(set(got[q][:k]) & set(exact[q][:k])) / len(exact[q][:k]) for q in exact]
    return sum(vals) / len(vals)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/tilemaxsim")
    p.add_argument("--data", default="../shared/data/cranfield")
    p.add_argument("--work", default="/tmp/codec-quality")
    p.add_argument("--rerank-k", type=int, default=200)
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--device", default="cpu")
    p.add_argument("--reuse", action="store_true", help="keep compressed files already in --work (re-time searches only)")
    a = p.parse_args()
    d, w = pathlib.Path(a.data), pathlib.Path(a.work)
    w.mkdir(parents=True, exist_ok=True)
    corpus = d / "corpus.safetensors"
    common = ["--queries", d / "queries.safetensors", "--query-ids", d / "query_ids.txt",
              "--doc-ids", d / "doc_ids.txt", "-k", "100", "--device", a.device]

    def search(corpus_path, name, extra=()):
        out = w / f"{name}.trec"
        r, _ = run([a.bin, "search", "--corpus", corpus_path, *common, *extra, "--out", out], w / f"{name}.search.log")
        rate = re.search(r"([\d.]+) ([KMG]?) ?docs/s", r.stderr)
        mult = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}[rate.group(2)] if rate else float("nan")
        ev, _ = run([a.bin, "eval", "--qrels", d / "qrels.txt", "--run", out], w / f"{name}.eval.log")
        ndcg = float(next(l.split()[1] for l in ev.stdout.splitlines() if l.startswith("all")))
        return read_run(out), float(rate.group(1)) * mult if rate else float("nan"), ndcg

    exact, exact_rate, exact_ndcg = search(corpus, "exact")
    rows = [("exact f16", 256, exact_rate, 1.0, 1.0, exact_ndcg, "", "")]
    for name in a.codecs.split(","):
        path = w / f"{name}.safetensors"
        if a.reuse and path.exists():
            r, _ = run([a.bin, "corpus", "info", path], w / f"{name}.info.log")
            secs = float(re.search(r"compressed (?:on \S+ )?in ([\d.]+) s", (w / f"{name}.compress.log").read_text()).group(1))
        else:
            r, _ = run([a.bin, "corpus", "compress", "--corpus", corpus, *CODECS[name], "--device", a.device, "-o", path],
                       w / f"{name}.compress.log")
            secs = float(re.search(r"compressed (?:on \S+ )?in ([\d.]+) s", r.stderr).group(1))
        bpt = int(re.search(r"(\d+) bytes per token", r.stdout).group(1))
        desc = re.search(r"codec\s+(.*)", r.stdout).group(1).split(" (")[0]
        for rr in (False, True):
            extra = ["--rerank", corpus, "--rerank-k", str(a.rerank_k)] if rr else []
            got, rate, ndcg = search(path, name + ("-rerank" if rr else ""), extra)
            label = desc + (f", exact rerank of top-{a.rerank_k}" if rr else "")
            rows.append((label, bpt, rate, recall(got, exact, 10), recall(got, exact, 100), ndcg,
                         f"{ndcg - exact_ndcg:+.4f}", f"{secs:.2f}" if not rr else ""))
    print(f"| codec | bytes/token (d=128) | {a.device} M docs/s | recall@10 vs exact | recall@100 vs exact | nDCG@10 | Δ nDCG@10 | compress s ({a.device}) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, bpt, rate, r10, r100, ndcg, delta, secs in rows:
        print(f"| {label} | {bpt} | {rate:.3f} | {r10:.4f} | {r100:.4f} | {ndcg:.4f} | {delta} | {secs} |")


if __name__ == "__main__":
    main()
