"""Compressed corpora on the GPU, ours beside the peers in one run (Nq=32, Nd=128, d=128,
B=100K unless given): LIK's fused PLAID kernel `plaid.maxsim_residual_varlen` (nbits 2 and 4,
65,536 centroids), flash-maxsim's int8 kernels (`flash_maxsim_int8_symmetric`: f16 queries,
`flash_maxsim_int8x8`: int8 queries), LIK's `fp8.maxsim_inference_fp8`, cuBLAS f16 (the
batched-queries bar) and ours (`tilemaxsim bench --device cuda --codec ...`, one query and 32).
Peers are timed with CUDA events, calls back to back, median after warm-up, inputs rotated
where they would fit in L2. Prints a markdown table; --json writes the rows.
    PYTHONPATH=/tmp/site python3 bench/peers_codecs.py [--docs 100000] [--json F]
"""

import argparse
import json
import statistics
import subprocess

import torch


def bench(fn, reps=30, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def ours(binary, args, docs, reps):
    cmd = [binary, "bench", "--device", "cuda", "--docs", str(docs), "--reps", str(reps), "--json"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return [], " ".join(cmd) + ": " + out.stderr.strip()[-300:]
    return json.loads(out.stdout)["results"], " ".join(cmd)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    B, Nd, d, Nq, K = a.docs, 128, 128, 32, 65536
    g = torch.Generator(device="cuda").manual_seed(0)
    unit = lambda *s: torch.nn.functional.normalize(torch.randn(*s, device="cuda", generator=g), dim=-1)  # noqa: E731
    rows = []

    def row(impl, case, ms, n, note=""):
        rows.append({"impl": impl, "case": case, "ms": ms, "m_per_s": n / ms / 1e3, "note": note})

    # cuBLAS f16: the bar of the batched-queries rows.
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    ms = bench(lambda: x @ x, reps=10)
    tflops = 2 * 8192**3 / ms / 1e9
    rows.append({"impl": "cuBLAS f16 8192^3", "case": "gemm", "ms": ms, "tflops": tflops})
    del x

    Q1 = unit(1, Nq, d).half()
    Q32 = unit(32, Nq, d).half()
    T = B * Nd
    cu = torch.arange(0, T + 1, Nd, device="cuda", dtype=torch.int32)
    try:
        from late_interaction_kernels import plaid

        cent = unit(K, d).half()
        codes = torch.randint(0, K, (T,), device="cuda", dtype=torch.int32, generator=g)
        for nbits in (2, 4):
            res = torch.randint(0, 256, (T, d * nbits // 8), device="cuda", dtype=torch.uint8, generator=g)
            w = torch.linspace(-0.08, 0.08, 2**nbits, device="cuda")
            for name, Q in (("1 query", Q1), ("32 queries", Q32)):
                f = lambda: plaid.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits, max_seqlen_d=Nd)  # noqa: E731
                row("LIK plaid.maxsim_residual_varlen", f"residual nbits={nbits}, {name}", bench(f), B * Q.shape[0])
            del res
        del cent, codes
    except Exception as e:  # a peer that cannot run here is reported, not fatal
        rows.append({"impl": "LIK residual", "error": f"{type(e).__name__}: {e}"})
    torch.cuda.empty_cache()
    D = unit(B, Nd, d).half()
    try:
        import flash_maxsim.flash_maxsim_quant as fq

        Di8, sc = fq.quantize_int8_symmetric(D)
        row("flash int8_symmetric (f16 Q)", "int8, 1 query", bench(lambda: fq.flash_maxsim_int8_symmetric(Q1[0], Di8, sc)), B)
        qi8, qs = fq.quantize_query_int8(Q1[0])
        row("flash int8x8 (int8 Q)", "int8, 1 query",
            bench(lambda: fq.flash_maxsim_int8x8(Q1[0], Di8, sc, Q_int8=qi8, q_scales=qs)), B)
        del Di8, sc
    except Exception as e:
        rows.append({"impl": "flash int8", "error": f"{type(e).__name__}: {e}"})
    torch.cuda.empty_cache()
    try:
        import late_interaction_kernels.fp8 as lf

        Df, ds = lf.quantize_fp8_per_token(D)
        for name, Q in (("1 query", Q1), ("32 queries", Q32)):
            qf, qs = lf.quantize_fp8_per_token(Q)
            row("LIK fp8.maxsim_inference_fp8", f"fp8, {name}",
                bench(lambda: lf.maxsim_inference_fp8(qf, Df, scale_Q=qs, scale_D=ds)), B * Q.shape[0])
        del Df, ds
    except Exception as e:
        rows.append({"impl": "LIK fp8", "error": f"{type(e).__name__}: {e}"})
    del D
    torch.cuda.empty_cache()

    for args in (["--codec", "residual", "--nbits", "1"], ["--codec", "residual", "--nbits", "2"],
                 ["--codec", "residual", "--nbits", "4"], ["--codec", "pq", "--m", "16"],
                 ["--codec", "pq", "--m", "32"], ["--codec", "int8"], ["--codec", "fp8"],
                 ["--dtype", "f16", "--doc-len", "128"], ["--dtype", "f16", "--doc-len", "128", "--queries", "32"]):
        results, cmd = ours(a.bin, args, B, a.reps)
        if not results:
            rows.append({"impl": "tilemaxsim", "error": cmd})
        for r in results:
            rows.append({"impl": "tilemaxsim", "case": r["name"], "ms": r["ms"], "m_per_s": r["docs_per_s"] / 1e6,
                         "gb_per_s": r["gb_per_s"], "pct_ceiling": r["pct_ceiling"],
                         "tflops": r["gflop_per_s"] / 1e3, "cmd": cmd})

    print(f"device {torch.cuda.get_device_name()}; B={B} Nd={Nd} d={d} Nq={Nq}; K={K} for residual peers")
    print("| impl | case | ms | M docs/s (pairs/s) | GB/s | % read ceiling | TFLOP/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['impl']} | error: {r['error']} | | | | | |")
            continue
        f = lambda k, s: format(r[k], s) if k in r else ""  # noqa: E731
        print(f"| {r['impl']} | {r['case']} | {f('ms', '.4f')} | {f('m_per_s', '.1f')} | {f('gb_per_s', '.0f')} | "
              f"{f('pct_ceiling', '.1f')} | {f('tflops', '.1f')} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
