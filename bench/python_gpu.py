"""The Python package on CUDA tensors beside the Python peers, one run: tilemaxsim (maxsim,
topk, the PyLate drop-in with autograd), late-interaction-kernels 0.4.5 (maxsim, retrieve),
flash-maxsim 0.3.0 and PyLate's torch path (pylate/scores/colbert.py:188-201, written out here
so PyLate need not be installed). Per-call overhead against the native Rust entry
(`tilemaxsim bench --raw`, the same score_raw path) in the same run.
usage (GPU machine, wheels in .whl, .dev/tilemaxsim built): python3 bench/python_gpu.py [--out DIR]
Timing: calls back to back, each between its own CUDA events, medians after >= 100 ms of warm-up;
corpora under 512 MB rotated over 16 copies (so none sits in L2)."""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import torch

import tilemaxsim
from tilemaxsim.integrations import pylate as pylate_dropin

try:
    import late_interaction_kernels as lik
except Exception as e:  # noqa: BLE001
    lik, LIK_ERR = None, str(e)
try:
    import flash_maxsim as fm
except Exception as e:  # noqa: BLE001
    fm, FM_ERR = None, str(e)

os.environ.setdefault("LIK_SUPPRESS_NORM_WARN", "1")
dev = torch.device("cuda")
rows, notes = [], []


def timed(fn, reps=30):
    """ms per call: calls back to back between their own events, median."""
    t0 = time.time()
    n = 0
    while n < 3 or time.time() - t0 < 0.1:
        fn()
        n += 1
        if n % 4 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)


def norm(*shape, dtype=torch.float16):
    x = torch.randn(*shape, device=dev, dtype=torch.float32)
    return (x / x.norm(dim=-1, keepdim=True)).to(dtype)


def copies(make, nbytes):
    n = 16 if nbytes < (512 << 20) else 1
    return [make() for _ in range(n)]


def rotating(fn, items):
    it = [0]

    def call():
        fn(items[it[0] % len(items)])
        it[0] += 1
    return call


def record(case, impl, ms, work, unit="M docs/s", err=None, note=""):
    rate = work / ms / 1e3 if ms else None
    rows.append({"case": case, "impl": impl, "ms": ms, "rate": rate, "unit": unit, "err": err, "note": note})
    print(f"{case:44s} {impl:38s} {ms if ms is None else round(ms, 4)!s:>9} ms  "
          f"{'' if rate is None else f'{rate:9.2f} {unit}'}  {note}", flush=True)


def attempt(case, impl, fn, work, unit="M docs/s", ref=None):
    try:
        out = fn()
        err = None
        if ref is not None and out is not None:
            o = out[0] if isinstance(out, tuple) else out
            err = float((o.float() - ref.float()).abs().max())
        ms = timed(fn)
        record(case, impl, ms, work, unit, err, "" if err is None else f"max err {err:.1e}")
    except Exception as e:  # noqa: BLE001
        torch.cuda.synchronize()
        record(case, impl, None, work, unit, note=f"failed: {type(e).__name__}: {str(e)[:120]}")


def check_err(case, impl, fn, ref):
    """A peer's largest difference from tilemaxsim's scores (exact f32 accumulation of the same
    inputs) on the same corpus, noted beside its row."""
    try:
        err = float((fn().float() - ref).abs().max())
        notes.append(f"{case}: {impl} max |diff| from tilemaxsim {err:.1e}")
    except Exception as e:  # noqa: BLE001
        notes.append(f"{case}: {impl} error check failed: {e}")


def pylate_torch(Q, D, qm=None, dm=None):
    scores = torch.einsum("ash,bth->abst", Q, D)
    if qm is not None:
        scores = scores * qm.unsqueeze(1).unsqueeze(3)
    if dm is not None:
        scores = scores * dm.unsqueeze(0).unsqueeze(2)
    return scores.max(axis=-1).values.sum(axis=-1)


def native_ms(args):
    """`tilemaxsim bench --raw` ms per call (the same score_raw path, from Rust)."""
    out = subprocess.run([".dev/tilemaxsim", "bench", "--device", "cuda", "--raw", "--reps", "30", *args],
                         capture_output=True, text=True, timeout=120).stdout
    line = [l for l in out.splitlines() if "Q=" in l][0]
    return float(re.split(r"\]\s+", line)[1].split()[0])


