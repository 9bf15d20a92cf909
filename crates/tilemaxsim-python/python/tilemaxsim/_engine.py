"""The engine's call and what every entry point shares before it: queries and documents as the
engine takes them (masks, lengths, packed offsets), the finite-value check, and `_run`, which
scores them with `_native.score` (or the float64 path)."""

from __future__ import annotations

import numpy as np

from . import _float64, _native
from ._arrays import (
    Array,
    as_array,
    dlpack,
    empty_scores,
    is_float64,
    is_torch,
    lengths_array,
    same_device,
    stream_of,
    torch,
)


def _queries(Q, q_mask) -> tuple[Array, bool]:
    Q = as_array(Q, "Q", keep_float64=True)
    single = Q.ndim == 2
    if single:
        Q = Q[None]
    if Q.ndim != 3:
        raise ValueError(f"Q: expected [Lq, d] or [A, Lq, d], got shape {tuple(Q.shape)}")
    if Q.shape[0] == 0 or Q.shape[1] == 0:
        raise ValueError(f"Q: empty (shape {tuple(Q.shape)}); every query needs a token")
    if q_mask is not None:
        m = q_mask[None] if single and q_mask.ndim == 1 else q_mask
        if tuple(m.shape) != tuple(Q.shape[:2]):
            raise ValueError(f"q_mask: expected shape {tuple(Q.shape[:2])}, got {tuple(m.shape)}")
        # A zero query row scores exactly 0 against any document: the token adds nothing (and
        # a masked token's values, NaN included, are not read).
        if is_torch(Q):
            Q = torch.where(
                m.to(device=Q.device, dtype=torch.bool)[..., None], Q, torch.zeros((), dtype=Q.dtype, device=Q.device)
            )
        else:
            Q = np.where(np.asarray(m, dtype=bool)[..., None], Q, np.zeros((), dtype=Q.dtype))
    return Q, single


def _documents(D, d_mask, doc_lengths, cu_seqlens) -> tuple[Array, dict]:
    D = as_array(D, "D", keep_float64=True)
    if cu_seqlens is not None:
        if d_mask is not None or doc_lengths is not None:
            raise ValueError("give cu_seqlens (packed documents) or d_mask / doc_lengths (padded), not both")
        if D.ndim != 2:
            raise ValueError(f"D: packed documents are [T, d], got shape {tuple(D.shape)}")
        return D, {"cu_seqlens": lengths_array(cu_seqlens, "cu_seqlens", D)}
    if D.ndim == 2:
        D = D[None]
    if D.ndim != 3:
        raise ValueError(f"D: expected [B, Ld, d] (or [T, d] with cu_seqlens), got shape {tuple(D.shape)}")
    if D.shape[0] == 0 or D.shape[1] == 0:
        raise ValueError(f"D: empty (shape {tuple(D.shape)}); every document needs a token")
    if d_mask is not None:
        if doc_lengths is not None:
            raise ValueError("give d_mask or doc_lengths, not both")
        if tuple(d_mask.shape) != tuple(D.shape[:2]):
            raise ValueError(f"d_mask: expected shape {tuple(D.shape[:2])}, got {tuple(d_mask.shape)}")
        D, doc_lengths = _compact(D, d_mask)
    if doc_lengths is None:
        return D, {}
    lengths = lengths_array(doc_lengths, "doc_lengths", D)
    if tuple(lengths.shape) != (D.shape[0],):
        raise ValueError(f"doc_lengths: expected shape ({D.shape[0]},), got {tuple(lengths.shape)}")
    return D, {"doc_lengths": lengths}


def _compact(D, d_mask):
    """Each document's unmasked tokens moved to its front, in order, and their count: masks with
    holes become lengths (one gather; none where the mask is a prefix on the host)."""
    if is_torch(D):
        m = d_mask.to(device=D.device, dtype=torch.bool)
        lengths = m.sum(dim=1)
        if not D.is_cuda and bool((m == (torch.arange(m.shape[1]) < lengths[:, None])).all()):
            return D, lengths
        order = torch.argsort((~m).to(torch.int8), dim=1, stable=True)
        return torch.gather(D, 1, order[..., None].expand(-1, -1, D.shape[2])), lengths
    m = np.asarray(d_mask, dtype=bool)
    lengths = m.sum(axis=1)
    order = np.argsort(~m, axis=1, kind="stable")
    return np.take_along_axis(D, order[..., None], axis=1), lengths


