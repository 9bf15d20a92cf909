"""PyLate drop-ins: `colbert_scores`, `colbert_scores_pairwise` and `colbert_kd_scores` with
PyLate's signatures (1.6.0, `backend` accepted and ignored) and semantics.

PyLate multiplies the similarities by the masks (pylate/scores/colbert.py: `scores = scores *
queries_mask...`, `scores * documents_mask...`): a masked query token adds 0, and a masked
document token takes part in the max as a similarity of 0. Masks may have holes. Here the
embeddings are multiplied by the masks instead, which gives the same similarities (a zero row
dots to 0), and the engine scores them. Inputs may be lists, numpy arrays or tensors (as
PyLate's `convert_to_tensor` takes them); the scores have the dtype PyLate's would have.
Gradients flow to the embeddings (tilemaxsim's autograd).

`patch()` points every reference an imported PyLate holds to these three functions (its
modules' names and default arguments such as `Distillation(score_metric=colbert_kd_scores)`)
at ours; `unpatch()` restores them.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import _api
from ._patching import Patcher

_patcher = Patcher("pylate")


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
    """E with each token multiplied by its mask value, and the dtype the masked similarities
    would have in PyLate (`scores * mask` promotes)."""
    if mask is None:
        return E, E.dtype
    m = _tensor(mask).to(E.device)
    out_dtype = torch.promote_types(E.dtype, m.dtype) if m.dtype != torch.bool else E.dtype
    return E * m.to(E.dtype)[..., None], out_dtype


def _result(scores: torch.Tensor, dtype) -> torch.Tensor:
    return scores if scores.dtype == dtype else scores.to(dtype)


def colbert_scores(queries_embeddings, documents_embeddings, queries_mask=None, documents_mask=None,
                   backend=None) -> torch.Tensor:
    """`[A, B]` scores of queries `[A, Lq, d]` against documents `[B, Ld, d]`."""
    Q, qd = _masked(_tensor(queries_embeddings), queries_mask)
    D, dd = _masked(_tensor(documents_embeddings), documents_mask)
    return _result(_api.maxsim(Q, D), torch.promote_types(qd, dd))


def colbert_scores_pairwise(queries_embeddings, documents_embeddings, backend=None) -> torch.Tensor:
    """`[B]`: query i against document i. Lists of different lengths are accepted, as PyLate
    zips them."""
    if isinstance(queries_embeddings, torch.Tensor) and isinstance(documents_embeddings, torch.Tensor):
        Q, D = queries_embeddings, documents_embeddings
        n = min(Q.shape[0], D.shape[0])
        return _result(_api.maxsim_pairs(Q[:n], D[:n]), torch.promote_types(Q.dtype, D.dtype))
    qs = [_tensor(q) for q in queries_embeddings]
    ds = [_tensor(d) for d in documents_embeddings]
    n = min(len(qs), len(ds))
    qs, ds = qs[:n], ds[:n]
    # Zero query rows add 0; documents padded and their lengths given.
    Q = torch.nn.utils.rnn.pad_sequence(qs, batch_first=True)
    D = torch.nn.utils.rnn.pad_sequence(ds, batch_first=True)
    lengths = torch.tensor([d.shape[0] for d in ds], device=D.device)
    return _result(_api.maxsim_pairs(Q, D, doc_lengths=lengths), torch.promote_types(Q.dtype, D.dtype))


def colbert_kd_scores(queries_embeddings, documents_embeddings, queries_mask=None, documents_mask=None,
                      backend=None) -> torch.Tensor:
    """`[A, N]`: query a against its N candidates `documents_embeddings[a]` (`[A, N, Ld, d]`)."""
    Q, qd = _masked(_tensor(queries_embeddings), queries_mask)
    D, dd = _masked(_tensor(documents_embeddings), documents_mask)
    A, N = D.shape[0], D.shape[1]
    scores = _api.maxsim_pairs(Q.repeat_interleave(N, dim=0), D.reshape(A * N, *D.shape[2:]))
    return _result(scores.reshape(A, N), torch.promote_types(qd, dd))


def patch() -> None:
    """Make an imported PyLate score with tilemaxsim (importing `pylate` first)."""
    import importlib

    import pylate.scores as scores

    for sub in ("pylate.scores.colbert", "pylate.losses", "pylate.evaluation", "pylate.rank", "pylate.models"):
        try:
            importlib.import_module(sub)
        except ImportError:
            pass
    originals = {}
    for name, ours in (("colbert_scores", colbert_scores), ("colbert_scores_pairwise", colbert_scores_pairwise),
                       ("colbert_kd_scores", colbert_kd_scores)):
        original = getattr(scores, name)
        if original is not ours:
            originals[original] = ours
    _patcher.patch(originals)


def unpatch() -> None:
    """Restore PyLate's own functions."""
    _patcher.unpatch()


def is_patched() -> bool:
    return _patcher.active
