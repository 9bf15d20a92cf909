"""`tilemaxsim.maxsim_residual` on CUDA tensors (scored in place) beside late-interaction-kernels'
`plaid.maxsim_residual_varlen` on the same tensors (each residual byte bit-reversed for LIK's
order), in one run: CUDA events around whole Python calls, back to back, median of 30 after
warm-up; B=100K documents of 128 tokens, d=128, K=65,536 centroids (the shape of
bench/peers_codecs.py), 1 query and 32 of 32 tokens; ours with `check=True` (the default: ids,
offsets and weights checked on the device, one wait) and `check=False` (LIK checks nothing).
Also the scores' agreement with LIK on that corpus, and the fp8 error of ours and LIK's
`maxsim_inference_fp8` against float64 exact scores on a common corpus.
    PYTHONPATH=/tmp/site python3 bench/residual_gpu.py [--docs 100000] [--json F]
"""

import argparse
import json
from functools import partial

import tilemaxsim
import torch
from peers_codecs import bench  # bench/ is the script's directory


def fp8_error(rows, g):
    """Relative error of fp8 scores against float64 exact ones, ours and LIK's, on one corpus."""
    B, Nd, d = 4000, 128, 128
    unit = lambda *s: torch.nn.functional.normalize(
        torch.randn(*s, device="cuda", generator=g), dim=-1
    )
    D = unit(B, Nd, d).half()
    Q = unit(16, 32, d).half()
    exact = torch.einsum("qid,bjd->qbij", Q.double(), D.double()).amax(-1).sum(-1)
    scale = exact.abs().mean().item()

    def err(name, s):
        e = (s.double() - exact).abs()
        rows.append(
            {
                "impl": name,
                "case": "fp8 error vs float64 exact (16 × 4000)",
                "mean_rel": e.mean().item() / scale,
                "max_rel": e.max().item() / scale,
            }
        )

    corpus = tilemaxsim.Corpus.from_tensors(
        D.reshape(-1, d).cpu(), doc_lengths=[Nd] * B, device="cuda"
    )
    fp8 = corpus.compress("fp8", device="cuda")
    s, i = fp8.search(Q.cpu(), B)
    ours = torch.empty(16, B, dtype=torch.float64)
    ours.scatter_(1, i, s.double())
    err("tilemaxsim fp8 (f16 Q × e4m3 codes, per-token scale)", ours.cuda())
    try:
        import late_interaction_kernels.fp8 as lf

        Df, ds = lf.quantize_fp8_per_token(D)
        qf, qs = lf.quantize_fp8_per_token(Q)
        theirs = lf.maxsim_inference_fp8(qf, Df, scale_Q=qs, scale_D=ds)
        err("LIK fp8.maxsim_inference_fp8 (e4m3 Q × e4m3 D)", theirs.reshape(16, B))
    except Exception as e:  # noqa: BLE001 (a peer that cannot run is reported)
        rows.append({"impl": "LIK fp8", "error": f"{type(e).__name__}: {e}"})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    B, Nd, d, K = a.docs, 128, 128, 65536
    g = torch.Generator(device="cuda").manual_seed(0)
    unit = lambda *s: torch.nn.functional.normalize(
        torch.randn(*s, device="cuda", generator=g), dim=-1
    )
    rows = []
    T = B * Nd
    cu = torch.arange(0, T + 1, Nd, device="cuda", dtype=torch.int32)
    cent = unit(K, d).half()
    codes = torch.randint(0, K, (T,), device="cuda", dtype=torch.int32, generator=g)
    rev = torch.tensor(
        [int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=torch.uint8, device="cuda"
    )
    try:
        from late_interaction_kernels import plaid
    except Exception as e:  # noqa: BLE001 (a peer that cannot run is reported)
        plaid = None
        rows.append({"impl": "LIK plaid", "error": f"{type(e).__name__}: {e}"})
    for nbits in (2, 4):
        res = torch.randint(
            0, 256, (T, d * nbits // 8), device="cuda", dtype=torch.uint8, generator=g
        )
        res_lik = rev[res.long()]
        w = torch.linspace(-0.08, 0.08, 2**nbits, device="cuda")
        for name, nq in (("1 query", 1), ("32 queries", 32)):
            Q = unit(nq, 32, d).half()
            case = f"residual nbits={nbits}, {name}"
            tensors = (Q, codes, res, cu, cent, w, nbits)
            ours = partial(tilemaxsim.maxsim_residual, *tensors)
            fast = partial(tilemaxsim.maxsim_residual, *tensors, check=False)
            t_ours, t_fast = bench(ours, a.reps), bench(fast, a.reps)
            rows.append(
                {
                    "impl": "tilemaxsim.maxsim_residual (check=True)",
                    "case": case,
                    "ms": t_ours,
                    "m_per_s": B * nq / t_ours / 1e3,
                }
            )
            rows.append(
                {
                    "impl": "tilemaxsim.maxsim_residual (check=False)",
                    "case": case,
                    "ms": t_fast,
                    "m_per_s": B * nq / t_fast / 1e3,
                }
            )
            if plaid is None:
                continue
            try:
                theirs = partial(
                    plaid.maxsim_residual_varlen,
                    Q,
                    codes,
                    res_lik,
                    cu,
                    cent,
                    w,
                    nbits,
                    max_seqlen_d=Nd,
                )
                t_lik = bench(theirs, a.reps)
                diff = (ours().float() - theirs().float()).abs().max().item()
                rows.append(
                    {
                        "impl": "LIK plaid.maxsim_residual_varlen",
                        "case": case,
                        "ms": t_lik,
                        "m_per_s": B * nq / t_lik / 1e3,
                        "note": f"ours {t_lik / t_ours:.2f}× (checked), {t_lik / t_fast:.2f}× (unchecked); "
                        f"max |ours - LIK| {diff:.2e}",
                    }
                )
            except Exception as e:  # noqa: BLE001 (a peer that cannot run is reported)
                rows.append(
                    {
                        "impl": "LIK plaid",
                        "case": case,
                        "error": f"{type(e).__name__}: {e}",
                    }
                )
            del Q
        del res, res_lik
        torch.cuda.empty_cache()
    del cent, codes
    torch.cuda.empty_cache()
    fp8_error(rows, g)

    print(f"device {torch.cuda.get_device_name()}; B={B} Nd={Nd} d={d} K={K}")
    print("| impl | case | ms | M docs/s (pairs/s) | note |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['impl']} | error: {r['error']} | | | |")
        elif "mean_rel" in r:
            print(
                f"| {r['impl']} | {r['case']} | | | mean rel. error {r['mean_rel']:.2e}, max {r['max_rel']:.2e} |"
            )
        else:
            print(
                f"| {r['impl']} | {r['case']} | {r['ms']:.4f} | {r['m_per_s']:.1f} | {r.get('note', '')} |"
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
