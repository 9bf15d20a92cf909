"""`maxsim_residual`: MaxSim of queries against a PLAID (ColBERTv2 / fast-plaid) residual index's
tensors as they lie on disk, with late-interaction-kernels' `plaid.maxsim_residual_varlen`
signature.

The documents are scored on their codes by the engine's compressed scorer: on the CPU each
document is decoded into a worker's buffer (never the whole index); with `device="cuda"` the
codes go to the GPU and its fused kernels score them (decoded on chip). The tensors pass through
host memory on the way (no zero-copy entry for codes yet)."""

from __future__ import annotations

import numpy as np

from . import _native
from ._arrays import as_array, is_torch, torch
from ._corpus import Corpus


def _numpy(x, name):
    if is_torch(x):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{name}: expected a torch tensor or a numpy array, got {type(x).__name__}")


def maxsim_residual(
    Q, codes_flat, residuals_flat, cu_seqlens_d, centroids, bucket_weights, nbits, *, normalize=True, device="cpu"
):
    """Scores `[Nq, Nd]` float32 (`[Nd]` for `Q` `[Lq, d]`) of `Q` `[Nq, Lq, d]` against the
    `Nd` documents of a residual index: `codes_flat` `[T]` centroid ids, `residuals_flat`
    `[T, ceil(d * nbits / 8)]` uint8 packed bucket codes, `cu_seqlens_d` `[Nd + 1]` offsets,
    `centroids` `[K, d]` (stored as f16, as PLAID indexes keep them), `bucket_weights`
    `[2^nbits]`, `nbits` 1, 2 or 4. Each token is reconstructed as PLAID does,
    `normalize(centroid + weights[buckets])`, and `Q`'s rows are L2-normalized (zero rows stay
    zero and add 0). Residual bytes are read in colbert-ai's and fast-plaid's bit order (the
    first dimension in the high bits); late-interaction-kernels 0.4.5 reads each byte's bits in
    the reverse order. Torch in, torch out (on `Q`'s device); empty documents are an error."""
    if not normalize:
        raise ValueError(
            "normalize=False: PLAID scores L2-normalized reconstructions; only normalize=True is supported"
        )
    if isinstance(nbits, bool) or int(nbits) != nbits:
        raise TypeError(f"nbits = {nbits!r}: expected an integer")
    Q = as_array(Q, "Q")
    single = Q.ndim == 2
    if Q.ndim not in (2, 3):
        raise ValueError(f"Q: expected [Lq, d] or [Nq, Lq, d], got {tuple(Q.shape)}")
    q = _numpy(Q, "Q").astype(np.float32, copy=False)
    q = q[None] if single else q
    if q.shape[0] == 0 or q.shape[1] == 0:
        raise ValueError(f"Q: no query tokens (shape {tuple(Q.shape)})")
    norms = np.linalg.norm(q, axis=-1, keepdims=True)
    q = np.ascontiguousarray(q / np.maximum(norms, 1e-12), dtype=np.float32)
    dim = q.shape[-1]

    codes = _numpy(codes_flat, "codes_flat")
    residuals = _numpy(residuals_flat, "residuals_flat")
    offsets = _numpy(cu_seqlens_d, "cu_seqlens_d")
    cents = _numpy(centroids, "centroids")
    weights = _numpy(bucket_weights, "bucket_weights")
    if codes.ndim != 1 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"codes_flat: expected [T] integers, got {codes.dtype} {codes.shape}")
    if codes.size and (codes.min() < 0 or codes.max() > np.iinfo(np.uint32).max):
        raise ValueError("codes_flat: centroid ids must be non-negative")
    if residuals.ndim != 2 or residuals.dtype != np.uint8:
        raise ValueError(f"residuals_flat: expected [T, packed] uint8, got {residuals.dtype} {residuals.shape}")
    if offsets.ndim != 1 or not np.issubdtype(offsets.dtype, np.integer) or offsets.size < 2:
        raise ValueError(f"cu_seqlens_d: expected [Nd + 1] integers with Nd >= 1, got {offsets.dtype} {offsets.shape}")
    if offsets[0] != 0 or (np.diff(offsets) < 0).any():
        raise ValueError("cu_seqlens_d: offsets must start at 0 and never decrease")
    if offsets[-1] != len(codes) or len(residuals) != len(codes):
        raise ValueError(
            f"cu_seqlens_d ends at {int(offsets[-1])}, codes_flat has {len(codes)} tokens and "
            f"residuals_flat {len(residuals)} rows: they must agree"
        )
    if cents.ndim != 2 or cents.shape[1] != dim:
        raise ValueError(f"centroids: expected [K, d = {dim}], got {cents.shape}")
    if not np.issubdtype(cents.dtype, np.floating):
        raise ValueError(f"centroids: expected floats, got {cents.dtype}")
    corpus = Corpus(_native_from_plaid(codes, residuals, offsets, cents, weights, int(nbits), dim, device))
    n = len(corpus)
    scores, index = corpus._native.search(q, [q.shape[1]] * q.shape[0], n)
    s = np.asarray(scores, dtype=np.float32).reshape(q.shape[0], n)
    i = np.asarray(index, dtype=np.int64).reshape(q.shape[0], n)
    out = np.empty_like(s)
    np.put_along_axis(out, i, s, axis=1)
    out = out[0] if single else out
    if is_torch(Q):
        return torch.from_numpy(out).to(Q.device)
    return out


def _native_from_plaid(codes, residuals, offsets, cents, weights, nbits, dim, device):
    return _native.Corpus.from_plaid(
        np.ascontiguousarray(codes, dtype="<u4").tobytes(),
        np.ascontiguousarray(residuals).tobytes(),
        [int(x) for x in offsets],
        np.ascontiguousarray(cents, dtype="<f2").tobytes(),
        [float(x) for x in np.asarray(weights, dtype=np.float32).reshape(-1)],
        nbits,
        dim,
        device,
    )