def _split_checked(D, fresh: bool) -> bool:
    from ._split import split_checked  # torch is there: D is a torch tensor

    return split_checked(D, fresh)


def _as_packed_candidates(D, layout):
    """CUDA padded documents with lengths, seen as packed rows: document i is rows
    i·Ld .. i·Ld + len_i of the padded buffer, so offsets [0, len_0, Ld, Ld + len_1, 2·Ld, ...]
    describe 2B - 1 "documents" (the gaps between them included) and candidates 0, 2, 4, ...
    pick the real ones. The tensor-core kernels then read only the real tokens, in place: they
    take packed offsets, while padded batches with lengths go to the CUDA-core kernel."""
    lengths = layout.get("doc_lengths")
    if lengths is None or D.ndim != 3:
        return D, layout
    b, ld = D.shape[0], D.shape[1]
    if D.stride(0) != ld * D.stride(1) or D.stride(2) != 1 or 2 * b >= 2**31:
        return D, layout
    starts = torch.arange(b, device=D.device, dtype=torch.int64) * ld
    offsets = torch.stack([starts, starts + lengths.clamp(0, ld)], dim=1).reshape(-1)
    candidates = torch.arange(0, 2 * b, 2, device=D.device, dtype=torch.int64)
    rows = D.as_strided((b * ld, D.shape[2]), (D.stride(1), 1))
    return rows, {"cu_seqlens": offsets, "candidates": candidates}


def _valid_tokens(D, layout):
    """The document tokens that are scored (padding past a length, or rows outside the packed
    offsets, are not)."""
    if "cu_seqlens" in layout:
        cu = layout["cu_seqlens"]
        return D[int(cu[0]) : int(cu[-1])] if len(cu) else D[:0]
    if "doc_lengths" in layout:
        lengths = layout["doc_lengths"]
        if is_torch(D):
            return D[torch.arange(D.shape[1], device=D.device)[None, :] < lengths[:, None]]
        return D[np.arange(D.shape[1])[None, :] < np.asarray(lengths)[:, None]]
    return D


def _all_finite(x) -> bool:
    return bool(torch.isfinite(x).all()) if is_torch(x) else bool(np.isfinite(np.asarray(x, dtype=np.float32)).all())


def _check_finite(Q, D, layout):
    if not _all_finite(Q):
        raise ValueError("Q: the queries hold NaN or infinite values")
    if not _all_finite(_valid_tokens(D, layout)):
        raise ValueError("D: the documents hold NaN or infinite values")


def _run(Q, D, layout, *, pairs: bool, check: bool | None) -> Array:
    same_device({"Q": Q, "D": D, **layout})
    if check:
        _check_finite(Q, D, layout)
    a, b = Q.shape[0], (D.shape[0] if "cu_seqlens" not in layout else layout["cu_seqlens"].shape[0] - 1)
    if pairs and a != b:
        raise ValueError(f"maxsim_pairs: {a} queries for {b} documents")
    if is_float64(Q) or is_float64(D):
        return _float64.maxsim(Q, D, layout, pairs=pairs)
    out = empty_scores((a,) if pairs else (a, b), Q)
    # float32 CUDA documents (against float32 queries: the split takes f32 on both sides) checked
    # for the tensor cores' split range (once a tensor, `_split`).
    checked = (
        is_torch(D)
        and D.is_cuda
        and D.dtype == torch.float32
        and getattr(Q, "dtype", None) == torch.float32
        and _split_checked(D, bool(check))
    )
    if is_torch(Q):
        Q = Q.detach()
        D = D.detach()
    stream = stream_of(Q)
    if is_torch(D) and D.is_cuda and not pairs:
        D, layout = _as_packed_candidates(D, layout)
    layout = {k: dlpack(v) for k, v in layout.items()}
    _native.score(
        dlpack(Q), [Q.shape[1]] * a, dlpack(D), dlpack(out), pairs=pairs, split_checked=checked, stream=stream, **layout
    )
    return out
