#!/usr/bin/env python3
"""End-to-end top-k search latency on the device: PyTorch einsum + torch.topk and
flash-maxsim 0.3.0 + torch.topk against `tilemaxsim bench-search` in the same session.

Every implementation is timed the same way: wall clock from the query batch in host memory to
the top-k (ids, scores) in host memory, median and p99 of 20 runs after a warm-up. The corpus
(B documents, Nd=128, d=128, f16, L2-normalized) is resident on the GPU for the peers and for
ours. The paper's figure (6.09 ms at 500K documents, single query, torch.topk) is printed as a
reference line. Prints a markdown table last. It ran inside bench/device_issue4.sh for the
GPU search table of BENCHMARKS.md (that script is in git history at 5d27f7b).

usage (GPU machine, .dev and .whl carried; flash-maxsim from the wheel):
    python3 -m pip install -q --no-deps --target /tmp/site .whl/flash_maxsim-0.3.0-py3-none-any.whl
    PYTHONPATH=/tmp/site python3 bench/search_peers.py [--sizes 100000,500000] [--batches 1,32] [-k 10] [--json PATH]
"""
import argparse, json, statistics, subprocess, sys, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--bin", default=".dev/tilemaxsim")
p.add_argument("--json", default=None)
p.add_argument("--sizes", default="100000,500000")
p.add_argument("--batches", default="1,32")
p.add_argument("-k", type=int, default=10)
p.add_argument("--reps", type=int, default=20)
args = p.parse_args()
dev = "cuda"
NQ, ND, DIM, K = 32, 128, 128, args.k
sizes = [int(s) for s in args.sizes.split(",")]
batches = [int(s) for s in args.batches.split(",")]


def unit(*shape):
    x = torch.randn(*shape, device=dev, dtype=torch.float32)
    return (x / x.norm(dim=-1, keepdim=True)).half()


def time_it(fn, queries):
    fn(queries[0])
    torch.cuda.synchronize()
    ms = []
    for r in range(args.reps):
        t = time.perf_counter()
        fn(queries[r % len(queries)])
        ms.append((time.perf_counter() - t) * 1e3)
    ms.sort()
    return statistics.median(ms), ms[round((len(ms) - 1) * 0.99)]


def einsum_topk(D):
    # Chunked over documents so the Q x B x Nq x Nd similarity tensor fits in memory.
    def run(qh):
        q = qh.to(dev)
        chunk = max(1, (1 << 31) // (q.shape[0] * NQ * ND * 2))
        scores = torch.cat([torch.einsum("aqd,bnd->abqn", q, D[i:i + chunk]).amax(-1).float().sum(-1)
                            for i in range(0, D.shape[0], chunk)], dim=1)
        v, i = torch.topk(scores, K, dim=1)
        return v.cpu(), i.cpu()
    return run


def flash_topk(D):
    import flash_maxsim as fm

    def run(qh):
        q = qh.to(dev)
        s = fm.flash_maxsim(q[0], D)[None] if q.shape[0] == 1 else fm.flash_maxsim_batched(q, D)
        v, i = torch.topk(s.float(), K, dim=1)
        return v.cpu(), i.cpu()
    return run


rows = []
for B in sizes:
    torch.manual_seed(0)
    D = unit(B, ND, DIM)
    for b in batches:
        qs = [unit(b, NQ, DIM).cpu() for _ in range(4)]
        for name, mk in [("PyTorch einsum + torch.topk", einsum_topk), ("flash-maxsim 0.3.0 + torch.topk", flash_topk)]:
            try:
                p50, p99 = time_it(mk(D), qs)
                rows.append(dict(docs=B, batch=b, impl=name, p50=p50, p99=p99))
            except Exception as e:  # noqa: BLE001
                rows.append(dict(docs=B, batch=b, impl=name, note=f"failed: {e!r}"[:120]))
            print(rows[-1], file=sys.stderr, flush=True)
    del D
    torch.cuda.empty_cache()

cmd = [args.bin, "bench-search", "--device", "cuda", "--json", "--docs", args.sizes, "--batches", args.batches,
       "-k", str(K), "--reps", str(args.reps), "--stream-docs", "0", "--multi-docs", "0"]
out = subprocess.run(cmd, capture_output=True, text=True)
if out.returncode == 0:
    for r in json.loads(out.stdout)["rows"]:
        rows.append(dict(docs=r["docs"], batch=r["batch"], impl=f"tilemaxsim ({r['searcher']})", p50=r["ms_p50"], p99=r["ms_p99"]))
else:
    rows.append(dict(docs=0, batch=0, impl="tilemaxsim", note=f"failed: {out.stderr[-300:]}"))

print(f"\n## End-to-end top-{K} search ({torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
      f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
print("| docs | batch | implementation | p50 ms | p99 ms | queries/s | × best peer (p50) |")
print("|---:|---:|---|---:|---:|---:|---:|")
for B in sizes:
    for b in batches:
        rs = [r for r in rows if r["docs"] == B and r["batch"] == b]
        peers = [r["p50"] for r in rs if "p50" in r and not r["impl"].startswith("tilemaxsim")]
        best = min(peers, default=None)
        for r in rs:
            if "p50" not in r:
                print(f"| {B} | {b} | {r['impl']} | | | | {r.get('note', '')} |")
                continue
            ratio = f"{best / r['p50']:.2f}×" if best else ""
            print(f"| {B} | {b} | {r['impl']} | {r['p50']:.3f} | {r['p99']:.3f} | {b / r['p50'] * 1e3:.1f} | {ratio} |")
        if B == 500_000 and b == 1:
            print(f"| 500000 | 1 | paper (TileMaxSim + torch.topk, its H100) | 6.09 | | {1 / 6.09e-3:.1f} | |")
for r in rows:
    if r.get("note"):
        print(f"\nnote: {r['impl']} at {r['docs']}/{r['batch']}: {r['note']}")
if args.json:
    json.dump(rows, open(args.json, "w"), indent=1)
