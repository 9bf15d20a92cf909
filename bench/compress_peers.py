"""Compression of a 16M-token corpus on the GPU beside fast-plaid's index build, one run
(issue 26, item 2): 200K documents x 80 tokens, d = 128, f16, unit-norm tokens drawn around
8192 random centers (clustered, as real token embeddings are), generated on the GPU.

- tilemaxsim: `corpus compress --codec residual --nbits 2 --device cuda` on the corpus written to
  a safetensors file, end to end (reads the file, checks it, trains, encodes, writes), twice;
  and the time it reports for training + encoding.
- fast-plaid 1.7.0: `FastPlaid(index, device="cuda").create(documents, nbits=2)` (its defaults:
  4 k-means iterations, at most 256 points per centroid) on the same tokens as a list of
  [80, 128] views of one CUDA tensor, timed with the GPU synchronized, twice (the first pays Triton's compile).

Both pick K = 2^floor(log2(16 sqrt(T))) = 32768 centroids.
usage: python3 bench/compress_peers.py --bin .dev/tilemaxsim --work /tmp/compress [--docs 200000 --len 80]
"""

import argparse
import pathlib
import re
import shutil
import subprocess
import time

import torch
from safetensors.torch import save_file


def corpus(docs, length, dim, seed=0, chunk=16_000_000):
    """docs x length unit f16 tokens on the GPU around 8,192 centers, made `chunk` tokens at a
    time (a corpus of at most `chunk` tokens draws the same numbers as one made at once)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    centers = torch.nn.functional.normalize(torch.randn(8192, dim, device="cuda", generator=g), dim=-1)
    n = docs * length
    out = torch.empty(n, dim, dtype=torch.float16, device="cuda")
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        which = torch.randint(0, 8192, (m,), device="cuda", generator=g)
        x = centers[which] + 0.08 * torch.randn(m, dim, device="cuda", generator=g)
        out[s : s + m] = torch.nn.functional.normalize(x, dim=-1).half()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--work", default="/tmp/compress")
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--len", type=int, default=80)
    a = p.parse_args()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    dim = 128
    x = corpus(a.docs, a.len, dim)
    tokens = x.shape[0]
    path = work / "synth16m.safetensors"
    t = time.time()
    save_file({"embeddings": x.cpu(), "offsets": torch.arange(0, tokens + 1, a.len, dtype=torch.int64)}, str(path))
    print(f"corpus: {a.docs} documents x {a.len} tokens = {tokens} tokens, d = {dim}, f16 "
          f"({path.stat().st_size / 1e9:.2f} GB, written in {time.time() - t:.1f} s)")

    for run in (1, 2):
        out = work / "synth16m.r2.safetensors"
        t = time.time()
        r = subprocess.run([a.bin, "corpus", "compress", "--corpus", str(path), "--codec", "residual", "--nbits", "2",
                            "--device", "cuda", "-o", str(out)], capture_output=True, text=True)
        wall = time.time() - t
        if r.returncode != 0:
            print(r.stderr)
            raise SystemExit("tilemaxsim compress failed")
        inner = re.search(r"compressed on \S+ in ([\d.]+) s \((.*)\)", r.stderr)
        k = re.search(r"K = (\d+)", r.stderr)
        print(f"tilemaxsim run {run}: {wall:.2f} s end to end, {inner.group(1)} s check + train + encode "
              f"({inner.group(2)}), K = {k.group(1) if k else '?'}, {out.stat().st_size / 1e6:.0f} MB")

    try:
        from fast_plaid import search
    except Exception as e:  # noqa: BLE001 - report and go on: the peer is optional here
        print(f"fast-plaid not importable: {e!r}")
        return
    docs = list(x.view(a.docs, a.len, dim))  # create() takes a list of [len, d] tensors
    for run in (1, 2):
        index = work / "fastplaid"
        shutil.rmtree(index, ignore_errors=True)
        torch.cuda.synchronize()
        t = time.time()
        search.FastPlaid(index=str(index), device="cuda").create(documents_embeddings=docs, nbits=2)
        torch.cuda.synchronize()
        size = sum(f.stat().st_size for f in index.rglob("*") if f.is_file())
        print(f"fast-plaid run {run}: {time.time() - t:.2f} s create, {size / 1e6:.0f} MB on disk")


if __name__ == "__main__":
    main()
