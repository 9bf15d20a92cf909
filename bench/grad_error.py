"""Gradient error of PyLate's in-batch scoring (64 queries × 512 documents, Lq = 32, Ld = 180,
d = 128, bf16, random unit tokens): dQ and dD of a cross-entropy loss over the scores, relative
to float64 autograd on the same (bf16-rounded) values, for tilemaxsim's drop-in, PyLate's torch
path and LIK (PyLate's backend="lik"). Run where the package and the peers are installed:
    PYTHONPATH=/tmp/site python3 bench/grad_error.py [--device cuda]
"""

import argparse

import torch

import pylate.scores as scores
from tilemaxsim.integrations import pylate as dropin


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    unit = lambda *s: torch.nn.functional.normalize(torch.randn(*s, generator=g), dim=-1)  # noqa: E731
    Q0 = unit(64, 32, 128).to(a.device, torch.bfloat16)
    D0 = unit(512, 180, 128).to(a.device, torch.bfloat16)
    labels = torch.arange(64, device=a.device) * 8

    def grads(fn, dtype):
        Q = Q0.to(dtype).clone().requires_grad_()
        D = D0.to(dtype).clone().requires_grad_()
        loss = torch.nn.functional.cross_entropy(fn(Q, D).float(), labels)
        return torch.autograd.grad(loss, (Q, D))

    wQ, wD = grads(lambda q, d: scores.colbert_scores(q, d, backend="torch"), torch.float64)
    rows = [("tilemaxsim drop-in", lambda q, d: dropin.colbert_scores(q, d))]
    rows.append(("PyLate torch (bf16 einsum)", lambda q, d: scores.colbert_scores(q, d, backend="torch")))
    if a.device == "cuda":
        rows.append(("LIK (PyLate backend='lik')", lambda q, d: scores.colbert_scores(q, d, backend="lik")))
    print(f"device {a.device}; relative error against float64 autograd")
    print("| path | dQ | dD |\n|---|---:|---:|")
    for name, fn in rows:
        try:
            gQ, gD = grads(fn, torch.bfloat16)
            print(f"| {name} | {rel(gQ, wQ):.4f} | {rel(gD, wD):.4f} |")
        except Exception as e:  # a peer that cannot run here is reported, not fatal
            print(f"| {name} | error: {type(e).__name__}: {e} | |")


if __name__ == "__main__":
    main()
