"""Gradients of MaxSim. The forward pass saves, for every (query, document, query token), the
index of its best document token as int32; the backward pass routes each score's gradient
through those tokens only:

    dQ[a, i]      = sum_b  g[a, b] * D[b, argmax[a, b, i]]
    dD[b, argmax] += sum_a g[a, b] * Q[a, i]

On CUDA with f16/bf16/f32 inputs of one dtype and d a multiple of 8 up to 128 (float32: the
documents in the split range, `_split.split_checked`; the forward multiplies float16 parts of
both sides on the tensor cores, as the engine's float32 kernels do), the engine's training
kernels do both passes (`_native.train_forward` writes the scores and the argmax in one pass;
`_native.train_backward` gathers dQ and accumulates dD per document), for padded documents (with
lengths), packed ones (`cu_seqlens`), pairs and the distillation layout (`group`: document b
against query b // K). Elsewhere (other d, float32 out of the split range, the CPU) the engine
scores, the argmax is found by torch products formed as the engine forms its similarities (exact
products of the stored values summed in float32, TF32 off; float32 on CUDA through float16 parts
on the tensor cores, `_split_queries`, whose best similarities are then the scores too), over
chunks of documents so the similarity blocks stay small, and the backward pass sums the rows
each gradient takes with `embedding_bag` (per-sample weights, no atomics); packed documents are
padded there first.
`pair_scores` serves gradient-free pairs on CUDA through the same forward kernel.
"""

from __future__ import annotations

import contextlib

import torch

from . import _native
from ._arrays import dlpack, same_device, stream_of
from ._engine import _check_finite, _run

# Bytes of float32 similarities materialized at once while finding the argmax (and of the
# backward pass's index arrays).
_BLOCK_BYTES = 256 << 20
_HALF = (torch.float16, torch.bfloat16)
_FUSED = (*_HALF, torch.float32)  # the training kernels' dtypes


