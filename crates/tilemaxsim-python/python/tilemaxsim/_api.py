"""The functional API: `maxsim`, `maxsim_pairs` and `topk` over torch tensors or numpy arrays,
scored by `_engine` (through `_autograd` where an input requires a gradient).

Shapes (d the embedding width):
- queries `Q`: `[Lq, d]` (one query) or `[A, Lq, d]`;
- documents `D`: padded `[B, Ld, d]` (with `doc_lengths` `[B]` or `d_mask` `[B, Ld]`), or packed
  `[T, d]` with `cu_seqlens` `[B + 1]` (document i is rows `cu_seqlens[i] .. cu_seqlens[i+1]`).

Masks exclude tokens: a masked query token adds nothing, a masked document token takes no part
in the max. (PyLate's masks, which let a masked document token count as a zero vector, are in
`tilemaxsim.integrations.pylate`.) Any strides are accepted (token rows whose stride along d is
not 1 are copied first). Scores are float32 from float32/float16/bfloat16 inputs, computed by
the engine; float64 inputs are scored in float64 (`_float64.py`). CUDA tensors are scored in
place on torch's current stream, and the result stays on the device: nothing waits for the GPU.

Non-finite values, the same rule on both devices: unchecked by default, a query holding NaN
scores NaN against every document, and a document holding NaN scores NaN for every query (an
infinite value gives an unspecified score); `check=True` raises `ValueError` instead when the
queries or the documents' tokens hold NaN or ±Inf (on CUDA the check waits for the GPU).
"""

from __future__ import annotations

import numpy as np

from . import _native
from ._arrays import Array, as_array, dlpack, is_float64, is_torch, same_device, stream_of, torch
from ._engine import _check_finite, _documents, _queries, _run

if torch is not None:  # gradients are torch's: without torch no input requires one
    from ._autograd import fused_ok, maxsim_with_grad, pair_scores
    from ._split import split_checked


_FAST = () if torch is None else (torch.float16, torch.bfloat16, torch.float32)


def _fast(Q, D):
    """The common call, CUDA tensors with no options and no gradient, with the fewest Python
    steps (the engine checks shapes and dtypes again): its host time is the call's floor."""
    if Q.ndim == 2:  # one query: the engine takes [Lq, d] as a batch of one, scores [B]
        # (an int size: torch.empty parses it 1 µs faster than a tuple)
        out = torch.empty(D.shape[0], dtype=torch.float32, device=Q.device)
    else:
        out = torch.empty((Q.shape[0], D.shape[0]), dtype=torch.float32, device=Q.device)
    # No query lengths: each query is all of its Lq rows.
    # float32 documents against float32 queries: on the tensor cores once their range is checked.
    checked = D.dtype is torch.float32 and Q.dtype is torch.float32 and split_checked(D)
    _native.score(dlpack(Q), None, dlpack(D), dlpack(out), split_checked=checked, stream=stream_of(Q))
    return out


def _needs_grad(Q, D) -> bool:
    """Whether the engine's scores need the autograd wrapper (float64 is differentiated by
    torch itself, through the float64 path's own operations)."""
    return (
        is_torch(Q)
        and torch.is_grad_enabled()
        and (Q.requires_grad or D.requires_grad)
        and not (is_float64(Q) or is_float64(D))
    )


def maxsim(Q, D, *, q_mask=None, d_mask=None, doc_lengths=None, cu_seqlens=None, check=None) -> Array:
    """MaxSim of every query against every document: `[B]` for one query `[Lq, d]`, else
    `[A, B]`, float32 (float64 for float64 inputs), on the inputs' device. NaN in a query or a
    document gives NaN scores; `check=True` raises on NaN/Inf instead (module docs).
    Documents `[A, K, Ld, d]` (the distillation layout) give `[A, K]`: query a against its own
    K documents. Differentiable in Q and D when either requires grad."""
    # The common call first, cheapest tests first (each attribute read costs host time).
    if (
        q_mask is None
        and d_mask is None
        and doc_lengths is None
        and cu_seqlens is None
        and not check
        and torch is not None
        and type(Q) is torch.Tensor
        and type(D) is torch.Tensor
        and D.ndim == 3
        and Q.is_cuda
        and Q.get_device() == D.get_device()
        and Q.dtype in _FAST
        and D.dtype in _FAST
        and Q.ndim in (2, 3)
        and Q.shape[-2] > 0
        and Q.stride(-1) == 1
        and D.stride(-1) == 1
        and not (torch.is_grad_enabled() and (Q.requires_grad or D.requires_grad))
    ):
        return _fast(Q, D)
    if getattr(D, "ndim", 0) == 4:
        return _grouped(Q, D, q_mask, d_mask, check)
    Q, single = _queries(Q, q_mask)
    D, layout = _documents(D, d_mask, doc_lengths, cu_seqlens)
    if _needs_grad(Q, D):
        out = maxsim_with_grad(Q, D, layout, pairs=False, check=check)
    else:
        out = _run(Q, D, layout, pairs=False, check=check)
    return out[0] if single else out


def maxsim_pairs(Q, D, *, q_mask=None, d_mask=None, doc_lengths=None, cu_seqlens=None, check=None) -> Array:
    """MaxSim of aligned pairs: query i `[B, Lq, d]` against document i, `[B]` float32."""
    Q, _ = _queries(Q, q_mask)
    D, layout = _documents(D, d_mask, doc_lengths, cu_seqlens)
    return _by_group(Q, D, layout, 1, check)


