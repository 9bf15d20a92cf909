"""Search within a subset (fast-plaid's and PyLate's `subset`) against what PyLate's
TileMaxSimIndex did before `Index.search(subset=...)`: every document scored on its codes and
every one rescored exactly, then the subset's kept. A synthetic index (unit tokens around 256
centres, d = 128) built on the CPU; 32 queries of 32 tokens, each with its own subset of S
random documents; median seconds per call of 32 queries over ROUNDS calls; the hits compared.
usage: python3 bench/subset_search.py [--docs 5000] [--subset 100] [--rounds 5] [--device cpu]
"""

import argparse
import statistics
import tempfile
import time

import numpy as np

import tilemaxsim


def unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=5000)
    p.add_argument("--subset", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    centres = unit(rng.standard_normal((256, 128)))
    docs = [unit(centres[rng.integers(0, 256, n)] + 0.3 * rng.standard_normal((n, 128))) for n in rng.integers(8, 60, a.docs)]
    Q = unit(centres[rng.integers(0, 256, (32, 32))] + 0.3 * rng.standard_normal((32, 32, 128)))
    lists = [sorted(rng.choice(a.docs, a.subset, replace=False).tolist()) for _ in range(32)]
    with tempfile.TemporaryDirectory() as d:
        t = time.time()
        index = tilemaxsim.Index(d + "/idx", device=a.device).create(documents_embeddings=docs)
        print(f"{a.docs} documents ({sum(len(x) for x in docs)} tokens), built in {time.time() - t:.1f} s on {a.device}")

        def before():
            every = index.search(Q, top_k=len(index), exhaustive=True, rerank_k=len(index))
            return [[(n, s) for n, s in row if n in set(allowed)][:10] for row, allowed in zip(every, lists)]

        def after():
            return index.search(Q, top_k=10, rerank_k=len(index), subset=lists)

        for name, call in (("before: everything scored, the subset kept", before), ("subset=", after)):
            secs = []
            for _ in range(a.rounds):
                t = time.perf_counter()
                hits = call()
                secs.append(time.perf_counter() - t)
            print(f"{name}: {statistics.median(secs) * 1e3:.1f} ms per call of 32 queries (subsets of {a.subset})")
        b, n = before(), after()
        same = all([d for d, _ in x] == [d for d, _ in y] for x, y in zip(b, n))
        print(f"the same documents in the same order: {same}")


if __name__ == "__main__":
    main()