def single_query(dtype, B, qdtype=None):
    """One query against B documents of 128 tokens; `qdtype` (else `dtype`) for the query: f32
    queries against f16 documents are what a server's JSON clients send."""
    qdtype = qdtype or dtype
    mixed = "" if qdtype == dtype else f", {str(qdtype)[6:]} query"
    case = f"{str(dtype)[6:]} A=1 B={B // 1000}K Nq=32 Nd=128{mixed}"
    nb = B * 128 * 128 * torch.tensor([], dtype=dtype).element_size()
    Ds = copies(lambda: norm(B, 128, 128, dtype=dtype), nb)
    Q = norm(32, 128, dtype=qdtype)
    ref = tilemaxsim.maxsim(Q, Ds[0]).float()
    attempt(case, "tilemaxsim.maxsim", rotating(lambda D: tilemaxsim.maxsim(Q, D), Ds), B)
    first = lambda f: (lambda: f(Ds[0]))  # noqa: E731  (the error check scores copy 0)
    if lik:
        attempt(case, "LIK maxsim", rotating(lambda D: lik.maxsim(Q, D), Ds), B)
        check_err(case, "LIK maxsim", first(lambda D: lik.maxsim(Q, D)), ref)
    if fm:
        attempt(case, "flash_maxsim", rotating(lambda D: fm.flash_maxsim(Q, D), Ds), B)
        check_err(case, "flash_maxsim", first(lambda D: fm.flash_maxsim(Q, D)), ref)
    if B <= 10_000:
        attempt(case, "PyLate torch path", rotating(lambda D: pylate_torch(Q[None], D), Ds), B)
        check_err(case, "PyLate torch path", first(lambda D: pylate_torch(Q[None], D)[0]), ref)
    if dtype == torch.float16 and qdtype == dtype and B in (1000, 100_000):
        # Overhead over the native entry: the same data, no rotation, in both.
        D = Ds[0]
        py = timed(lambda: tilemaxsim.maxsim(Q, D))
        nat = native_ms(["--dtype", "f16", "--docs", str(B)])
        notes.append(f"{case}: Python {py * 1e3:.1f} us against native score_raw {nat * 1e3:.1f} us per call "
                     f"(+{(py - nat) * 1e3:.1f} us, {py / nat:.3f}x)")
        print(notes[-1], flush=True)
    del Ds


def varlen():
    case = "f16 A=1 B=100K Nd~U[32,256]"
    B = 100_000
    lens = torch.randint(32, 257, (B,), device=dev)
    T = int(lens.sum())
    packed = norm(T, 128)
    cu = torch.zeros(B + 1, dtype=torch.int64, device=dev)
    cu[1:] = lens.cumsum(0)
    Q = norm(32, 128)
    attempt(case, "tilemaxsim.maxsim packed (cu_seqlens)", lambda: tilemaxsim.maxsim(Q, packed, cu_seqlens=cu), B)
    if fm:
        attempt(case, "flash_maxsim packed", lambda: fm.flash_maxsim(Q, packed, cu.to(torch.int32)), B)
    padded = torch.zeros(B, 256, 128, device=dev, dtype=torch.float16)
    mask = torch.arange(256, device=dev)[None, :] < lens[:, None]
    padded[mask] = packed
    attempt(case, "tilemaxsim.maxsim padded + doc_lengths", lambda: tilemaxsim.maxsim(Q, padded, doc_lengths=lens), B)
    if lik:
        attempt(case, "LIK maxsim padded + d_mask", lambda: lik.maxsim(Q, padded, d_mask=mask), B)
        cuq = torch.tensor([0, 32], dtype=torch.int32, device=dev)
        attempt(case, "LIK maxsim_varlen", lambda: lik.maxsim_varlen(Q, packed, cuq, cu.to(torch.int32), 32, 256), B)
    if fm:
        attempt(case, "flash_maxsim padded + doc_lengths", lambda: fm.flash_maxsim(Q, padded, lens.to(torch.int32)), B)
    del padded, packed