@contextlib.contextmanager
def _exact_sums():
    """Matrix products in full float32 whatever the caller set: float32 inputs not as TF32
    (`fp32_precision`, `allow_tf32` before torch 2.9), 16-bit inputs not summed in float16
    (`allow_fp16_accumulation`)."""
    matmul = torch.backends.cuda.matmul
    want: dict[str, object] = {"fp32_precision": "ieee"} if hasattr(matmul, "fp32_precision") else {"allow_tf32": False}
    if getattr(matmul, "allow_fp16_accumulation", False):
        want["allow_fp16_accumulation"] = False
    old = {k: getattr(matmul, k) for k in want}
    for k, v in want.items():
        setattr(matmul, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(matmul, k, v)


def _products(a, b):
    """`a @ b` (2-D or batched 3-D) in float32: exact products of the values as stored, float32
    sums, as the engine forms its similarities."""
    with _exact_sums():
        if a.is_cuda and a.dtype in _HALF and b.dtype == a.dtype:
            return (torch.bmm if a.ndim == 3 else torch.mm)(a, b, out_dtype=torch.float32)
        return torch.matmul(a.float(), b.float())


# float32 similarities for the argmax on the tensor cores (CUDA): each value split into float16
# parts, the three products hi·hi + lo·hi + hi·lo in one float16 product over 3d with float32
# sums, as the engine's float32 kernels form them (`maxsim_bulk_split`). Each query row is first
# scaled by the power of two that brings its largest |q| into [2^14, 2^15) (an argmax is the same
# for any positive scale of its row), so its parts lose nothing to float16's range; a document's
# low part is scaled by 2^11 and the query's high part by 2^-11 against it. Documents must lie in
# the split's range (`_split.split_checked`). The products carry the values to about 2^-22 of the
# row's largest similarity, the engine's precision, at three times a float16 product's work on
# the tensor cores instead of IEEE float32 products on the CUDA cores.
_LOW_SCALE = 11


def _ldexp(x, k):
    """x · 2^k, exactly where the result is a normal float32, for k up to ±252 (in two steps:
    2^k alone is not a float32 past ±127)."""
    half = torch.div(k, 2, rounding_mode="floor")
    return torch.ldexp(torch.ldexp(x, half), k - half)


def _split_queries(Q):
    """`[..., 3d]` float16, the row-scaled query's parts (hi, lo, hi · 2^-11), and `[..., 1]`
    int32, each row's scale as a power of two (`_ldexp(x, -shift)` undoes it)."""
    _, e = torch.frexp(Q.abs().amax(dim=-1, keepdim=True))  # the largest |q| in [2^(e-1), 2^e)
    shift = 15 - e
    q = _ldexp(Q, shift)
    hi = q.half()
    lo = (q - hi.float()).half()
    return torch.cat([hi, lo, (hi.float() * 2.0**-_LOW_SCALE).half()], dim=-1), shift


def _split_documents(D):
    """`[..., 3d]` float16: the document tokens' parts (hi, hi, lo · 2^11), against
    `_split_queries`'s."""
    hi = D.half()
    lo = ((D - hi.float()) * 2.0**_LOW_SCALE).half()
    return torch.cat([hi, hi, lo], dim=-1)


def _split_ok(Q, D, check) -> bool:
    """Whether the argmax's products go through `_split_queries` / `_split_documents`: float32
    CUDA inputs, finite queries, documents in the split's range (checked again with `check`)."""
    if not (Q.is_cuda and Q.dtype == torch.float32 and D.dtype == torch.float32 and D.device == Q.device):
        return False
    from ._split import split_checked

    return bool(torch.isfinite(Q).all()) and split_checked(D, bool(check))


def _best(Q, D, lengths, pairs, split=False):
    """Each query token's best document token (int32) and its similarity (float32), each
    `[A, B, Lq]` (pairs: `[B, Lq]`); `split`: the products through the float16 parts (the
    similarities scaled back)."""
    A, Lq, d = Q.shape
    B, Ld, _ = D.shape
    parts = _split_documents if split else (lambda x: x)  # the documents' side, a chunk at a time
    shift = None
    if split:
        Q, shift = _split_queries(Q)
        d = 3 * d
    valid = None
    if lengths is not None:
        valid = torch.arange(Ld, device=D.device)[None, :] < lengths[:, None]
    if pairs:
        sims = _products(Q, parts(D).transpose(1, 2))  # [B, Lq, Ld]
        if valid is not None:
            sims = sims.masked_fill(~valid[:, None, :], float("-inf"))
        best, arg = sims.max(dim=2)
        return arg.to(torch.int32), best if shift is None else _ldexp(best, -shift[..., 0])
    arg_out = torch.empty((A, B, Lq), dtype=torch.int32, device=Q.device)
    best_out = torch.empty((A, B, Lq), dtype=torch.float32, device=Q.device)
    rows = Q.reshape(A * Lq, d)
    # A document's bytes at once: its float32 similarities, and with the split the float16 parts
    # of its tokens and their float32 temporaries (about 16 bytes a value).
    step = max(1, _BLOCK_BYTES // max(1, A * Lq * Ld * 4 + (Ld * d * 16 // 3 if split else 0)))
    for s in range(0, B, step):
        e = min(B, s + step)
        sims = _products(rows, parts(D[s:e]).reshape((e - s) * Ld, d).t()).view(A, Lq, e - s, Ld)
        if valid is not None:
            sims = sims.masked_fill(~valid[None, None, s:e, :], float("-inf"))
        best, arg = sims.max(dim=3)  # [A, Lq, e - s]
        if shift is not None:
            best = _ldexp(best, -shift)
        arg_out[:, s:e] = arg.transpose(1, 2)
        best_out[:, s:e] = best.transpose(1, 2)
    return arg_out, best_out


class MaxSim(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, D, lengths, pairs, check):
        layout = {} if lengths is None else {"doc_lengths": lengths}
        same_device({"Q": Q, "D": D, **layout})
        stream_of(Q)  # refuses a CUDA graph's capture, as `_run` does
        # Through the float16 parts the scores come from the same products as the argmax (the
        # engine's float32 scores would be a second pass over the documents); the inputs are
        # finite there, so `check` has nothing to refuse.
        split = _split_ok(Q, D, check)
        scores = None if split else _run(Q, D, layout, pairs=pairs, check=check)
        with torch.no_grad():
            argmax, best = _best(Q, D, lengths, pairs, split)
        if scores is None:
            scores = best.sum(dim=-1)
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
        # Both gradients as weighted sums of rows (`embedding_bag`, sum mode, with per-sample
        # weights): nothing of size [A, B, Lq, d] is formed, no atomics, deterministic. Documents
        # a chunk at a time, so the index arrays (int64, a few of [A, chunk, Lq]) stay small.
        flat = D.float().reshape(B * Ld, d)
        qrows = Q.float().reshape(A * Lq, d)
        if ctx.needs_input_grad[0]:
            dQ = torch.zeros((A * Lq, d), dtype=torch.float32, device=Q.device)
        if ctx.needs_input_grad[1]:
            dD = torch.empty((B * Ld, d), dtype=torch.float32, device=D.device)
        step = max(1, _BLOCK_BYTES // max(1, 64 * A * Lq))  # about 60 bytes of indices a (a, b, i)
        for s in range(0, B, step):
            e = min(B, s + step)
            local = idx[:, s:e] + (torch.arange(e - s, device=D.device) * Ld)[None, :, None]  # [A, e - s, Lq]
            if dQ is not None:
                dQ += _gradient_queries(flat[s * Ld : e * Ld], local, g[:, s:e])
            if dD is not None:
                dD[s * Ld : e * Ld] = _gradient_documents(qrows, local, g[:, s:e], (e - s) * Ld)
        if dQ is not None:
            dQ = dQ.reshape(A, Lq, d).to(Q.dtype)
        if dD is not None:
            dD = dD.reshape(B, Ld, d).to(D.dtype)
        return dQ, dD, None, None, None


def _gradient_queries(flat, rows, g):
    """`[A · Lq, d]`: row (a, i) is sum_b g[a, b] · flat[rows[a, b, i]] (flat: the documents'
    token rows, float32; rows `[A, B, Lq]` into it)."""
    A, B, Lq = rows.shape
    bags = rows.transpose(1, 2).reshape(A * Lq, B)  # bag (a, i): its B rows, one a document
    weights = g[:, None, :].expand(A, Lq, B).reshape(A * Lq, B)
    return torch.nn.functional.embedding_bag(bags, flat, mode="sum", per_sample_weights=weights)


def _gradient_documents(qrows, rows, g, n):
    """`[n, d]`: row r is the sum, over every (a, b, i) whose best token is r (rows[a, b, i] =
    r), of g[a, b] · qrows[a · Lq + i] (qrows: the query rows, float32); 0 where none is."""
    A, B, Lq = rows.shape
    target = rows.reshape(-1)
    order = torch.argsort(target, stable=True)  # the contributions grouped by their row r
    source = torch.arange(A * Lq, device=rows.device).view(A, 1, Lq).expand(A, B, Lq)  # a · Lq + i
    weights = g[:, :, None].expand(A, B, Lq).reshape(-1)
    counts = torch.bincount(target, minlength=n)
    offsets = torch.cumsum(counts, 0) - counts
    return torch.nn.functional.embedding_bag(
        source.reshape(-1)[order], qrows, offsets, mode="sum", per_sample_weights=weights[order]
    )


def _empty(shape, *, dtype, device):
    """Outputs of the training kernels (the tests poison them here)."""
    return torch.empty(shape, dtype=dtype, device=device)


def fused_ok(Q, D, check=False) -> bool:
    """Whether the training kernels take these inputs (float32: the documents in the split
    range, checked again with `check`)."""
    shape_ok = (
        Q.is_cuda
        and D.is_cuda
        and Q.device == D.device
        and Q.dtype == D.dtype
        and Q.dtype in _FUSED
        and Q.ndim == 3
        and Q.shape[2] % 8 == 0
        and 0 < Q.shape[2] <= 128
        and Q.shape[0] > 0
        and Q.shape[1] > 0
    )
    if not shape_ok or Q.dtype != torch.float32:
        return shape_ok
    from ._split import split_checked

    return split_checked(D, bool(check))


def _aligned(t):
    """`t` with contiguous, 16-byte aligned token rows (a copy where they are not)."""
    unit = 16 // t.element_size()
    if t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(s % unit == 0 for s in t.stride()[:-1]):
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
        split_checked=Q.dtype == torch.float32,  # fused_ok checked them
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
            split_checked=Q.dtype == torch.float32,  # as in the forward
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
    if fused_ok(Q, D, check):
        return FusedMaxSim.apply(Q, D, layout.get("doc_lengths"), layout.get("cu_seqlens"), group, check)
    if "cu_seqlens" in layout:
        D, lengths = _padded(D, layout["cu_seqlens"])
        layout = {"doc_lengths": lengths}
    if group > 1:
        Q = Q.repeat_interleave(group, dim=0)
    return MaxSim.apply(Q, D, layout.get("doc_lengths"), group > 0, check)
