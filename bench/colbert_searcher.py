"""colbert-ai's own PLAID `Searcher` on a real index, unpatched and with `tilemaxsim.integrations.colbert`
patched in, on the GPU: the rankings of both (they must be the same) and the time of the scoring
stage (`IndexScorer.score_pids`, and within it the MaxSim call `colbert_score_packed`).

    python3 bench/colbert_searcher.py build --corpus C.safetensors -o DIR [--nbits 2]
    PYTHONPATH=/tmp/site python3 bench/colbert_searcher.py run --index DIR --queries Q.safetensors \
        [--candidates 100000] [--json F]

`build` writes a colbert-ai index directory with colbert-ai's own code: `ResidualCodec` (bucket
cutoffs and weights from a held-out sample, `CollectionIndexer._compute_avg_residual`), `IndexSaver`
(codes, residuals, doclens) and `CollectionIndexer._build_ivf` (the centroid → passage IVF). Only
the k-means is ours: colbert-ai calls faiss, absent here and on the device, so the centroids are 4
seeded Lloyd iterations (torch) on a token sample, normalized as colbert-ai normalizes them, with
colbert-ai's count, 2^floor(log2(16 sqrt(tokens))).

`run` loads that index with `Searcher` (the query encoder is not loaded: the queries are token
embeddings already, given to `Searcher.dense_search`) and searches every query at k=10 and
k=100, first unpatched, then patched. CUDA events time each `score_pids` and each
`colbert_score_packed`. `--candidates N` then builds a synthetic index of N documents on the
device (clustered tokens, 32..128 of them a document) with the same code and times the scoring of
N candidates for one query (`score_pids` with every pid: PLAID's decompression, then MaxSim), the
paper's "100K candidates" case, unpatched and patched, and `tilemaxsim.maxsim_residual` on the
index's own codes (no decompression), median of 20 after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no model is downloaded: the checkpoint is unused

import numpy as np
import torch
from safetensors.numpy import load_file


def load_tokens(path):
    t = load_file(path)
    return torch.from_numpy(t["embeddings"].astype(np.float32)), np.diff(t["offsets"]).tolist()


def kmeans(embs, k, seed, iters=4):
    g = torch.Generator().manual_seed(seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = min(len(embs), 64 * k)
    sample = embs[torch.randperm(len(embs), generator=g)[:n]].to(dev)
    cents = sample[torch.randperm(n, generator=g)[:k].to(dev)].clone()
    for _ in range(iters):
        assign = torch.cat([(c @ cents.T).argmax(1) for c in sample.split(1 << 15)])
        sums = torch.zeros_like(cents).index_add_(0, assign, sample)
        counts = torch.bincount(assign, minlength=k)[:, None]
        cents = torch.where(counts > 0, sums / counts.clamp(min=1), cents)
    return torch.nn.functional.normalize(cents, dim=-1).cpu()


def build(embs, doclens, path, nbits, seed=0, chunk_docs=25_000):
    """A colbert-ai index of `embs` [N, d] (documents of `doclens` tokens) in `path`."""
    from colbert.indexing.codecs.residual import ResidualCodec
    from colbert.indexing.collection_indexer import CollectionIndexer
    from colbert.indexing.index_saver import IndexSaver
    from colbert.infra.config import ColBERTConfig

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    n, dim = embs.shape
    k = int(2 ** np.floor(np.log2(16 * np.sqrt(n))))
    config = ColBERTConfig(nbits=nbits, dim=dim, index_path=str(path), checkpoint=str(path))
    use_gpu = torch.cuda.is_available()
    centroids = kmeans(embs, k, seed)
    g = torch.Generator().manual_seed(seed + 1)
    heldout = embs[torch.randperm(n, generator=g)[: min(50_000, max(1, n // 20))]]
    this = types.SimpleNamespace(config=config, use_gpu=use_gpu, verbose=0)
    cutoffs, weights, avg = CollectionIndexer._compute_avg_residual(this, centroids, heldout)  # type: ignore[arg-type]
    codec = ResidualCodec(config, centroids, avg, cutoffs, weights)
    saver = IndexSaver(config)
    saver.save_codec(codec)
    starts = np.concatenate([[0], np.cumsum(doclens)])
    chunks = [(i, min(i + chunk_docs, len(doclens))) for i in range(0, len(doclens), chunk_docs)]
    meta = {"config": config.export(), "num_chunks": len(chunks), "num_embeddings": n}
    (path / "plan.json").write_text(json.dumps(meta))
    with saver.thread():
        for c, (a, b) in enumerate(chunks):
            tokens = embs[starts[a] : starts[b]]
            saver.save_chunk(c, a, tokens.cuda().half() if use_gpu else tokens, doclens[a:b])
    ivf = types.SimpleNamespace(
        verbose=0,
        rank=0,
        config=config,
        num_chunks=len(chunks),
        num_embeddings=n,
        num_partitions=k,
        embedding_offsets=[int(starts[a]) for a, _ in chunks],
    )
    CollectionIndexer._build_ivf(ivf)  # type: ignore[arg-type]
    meta.update(num_partitions=k, avg_doclen=n / len(doclens))
    (path / "metadata.json").write_text(json.dumps(meta))
    return k


class NoEncoder:
    """Stands in for colbert's `Checkpoint` (a BERT): the queries come as embeddings. It loads
    what `ColBERT.__init__` loads besides the model: the CPU `segmented_maxsim` extension."""

    def __init__(self, *args, **kwargs):
        from colbert.modeling.colbert import ColBERT

        ColBERT.try_load_torch_extensions(torch.cuda.is_available())

    def cuda(self):
        return self


def searcher(index, ndocs):
    import colbert.searcher as cs
    from colbert.infra import ColBERTConfig, Run, RunConfig

    cs.Checkpoint = NoEncoder  # pyright: ignore[reportAttributeAccessIsNotModule]
    path = Path(index).resolve()
    with Run().context(RunConfig(nranks=1)):
        return cs.Searcher(
            index=path.name,
            index_root=str(path.parent),
            checkpoint=str(path),
            collection=[f"passage {i}" for i in range(ndocs)],
            config=ColBERTConfig(),
            verbose=0,
        )


class Clock:
    """CUDA events on the GPU, the wall clock on the CPU (a local trial run): milliseconds."""

    def __init__(self):
        self.cuda = torch.cuda.is_available()
        if self.cuda:
            self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.a.record()
        else:
            self.t = time.perf_counter()

    def ms(self):
        if not self.cuda:
            return (time.perf_counter() - self.t) * 1e3
        self.b.record()
        self.b.synchronize()
        return self.a.elapsed_time(self.b)


class Timed:
    """Wraps a function of `colbert.search.index_storage` (or a method): its time per call."""

    def __init__(self, owner, name):
        self.owner, self.name, self.inner = owner, name, getattr(owner, name)
        self.ms: list[float] = []
        setattr(owner, name, self)

    def __call__(self, *args, **kwargs):
        clock = Clock()
        out = self.inner(*args, **kwargs)
        self.ms.append(clock.ms())
        return out

    def restore(self):
        setattr(self.owner, self.name, self.inner)


def search_all(s, queries, k):
    import colbert.search.index_storage as storage

    score = Timed(s.ranker, "score_pids")
    maxsim = Timed(storage, "colbert_score_packed")
    runs = []
    t0 = time.perf_counter()
    for q in queries:
        s.config.configure(ncells=None, centroid_score_threshold=None, ndocs=None)
        pids, _, scores = s.dense_search(q[None], k=k)
        runs.append((list(pids), list(scores)))
    wall = time.perf_counter() - t0
    score.restore()
    maxsim.restore()
    return runs, {"score_pids_ms": sum(score.ms), "maxsim_ms": sum(maxsim.ms), "wall_s": wall}


def compare(base, other):
    same = sum(a[0] == b[0] for a, b in zip(base, other))
    diff = max((abs(x - y) for a, b in zip(base, other) for x, y in zip(a[1], b[1])), default=0.0)
    # Where the order differs, the scores' gap in the unpatched run at the first difference.
    gaps = []
    for a, b in zip(base, other):
        if a[0] != b[0]:
            i = next(i for i, (x, y) in enumerate(zip(a[0], b[0])) if x != y)
            gaps.append(abs(a[1][i] - a[1][i + 1]) if i + 1 < len(a[1]) else float("nan"))
    return {"identical": same, "queries": len(base), "max_score_diff": diff, "tie_gaps": gaps}


def median_ms(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    ms = []
    for _ in range(reps):
        clock = Clock()
        fn()
        ms.append(clock.ms())
    return statistics.median(ms)


def candidates_case(n, nbits, workdir, rows):
    """Scoring `n` candidates of a synthetic index, colbert unpatched / patched / fused codes."""
    import tilemaxsim
    from tilemaxsim.integrations import colbert as dropin

    g = torch.Generator(device="cuda").manual_seed(5)
    lens = torch.randint(32, 129, (n,), generator=g, device="cuda")
    centers = torch.nn.functional.normalize(torch.randn(4096, 128, device="cuda", generator=g), dim=-1)
    pick = torch.randint(0, 4096, (int(lens.sum()),), generator=g, device="cuda")
    noise = torch.randn(len(pick), 128, device="cuda", generator=g)
    embs = torch.nn.functional.normalize(centers[pick] + 0.35 * noise, dim=-1).half().cpu().float()
    del noise, pick
    t0 = time.perf_counter()
    k = build(embs, lens.tolist(), workdir, nbits)
    build_s = time.perf_counter() - t0
    s = searcher(workdir, n)
    Q = torch.nn.functional.normalize(torch.randn(1, 32, 128, device="cuda", generator=g), dim=-1).half()
    pids = torch.arange(n, dtype=torch.int32, device="cuda")
    config = s.config
    base = s.ranker.score_pids(config, Q, pids, None)[0]
    t_base = median_ms(lambda: s.ranker.score_pids(config, Q, pids, None))
    D_packed, D_lens = s.ranker.lookup_pids(pids)
    import colbert.search.index_storage as storage

    m_base = median_ms(lambda: storage.colbert_score_packed(Q, D_packed, D_lens, config))
    dropin.patch()
    try:
        ours = s.ranker.score_pids(config, Q, pids, None)[0]
        t_ours = median_ms(lambda: s.ranker.score_pids(config, Q, pids, None))
        m_ours = median_ms(lambda: storage.colbert_score_packed(Q, D_packed, D_lens, config))
    finally:
        dropin.unpatch()
    emb = s.ranker.embeddings
    cu = torch.zeros(n + 1, dtype=torch.int32, device="cuda")
    torch.cumsum(s.ranker.doclens.cuda(), 0, out=cu[1:])
    total = int(cu[-1])
    args = (
        emb.codes[:total].cuda().int(),
        emb.residuals[:total].cuda(),
        cu,
        s.ranker.codec.centroids.cuda().half(),
        s.ranker.codec.bucket_weights.cuda().half(),
        nbits,
    )
    fused = tilemaxsim.maxsim_residual(Q[0], *args)
    t_fused = median_ms(lambda: tilemaxsim.maxsim_residual(Q[0], *args, check=False))
    top = 100
    agree = lambda a: len(set(a.topk(top).indices.tolist()) & set(base.float().topk(top).indices.tolist()))
    rows.append(
        {
            "case": f"{n} candidates, one query of 32 tokens, nbits={nbits}, {total} tokens, K={k}",
            "build_s": build_s,
            "score_pids_ms": {"colbert": t_base, "patched": t_ours},
            "colbert_score_packed_ms": {"colbert": m_base, "patched": m_ours},
            "maxsim_residual_ms (codes, no decompression)": t_fused,
            "max_abs_diff_patched": (ours.float() - base.float()).abs().max().item(),
            "max_abs_diff_fused": (fused.float() - base.float()).abs().max().item(),
            f"top{top}_overlap": {"patched": agree(ours.float()), "fused": agree(fused.float())},
        }
    )


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--corpus", required=True)
    b.add_argument("-o", required=True)
    b.add_argument("--nbits", type=int, default=2)
    r = sub.add_parser("run")
    r.add_argument("--index", required=True)
    r.add_argument("--queries", required=True)
    r.add_argument("--candidates", type=int, default=0)
    r.add_argument("--nbits", type=int, default=2)
    r.add_argument("--json")
    a = ap.parse_args()
    if a.cmd == "build":
        embs, lens = load_tokens(a.corpus)
        k = build(embs, lens, a.o, a.nbits)
        print(f"built {a.o}: {len(lens)} documents, {len(embs)} tokens, {k} centroids")
        return
    from tilemaxsim.integrations import colbert as dropin

    q, qlens = load_tokens(a.queries)
    queries = list(torch.split(q, qlens))  # float32, as colbert's encoder gives them
    ndocs = len(json.loads(Path(a.index, "doclens.0.json").read_text()))
    chunk = 1
    while Path(a.index, f"doclens.{chunk}.json").is_file():
        ndocs += len(json.loads(Path(a.index, f"doclens.{chunk}.json").read_text()))
        chunk += 1
    s = searcher(a.index, ndocs)
    rows = []
    for k in (10, 100):
        search_all(s, queries[:5], k)  # warm-up (and colbert's extension builds)
        base, tb = search_all(s, queries, k)
        dropin.patch()
        try:
            search_all(s, queries[:5], k)
            ours, to = search_all(s, queries, k)
        finally:
            dropin.unpatch()
        row = {"case": f"Searcher.dense_search k={k}, {len(queries)} queries, {ndocs} documents"}
        row.update(compare(base, ours), colbert=tb, patched=to)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.candidates:
        candidates_case(a.candidates, a.nbits, Path("/tmp/colbert-synthetic"), rows)
        print(json.dumps(rows[-1]), flush=True)
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)"
    meta = {"gpu": gpu, "torch": torch.__version__, "argv": sys.argv}
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
