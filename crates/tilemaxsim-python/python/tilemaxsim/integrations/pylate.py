"""PyLate drop-ins: `colbert_scores`, `colbert_scores_pairwise` and `colbert_kd_scores` with
PyLate's signatures (1.6.0) and semantics, on the CPU and on CUDA alike.

PyLate multiplies the similarities by the masks (pylate/scores/colbert.py: `scores = scores *
queries_mask...`, `scores * documents_mask...`): a masked query token adds 0, and a masked
document token takes part in the max as a similarity of 0. Masks may have holes. Here the
embeddings are multiplied by the masks instead, which gives the same similarities (a zero row
dots to 0), and the engine scores them. What PyLate's torch path does, these do too:
- inputs may be lists, numpy arrays or tensors (PyLate's `convert_to_tensor`), of any strides;
- the scores have the dtype PyLate's would have (float64 inputs are scored in float64);
- empty batches give empty scores, and queries of no tokens give zeros;
- a NaN anywhere in a query (masked tokens included: NaN × 0 is NaN) makes its scores NaN, and
  a NaN in a document makes its scores NaN;
- `backend` is resolved as PyLate resolves it (the argument, else `PYLATE_SCORES_BACKEND`, else
  `"auto"`; anything but auto/torch/flash/lik is a `ValueError`). `"auto"` scores with
  tilemaxsim on either device; an explicit `"torch"`, `"flash"` or `"lik"` asks for that
  backend, so the call goes to PyLate's own function (which raises as PyLate does, e.g.
  `RuntimeError` for `"lik"` on CPU tensors).
Gradients flow to the embeddings (tilemaxsim's autograd).

`patch()` points every reference an imported PyLate holds to these three functions (its
modules' names and default arguments such as `Distillation(score_metric=colbert_kd_scores)`)
at ours; `unpatch()` restores them.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from .. import _api
from ._patching import Patcher

_patcher = Patcher("pylate")
_NAMES = ("colbert_scores", "colbert_scores_pairwise", "colbert_kd_scores")
# PyLate's own functions, remembered by `patch()` (the module attributes then point at ours).
_originals: dict = {}


def _resolve_backend(backend) -> str:
    """PyLate's rule (pylate/scores/colbert.py `_resolve_backend`), read on every call."""
    if backend is None:
        backend = os.environ.get("PYLATE_SCORES_BACKEND", "auto")
    backend = backend.lower()
    if backend not in ("auto", "torch", "flash", "lik"):
        raise ValueError(f"backend must be one of 'auto', 'torch', 'flash', 'lik'; got {backend!r}")
    return backend


def _original(name: str):
    """PyLate's own `name` (for an explicitly named backend)."""
    if name in _originals:
        return _originals[name]
    import pylate.scores.colbert as module

    return getattr(module, name)


