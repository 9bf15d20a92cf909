"""A streamed index build (issue 28, item 1): `tilemaxsim index build` of an exact f16 corpus
larger than the memory the build may use. The corpus file is written here chunk by chunk
(safetensors by hand, tokens from a clustered mixture: each document's tokens near one of 4,096
topic centers, unit norm), then built on the GPU inside a cgroup whose memory limit is below
the file's size, when this machine lets a cgroup be made; the build's peak resident memory is
sampled from /proc either way (anonymous memory apart from the mapped file's pages). Then IVF
and exhaustive search on the index, and IVF's recall@10 against exhaustive.

usage: python3 bench/stream_build.py --bin .dev/tilemaxsim --work /tmp/stream [--gb 40] [--cap-gb 12]
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import threading
import time

import numpy as np

D = 128
TOPICS = 4096


def lengths(n, rng):
    """MS MARCO passages' shape: log-normal around 60, clipped to 8..180 (mean about 66)."""
    return np.clip(np.round(rng.lognormal(np.log(60.0), 0.45, n)), 8, 180).astype(np.int64)


def tokens(lens, centers, seed):
    """f16 unit rows: each document's tokens are its topic's center plus noise (on the GPU when
    torch has one)."""
    try:
        import torch

        dev = "cuda" if torch.cuda.is_available() else "cpu"
        g = torch.Generator(device=dev).manual_seed(seed)
        c = torch.as_tensor(centers, device=dev)
        topic = torch.randint(0, TOPICS, (len(lens),), generator=g, device=dev)
        per = torch.repeat_interleave(topic, torch.as_tensor(lens, device=dev))
        x = c[per] + 0.6 * torch.randn((len(per), D), generator=g, device=dev) / D**0.5
        x = x / x.norm(dim=1, keepdim=True)
        return x.half().cpu().numpy()
    except ImportError:
        rng = np.random.default_rng(seed)
        per = np.repeat(rng.integers(0, TOPICS, len(lens)), lens)
        x = centers[per] + 0.6 * rng.standard_normal((len(per), D)).astype(np.float32) / np.sqrt(D)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)


def write_corpus(path, lens, centers, chunk_docs):
    """The corpus file (tilemaxsim's safetensors layout), its tokens streamed chunk by chunk."""
    t = int(lens.sum())
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    emb_bytes, off_bytes = t * D * 2, offsets.nbytes
    header = {
        "__metadata__": {"format": "tilemaxsim.corpus", "version": "1"},
        "embeddings": {"dtype": "F16", "shape": [t, D], "data_offsets": [0, emb_bytes]},
        "offsets": {"dtype": "I64", "shape": [len(offsets)], "data_offsets": [emb_bytes, emb_bytes + off_bytes]},
    }
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 16)  # the tokens start 16-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for i, start in enumerate(range(0, len(lens), chunk_docs)):
            f.write(tokens(lens[start : start + chunk_docs], centers, 1000 + i).tobytes())
        f.write(offsets.tobytes())
    return t


def make_cgroup(cap_bytes):
    """A cgroup v2 with memory.max = cap_bytes (and no swap), or None where none can be made."""
    root = pathlib.Path("/sys/fs/cgroup")
    cg = root / f"tms-stream-{os.getpid()}"
    try:
        ctl = (root / "cgroup.subtree_control").read_text()
        if "memory" not in ctl:
            (root / "cgroup.subtree_control").write_text("+memory")
        cg.mkdir()
        (cg / "memory.max").write_text(str(cap_bytes))
        if (cg / "memory.swap.max").exists():
            (cg / "memory.swap.max").write_text("0")
        return cg
    except OSError as e:
        print(f"no cgroup ({e}); the build runs uncapped, its peak memory sampled")
        return None


def sample(pid, peaks, stop):
    """Peak VmRSS, RssAnon and RssFile (kB) of `pid`, every 0.2 s."""
    while not stop.is_set():
        try:
            text = pathlib.Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            m = re.search(rf"^{k}:\s+(\d+) kB", text, re.M)
            if m:
                peaks[k] = max(peaks.get(k, 0), int(m.group(1)))
        time.sleep(0.2)


