"""`maxsim_residual`: MaxSim of queries against a PLAID (ColBERTv2 / fast-plaid) residual index's
tensors as they lie on disk or on the GPU, with late-interaction-kernels'
`plaid.maxsim_residual_varlen` signature.

- CUDA tensors (the default when `Q` is one) are scored in place by the GPU's fused kernels
  (`_native.score_residual`): on the caller's current stream, nothing copied to the host, the
  documents decoded on chip. With `check=True` (the default) the ids, offsets and weights are
  checked first on the device, which waits for one small result; `check=False` skips that, as
  late-interaction-kernels does.
- Otherwise the tensors become a compressed corpus in host memory, scored on the CPU (each
  document decoded into a worker's buffer, never the whole index) or, with `device="cuda"`,
  uploaded and scored by the same fused kernels."""

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
    Q,
    codes_flat,
    residuals_flat,
    cu_seqlens_d,
    centroids,
    bucket_weights,
    nbits,
    *,
    normalize=True,
    device=None,
    check=True,
):
    """Scores `[Nq, Nd]` float32 (`[Nd]` for `Q` `[Lq, d]`) of `Q` `[Nq, Lq, d]` against the
    `Nd` documents of a residual index: `codes_flat` `[T]` centroid ids, `residuals_flat`
    `[T, ceil(d * nbits / 8)]` uint8 packed bucket codes, `cu_seqlens_d` `[Nd + 1]` offsets,
    `centroids` `[K, d]` (stored as f16, as PLAID indexes keep them), `bucket_weights`
    `[2^nbits]`, `nbits` 1, 2 or 4. Each token is reconstructed as PLAID does,
    `normalize(centroid + weights[buckets])`, and `Q`'s rows are L2-normalized (zero rows stay
    zero and add 0). Residual bytes are read in colbert-ai's and fast-plaid's bit order (the
    first dimension in the high bits); late-interaction-kernels 0.4.5 reads each byte's bits in
    the reverse order. `device`: None (`Q`'s device), "cpu", "cuda" or "cuda:N". Torch in,
    torch out (on `Q`'s device); empty documents are an error (with `check`, on the GPU)."""
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
    if device is None:
        device = str(Q.device) if is_torch(Q) and Q.is_cuda else "cpu"
    if is_torch(Q) and Q.is_cuda and str(device).startswith("cuda"):
        if torch.device(device).index not in (None, Q.device.index):
            raise ValueError(f"device={device!r}: Q is on {Q.device}; move it there first")
        args = (codes_flat, residuals_flat, cu_seqlens_d, centroids, bucket_weights)
        out = _on_cuda(Q[None] if single else Q, *args, int(nbits), check)
        return out[0] if single else out
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


def _on_cuda(Q, codes, residuals, cu, centroids, weights, nbits, check):
    """`maxsim_residual` on CUDA tensors, in place on `Q`'s device and current stream."""
    dev = Q.device
    names = ("codes_flat", "residuals_flat", "cu_seqlens_d", "centroids", "bucket_weights")
    for name, t in zip(names, (codes, residuals, cu, centroids, weights), strict=True):
        if not is_torch(t):
            raise TypeError(f"{name}: expected a torch tensor on {dev} like Q, got {type(t).__name__}")
        if t.device != dev:
            raise ValueError(f"{name}: on {t.device}, Q on {dev}: every tensor must be on one device")
    if nbits not in (1, 2, 4):
        raise ValueError(f"nbits = {nbits}: expected 1, 2 or 4")
    if not Q.dtype.is_floating_point:
        raise TypeError(f"Q: expected a float tensor, got {Q.dtype}")
    if Q.shape[0] == 0 or Q.shape[1] == 0:
        raise ValueError(f"Q: no query tokens (shape {tuple(Q.shape)})")
    dim = Q.shape[-1]
    if codes.ndim != 1 or codes.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"codes_flat: expected [T] int32 or int64, got {codes.dtype} {tuple(codes.shape)}")
    T = codes.shape[0]
    row = (dim * nbits + 7) // 8
    if residuals.dtype != torch.uint8 or tuple(residuals.shape) != (T, row):
        raise ValueError(
            f"residuals_flat: expected [T = {T}, {row}] uint8 ({row} bytes a token at d = {dim}, "
            f"nbits = {nbits}), got {residuals.dtype} {tuple(residuals.shape)}"
        )
    if cu.ndim != 1 or cu.dtype not in (torch.int32, torch.int64) or cu.shape[0] < 2:
        raise ValueError(f"cu_seqlens_d: expected [Nd + 1] integers with Nd >= 1, got {cu.dtype} {tuple(cu.shape)}")
    if centroids.ndim != 2 or centroids.shape[1] != dim or not centroids.dtype.is_floating_point:
        raise ValueError(f"centroids: expected [K, d = {dim}] floats, got {centroids.dtype} {tuple(centroids.shape)}")
    if weights.numel() != 2**nbits or not weights.dtype.is_floating_point:
        raise ValueError(f"bucket_weights: expected {2**nbits} weights for nbits = {nbits}, got {tuple(weights.shape)}")
    K = centroids.shape[0]
    q = torch.nn.functional.normalize(Q.float(), dim=-1, eps=1e-12).contiguous()
    ids = codes.to(torch.int32).contiguous()
    offsets = cu.to(torch.int64).contiguous()
    cents = centroids.to(torch.float16).contiguous()
    w = weights.reshape(-1).to(torch.float32).contiguous()
    if check:
        # One wait for every value check, each a reduction on the device.
        lens = offsets[1:] - offsets[:-1]
        flags = torch.stack(
            [
                (codes.min() < 0) if T else torch.zeros((), dtype=torch.bool, device=dev),
                (codes.max() >= K) if T else torch.zeros((), dtype=torch.bool, device=dev),
                offsets[0] != 0,
                offsets[-1] != T,
                (lens < 0).any(),
                (lens == 0).any(),
                ~torch.isfinite(w).all(),
            ]
        ).tolist()
        problems = (
            "codes_flat: centroid ids must be non-negative",
            f"codes_flat: a centroid id is {K} or more, and there are {K} centroids",
            "cu_seqlens_d: offsets must start at 0",
            f"cu_seqlens_d ends at {int(offsets[-1])}, codes_flat has {T} tokens: they must agree",
            "cu_seqlens_d: offsets must never decrease",
            "cu_seqlens_d: a document is empty; every document needs at least one token",
            "bucket_weights: every bucket weight must be finite",
        )
        for bad, msg in zip(flags, problems, strict=True):
            if bad:
                raise ValueError(msg)
    out = torch.empty(Q.shape[0], offsets.shape[0] - 1, dtype=torch.float32, device=dev)
    _native.score_residual(
        q, residuals.contiguous(), ids, offsets, cents, w, nbits, out, stream=torch.cuda.current_stream(dev).cuda_stream
    )
    return out