def _by_group(Q, D, layout, group, check):
    """Document b against query b // group, `[B]`: the training kernels on CUDA (with or without
    a gradient), else the engine's pairs (queries repeated for groups past 1)."""
    b = layout["cu_seqlens"].shape[0] - 1 if "cu_seqlens" in layout else D.shape[0]
    if b != Q.shape[0] * group:
        what = "maxsim_pairs" if group == 1 else f"documents in groups of {group} a query"
        raise ValueError(f"{what}: {Q.shape[0]} queries for {b} documents")
    if _needs_grad(Q, D):
        return maxsim_with_grad(Q, D, layout, pairs=True, check=check, group=group)
    if is_torch(Q) and is_torch(D) and fused_ok(Q, D, check):
        if check:
            _check_finite(Q, D, layout)
        return pair_scores(Q, D, layout, group)
    if group > 1:
        Q = Q.repeat_interleave(group, dim=0) if is_torch(Q) else np.repeat(Q, group, axis=0)
    return _run(Q, D, layout, pairs=True, check=check)


def _grouped(Q, D, q_mask, d_mask, check):
    """Queries `[A, Lq, d]` against their own documents `[A, K, Ld, d]`: `[A, K]`."""
    D = as_array(D, "D", keep_float64=True)
    A, K = D.shape[0], D.shape[1]
    Q, _ = _queries(Q, q_mask)
    if Q.shape[0] != A:
        raise ValueError(f"{Q.shape[0]} queries for documents of shape {tuple(D.shape)} ([A, K, Ld, d])")
    if d_mask is not None:
        if tuple(d_mask.shape) != tuple(D.shape[:3]):
            raise ValueError(f"d_mask: expected shape {tuple(D.shape[:3])}, got {tuple(d_mask.shape)}")
        d_mask = d_mask.reshape(A * K, D.shape[2])
    if A == 0 or K == 0:
        if is_torch(D):
            return torch.zeros((A, K), dtype=torch.float32, device=D.device)
        return np.zeros((A, K), np.float32)
    D, layout = _documents(D.reshape(A * K, *D.shape[2:]), d_mask, None, None)
    return _by_group(Q, D, layout, K, check).reshape(A, K)


def _slice_docs(D, layout, start, end):
    if "cu_seqlens" in layout:
        off = layout["cu_seqlens"][start : end + 1]
        return D, {"cu_seqlens": off}
    out = {"doc_lengths": layout["doc_lengths"][start:end]} if "doc_lengths" in layout else {}
    return D[start:end], out


def _order_keys(scores, idx):
    """int64 keys whose order is the library's: score descending (-0 == +0, NaN lowest), then
    the lower index first; unique, so `topk` on them is deterministic."""
    s = torch.nan_to_num(scores.float(), nan=float("-inf")) + 0.0
    bits = s.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    # The score's order as a signed 32-bit value (negative floats below positive ones), in the
    # high half; the index, reversed, in the low half.
    ordered = torch.where(bits >= 0x80000000, 0x7FFFFFFF - bits, bits)
    return (ordered << 32) | (0xFFFFFFFF - idx)


def _merge(best, chunk_scores, first, k):
    """The k best of the running best and one chunk's scores, ties to the lower index."""
    s, i = best
    if is_torch(chunk_scores):
        idx = torch.arange(first, first + chunk_scores.shape[1], device=chunk_scores.device)
        idx = idx.expand(chunk_scores.shape[0], -1)
        s = chunk_scores if s is None else torch.cat([s, chunk_scores], dim=1)
        i = idx if i is None else torch.cat([i, idx], dim=1)
        pos = torch.topk(_order_keys(s, i), min(k, s.shape[1]), dim=1).indices
        return torch.gather(s, 1, pos), torch.gather(i, 1, pos)
    idx = np.broadcast_to(np.arange(first, first + chunk_scores.shape[1]), chunk_scores.shape)
    s = chunk_scores if s is None else np.concatenate([s, chunk_scores], axis=1)
    i = idx if i is None else np.concatenate([i, idx], axis=1)
    key = np.nan_to_num(s, nan=-np.inf, neginf=-np.inf, posinf=np.inf)
    order = np.argsort(-key, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, axis=1), np.take_along_axis(i, order, axis=1)


def topk(
    Q, D, k, *, q_mask=None, d_mask=None, doc_lengths=None, cu_seqlens=None, chunk=65536, check=None
) -> tuple[Array, Array]:
    """The `k` best documents per query: (scores, indices), each `[min(k, B)]` for one query,
    else `[A, min(k, B)]`, best first, ties to the lower index, NaN last. A `k` larger than the
    number of documents returns them all (the rule of `Corpus.search`, the CLI and the server).
    Scores `chunk` documents at a time, so at most `A × chunk` scores exist at once."""
    Q, single = _queries(Q, q_mask)
    D, layout = _documents(D, d_mask, doc_lengths, cu_seqlens)
    b = D.shape[0] if "cu_seqlens" not in layout else layout["cu_seqlens"].shape[0] - 1
    if k < 1:
        raise ValueError(f"k = {k}: must be at least 1")
    k = min(k, b)
    if check:
        same_device({"Q": Q, "D": D, **layout})
        _check_finite(Q, D, layout)
    best: tuple[Array, Array] = (None, None)  # (scores, indices) of the documents so far
    for start in range(0, b, max(1, chunk)):
        end = min(b, start + chunk)
        Dc, lc = _slice_docs(D, layout, start, end)
        scores = _run(Q, Dc, lc, pairs=False, check=False)
        best = _merge(best, scores, start, k)
    s, i = best
    if s is None:  # no document at all: empty results, as for any k beyond the corpus
        a = Q.shape[0]
        if is_torch(Q):
            s = torch.empty((a, 0), dtype=torch.float32, device=Q.device)
            i = torch.empty((a, 0), dtype=torch.int64, device=Q.device)
        else:
            s, i = np.empty((a, 0), dtype=np.float32), np.empty((a, 0), dtype=np.int64)
    return (s[0], i[0]) if single else (s, i)
