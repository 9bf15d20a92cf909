"""Gradients of MaxSim. The forward pass saves, for every (query, document, query token), the
index of its best document token as int32; the backward pass routes each score's gradient
through those tokens only:

    dQ[a, i]      = sum_b  g[a, b] * D[b, argmax[a, b, i]]
    dD[b, argmax] += sum_a g[a, b] * Q[a, i]

On CUDA with f16/bf16 inputs of one dtype and d a multiple of 8 up to 128, the engine's training
kernels do both passes (`_native.train_forward` writes the scores and the argmax in one pass;
`_native.train_backward` gathers dQ and accumulates dD per document), for padded documents
(with lengths), packed ones (`cu_seqlens`), pairs and the distillation layout (`group`: document
b against query b // K). Elsewhere the engine scores, the argmax is found by torch products
formed as the engine forms its similarities (exact products of the stored values summed in
float32, TF32 off), and the backward pass gathers and scatters in torch, over chunks of documents
so the similarity blocks stay small; packed documents are padded there first.
`pair_scores` serves gradient-free pairs on CUDA through the same forward kernel.
"""

from __future__ import annotations

import contextlib

import torch

from . import _native
from ._arrays import dlpack, stream_of
from ._engine import _check_finite, _run

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


def _empty(shape, *, dtype, device):
    """Outputs of the training kernels (the tests poison them here)."""
    return torch.empty(shape, dtype=dtype, device=device)


def fused_ok(Q, D) -> bool:
    """Whether the training kernels take these inputs."""
    return (
        Q.is_cuda
        and D.is_cuda
        and Q.device == D.device
        and Q.dtype == D.dtype
        and Q.dtype in _HALF
        and Q.ndim == 3
        and Q.shape[2] % 8 == 0
        and 0 < Q.shape[2] <= 128
        and Q.shape[0] > 0
        and Q.shape[1] > 0
    )


def _aligned(t):
    """`t` with contiguous, 16-byte aligned token rows (a copy where they are not)."""
    if t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(s % 8 == 0 for s in t.stride()[:-1]):
        return t
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _layout_kwargs(layout):
    return {k: dlpack(v) for k, v in layout.items() if k in ("cu_seqlens", "doc_lengths")}


def _forward(Q, D, layout, group, keep_argmax):
    """Scores (`[A, B]`, or `[B]` with a group) and, if asked, the argmax `[pairs, Lq]`."""
    A, Lq = Q.shape[0], Q.shape[1]
    B = layout["cu_seqlens"].shape[0] - 1 if "cu_seqlens" in layout else D.shape[0]
    shape = (B,) if group else (A, B)
    # Queries past 32 tokens add their 32-row chunks into the scores.
    zeros = torch.zeros if Lq > 32 else _empty
    out = zeros(shape, dtype=torch.float32, device=Q.device)
    argmax = _empty(shape + (Lq,), dtype=torch.int32, device=Q.device) if keep_argmax else None
    _native.train_forward(
        dlpack(Q),
        dlpack(D),
        dlpack(out),
        None if argmax is None else dlpack(argmax),
        group=group,
        stream=stream_of(Q),
        **_layout_kwargs(layout),
    )
    return out, argmax


def pair_scores(Q, D, layout, group):
    """Gradient-free scores through the forward kernel (pairs and groups on CUDA)."""
    return _forward(_aligned(Q), _aligned(D), layout, group, keep_argmax=False)[0]


class FusedMaxSim(torch.autograd.Function):
    """The training kernels' forward and backward passes (see the module docs)."""

    @staticmethod
    def forward(ctx, Q, D, lengths, offsets, group, check):
        layout = {k: v for k, v in (("doc_lengths", lengths), ("cu_seqlens", offsets)) if v is not None}
        if check:
            _check_finite(Q, D, layout)
        Q, D = _aligned(Q), _aligned(D)
        scores, argmax = _forward(Q, D, layout, group, keep_argmax=True)
        ctx.save_for_backward(Q, D, argmax)
        ctx.layout, ctx.group = layout, group
        return scores

    @staticmethod
    def backward(ctx, g):
        Q, D, argmax = ctx.saved_tensors
        want_q, want_d = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dQ = _empty(Q.shape, dtype=Q.dtype, device=Q.device) if want_q else None
        dD = None
        if want_d:
            # A padded dD is written whole; a packed one only at its documents' rows.
            zeros = torch.zeros if "cu_seqlens" in ctx.layout else _empty
            dD = zeros(D.shape, dtype=D.dtype, device=D.device)
        _native.train_backward(
            dlpack(Q),
            dlpack(D),
            dlpack(argmax),
            dlpack(g.float().contiguous()),
            None if dQ is None else dlpack(dQ),
            None if dD is None else dlpack(dD),
            group=ctx.group,
            stream=stream_of(Q),
            **_layout_kwargs(ctx.layout),
        )
        return dQ, dD, None, None, None, None


def _padded(D, offsets):
    """Packed documents `[T, d]` as a padded batch and its lengths (differentiable in D)."""
    lengths = offsets[1:] - offsets[:-1]
    width = max(1, int(lengths.max())) if lengths.numel() else 1
    rows = offsets[:-1, None] + torch.arange(width, device=D.device)[None, :]
    valid = torch.arange(width, device=D.device)[None, :] < lengths[:, None]
    rows = torch.where(valid, rows, offsets[:-1, None].clamp(max=max(0, D.shape[0] - 1)))
    return D[rows.clamp(0, max(0, D.shape[0] - 1))], lengths


def maxsim_with_grad(Q, D, layout, *, pairs, check, group=None):
    """Differentiable scores: every query against every document, pairs (`[B]`), or with
    `group` = K document b against query b // K (`[B]`)."""
    group = group or (1 if pairs else 0)
    if fused_ok(Q, D):
        return FusedMaxSim.apply(Q, D, layout.get("doc_lengths"), layout.get("cu_seqlens"), group, check)
    if "cu_seqlens" in layout:
        D, lengths = _padded(D, layout["cu_seqlens"])
        layout = {"doc_lengths": lengths}
    if group > 1:
        Q = Q.repeat_interleave(group, dim=0)
    return MaxSim.apply(Q, D, layout.get("doc_lengths"), group > 0, check)