def _tensor(x) -> torch.Tensor:
    """PyLate's `convert_to_tensor` (pylate/utils/tensor.py), for lists, arrays and tensors."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    if isinstance(x, (list, tuple)):
        if not x:
            return torch.tensor([], dtype=torch.float32)
        if isinstance(x[0], np.ndarray):
            return torch.from_numpy(np.array(x, dtype=np.float32))
        if isinstance(x[0], torch.Tensor):
            return torch.stack(list(x))
        return torch.tensor(x, dtype=torch.float32)
    raise TypeError(f"expected a list, numpy array or torch tensor, got {type(x).__name__}")


def _masked(E: torch.Tensor, mask):
    """E with each token multiplied by its mask value (NaN × 0 stays NaN, as in PyLate), and
    the dtype the masked similarities would have in PyLate (`scores * mask` promotes)."""
    if mask is None:
        return E, E.dtype
    m = _tensor(mask).to(E.device)
    out_dtype = torch.promote_types(E.dtype, m.dtype) if m.dtype != torch.bool else E.dtype
    return E * m.to(E.dtype)[..., None], out_dtype


def _result(scores: torch.Tensor, dtype) -> torch.Tensor:
    return scores if scores.dtype == dtype else scores.to(dtype)


def _no_tokens(what: str, shape) -> ValueError:
    # PyLate's max over an empty token axis raises (torch's IndexError); so does this.
    return ValueError(f"{what}: no document tokens (shape {tuple(shape)}); every document needs a token")


def _no_pairs() -> ValueError:
    # PyLate stacks an empty list of scores, which torch refuses; so does this.
    return ValueError("colbert_scores_pairwise: no (query, document) pairs")


def colbert_scores(
    queries_embeddings, documents_embeddings, queries_mask=None, documents_mask=None, backend=None
) -> torch.Tensor:
    """`[A, B]` scores of queries `[A, Lq, d]` against documents `[B, Ld, d]`."""
    resolved = _resolve_backend(backend)
    if resolved != "auto":
        return _original("colbert_scores")(
            queries_embeddings, documents_embeddings, queries_mask, documents_mask, backend=resolved
        )
    Q, qd = _masked(_tensor(queries_embeddings), queries_mask)
    D, dd = _masked(_tensor(documents_embeddings), documents_mask)
    dtype = torch.promote_types(qd, dd)
    A, Lq, B, Ld = Q.shape[0], Q.shape[1], D.shape[0], D.shape[1]
    if Ld == 0:
        raise _no_tokens("documents_embeddings", D.shape)
    if A == 0 or B == 0 or Lq == 0:
        return torch.zeros((A, B), dtype=dtype, device=Q.device)
    return _result(_api.maxsim(Q, D), dtype)


def colbert_scores_pairwise(queries_embeddings, documents_embeddings, backend=None) -> torch.Tensor:
    """`[B]`: query i against document i. Lists of different lengths are accepted, as PyLate
    zips them."""
    resolved = _resolve_backend(backend)
    if resolved != "auto":
        return _original("colbert_scores_pairwise")(queries_embeddings, documents_embeddings, backend=resolved)
    if isinstance(queries_embeddings, torch.Tensor) and isinstance(documents_embeddings, torch.Tensor):
        n = min(queries_embeddings.shape[0], documents_embeddings.shape[0])
        Q, D, lengths = queries_embeddings[:n], documents_embeddings[:n], None
    else:
        qs = [_tensor(q) for q in queries_embeddings]
        ds = [_tensor(d) for d in documents_embeddings]
        n = min(len(qs), len(ds))
        qs, ds = qs[:n], ds[:n]
        if n == 0:
            raise _no_pairs()
        if any(d.shape[0] == 0 for d in ds):
            raise _no_tokens("documents_embeddings", next(d.shape for d in ds if d.shape[0] == 0))
        # Zero query rows add 0; documents padded and their lengths given.
        Q = torch.nn.utils.rnn.pad_sequence(qs, batch_first=True)
        D = torch.nn.utils.rnn.pad_sequence(ds, batch_first=True)
        lengths = torch.tensor([d.shape[0] for d in ds], device=D.device)
    if n == 0:
        raise _no_pairs()
    if D.shape[1] == 0:
        raise _no_tokens("documents_embeddings", D.shape)
    dtype = torch.promote_types(Q.dtype, D.dtype)
    if Q.shape[1] == 0:
        return torch.zeros((n,), dtype=dtype, device=Q.device)
    return _result(_api.maxsim_pairs(Q, D, doc_lengths=lengths), dtype)


def colbert_kd_scores(
    queries_embeddings, documents_embeddings, queries_mask=None, documents_mask=None, backend=None
) -> torch.Tensor:
    """`[A, N]`: query a against its N candidates `documents_embeddings[a]` (`[A, N, Ld, d]`)."""
    resolved = _resolve_backend(backend)
    if resolved != "auto":
        return _original("colbert_kd_scores")(
            queries_embeddings, documents_embeddings, queries_mask, documents_mask, backend=resolved
        )
    Q, qd = _masked(_tensor(queries_embeddings), queries_mask)
    D, dd = _masked(_tensor(documents_embeddings), documents_mask)
    dtype = torch.promote_types(qd, dd)
    A, N, Ld = D.shape[0], D.shape[1], D.shape[2]
    if Ld == 0:
        raise _no_tokens("documents_embeddings", D.shape)
    if A == 0 or N == 0 or Q.shape[1] == 0:
        return torch.zeros((A, N), dtype=dtype, device=Q.device)
    return _result(_api.maxsim(Q, D), dtype)


def patch() -> None:
    """Make an imported PyLate score with tilemaxsim (importing `pylate` first)."""
    import importlib

    import pylate.scores as scores

    for sub in ("pylate.scores.colbert", "pylate.losses", "pylate.evaluation", "pylate.rank", "pylate.models"):
        try:
            importlib.import_module(sub)
        except ImportError:
            pass
    ours = {
        "colbert_scores": colbert_scores,
        "colbert_scores_pairwise": colbert_scores_pairwise,
        "colbert_kd_scores": colbert_kd_scores,
    }
    replacements = {}
    for name in _NAMES:
        original = getattr(scores, name)
        if original is not ours[name]:
            replacements[original] = ours[name]
            _originals.setdefault(name, original)
    _patcher.patch(replacements)


def unpatch() -> None:
    """Restore PyLate's own functions."""
    _patcher.unpatch()


def is_patched() -> bool:
    return _patcher.active
