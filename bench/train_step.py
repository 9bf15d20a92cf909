"""One PyLate training step (forward + backward of the same loss) on the GPU: tilemaxsim's
training kernels (through the PyLate drop-in and through `tilemaxsim.maxsim`) beside LIK 0.4.5's
`maxsim` (its fused Triton forward and backward) and PyLate's torch path (pylate/scores/
colbert.py:188-201, written out here), timed in one process on the same tensors.

Shapes: PyLate's in-batch contrastive step (64 queries × 512 documents, Lq 32, Ld 180, d 128,
bf16, cross-entropy over the score matrix), the same in f16 and in f32 (a model trained without
autocast; ours then splits both sides into float16 parts on the tensor cores), the distillation layout (D
`[64, 32, 180, 128]`, KL against teacher scores) and, for ours, the forward and backward passes
alone. Each step's dQ and dD are compared with float64 autograd of the same inputs (max |error|
relative to the largest gradient). Timing: CUDA events around each step, median of 30 after
warm-up; the inputs stay resident (the step is compute- and L2-bound, 24 MB of documents).
usage: python bench/train_step.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import tilemaxsim
import torch
from tilemaxsim import _autograd, _native
from tilemaxsim._arrays import dlpack, stream_of
from tilemaxsim.integrations import pylate as pylate_dropin

try:
    import late_interaction_kernels as lik
except Exception as e:  # noqa: BLE001
    lik, LIK_ERR = None, str(e)

dev = "cuda"
rows: list[dict] = []


def timed(fn, reps=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def pylate_torch(Q, D, dm=None):
    scores = torch.einsum("ash,bth->abst", Q, D)
    if dm is not None:
        scores = scores * dm.unsqueeze(0).unsqueeze(2)
    return scores.max(axis=-1).values.sum(axis=-1)


def pylate_torch_kd(Q, D):
    scores = torch.einsum("ash,abth->abst", Q, D)
    return scores.max(axis=-1).values.sum(axis=-1)


def grad_error(loss_of, Q, D):
    """Max |dQ - dQ64| and |dD - dD64|, each over the largest float64 gradient."""
    for t in (Q, D):
        t.grad = None
    loss_of(Q, D).backward()
    q64 = Q.detach().double().requires_grad_()
    d64 = D.detach().double().requires_grad_()
    loss_of(q64, d64, reference=True).backward()
    err = []
    for got, want in ((Q.grad, q64.grad), (D.grad, d64.grad)):
        err.append(float((got.double() - want).abs().max() / want.abs().max()))
    return err


def step_rows(case, impls, Q, D, pairs):
    base = None
    for name, loss_of in impls:

        def step(loss_of=loss_of):
            for t in (Q, D):
                t.grad = None
            loss_of(Q, D).backward()

        try:
            ms = timed(step)
            err = grad_error(loss_of, Q, D)
        except Exception as e:  # noqa: BLE001
            print(f"{case:58s} {name:34s} failed: {str(e)[:160]}", flush=True)
            continue
        base = base or ms
        rows.append(
            {
                "case": case,
                "impl": name,
                "ms": ms,
                "pairs_per_ms": pairs / ms,
                "err_dq": err[0],
                "err_dd": err[1],
            }
        )
        print(
            f"{case:58s} {name:34s} {ms:8.3f} ms  {pairs / ms / 1e3:7.2f} M pairs/s  "
            f"dQ err {err[0]:.1e} dD err {err[1]:.1e}",
            flush=True,
        )


def in_batch(dtype, A=64, B=512, Lq=32, Ld=180, d=128):
    torch.manual_seed(0)
    Q = (
        torch.nn.functional.normalize(torch.randn(A, Lq, d, device=dev), dim=-1)
        .to(dtype)
        .requires_grad_()
    )
    D = (
        torch.nn.functional.normalize(torch.randn(B, Ld, d, device=dev), dim=-1)
        .to(dtype)
        .requires_grad_()
    )
    target = torch.arange(A, device=dev) * (B // A)

    def ce(scores):
        return torch.nn.functional.cross_entropy(scores.float(), target)

    def ours_dropin(Q, D, reference=False):
        return ce(
            pylate_torch(Q, D) if reference else pylate_dropin.colbert_scores(Q, D)
        )

    def ours_api(Q, D, reference=False):
        return ce(pylate_torch(Q, D) if reference else tilemaxsim.maxsim(Q, D))

    def torch_path(Q, D, reference=False):
        return ce(pylate_torch(Q, D))

    impls = [
        ("tilemaxsim (pylate drop-in)", ours_dropin),
        ("tilemaxsim.maxsim", ours_api),
        ("PyLate torch path", torch_path),
    ]
    if lik:
        impls.append(
            (
                "LIK maxsim",
                lambda Q, D, reference=False: ce(
                    pylate_torch(Q, D) if reference else lik.maxsim(Q, D)
                ),
            )
        )
    case = f"{str(dtype)[6:]} in-batch {A}q x {B}d Lq{Lq} Ld{Ld} fwd+bwd"
    step_rows(case, impls, Q, D, A * B)
    # Our passes alone.
    with torch.no_grad():
        ms = timed(lambda: tilemaxsim.maxsim(Q, D))
    rows.append({"case": case, "impl": "tilemaxsim scores only (no grad)", "ms": ms})
    print(f"{case:58s} {'ours: scores only (no grad)':34s} {ms:8.3f} ms", flush=True)
    s = tilemaxsim.maxsim(Q, D)
    g = torch.randn_like(s)
    ms = timed(lambda: torch.autograd.grad(tilemaxsim.maxsim(Q, D), (Q, D), g))
    rows.append(
        {"case": case, "impl": "tilemaxsim fwd (argmax) + bwd, no loss", "ms": ms}
    )
    print(f"{case:58s} {'ours: fwd+argmax+bwd, no loss':34s} {ms:8.3f} ms", flush=True)
    # Each kernel alone (f32: the forward splits the documents into float16 planes first).
    Qd, Dd = Q.detach(), D.detach()
    if not _autograd.fused_ok(Qd, Dd):
        return
    _, am = _autograd._forward(Qd, Dd, {}, 0, keep_argmax=True)
    dq, dd = torch.empty_like(Qd), torch.empty_like(Dd)
    stream = stream_of(Qd)

    def bwd(want_q, want_d):
        _native.train_backward(
            dlpack(Qd),
            dlpack(Dd),
            dlpack(am),
            dlpack(g),
            dlpack(dq) if want_q else None,
            dlpack(dd) if want_d else None,
            group=0,
            split_checked=Qd.dtype == torch.float32,
            stream=stream,
        )

    for name, fn in (
        (
            "kernel: forward + argmax",
            lambda: _autograd._forward(Qd, Dd, {}, 0, keep_argmax=True),
        ),
        (
            "kernel: forward, no argmax",
            lambda: _autograd._forward(Qd, Dd, {}, 0, keep_argmax=False),
        ),
        ("kernel: dQ", lambda: bwd(True, False)),
        ("kernel: dD", lambda: bwd(False, True)),
    ):
        ms = timed(fn)
        rows.append({"case": case, "impl": name, "ms": ms})
        print(f"{case:58s} {name:34s} {ms:8.3f} ms", flush=True)


def distillation(dtype, A=64, K=32, Lq=32, Ld=180, d=128):
    torch.manual_seed(0)
    Q = (
        torch.nn.functional.normalize(torch.randn(A, Lq, d, device=dev), dim=-1)
        .to(dtype)
        .requires_grad_()
    )
    D = (
        torch.nn.functional.normalize(torch.randn(A, K, Ld, d, device=dev), dim=-1)
        .to(dtype)
        .requires_grad_()
    )
    teacher = torch.log_softmax(torch.randn(A, K, device=dev), dim=-1)

    def kl(scores):
        return torch.nn.functional.kl_div(
            torch.log_softmax(scores.float(), dim=-1),
            teacher,
            log_target=True,
            reduction="batchmean",
        )

    def ours(Q, D, reference=False):
        return kl(
            pylate_torch_kd(Q, D)
            if reference
            else pylate_dropin.colbert_kd_scores(Q, D)
        )

    impls = [
        ("tilemaxsim (pylate drop-in)", ours),
        ("PyLate torch path", lambda Q, D, reference=False: kl(pylate_torch_kd(Q, D))),
    ]
    if lik:
        impls.append(
            (
                "LIK maxsim (KD layout)",
                lambda Q, D, reference=False: kl(
                    pylate_torch_kd(Q, D) if reference else lik.maxsim(Q, D)
                ),
            )
        )
    step_rows(
        f"{str(dtype)[6:]} distillation {A}q x {K} cand Ld{Ld} fwd+bwd",
        impls,
        Q,
        D,
        A * K,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results/train"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, tilemaxsim {tilemaxsim.__version__}, "
        f"LIK {getattr(lik, '__version__', LIK_ERR if lik is None else '?')}",
        flush=True,
    )
    in_batch(torch.bfloat16)
    in_batch(torch.float16)
    in_batch(torch.float32)
    distillation(torch.bfloat16)
    with open(os.path.join(a.out, "train_step.json"), "w") as f:
        json.dump(
            {"rows": rows, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
