"""An MS MARCO-shaped index on one GPU (issue 28, item 5): 8.8M documents of lengths drawn like
MS MARCO passages' (a clipped log-normal, mean about 68 tokens, 8 to 180), about 600M tokens,
written straight as a residual-compressed corpus (nbits = 2, d = 128) without the 150 GB of f16
tokens it stands for. The tokens form a clustered mixture in the codes' own terms: K centroids
in groups of 64 around random centers; each document draws most of its tokens' centroids from
one group (its topic, Zipf-distributed over the groups) and the rest at random; the residuals
are random 2-bit codes. Queries: 32 tokens near the centroids of one random document's tokens.

Then: `tilemaxsim index build` of that file (the IVF over 600M tokens, the codes written), and
`index search --device cuda` with IVF (batches of 1 and 32) and exhaustively (batch 32) on the
codes resident on the GPU, then IVF with the codes streamed (`--residency stream`: only each
token's centroid id on the GPU, each batch's candidates uploaded); recall@10 of IVF against
exhaustive search on the same codes; the GPU memory each search process used at most
(`nvidia-smi`, polled every 200 ms).
fast-plaid is not run here: it builds from the f16 tokens (150 GB).

With --only-exhaustive: exhaustive search alone, at batches 32 and 1, and at batch 32 again with
each document in tiles of its own (TILEMAXSIM_PACK=0: maxsim_codec_wg_*, as before the batched codec
kernels took runs of documents cut into tiles across their boundaries), all against the first.
With --only-exhaustive --other BIN: batch 32 by --bin and by BIN in turn, twice, then batch 1 by
--bin: an A/B of two builds on the same index, recall against --bin's first run.
With --devices LIST (`0,1`): exhaustive and IVF (8/4096, 4/1024) at batches 32 and 1, each on one
GPU and then split over LIST (GPU memory is GPU 0's).

usage: python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco [--docs 8800000] [--centroids 262144]
       [--only-streamed | --only-exhaustive [--other BIN] | --devices LIST | --only-build]
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import time

import numpy as np

D, NBITS, GROUP = 128, 2, 64
ROW = D * NBITS // 8


def lengths(n, rng):
    """Passage lengths in tokens: log-normal around 60, clipped to 8..180 (mean about 68)."""
    return np.clip(np.round(rng.lognormal(np.log(60.0), 0.45, n)), 8, 180).astype(np.int64)


def centroids(k, rng):
    """K unit centroids in groups of 64 around random unit centers."""
    centers = rng.standard_normal((k // GROUP, D)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    c = np.repeat(centers, GROUP, axis=0) + 0.35 * rng.standard_normal((k, D)).astype(np.float32) / np.sqrt(D)
    return (c / np.linalg.norm(c, axis=1, keepdims=True)).astype(np.float16)


def token_ids(lens, k, rng):
    """Each document's tokens' centroids: 80% from its topic's group, 20% anywhere."""
    groups = k // GROUP
    topic = np.minimum(rng.zipf(1.3, len(lens)) - 1, groups - 1)
    topic = (topic * 2654435761) % groups  # spread the popular topics over the groups
    per_token = np.repeat(topic, lens)
    ids = per_token * GROUP + rng.integers(0, GROUP, len(per_token))
    anywhere = rng.random(len(per_token)) < 0.2
    ids[anywhere] = rng.integers(0, k, int(anywhere.sum()))
    return ids.astype(np.int32)