def batched():
    case = "f16 32 queries x 100K Nd=128"
    B = 100_000
    D = norm(B, 128, 128)
    Q = norm(32, 32, 128)
    attempt(case, "tilemaxsim.maxsim", lambda: tilemaxsim.maxsim(Q, D), 32 * B, "M pairs/s")
    if lik:
        attempt(case, "LIK maxsim", lambda: lik.maxsim(Q, D), 32 * B, "M pairs/s")
    if fm:
        attempt(case, "flash_maxsim_batched", lambda: fm.flash_maxsim_batched(Q, D), 32 * B, "M pairs/s")
    del D


def top10(B):
    case = f"f16 top-10 A=1 B={B // 1000}K Nd=128"
    D = norm(B, 128, 128)
    Q = norm(32, 128)
    attempt(case, "tilemaxsim.topk", lambda: tilemaxsim.topk(Q, D, 10, chunk=B), B)
    if lik and B < 500_000:
        attempt(case, "LIK retrieve", lambda: lik.retrieve(Q, D, 10, normalize=False), B)
    if fm:
        attempt(case, "flash_maxsim + torch.topk", lambda: torch.topk(fm.flash_maxsim(Q, D), 10), B)
    del D


def training_step():
    case = "PyLate step: 32 queries x 256 docs, fwd+bwd"
    Q = norm(32, 32, 128).requires_grad_()
    D = norm(256, 180, 128).requires_grad_()
    dm = (torch.rand(256, 180, device=dev) < 0.8).half()
    target = torch.arange(32, device=dev) * 8

    def ours():
        s = pylate_dropin.colbert_scores(Q, D, None, dm)
        torch.nn.functional.cross_entropy(s.float(), target).backward()

    def torch_path():
        s = pylate_torch(Q, D, None, dm)
        torch.nn.functional.cross_entropy(s.float(), target).backward()

    attempt(case, "tilemaxsim (pylate drop-in, autograd)", ours, 32 * 256, "K pairs/ms")
    attempt(case, "PyLate torch path", torch_path, 32 * 256, "K pairs/ms")
    if lik:
        attempt(case, "LIK maxsim (autograd)", lambda: torch.nn.functional.cross_entropy(
            lik.maxsim(Q, D, d_mask=dm.bool()), target).backward(), 32 * 256, "K pairs/ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results/python_gpu"))
    ap.add_argument("--cases", default="single,f32,varlen,batched,top10,training",
                    help="comma-separated: single, f32, varlen, batched, top10, training")
    a = ap.parse_args()
    cases = set(a.cases.split(","))
    os.makedirs(a.out, exist_ok=True)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, tilemaxsim {tilemaxsim.__version__}, "
          f"LIK {getattr(lik, '__version__', LIK_ERR if lik is None else '?')}, "
          f"flash-maxsim {getattr(fm, '__version__', FM_ERR if fm is None else '?')}", flush=True)
    if "single" in cases:
        for dtype in (torch.float16, torch.bfloat16):
            for B in (1000, 10_000, 100_000):
                single_query(dtype, B)
    if "f32" in cases:
        for B in (10_000, 100_000):
            single_query(torch.float32, B)
        single_query(torch.float16, 100_000, qdtype=torch.float32)
    if "varlen" in cases:
        varlen()
    if "batched" in cases:
        batched()
    if "top10" in cases:
        top10(100_000)
        top10(500_000)
    if "training" in cases:
        training_step()
    if lik and "top10" in cases:
        # LIK's retrieve at 500K documents ends its process's CUDA context (ANCHORS.md): run it
        # last, alone, in a child process.
        code = ("import torch, late_interaction_kernels as lik; D = torch.randn(500000, 128, 128, device='cuda', "
                "dtype=torch.float16); Q = torch.randn(32, 128, device='cuda', dtype=torch.float16); "
                "lik.retrieve(Q, D, 10, normalize=False); torch.cuda.synchronize(); print('ok')")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        msg = "ran" if r.returncode == 0 else f"failed (exit {r.returncode}): {(r.stderr.strip().splitlines() or [''])[-1][:160]}"
        notes.append(f"f16 top-10 A=1 B=500K: LIK retrieve {msg}")
    with open(os.path.join(a.out, "python_gpu.json"), "w") as f:
        json.dump({"rows": rows, "notes": notes, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, f, indent=1)
    print("\n".join(notes))


if __name__ == "__main__":
    main()
