"""The float64 path: MaxSim of float64 inputs computed in float64, by torch on the inputs'
device (or numpy), instead of being rounded to the engine's float32.

torch's own autograd differentiates it, so `torch.autograd.gradcheck` holds at its default
tolerances. It is the reference arithmetic, not a fast path: documents are scored in blocks of
about 256 MB of similarities. An input that is not float64 is widened (its values exactly)."""

from __future__ import annotations

import numpy as np

from ._arrays import is_torch, torch

# Bytes of float64 similarities materialized at once.
_BLOCK_BYTES = 256 << 20


def _padded(D, layout):
    """Packed `[T, d]` documents with `cu_seqlens` as padded `[B, Ld, d]` and their lengths;
    padded ones as they are, with lengths when given."""
    if "cu_seqlens" not in layout:
        return D, layout.get("doc_lengths")
    cu = layout["cu_seqlens"]
    offsets = [int(x) for x in (cu.tolist() if is_torch(cu) else cu)]
    lengths = [e - s for s, e in zip(offsets, offsets[1:])]
    if any(n < 0 for n in lengths) or (offsets and (offsets[0] < 0 or offsets[-1] > D.shape[0])):
        raise ValueError(f"cu_seqlens: must be non-decreasing within 0..={D.shape[0]}")
    width = max(lengths, default=0) or 1
    if is_torch(D):
        out = torch.zeros((len(lengths), width, D.shape[1]), dtype=D.dtype, device=D.device)
        for i, (s, n) in enumerate(zip(offsets, lengths)):
            out[i, :n] = D[s : s + n]
        return out, torch.tensor(lengths, device=D.device)
    out = np.zeros((len(lengths), width, D.shape[1]), dtype=D.dtype)
    for i, (s, n) in enumerate(zip(offsets, lengths)):
        out[i, :n] = D[s : s + n]
    return out, np.asarray(lengths)


def maxsim(Q, D, layout, *, pairs: bool):
    """`[A, B]` (pairs: `[B]`) float64 scores of queries `[A, Lq, d]` against documents as
    `_engine` lays them out. An empty document scores -inf, as in the engine."""
    D, lengths = _padded(D, layout)
    if is_torch(Q) or is_torch(D):
        return _torch(Q, D, lengths, pairs)
    return _numpy(Q, D, lengths, pairs)


def _torch(Q, D, lengths, pairs):
    Q, D = Q.double(), D.double()
    A, Lq, _ = Q.shape
    B, Ld, _ = D.shape
    valid = None
    if lengths is not None:
        valid = torch.arange(Ld, device=D.device)[None, :] < lengths.to(D.device)[:, None]
    if pairs:
        sims = torch.einsum("bid,bjd->bij", Q, D)
        if valid is not None:
            sims = sims.masked_fill(~valid[:, None, :], float("-inf"))
        return sims.max(dim=2).values.sum(dim=1)
    step = max(1, _BLOCK_BYTES // max(1, A * Lq * Ld * 8))
    parts = []
    for s in range(0, B, step):
        sims = torch.einsum("aid,bjd->abij", Q, D[s : s + step])
        if valid is not None:
            sims = sims.masked_fill(~valid[None, s : s + step, None, :], float("-inf"))
        parts.append(sims.max(dim=3).values.sum(dim=2))
    return torch.cat(parts, dim=1) if parts else torch.zeros((A, 0), dtype=torch.float64, device=Q.device)


def _numpy(Q, D, lengths, pairs):
    Q, D = np.asarray(Q, dtype=np.float64), np.asarray(D, dtype=np.float64)
    A, Lq, _ = Q.shape
    B, Ld, _ = D.shape
    valid = None if lengths is None else np.arange(Ld)[None, :] < np.asarray(lengths)[:, None]
    if pairs:
        sims = np.einsum("bid,bjd->bij", Q, D)
        if valid is not None:
            sims = np.where(valid[:, None, :], sims, -np.inf)
        return sims.max(axis=2).sum(axis=1)
    out = np.empty((A, B), dtype=np.float64)
    step = max(1, _BLOCK_BYTES // max(1, A * Lq * Ld * 8))
    for s in range(0, B, step):
        sims = np.einsum("aid,bjd->abij", Q, D[s : s + step])
        if valid is not None:
            sims = np.where(valid[None, s : s + step, None, :], sims, -np.inf)
        out[:, s : s + step] = sims.max(axis=3).sum(axis=2)
    return out
