#!/usr/bin/env python3
"""GPU MaxSim peers vs tilemaxsim, side by side in one run on the device.

Peers: flash-maxsim 0.3.0 (carried wheel), PyTorch einsum -> max -> sum, PLAID-style
D @ Q.T -> max -> sum. Ours: `.dev/tilemaxsim bench --device cuda --json` per case (its own
seeded data of the same shape; it measures its own read ceiling in the same process).
Timing: CUDA events through triton.testing.do_bench (median), corpora smaller than L2 rotated.
Every peer is checked against a float64 reference on the first 256 documents first.

Run on the device (see bench/gpu_peers.sh). Prints a markdown table last.
"""
import argparse, json, subprocess, sys, time

import torch
import triton

p = argparse.ArgumentParser()
p.add_argument("--bin", default=".dev/tilemaxsim")
p.add_argument("--json", default=None)
p.add_argument("--quick", action="store_true")
p.add_argument("--kernels", default="", help="comma list of our kernels to run by name (bench --kernel); default: the engine's choice")
args = p.parse_args()

dev = "cuda"
L2 = torch.cuda.get_device_properties(0).L2_cache_size
NQ = 32


def unit(*shape, dtype):
    x = torch.randn(*shape, device=dev, dtype=torch.float32)
    return (x / x.norm(dim=-1, keepdim=True)).to(dtype)


def bench(fn, copies):
    i = [0]

    def step():
        i[0] = (i[0] + 1) % copies
        fn(i[0])

    return triton.testing.do_bench(step, warmup=25, rep=200, return_mode="median")


def ref_scores(Q, D, lens=None):
    q = Q.double()
    out = []
    for j in range(min(256, D.shape[0] if lens is None else len(lens))):
        d = D[j].double() if lens is None else D[lens[j][0]:lens[j][1]].double()
        out.append((q @ d.T).max(dim=1).values.sum())
    return torch.stack(out)


def relerr(got, want):
    got = got[: want.shape[0]].double()
    return ((got - want).abs() / want.abs().clamp_min(1e-30)).max().item()


def ours(dtype, docs, doc_len, dim=128, queries=1, kernel=None):
    cmd = [args.bin, "bench", "--device", "cuda", "--json", "--dtype", dtype, "--docs", str(docs),
           "--doc-len", doc_len, "--dim", str(dim), "--queries", str(queries), "--reps", "30"]
    if kernel:
        cmd += ["--kernel", kernel]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()[-300:]
    js = json.loads(out.stdout)
    return js["results"][0] | {"ceiling": js["ceiling_read_gbps"]}, None


import flash_maxsim as fm

rows = []


def record(case, name, ms, pairs, bytes_, flops, err=None, note=""):
    rows.append(dict(case=case, impl=name, ms=ms, mdocs=pairs / ms / 1e3, gbps=bytes_ / ms / 1e6,
                     tflops=flops / ms / 1e9, err=err, note=note))
    print(f"[{case}] {name}: {ms:.4f} ms, {pairs / ms / 1e3:.2f} M/s, err {err}", file=sys.stderr, flush=True)


