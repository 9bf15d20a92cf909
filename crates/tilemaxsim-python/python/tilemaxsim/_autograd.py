"""Gradients of MaxSim. The forward pass scores with the engine and saves, for every (query,
document, query token), the index of its best document token as int32; the backward pass
routes each score's gradient through those tokens only:

    dQ[a, i]      = sum_b  g[a, b] * D[b, argmax[a, b, i]]
    dD[b, argmax] += sum_a g[a, b] * Q[a, i]

Both run as torch operations on the inputs' device (GPU or CPU), over chunks of documents so the
similarity blocks behind the argmax and the one-hot blocks of the backward pass stay small.
Padded documents only (packed ones: pad first).
"""

from __future__ import annotations

import torch

from ._api import _run

# Bytes of float32 similarities materialized at once while finding the argmax.
_BLOCK_BYTES = 256 << 20


def _argmax(Q, D, lengths, pairs):
    """int32 `[A, B, Lq]` (pairs: `[B, Lq]`): each query token's best document token."""
    A, Lq, _ = Q.shape
    B, Ld, _ = D.shape
    valid = None
    if lengths is not None:
        valid = torch.arange(Ld, device=D.device)[None, :] < lengths[:, None]
    # Similarities in the inputs' dtype (tensor cores for 16-bit inputs, f32 accumulation): the
    # scores themselves come from the engine; these only pick each token's best match.
    if pairs:
        sims = torch.einsum("bid,bjd->bij", Q, D.to(Q.dtype))
        if valid is not None:
            sims = sims.masked_fill(~valid[:, None, :], float("-inf"))
        return sims.argmax(dim=2).to(torch.int32)
    out = torch.empty((A, B, Lq), dtype=torch.int32, device=Q.device)
    step = max(1, _BLOCK_BYTES // max(1, A * Lq * Ld * 4))
    for s in range(0, B, step):
        e = min(B, s + step)
        sims = torch.einsum("aid,bjd->abij", Q, D[s:e].to(Q.dtype))
        if valid is not None:
            sims = sims.masked_fill(~valid[None, s:e, None, :], float("-inf"))
        out[:, s:e] = sims.argmax(dim=3).to(torch.int32)
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
        # The gradient of each score goes to its query tokens' argmax document tokens only: as a
        # one-hot matrix P (g at each argmax), dQ = P D and dD = P^T Q, two products on the
        # tensor cores for 16-bit inputs, over chunks of documents.
        Q, D, argmax = ctx.saved_tensors
        A, Lq, d = Q.shape
        B, Ld, _ = D.shape
        idx = argmax.long()
        Dq = D.to(Q.dtype)
        need_q, need_d = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if ctx.pairs:
            P = torch.zeros((B, Lq, Ld), dtype=Q.dtype, device=Q.device)
            P.scatter_(2, idx[..., None], g.to(Q.dtype)[:, None, None].expand(B, Lq, 1).contiguous())
            dQ = torch.einsum("bij,bjd->bid", P, Dq) if need_q else None
            dD = torch.einsum("bij,bid->bjd", P, Q).to(D.dtype) if need_d else None
            return dQ, dD, None, None, None
        dQ = torch.zeros((A, Lq, d), dtype=torch.float32, device=Q.device) if need_q else None
        dD = torch.empty((B, Ld, d), dtype=D.dtype, device=D.device) if need_d else None
        step = max(1, _BLOCK_BYTES // max(1, A * Lq * Ld * Q.element_size()))
        gq = g.to(Q.dtype)
        for s in range(0, B, step):
            e = min(B, s + step)
            P = torch.zeros((A, e - s, Lq, Ld), dtype=Q.dtype, device=Q.device)
            P.scatter_(3, idx[:, s:e, :, None], gq[:, s:e, None, None].expand(A, e - s, Lq, 1).contiguous())
            if need_q:
                dQ += torch.einsum("abij,bjd->aid", P, Dq[s:e]).float()
            if need_d:
                dD[s:e] = torch.einsum("abij,aid->bjd", P, Q).to(D.dtype)
        return (dQ.to(Q.dtype) if need_q else None), dD, None, None, None


def maxsim_with_grad(Q, D, layout, *, pairs, check):
    if "cu_seqlens" in layout:
        raise NotImplementedError(
            "gradients through packed documents (cu_seqlens) are not supported; pass padded documents with doc_lengths"
        )
    return MaxSim.apply(Q, D, layout.get("doc_lengths"), pairs, check)
