"""Index search on the GPU beside fast-plaid 1.7.0 (issue 28, item 5), in one run: a 200K-document
corpus (80 tokens each, d = 128, f16, unit-norm tokens around 8,192 centers: compress_peers.py's)
and 256 queries of 32 tokens, each drawn around the tokens of one document.

- exact top-10: `tilemaxsim search --device cuda` on the f16 corpus (the reference for recall);
- tilemaxsim: `index build --device cuda --no-exact` (residual nbits = 2) timed end to end, then
  `index search --device cuda` with IVF (every stage on the GPU) at several nprobe / ndocs,
  including fast-plaid's defaults (8 / 4096), and exhaustive, on the codes alone; IVF with the
  codes streamed (`--residency stream`); and IVF with its top 100 reranked exactly against the
  f16 corpus (`--rerank`); batches of 1 and 32;
- fast-plaid: `create(nbits=2)` (its defaults) timed with the GPU synchronized, then
  `search(top_k=10, n_ivf_probe=8, n_full_scores=4096)`: one call per query, and calls of 32.

For each: build seconds, index bytes, queries/s, latency per call (p50, p99), recall@10 against
exact search. Markdown on stdout; logs under --work.
With --devices 0,1 also IVF (8 / 4096) and exhaustive search with the documents split over those GPUs.
With --only "fast-plaid's,exhaustive" only the searches whose label holds one of those.
With --seeds 0,1,2 and --peer-seeds 42,1,2 one build (and its searches) per seed on each side,
and a summary of recall over the seeds; with --buckets lloyd-max,quantiles our builds with each
bucket fit (ours by default: Lloyd-Max; quantiles: colbert-ai's and fast-plaid's). With --xtr
also xtr-warp-rs 2.1.0 (WARP): `XTRWarp.create(nbits=2)`, searched with its own hyperparameters.
usage: python3 bench/index_peers.py --bin .dev/tilemaxsim --work /tmp/index-peers [--docs 200000] [--queries 256] [--devices 0,1]
       [--only LABELS] [--seeds 0,1,2] [--peer-seeds 42,1,2] [--kmeans-iters 4] [--batches 1,32]
       [--buckets lloyd-max,quantiles] [--xtr] [--xtr-nprobe 8,32]
"""

import argparse
import pathlib
import re
import shutil
import statistics
import subprocess
import time

import torch
from compress_peers import corpus
from safetensors.torch import save_file

# (label, flags) of our searches.
OURS = [
    ("IVF nprobe=8 ndocs=4096 (fast-plaid's)", ["--nprobe", "8", "--ndocs", "4096"]),
    ("IVF nprobe=4 ndocs=1024", ["--nprobe", "4", "--ndocs", "1024"]),
    ("IVF nprobe=2 ndocs=256", ["--nprobe", "2", "--ndocs", "256"]),
    ("exhaustive", ["--exhaustive"]),
    ("IVF nprobe=8 ndocs=4096, codes streamed", ["--nprobe", "8", "--ndocs", "4096", "--residency", "stream"]),
    (
        "IVF nprobe=8 ndocs=4096, top 100 reranked exactly",
        [
            "--nprobe",
            "8",
            "--ndocs",
            "4096",
            "--rerank-k",
            "100",
            "--rerank",
            "{corpus}",
        ],
    ),
]


