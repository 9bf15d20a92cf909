"""MS MARCO scale beside fast-plaid 1.7.0 (issue 28, item 5), from the same f16 tokens on both
sides: 8.8M documents of MS MARCO passage lengths (msmarco_scale.py's draw: mean about 66
tokens, 8 to 180; about 582M tokens, 149 GB in f16), d = 128, a clustered mixture generated on
the GPU (msmarco_scale.py's 262,144 centres in groups of 64, each document's tokens mostly from
its topic's group, each token its centre plus Gaussian noise, unit norm). 256 queries of 32
tokens, each around the tokens of one document.

It needs a machine with the corpus's 149 GB in host memory twice over (fast-plaid's `create`
takes the documents as a list of CPU tensors; here they are views of the memory-mapped file):
nvidia-h200-x4 (512 GB). The work runs in three phases, so that each fits one device call
while the machine stays warm between them:

- `prepare`: the corpus written to /dev/shm where it has room (else under --work), the queries; our `index build
  --device cuda --no-exact` (nbits 2) on the first GPU, timed end to end, while the exact top-10
  (`tilemaxsim search --devices`, the documents split over the other GPUs: the recall
  reference) runs beside it, which can only slow our build; then `peer` started in the
  background, alone on the machine.
- `peer`: fast-plaid's `create(nbits=2)` with its defaults (timed with the GPU synchronized),
  then `search(top_k=10, n_ivf_probe=8, n_full_scores=4096)` in calls of 1 and of 32 queries;
  its rows to peer.json.
- `finish`: waits for peer.json (--wait seconds; exit 3 while fast-plaid still runs; not with
  --without-peer), then our
  `index search` on the first GPU (IVF 8/4096, IVF 4/1024 and exhaustive, each at batches 1
  and 32; the batch-1 rows of the last two were added after the 2026-11-28 night run), each
  with the GPU memory it used at most, and the table with the ratios.

Each row: build seconds, index bytes, queries/s, p50/p99 ms a call, recall@10 against exact.
usage: python3 bench/msmarco_peers.py prepare|peer|finish --bin .dev/tilemaxsim --work /tmp/mm
       [--docs 8800000] [--devices 0,1,2,3] [--wait 560] [--without-peer]
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import torch
from index_peers import du, index_search, read_run, recall, run, timed_searches
from msmarco_scale import D, GROUP, centroids, lengths, run_watched

K, SIGMA, CHUNK = 262_144, 0.035, 500_000


def write_corpus(path, lens, seed, keep):
    """The f16 corpus (safetensors written by hand, chunk by chunk: offsets, then embeddings),
    made on the GPU: msmarco_scale.py's centres and topics, each token its centre plus noise;
    returns the tokens of the documents in `keep`."""
    n, t = len(lens), int(lens.sum())
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    header = {
        "offsets": {"dtype": "I64", "shape": [n + 1], "data_offsets": [0, 8 * (n + 1)]},
        "embeddings": {"dtype": "F16", "shape": [t, D], "data_offsets": [8 * (n + 1), 8 * (n + 1) + 2 * D * t]},
    }
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    rng = np.random.default_rng([seed, 2])
    c = torch.from_numpy(centroids(K, rng)).to(dev).float()
    groups = K // GROUP
    topic = np.minimum(rng.zipf(1.3, n) - 1, groups - 1)
    topic = torch.from_numpy((topic * 2654435761) % groups).to(dev)  # popular topics spread over the groups
    lens_d = torch.from_numpy(lens).to(dev)
    g = torch.Generator(device=dev).manual_seed(seed)
    kept = {}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + offsets.tobytes())
        for a in range(0, n, CHUNK):
            b = min(n, a + CHUNK)
            m = int(offsets[b] - offsets[a])
            # 80% of a document's tokens from its topic's group of 64 centres, 20% anywhere.
            ids = torch.repeat_interleave(topic[a:b], lens_d[a:b]) * GROUP
            ids += torch.randint(0, GROUP, (m,), device=dev, generator=g)
            anywhere = torch.rand(m, device=dev, generator=g) < 0.2
            ids = torch.where(anywhere, torch.randint(0, K, (m,), device=dev, generator=g), ids)
            x = c[ids] + SIGMA * torch.randn(m, D, device=dev, generator=g)
            x = torch.nn.functional.normalize(x, dim=-1).half().cpu()
            for j in keep[(keep >= a) & (keep < b)]:
                kept[int(j)] = x[offsets[j] - offsets[a] : offsets[j + 1] - offsets[a]].float()
            f.write(x.numpy().data)
    return kept


def write_queries(path, kept, seed):
    """32 tokens drawn (with repeats) from each kept document, plus noise, unit norm, f32."""
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    rows = []
    for j in sorted(kept):
        x = kept[j]
        pick = torch.randint(0, len(x), (32,), generator=g)
        rows.append(torch.nn.functional.normalize(x[pick] + 0.05 * torch.randn(32, D, generator=g), dim=-1))
    q = torch.cat(rows)
    save_file({"embeddings": q, "offsets": torch.arange(0, len(q) + 1, 32, dtype=torch.int64)}, str(path))


def corpus_path(w):
    """Where the corpus lies: /dev/shm when it has room for it (memory, where a write is not held
    back by the disk: on an H200 host, 149 GB took 201.6 s into the page cache of a disk), else
    under the work directory."""
    link = w / "corpus.safetensors"
    if not link.is_symlink() and not link.exists():
        shm = pathlib.Path("/dev/shm")
        if shm.is_dir() and shutil.disk_usage(shm).free > 160e9:
            link.symlink_to(shm / "tilemaxsim-msmarco-corpus.safetensors")
    return link.resolve()


def load_corpus(path):
    """The corpus file as a list of per-document views of one memory map (no copy)."""
    with open(path, "rb") as f:
        hlen = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(hlen))
    base = 8 + hlen
    n = header["offsets"]["shape"][0] - 1
    offsets = np.memmap(path, np.int64, "r", base, (n + 1,))
    t = header["embeddings"]["shape"][0]
    emb = np.memmap(path, np.float16, "r", base + header["embeddings"]["data_offsets"][0], (t, D))
    x = torch.from_numpy(emb)  # read-only memory: fast-plaid only reads it
    return list(torch.split(x, np.diff(offsets).tolist()))


def load_queries(path):
    from safetensors.torch import load_file

    q = load_file(str(path))["embeddings"]
    return q.reshape(-1, 32, D)


def prepare(a, w):
    rng = np.random.default_rng(a.seed)
    lens = lengths(a.docs, rng)
    keep = np.sort(rng.choice(a.docs, a.queries, replace=False))
    cpath, qpath = corpus_path(w), w / "queries.safetensors"
    t = time.time()
    kept = write_corpus(cpath, lens, a.seed, keep)
    write_queries(qpath, kept, a.seed)
    meta = {"docs": a.docs, "tokens": int(lens.sum()), "corpus_bytes": cpath.stat().st_size, "write_s": time.time() - t}
    print(f"corpus: {a.docs:,} documents, {meta['tokens']:,} tokens (mean {lens.mean():.1f}), f16 "
          f"{meta['corpus_bytes'] / 1e9:.1f} GB, written in {meta['write_s']:.1f} s; {a.queries} queries", flush=True)
    # The exact reference on the other GPUs while our build runs on the first: it can only slow
    # our build (the host's memory and cores are shared), never fast-plaid's, which runs alone.
    first, rest = a.devices.split(",")[0], ",".join(a.devices.split(",")[1:]) or a.devices
    gpus = ["--device", "cuda", "--devices", rest] if a.device == "cuda" else ["--device", a.device]
    exact = subprocess.Popen([a.bin, "search", "--corpus", cpath, "--queries", qpath, "-k", "10", *gpus,
                              "--out", w / "exact.trec"], stdout=subprocess.DEVNULL, stderr=open(w / "exact.log", "w"))
    index = w / "index"
    env = os.environ | {"CUDA_VISIBLE_DEVICES": first} if a.device == "cuda" else None
    t = time.time()
    r = subprocess.run([a.bin, "index", "build", "--corpus", cpath, "--no-exact", "--nbits", "2", "--device",
                        a.device, "-o", index], capture_output=True, text=True, env=env)
    build_s = time.time() - t
    (w / "build.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"index build failed: {r.stderr[-2000:]}")
    meta |= {"build_s": build_s, "index_bytes": du(index), "build_note": r.stderr.strip().splitlines()[-1]}
    print(f"tilemaxsim index build: {build_s:.1f} s wall, {meta['index_bytes'] / 1e9:.2f} GB; {meta['build_note']}",
          flush=True)
    (w / "meta.json").write_text(json.dumps(meta))
    if exact.wait() != 0:
        raise SystemExit(f"exact search failed: {(w / 'exact.log').read_text()[-2000:]}")
    print(f"exact top-10 on GPUs {rest}: done {time.time() - t:.1f} s after the build started", flush=True)
    log = open(w / "peer.log", "w")
    subprocess.Popen([sys.executable, __file__, "peer", "--work", str(w), "--queries", str(a.queries), "--device",
                      a.device],
                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    print("fast-plaid started in the background (peer.log), alone on the machine", flush=True)


def peer(a, w):
    from fast_plaid import search

    from importlib.metadata import version

    label = f"fast-plaid {version('fast-plaid')} nprobe=8 n_full_scores=4096"

    docs = load_corpus(corpus_path(w))
    q = load_queries(w / "queries.safetensors").to(a.device)
    exact = read_run(w / "exact.trec")
    if a.device != "cuda":  # a small trial here: timed_searches synchronizes a GPU
        torch.cuda.synchronize = lambda *_: None
    sync = torch.cuda.synchronize
    print(f"{len(docs):,} documents mapped", flush=True)
    sync()
    t = time.time()
    plaid = search.FastPlaid(index=str(w / "fast-plaid"), device=a.device)
    plaid.create(documents_embeddings=docs, nbits=2, seed=42)
    sync()
    build = time.time() - t
    size = du(w / "fast-plaid")
    print(f"fast-plaid create: {build:.1f} s, {size / 1e9:.2f} GB", flush=True)
    (w / "peer_build.json").write_text(json.dumps({"build_s": build, "index_bytes": size}))
    del docs
    rows = []
    for batch in (1, 32):
        plaid.search(queries_embeddings=q[:batch], top_k=10, n_ivf_probe=8, n_full_scores=4096, show_progress=False)
        call = lambda part: plaid.search(  # noqa: E731
            queries_embeddings=part, top_k=10, n_ivf_probe=8, n_full_scores=4096, show_progress=False
        )
        qps, p50, p99, rec = timed_searches(a, q, batch, call, exact)
        rows.append({"label": label, "batch": batch, "qps": qps,
                     "p50": p50, "p99": p99, "recall": rec})
        print(rows[-1], flush=True)
    (w / "peer.json").write_text(json.dumps({"build_s": build, "index_bytes": size, "rows": rows}))


def finish(a, w):
    t = time.time()
    while not a.without_peer and not (w / "peer.json").exists():
        tail = (w / "peer.log").read_text()[-2000:] if (w / "peer.log").exists() else ""
        if "Traceback" in tail:
            raise SystemExit(f"fast-plaid failed; peer.log ends:\n{tail}")
        if time.time() - t > a.wait:
            print(f"fast-plaid not done after {a.wait} s; peer.log ends:\n{tail}", flush=True)
            sys.exit(3)
        time.sleep(5)
    meta = json.loads((w / "meta.json").read_text())
    fp = json.loads((w / "peer.json").read_text()) if (w / "peer.json").exists() else {"rows": [], "build_s": 0}
    exact = read_run(w / "exact.trec")
    qpath, index = w / "queries.safetensors", w / "index"
    ours = [("IVF nprobe=8 ndocs=4096", 1, ["--nprobe", "8", "--ndocs", "4096"]),
            ("IVF nprobe=8 ndocs=4096", 32, ["--nprobe", "8", "--ndocs", "4096"]),
            ("IVF nprobe=4 ndocs=1024", 1, ["--nprobe", "4", "--ndocs", "1024"]),
            ("IVF nprobe=4 ndocs=1024", 32, ["--nprobe", "4", "--ndocs", "1024"]),
            ("exhaustive", 1, ["--exhaustive"]),
            ("exhaustive", 32, ["--exhaustive"])]
    rows = []
    for label, batch, flags in ours:
        name = re.sub(r"\W+", "_", label) + f"_b{batch}"
        out = w / f"{name}.trec"
        cmd = [a.bin, "index", "search", "--index", index, "--queries", qpath, "-k", "10", "--device", a.device,
               "--batch", str(batch), "--rerank-k", "0", *flags, "--out", out]
        r, _, gb = run_watched(cmd, w / f"{name}.log")
        qps = float(re.search(r"([\d.]+) queries/s", r.stderr).group(1))
        p50 = float(re.search(r"p50 ([\d.]+) ms", r.stderr).group(1))
        p99 = float(re.search(r"p99 ([\d.]+) ms", r.stderr).group(1))
        rows.append({"label": f"tilemaxsim {label}", "batch": batch, "qps": qps, "p50": p50, "p99": p99,
                     "recall": recall(read_run(out), exact), "gpu_gb": gb})
        print(rows[-1], flush=True)
    peer_qps = {r["batch"]: r["qps"] for r in fp["rows"]} or {1: float("nan"), 32: float("nan")}
    print(f"\ncorpus: {meta['docs']:,} documents, {meta['tokens']:,} tokens, f16 {meta['corpus_bytes'] / 1e9:.1f} GB\n")
    print("| search | batch | build s | index GB | queries/s | × fast-plaid | p50 ms | p99 ms | recall@10 vs exact "
          "| GPU GB at most |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['label']} | {r['batch']} | {meta['build_s']:.1f} | {meta['index_bytes'] / 1e9:.2f} | "
              f"{r['qps']:.1f} | {r['qps'] / peer_qps[r['batch']]:.2f} | {r['p50']:.2f} | {r['p99']:.2f} | "
              f"{r['recall']:.4f} | {r['gpu_gb']:.1f} |")
    for r in fp["rows"]:
        print(f"| {r['label']} | {r['batch']} | {fp['build_s']:.1f} | {fp['index_bytes'] / 1e9:.2f} | "
              f"{r['qps']:.1f} | 1.00 | {r['p50']:.2f} | {r['p99']:.2f} | {r['recall']:.4f} | |")
    if fp["rows"]:
        print(f"\nbuild: {fp['build_s'] / meta['build_s']:.2f}× faster than fast-plaid's create")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["prepare", "peer", "finish"])
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--work", default="/tmp/mm")
    p.add_argument("--docs", type=int, default=8_800_000)
    p.add_argument("--queries", type=int, default=256)
    p.add_argument("--devices", default="0,1,2,3", help="GPUs of the exact search; fast-plaid and ours use the first")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--device", default="cuda", help="ours: cuda (the machine's GPUs), or cpu for a small trial here")
    p.add_argument("--wait", type=float, default=560, help="finish: seconds to wait for fast-plaid")
    p.add_argument("--without-peer", action="store_true", help="finish: our rows without waiting for fast-plaid's")
    a = p.parse_args()
    a.bin = str(pathlib.Path(a.bin).resolve())
    w = pathlib.Path(a.work)
    w.mkdir(parents=True, exist_ok=True)
    {"prepare": prepare, "peer": peer, "finish": finish}[a.phase](a, w)


if __name__ == "__main__":
    main()