def run_case(case, dtype_name, B, Nd=128, dim=128, varlen=False, queries=1):
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
    torch.manual_seed(0)
    if varlen:
        lens = torch.randint(32, 257, (B,))
        T = int(lens.sum())
        cu = torch.zeros(B + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(lens, 0)
        cu = cu.to(dev)
    else:
        T = B * Nd
    per = T * dim * dt.itemsize
    copies = 16 if per < 4 * L2 else 1  # ANCHORS.md: small corpora rotated among 16 copies
    Ds = [unit(T, dim, dtype=dt) for _ in range(copies)]
    if queries == 1:
        Q = unit(NQ, dim, dtype=dt)
    else:
        Q = unit(queries, NQ, dim, dtype=dt)
    flops = 2 * NQ * dim * T * queries
    pairs = B * queries
    # flash-maxsim
    try:
        if varlen:
            f = lambda i: fm.flash_maxsim(Q, Ds[i], cu)
            spans = [(int(cu[j]), int(cu[j + 1])) for j in range(256)]
            err = relerr(f(0), ref_scores(Q, Ds[0], spans))
        elif queries > 1:
            f = lambda i: fm.flash_maxsim_batched(Q, Ds[i].view(B, Nd, dim))
            err = relerr(f(0)[0], ref_scores(Q[0], Ds[0].view(B, Nd, dim)))
        else:
            f = lambda i: fm.flash_maxsim(Q, Ds[i].view(B, Nd, dim))
            err = relerr(f(0), ref_scores(Q, Ds[0].view(B, Nd, dim)))
        record(case, "flash-maxsim 0.3.0", bench(f, copies), pairs, per, flops, err)
    except Exception as e:  # noqa: BLE001
        rows.append(dict(case=case, impl="flash-maxsim 0.3.0", note=f"failed: {e!r}"[:120]))
    if queries == 1 and not varlen and B <= 100_000:
        for name, f in [
            ("PyTorch einsum", lambda i: torch.einsum("qd,bnd->bqn", Q, Ds[i].view(B, Nd, dim)).max(-1).values.sum(-1)),
            ("PLAID D@Q.T", lambda i: (Ds[i].view(B, Nd, dim) @ Q.T).max(1).values.sum(-1)),
        ]:
            try:
                err = relerr(f(0), ref_scores(Q, Ds[0].view(B, Nd, dim)))
                record(case, name, bench(f, copies), pairs, per, flops, err)
            except Exception as e:  # noqa: BLE001
                rows.append(dict(case=case, impl=name, note=f"failed: {e!r}"[:120]))
    del Ds
    torch.cuda.empty_cache()
    for kernel in [k for k in args.kernels.split(",") if k] or [None]:
        r, e = ours(dtype_name, B, "32:256" if varlen else str(Nd), dim, queries, kernel)
        if r:
            rows.append(dict(case=case, impl=f"tilemaxsim {r['name'].split('[')[-1].rstrip(']')}", ms=r["ms"],
                             mdocs=r["docs_per_s"] / 1e6, gbps=r["gb_per_s"], tflops=r["gflop_per_s"] / 1e3, err=None,
                             note=f"{r['pct_ceiling']:.1f}% of its read ceiling {r['ceiling']:.0f} GB/s"))
        else:
            rows.append(dict(case=case, impl=f"tilemaxsim {kernel or ''}".strip(), note=f"failed: {e}"))


cases = [
    ("f16 B=1K (rotated)", "f16", 1_000, {}),
    ("f16 B=10K", "f16", 10_000, {}),
    ("f16 B=100K", "f16", 100_000, {}),
    ("f16 B=500K", "f16", 500_000, {}),
    ("f16 varlen U[32,256] B=100K", "f16", 100_000, {"varlen": True}),
    ("bf16 B=100K", "bf16", 100_000, {}),
    ("f32 B=100K", "f32", 100_000, {}),
    ("f16 d=768 B=10K", "f16", 10_000, {"dim": 768}),
    ("f16 32 queries x 100K", "f16", 100_000, {"queries": 32}),
]
if args.quick:
    cases = cases[1:3]
t0 = time.time()
for name, dt, B, kw in cases:
    run_case(name, dt, B, **kw)

print(f"\n## GPU peers vs tilemaxsim ({torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
      f"triton {triton.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - t0:.0f} s)\n")
print("| case | implementation | ms | M docs/s (pairs) | GB/s | TFLOP/s | max rel err vs f64 | × best peer | notes |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for case, *_ in cases:
    rs = [r for r in rows if r["case"] == case]
    peers = [r for r in rs if "mdocs" in r and not r["impl"].startswith("tilemaxsim")]
    best = max((r["mdocs"] for r in peers), default=None)
    for r in rs:
        if "mdocs" not in r:
            print(f"| {case} | {r['impl']} | | | | | | | {r.get('note', '')} |")
            continue
        ratio = f"{r['mdocs'] / best:.2f}×" if best else ""
        err = f"{r['err']:.1e}" if r.get("err") is not None else ""
        print(f"| {case} | {r['impl']} | {r['ms']:.4f} | {r['mdocs']:.2f} | {r['gbps']:.0f} | {r['tflops']:.1f} | {err} | {ratio} | {r.get('note', '')} |")
if args.json:
    json.dump(rows, open(args.json, "w"), indent=1)