def write(path, cents, lens, k, seed, chunk_docs, keep_docs):
    """The compressed corpus file, streamed chunk by chunk (safetensors written by hand); returns
    the centroid ids of the documents in `keep_docs`."""
    n, t = len(lens), int(lens.sum())
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    small = [
        ("centroids", "F16", [k, D], cents.tobytes()),
        ("bucket_cutoffs", "F32", [3], np.array([-0.03, 0.0, 0.03], dtype=np.float32).tobytes()),
        ("bucket_weights", "F32", [4], np.array([-0.05, -0.015, 0.015, 0.05], dtype=np.float32).tobytes()),
        ("offsets", "I64", [n + 1], offsets.tobytes()),
    ]
    big = [("codes", "I32", [t], 4 * t), ("residuals", "U8", [t, ROW], ROW * t)]
    header = {"__metadata__": {"format": "tilemaxsim.compressed", "version": "1", "codec": "residual",
                               "dim": str(D), "nbits": str(NBITS)}}
    at = 0
    for name, dt, shape, data in small:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    for name, dt, shape, size in big:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + size]}
        at += size
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    kept = {}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in small:
            f.write(data)
        for a in range(0, n, chunk_docs):  # the centroid ids
            b = min(n, a + chunk_docs)
            ids = token_ids(lens[a:b], k, np.random.default_rng([seed, a]))
            for j in keep_docs[(keep_docs >= a) & (keep_docs < b)]:
                kept[int(j)] = ids[offsets[j] - offsets[a] : offsets[j + 1] - offsets[a]]
            f.write(ids.tobytes())
        rng = np.random.default_rng([seed, 1])
        step = 1 << 28
        for a in range(0, ROW * t, step):  # the residuals: random 2-bit codes
            f.write(rng.integers(0, 256, min(step, ROW * t - a), dtype=np.uint8).tobytes())
    return kept


def queries(kept, cents, rng, path):
    """32 tokens around the centroids of each kept document's tokens, unit norm, f32."""
    rows = []
    for j in sorted(kept):
        ids = rng.choice(kept[j], 32)
        q = cents[ids].astype(np.float32) + 0.05 * rng.standard_normal((32, D)).astype(np.float32)
        rows.append(q / np.linalg.norm(q, axis=1, keepdims=True))
    from safetensors.numpy import save_file

    emb = np.concatenate(rows)
    save_file({"embeddings": emb, "offsets": np.arange(0, len(emb) + 1, 32, dtype=np.int64)}, str(path))


def run(cmd, log):
    t = time.time()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    pathlib.Path(log).write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"failed ({log}): {' '.join(map(str, cmd))}\n{r.stderr[-3000:]}")
    return r, time.time() - t


