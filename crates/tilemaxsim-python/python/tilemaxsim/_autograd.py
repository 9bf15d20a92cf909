"""Gradients of MaxSim. The forward pass scores with the engine and saves, for every (query,
document, query token), the index of its best document token as int32; the backward pass
routes each score's gradient through those tokens only:

    dQ[a, i]      = sum_b  g[a, b] * D[b, argmax[a, b, i]]
    dD[b, argmax] += sum_a g[a, b] * Q[a, i]

The argmax is taken over similarities computed as the engine computes the scores: exact products
of the stored values summed in float32 (16-bit inputs on CUDA: tensor-core products with float32
output; otherwise float32 matrix products with TF32 off), so each token's gradient goes to the
document token that its score took. Both passes run as torch operations on the inputs' device,
over chunks of documents so the similarity blocks stay small. Padded documents only (packed
ones: pad first).
"""

from __future__ import annotations

import contextlib

import torch

from ._engine import _run

# Bytes of float32 similarities materialized at once while finding the argmax.
_BLOCK_BYTES = 256 << 20
_HALF = (torch.float16, torch.bfloat16)


@contextlib.contextmanager
def _ieee_float32():
    """float32 matrix products in full float32 (not TF32, whatever the caller set)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        old = matmul.fp32_precision
        matmul.fp32_precision = "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = old
    else:  # torch before 2.9
        old = matmul.allow_tf32
        matmul.allow_tf32 = False
        try:
            yield
        finally:
            matmul.allow_tf32 = old


def _products(a, b):
    """`a @ b` (2-D or batched 3-D) in float32: exact products of the values as stored, float32
    sums, as the engine forms its similarities."""
    if a.is_cuda and a.dtype in _HALF and b.dtype == a.dtype:
        return (torch.bmm if a.ndim == 3 else torch.mm)(a, b, out_dtype=torch.float32)
    with _ieee_float32():
        return torch.matmul(a.float(), b.float())


def _argmax(Q, D, lengths, pairs):
    """int32 `[A, B, Lq]` (pairs: `[B, Lq]`): each query token's best document token."""
    A, Lq, d = Q.shape
    B, Ld, _ = D.shape
    valid = None
    if lengths is not None:
        valid = torch.arange(Ld, device=D.device)[None, :] < lengths[:, None]
    if pairs:
        sims = _products(Q, D.transpose(1, 2))  # [B, Lq, Ld]
        if valid is not None:
            sims = sims.masked_fill(~valid[:, None, :], float("-inf"))
        return sims.argmax(dim=2).to(torch.int32)
    out = torch.empty((A, B, Lq), dtype=torch.int32, device=Q.device)
    rows = Q.reshape(A * Lq, d)
    step = max(1, _BLOCK_BYTES // max(1, A * Lq * Ld * 4))
    for s in range(0, B, step):
        e = min(B, s + step)
        sims = _products(rows, D[s:e].reshape((e - s) * Ld, d).t()).view(A, Lq, e - s, Ld)
        if valid is not None:
            sims = sims.masked_fill(~valid[None, None, s:e, :], float("-inf"))
        out[:, s:e] = sims.argmax(dim=3).transpose(1, 2).to(torch.int32)
    return out


class MaxSim(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, D, lengths, pairs, check):
        layout = {} if lengths is None else {"doc_lengths": lengths}
        scores = _run(Q, D, layout, pairs=pairs, check=check)
        with torch.no_grad():
            argmax = _argmax(Q, D, lengths, pairs)
        ctx.save_for_backward(Q, D, argmax)
        ctx.pairs = pairs
        return scores

    @staticmethod
    def backward(ctx, g):
        Q, D, argmax = ctx.saved_tensors
        A, Lq, d = Q.shape
        B, Ld, _ = D.shape
        g = g.float()
        idx = argmax.long()
        dQ = dD = None
        if ctx.pairs:
            best = torch.gather(D.float(), 1, idx[..., None].expand(-1, -1, d))  # [B, Lq, d]
            if ctx.needs_input_grad[0]:
                dQ = (g[:, None, None] * best).to(Q.dtype)
            if ctx.needs_input_grad[1]:
                contrib = g[:, None, None] * Q.float()  # [B, Lq, d]
                dD = torch.zeros((B, Ld, d), dtype=torch.float32, device=D.device)
                dD.scatter_add_(1, idx[..., None].expand(-1, -1, d), contrib)
                dD = dD.to(D.dtype)
            return dQ, dD, None, None, None
        flat = D.float().reshape(B * Ld, d)
        rows = idx + (torch.arange(B, device=D.device) * Ld)[None, :, None]  # [A, B, Lq]
        if ctx.needs_input_grad[0]:
            dQ = torch.zeros((A, Lq, d), dtype=torch.float32, device=Q.device)
            step = max(1, _BLOCK_BYTES // max(1, A * Lq * d * 4))
            for s in range(0, B, step):
                e = min(B, s + step)
                best = flat[rows[:, s:e]]  # [A, b, Lq, d]
                dQ += torch.einsum("ab,abid->aid", g[:, s:e], best)
            dQ = dQ.to(Q.dtype)
        if ctx.needs_input_grad[1]:
            dflat = torch.zeros((B * Ld, d), dtype=torch.float32, device=D.device)
            Qf = Q.float()
            step = max(1, _BLOCK_BYTES // max(1, A * Lq * d * 4))
            for s in range(0, B, step):
                e = min(B, s + step)
                contrib = g[:, s:e, None, None] * Qf[:, None]  # [A, b, Lq, d]
                dflat.index_add_(0, rows[:, s:e].reshape(-1), contrib.reshape(-1, d))
            dD = dflat.reshape(B, Ld, d).to(D.dtype)
        return dQ, dD, None, None, None


def maxsim_with_grad(Q, D, layout, *, pairs, check):
    if "cu_seqlens" in layout:
        raise NotImplementedError(
            "gradients through packed documents (cu_seqlens) are not supported; pass padded documents with doc_lengths"
        )
    return MaxSim.apply(Q, D, layout.get("doc_lengths"), pairs, check)