def queries(x, docs, length, n, seed=1):
    """n queries of 32 tokens: each around 32 tokens (drawn with repeats) of one random document."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    which = torch.randint(0, docs, (n,), device="cuda", generator=g)
    pick = torch.randint(0, length, (n, 32), device="cuda", generator=g)
    rows = (which[:, None] * length + pick).reshape(-1)
    q = x[rows].float() + 0.05 * torch.randn(n * 32, x.shape[1], device="cuda", generator=g)
    return torch.nn.functional.normalize(q, dim=-1).reshape(n, 32, -1)


def read_run(path):
    run = {}
    for line in pathlib.Path(path).read_text().splitlines():
        qid, _, doc, rank, *_ = line.split()
        run.setdefault(qid, []).append((int(rank), doc))
    return {q: [d for _, d in sorted(v)] for q, v in run.items()}


def recall(got, exact, k=10):
    return statistics.mean(len(set(got.get(q, [])[:k]) & set(v[:k])) / min(k, len(v)) for q, v in exact.items())


def run(cmd, log):
    t = time.time()
    r = subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True)
    secs = time.time() - t
    pathlib.Path(log).write_text(r.stdout[-20000:] + "\n--- stderr\n" + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r, secs


def pct(sorted_secs, f):
    return sorted_secs[round((len(sorted_secs) - 1) * f)] * 1e3


def du(path):
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


def ours_rows(a, w, cpath, qpath, exact, ours, seed, fit):
    """Our index built with k-means seed `seed` and bucket fit `fit` (timed end to end), then
    each of `ours` searched at each batch size."""
    rows = []
    index = w / "index"
    shutil.rmtree(index, ignore_errors=True)
    r, build_s = run(
        [
            a.bin,
            "index",
            "build",
            "--corpus",
            cpath,
            "--no-exact",
            "--nbits",
            "2",
            "--seed",
            str(seed),
            "--buckets",
            fit,
            "--kmeans-iters",
            str(a.kmeans_iters),
            "--device",
            "cuda",
            "-o",
            index,
        ],
        w / f"build_{fit}_seed{seed}.log",
    )
    print(
        f"tilemaxsim build ({fit}, seed {seed}): {build_s:.2f} s wall; {r.stderr.strip().splitlines()[-1]}",
        flush=True,
    )
    tag = f", {fit} buckets" if "," in a.buckets else ""
    ours_bytes = du(index)
    for label, flags in ours:
        flags = [str(cpath) if f == "{corpus}" else f for f in flags]
        for batch in a.batches:
            name = re.sub(r"\W+", "_", label) + f"_b{batch}_{fit}_seed{seed}"
            out = w / f"{name}.trec"
            r, qps, p50, p99 = index_search(
                a,
                index,
                qpath,
                batch,
                flags if "--rerank" in flags else ["--rerank-k", "0", *flags],
                out,
                w / f"{name}.log",
            )
            notice = [line for line in r.stderr.splitlines() if line.startswith("notice")]
            rows.append(
                (
                    f"tilemaxsim {label}{tag}",
                    seed,
                    batch,
                    build_s,
                    ours_bytes,
                    qps,
                    p50,
                    p99,
                    recall(read_run(out), exact),
                    "; ".join(notice),
                )
            )
            emit(rows[-1])
    return rows


def index_search(a, index, qpath, batch, flags, out, log):
    """`tilemaxsim index search` on the GPU, top-10 of each query to `out`: the run's result,
    and its queries/s, p50 and p99 (ms a call)."""
    r, _ = run(
        [
            a.bin,
            "index",
            "search",
            "--index",
            index,
            "--queries",
            qpath,
            "-k",
            "10",
            "--device",
            "cuda",
            "--batch",
            str(batch),
            *flags,
            "--out",
            out,
        ],
        log,
    )
    qps = float(re.search(r"([\d.]+) queries/s", r.stderr).group(1))
    p50 = float(re.search(r"p50 ([\d.]+) ms", r.stderr).group(1))
    p99 = float(re.search(r"p99 ([\d.]+) ms", r.stderr).group(1))
    return r, qps, p50, p99


def peer_rows(a, w, x, q, exact, seed):
    """fast-plaid's index created with `seed` (timed with the GPU synchronized), then searched
    at its defaults (8 probes, 4096 full scores) at batches of 1 and 32."""
    from fast_plaid import search

    rows = []
    fp = w / "fast-plaid"
    shutil.rmtree(fp, ignore_errors=True)
    docs = list(x.view(a.docs, a.len, 128).unbind(0))
    torch.cuda.synchronize()
    t = time.time()
    plaid = search.FastPlaid(index=str(fp), device="cuda")
    plaid.create(documents_embeddings=docs, nbits=2, seed=seed)
    torch.cuda.synchronize()
    fp_build = time.time() - t
    fp_bytes = du(fp)
    print(f"fast-plaid build (seed {seed}): {fp_build:.2f} s", flush=True)
    del docs
    for batch in a.batches:
        plaid.search(queries_embeddings=q[:batch], top_k=10, show_progress=False)  # warm
        call = lambda part: plaid.search(  # noqa: E731
            queries_embeddings=part, top_k=10, n_ivf_probe=8, n_full_scores=4096, show_progress=False
        )
        rows.append(
            (
                "fast-plaid 1.7.0 nprobe=8 n_full_scores=4096",
                seed,
                batch,
                fp_build,
                fp_bytes,
                *timed_searches(a, q, batch, call, exact),
                "",
            )
        )
        emit(rows[-1])
    return rows


def xtr_rows(a, w, x, q, exact):
    """xtr-warp-rs's index (`XTRWarp.create(nbits=2)`, its other defaults) timed with the GPU
    synchronized, loaded on the GPU, then searched with its own hyperparameters (chosen from
    the index and k) at each batch size."""
    from xtr_warp import XTRWarp

    rows = []
    path = w / "xtr-warp"
    shutil.rmtree(path, ignore_errors=True)
    docs = list(x.view(a.docs, a.len, 128).unbind(0))
    torch.cuda.synchronize()
    t = time.time()
    warp = XTRWarp(index=str(path))
    warp.create(docs, device="cuda", nbits=2, show_progress=False)
    torch.cuda.synchronize()
    build = time.time() - t
    del docs
    warp.load(device="cuda")
    size = du(path)
    print(f"xtr-warp-rs build: {build:.2f} s", flush=True)
    settings = [("its search defaults", {})] + [
        (f"nprobe={n}, no centroid-score threshold", {"nprobe": n, "centroid_score_threshold": 0.0})
        for n in (int(v) for v in a.xtr_nprobe.split(",") if v)
    ]
    for (label, kw), batch in ((st, b) for st in settings for b in a.batches):
        warp.search(q[:batch], top_k=10, show_progress=False, **kw)  # warm
        call = lambda part: warp.search(part, top_k=10, show_progress=False, **kw)  # noqa: E731
        rows.append(
            (
                f"xtr-warp-rs 2.1.0 ({label})",
                42,
                batch,
                build,
                size,
                *timed_searches(a, q, batch, call, exact),
                "",
            )
        )
        emit(rows[-1])
    warp.free()
    return rows


def timed_searches(a, q, batch, search, exact):
    """A peer's `search(queries)` over every query in calls of `batch`, each call timed with the
    GPU synchronized: (queries/s, p50 ms, p99 ms, recall@10 against `exact`)."""
    lat, got = [], {}
    t0 = time.time()
    for s in range(0, a.queries, batch):
        torch.cuda.synchronize()
        t = time.perf_counter()
        res = search(q[s : s + batch])
        torch.cuda.synchronize()
        lat.append(time.perf_counter() - t)
        for i, hits in enumerate(res):
            got[str(s + i)] = [str(d) for d, _ in hits]
    total = time.time() - t0
    lat.sort()
    return a.queries / total, pct(lat, 0.5), pct(lat, 0.99), recall(got, exact)


def emit(row):
    """One row as it is measured (the table at the end repeats it)."""
    name, seed, batch, _b, _size, qps, p50, _p99, rec, _note = row
    print(f"  {name}, seed {seed}, batch {batch}: {qps:.1f} queries/s, p50 {p50:.2f} ms, recall {rec:.4f}", flush=True)


def summary(rows):
    """Per search and batch over the seeds: recall mean, min, max; queries/s and build median."""
    groups = {}
    for name, _seed, batch, b, _size, qps, _p50, _p99, rec, _note in rows:
        groups.setdefault((name, batch), []).append((rec, qps, b))
    print("\n| search | batch | seeds | recall@10 mean | min | max | queries/s (median) | build s (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (name, batch), v in groups.items():
        recs = [r for r, _, _ in v]
        print(
            f"| {name} | {batch} | {len(v)} | {statistics.mean(recs):.4f} | {min(recs):.4f} | {max(recs):.4f} "
            f"| {statistics.median(q for _, q, _ in v):.1f} | {statistics.median(b for _, _, b in v):.2f} |"
        )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--work", default="/tmp/index-peers")
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--len", type=int, default=80)
    p.add_argument("--queries", type=int, default=256)
    p.add_argument("--skip-peer", action="store_true")
    p.add_argument("--seeds", default="0", help="our k-means seeds, one build each (comma-separated)")
    p.add_argument("--peer-seeds", default="42", help="fast-plaid's seeds, one create each (its default 42)")
    p.add_argument("--kmeans-iters", type=int, default=4, help="our Lloyd iterations (both default to 4)")
    p.add_argument(
        "--buckets",
        default="lloyd-max",
        help="our residual bucket fits, one build each (comma-separated: lloyd-max, quantiles)",
    )
    p.add_argument("--batches", default="1,32", help="search batch sizes (comma-separated)")
    p.add_argument("--xtr", action="store_true", help="also xtr-warp-rs 2.1.0 (create nbits=2, its search defaults)")
    p.add_argument(
        "--xtr-nprobe", default="", help="with --xtr, also these nprobe (comma-separated), no centroid-score threshold"
    )
    p.add_argument("--only", help="our searches whose label contains one of these (comma-separated)")
    p.add_argument(
        "--devices",
        help="also search with the index's documents split over these GPUs (e.g. 0,1)",
    )
    a = p.parse_args()
    a.batches = [int(b) for b in a.batches.split(",")]
    ours = [r for r in OURS if not a.only or any(k in r[0] for k in a.only.split(","))]
    if a.devices:
        ours += [
            (f"{label} on GPUs {a.devices}", [*flags, "--devices", a.devices])
            for label, flags in OURS
            if "--rerank" not in flags and label.startswith(("IVF nprobe=8", "exhaustive"))
        ]
    w = pathlib.Path(a.work)
    w.mkdir(parents=True, exist_ok=True)
    x = corpus(a.docs, a.len, 128)
    q = queries(x, a.docs, a.len, a.queries)
    cpath, qpath = w / "corpus.safetensors", w / "queries.safetensors"
    save_file(
        {
            "embeddings": x.cpu(),
            "offsets": torch.arange(0, x.shape[0] + 1, a.len, dtype=torch.int64),
        },
        str(cpath),
    )
    save_file(
        {
            "embeddings": q.reshape(-1, 128).cpu(),
            "offsets": torch.arange(0, a.queries * 32 + 1, 32, dtype=torch.int64),
        },
        str(qpath),
    )
    print(
        f"corpus: {a.docs} documents x {a.len} tokens, d = 128, f16 ({cpath.stat().st_size / 1e9:.2f} GB); "
        f"{a.queries} queries x 32 tokens\n"
    )

    run(
        [
            a.bin,
            "search",
            "--corpus",
            cpath,
            "--queries",
            qpath,
            "-k",
            "10",
            "--device",
            "cuda",
            "--out",
            w / "exact.trec",
        ],
        w / "exact.log",
    )
    exact = read_run(w / "exact.trec")

    rows = []
    for fit in a.buckets.split(","):
        for seed in [int(v) for v in a.seeds.split(",") if v]:  # --seeds "": none of ours
            rows += ours_rows(a, w, cpath, qpath, exact, ours, seed, fit)
    if not a.skip_peer:
        for seed in [int(v) for v in a.peer_seeds.split(",")]:
            rows += peer_rows(a, w, x, q, exact, seed)
    if a.xtr:
        rows += xtr_rows(a, w, x, q, exact)

    print(
        "\n| search | seed | batch | build s | index MB | queries/s | p50 ms (a call) | p99 ms | recall@10 vs exact | notes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, seed, batch, b, size, qps, p50, p99, rec, note in rows:
        print(
            f"| {name} | {seed} | {batch} | {b:.2f} | {size / 1e6:.0f} | {qps:.1f} | {p50:.2f} | {p99:.2f} | {rec:.4f} | {note} |"
        )
    summary(rows)


if __name__ == "__main__":
    main()