def run_measured(cmd, cgroup):
    """Run `cmd` (in `cgroup` when given), sampling its memory; returns (seconds, peaks, output)."""
    peaks, stop = {}, threading.Event()

    def enter():
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    t = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=enter)
    th = threading.Thread(target=sample, args=(p.pid, peaks, stop))
    th.start()
    out = p.communicate()[0]
    stop.set()
    th.join()
    if cgroup is not None and (cgroup / "memory.peak").exists():
        peaks["cgroup memory.peak kB"] = int((cgroup / "memory.peak").read_text()) // 1024
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{out[-3000:]}")
    return time.time() - t, peaks, out


def run_file(path):
    """{query: [doc, ...]} of a TREC run file, by rank."""
    hits = {}
    for line in open(path):
        q, _, doc, rank, *_ = line.split()
        hits.setdefault(q, []).append((int(rank), doc))
    return {q: [d for _, d in sorted(v)] for q, v in hits.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--gb", type=float, default=40.0, help="f16 tokens to write, GB")
    ap.add_argument("--cap-gb", type=float, default=12.0, help="the build's cgroup memory limit, GB")
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    work = pathlib.Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((TOPICS, D)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    n = int(a.gb * 1e9 / (66.2 * D * 2))
    lens = lengths(n, rng)
    corpus = work / "corpus.safetensors"
    t0 = time.time()
    t = write_corpus(corpus, lens, centers, chunk_docs=200_000)
    size = corpus.stat().st_size
    print(f"corpus: {n:,} documents, {t:,} tokens, d = {D}, f16: {size / 1e9:.2f} GB written in {time.time() - t0:.1f} s")
    print(f"host memory: {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 1e9:.1f} GB")
    cgroup = make_cgroup(int(a.cap_gb * 1e9))
    if cgroup is not None:
        print(f"build capped by cgroup {cgroup.name}: memory.max {a.cap_gb:.1f} GB, below the corpus's {size / 1e9:.1f} GB")
    index = work / "index"
    build = [a.bin, "index", "build", "--corpus", str(corpus), "-o", str(index), "--no-exact", "--device", a.device]
    secs, peaks, out = run_measured(build, cgroup)
    print(f"== {' '.join(build)}\n{out.strip()[-1500:]}")
    print(f"build: {secs:.1f} s wall; peaks (kB): {json.dumps(peaks)}")
    print(f"  peak anonymous memory {peaks.get('RssAnon', 0) / 1e6:.2f} GB against the corpus's {size / 1e9:.2f} GB")
    idx_bytes = sum(f.stat().st_size for f in index.iterdir())
    print(f"index: {idx_bytes / 1e9:.2f} GB on disk")
    # Queries: 32 tokens near one random document's topic center.
    qlens = np.full(a.queries, 32, dtype=np.int64)
    q = work / "queries.safetensors"
    write_corpus(q, qlens, centers, chunk_docs=a.queries)
    runs = {}
    for mode, extra in (("ivf", []), ("exhaustive", ["--exhaustive"])):
        out_run = work / f"{mode}.trec"
        cmd = [a.bin, "index", "search", "--index", str(index), "--queries", str(q), "-k", "10",
               "--out", str(out_run), "--device", a.device, "--rerank-k", "0", *extra]
        secs, peaks, out = run_measured(cmd, None)
        print(f"== {mode}: {secs:.1f} s wall (open, upload and search); {out.strip().splitlines()[-1] if out.strip() else ''}")
        runs[mode] = run_file(out_run)
    rec = np.mean([len(set(runs["ivf"].get(qq, [])) & set(v)) / len(v) for qq, v in runs["exhaustive"].items()])
    print(f"IVF recall@10 against exhaustive search on the same codes: {rec:.4f} over {len(runs['exhaustive'])} queries")
    if cgroup is not None:
        try:
            cgroup.rmdir()
        except OSError:
            pass


if __name__ == "__main__":
    main()