def run_watched(cmd, log):
    """`run`, with the most GPU memory in use while it ran (GB; nvidia-smi every 200 ms, GPU 0)."""
    if shutil.which("nvidia-smi") is None:
        return (*run(cmd, log), 0.0)
    poll = subprocess.Popen(["nvidia-smi", "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0],
                             "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "200"],
                            stdout=subprocess.PIPE, text=True)
    try:
        r, wall = run(cmd, log)
    finally:
        poll.terminate()
    used = [int(x) for x in poll.communicate()[0].split() if x.isdigit()]
    return r, wall, max(used, default=0) / 1024


def read_run(path):
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        q, _, doc, _, _, _ = line.split()
        out.setdefault(q, []).append(doc)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--work", default="/tmp/msmarco")
    p.add_argument("--docs", type=int, default=8_800_000)
    p.add_argument("--centroids", type=int, default=262_144)
    p.add_argument("--queries", type=int, default=256)
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--only-streamed", action="store_true", help="exhaustive (the reference) and the streamed rows only")
    p.add_argument("--only-exhaustive", action="store_true", help="exhaustive rows only (batch 32, 32 unpacked, 1)")
    p.add_argument("--other", help="with --only-exhaustive: a second binary, batch 32 alternated with --bin's")
    p.add_argument("--only-build", action="store_true", help="the corpus and the index, no searches")
    p.add_argument("--devices", help="rows on one GPU, each followed by the same split over these GPUs (`0,1`)")
    a = p.parse_args()
    w = pathlib.Path(a.work)
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    rng = np.random.default_rng(a.seed)
    t = time.time()
    lens = lengths(a.docs, rng)
    cents = centroids(a.centroids, rng)
    keep = np.sort(rng.choice(a.docs, a.queries, replace=False))
    src = w / "corpus.safetensors"
    kept = write(src, cents, lens, a.centroids, a.seed, 200_000, keep)
    queries(kept, cents, rng, w / "queries.safetensors")
    print(f"corpus: {a.docs:,} documents, {int(lens.sum()):,} tokens (mean {lens.mean():.1f}, 8..180), "
          f"K = {a.centroids:,}, nbits 2: {src.stat().st_size / 1e9:.2f} GB written in {time.time() - t:.1f} s "
          f"(the f16 tokens would be {int(lens.sum()) * D * 2 / 1e9:.1f} GB)")
    index = w / "index"
    r, secs = run([a.bin, "index", "build", "--corpus", src, "--no-exact", "-o", index], w / "build.log")
    print(f"index build: {secs:.1f} s wall; {r.stderr.strip().splitlines()[-1]}")
    src.unlink()
    size = sum(f.stat().st_size for f in index.iterdir())
    print(f"index: {size / 1e9:.2f} GB on disk\n")
    if a.only_build:
        return
    print("| search | batch | queries/s | p50 ms (a call) | p99 ms | recall@10 vs exhaustive | GPU memory at most (GB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ivf8, ivf4 = ["--nprobe", "8", "--ndocs", "4096"], ["--nprobe", "4", "--ndocs", "1024"]
    stream = ["--residency", "stream"]
    rows = [("exhaustive", 32, ["--exhaustive"]),
            ("IVF nprobe=8 ndocs=4096", 32, ivf8),
            ("IVF nprobe=8 ndocs=4096", 1, ivf8),
            ("IVF nprobe=4 ndocs=1024", 32, ivf4),
            ("IVF nprobe=8 ndocs=4096, codes streamed", 32, ivf8 + stream),
            ("IVF nprobe=8 ndocs=4096, codes streamed", 1, ivf8 + stream),
            ("IVF nprobe=4 ndocs=1024, codes streamed", 32, ivf4 + stream)]
    rows = [r for r in rows if not a.only_streamed or "streamed" in r[0] or r[0] == "exhaustive"]
    if a.only_exhaustive:
        rows = [("exhaustive", 32, ["--exhaustive"]),
                ("exhaustive, a document's own tiles (TILEMAXSIM_PACK=0)", 32, ["--exhaustive"]),
                ("exhaustive", 1, ["--exhaustive"])]
        if a.other:
            other = f"exhaustive, {a.other}"
            rows = [("exhaustive", 32, ["--exhaustive"]), (other, 32, ["--exhaustive"])] * 2 + [rows[2]]
    if a.devices:
        rows = [("exhaustive", 32, ["--exhaustive"]), ("IVF nprobe=8 ndocs=4096", 32, ivf8),
                ("IVF nprobe=8 ndocs=4096", 1, ivf8), ("IVF nprobe=4 ndocs=1024", 32, ivf4),
                ("IVF nprobe=4 ndocs=1024", 1, ivf4)]
        rows = [r for row in rows for r in (row, (f"{row[0]}, --devices {a.devices}", row[1],
                                                   row[2] + ["--devices", a.devices]))]
    exact = None
    for label, batch, flags in rows:
        os.environ.pop("TILEMAXSIM_PACK", None)
        if "TILEMAXSIM_PACK=0" in label:
            os.environ["TILEMAXSIM_PACK"] = "0"
        name = re.sub(r"\W+", "_", label) + f"_b{batch}"
        out = w / f"{name}.trec"
        binary = a.other if a.other and label.endswith(a.other) else a.bin
        r, wall, gb = run_watched([binary, "index", "search", "--index", index, "--queries", w / "queries.safetensors",
                       "-k", "10", "--device", a.device, "--batch", str(batch), "--rerank-k", "0", *flags,
                       "--out", out], w / f"{name}.log")
        got = read_run(out)
        if exact is None:
            exact = got
        rec = sum(len(set(got[q][:10]) & set(exact[q][:10])) / 10 for q in exact) / len(exact)
        qps = float(re.search(r"([\d.]+) queries/s", r.stderr).group(1))
        p50 = float(re.search(r"p50 ([\d.]+) ms", r.stderr).group(1))
        p99 = float(re.search(r"p99 ([\d.]+) ms", r.stderr).group(1))
        print(f"| {label} | {batch} | {qps:.1f} | {p50:.2f} | {p99:.2f} | {rec:.4f} | {gb:.1f} |  ({wall:.1f} s wall "
              "with the upload)", flush=True)


if __name__ == "__main__":
    main()
