"""ColBERT (colbert-ai) drop-ins: `colbert_score` and `colbert_score_packed` with colbert's
signatures and semantics (colbert/modeling/colbert.py, 0.2.22):

- the queries are cast to the documents' dtype (`Q.to(dtype=D_padded.dtype)`), and the scores
  come back in it;
- padding is scored as -9999 (`colbert_score_reduce`: `scores_padded[D_padding] = -9999`), so
  a padded token never wins unless a document is all padding;
- with `config.total_visible_gpus > 0` the inputs move to the GPU first, as colbert does;
- on colbert's CPU branch of `colbert_score_packed` (`ColBERT.segmented_maxsim`, a C++ routine
  whose running max starts at 0) every query token's max is at least 0; here a zero token is
  added to each document there, which gives the same;
- `colbert_score` takes Q `[1 | ndocs, Lq, d]`: one query against all documents, or query i
  against document i; `colbert_score_packed` one query against packed documents.

Only `config.interaction == "colbert"` is scored here; other interactions go to colbert's own
function. `patch()` replaces the names in `colbert.modeling.colbert` and in
`colbert.search.index_storage`, where PLAID's `IndexScorer.score_pids` calls them.
"""

from __future__ import annotations

import torch

from .. import _api
from ._patching import Patcher

_patcher = Patcher("colbert")
_originals: dict = {}
PAD_SCORE = -9999.0


def _use_gpu(config) -> bool:
    visible = getattr(config, "total_visible_gpus", None) if config is not None else None
    return (torch.cuda.device_count() if visible is None else visible) > 0


def _to_gpu(config, *tensors):
    if _use_gpu(config):
        return tuple(t.cuda() for t in tensors)
    return tensors


def _interaction(config) -> str:
    return getattr(config, "interaction", "colbert") if config is not None else "colbert"


def _fill_empty(scores, lengths, lq):
    """A document with no real token: every query token's max is the padding's -9999."""
    return torch.where(lengths > 0, scores, torch.full_like(scores, PAD_SCORE * lq))


def colbert_score(Q, D_padded, D_mask, config=None):
    """`[ndocs]` scores; Q `[1 | ndocs, Lq, d]`, D_padded `[ndocs, Ld, d]`, D_mask `[ndocs, Ld]`."""
    if _interaction(config) != "colbert":
        return _original("colbert_score")(Q, D_padded, D_mask, config)
    Q, D_padded, D_mask = _to_gpu(config, Q, D_padded, D_mask)
    assert Q.dim() == 3, Q.size()
    assert D_padded.dim() == 3, D_padded.size()
    assert Q.size(0) in [1, D_padded.size(0)]
    Q = Q.to(dtype=D_padded.dtype)
    mask = D_mask.view(D_padded.size(0), D_padded.size(1)).bool()
    lengths = mask.sum(dim=1)
    # Documents with no real token are scored on one (then replaced by the padding's score).
    mask = mask | (lengths == 0)[:, None] & (torch.arange(mask.size(1), device=mask.device) == 0)[None]
    if Q.size(0) == 1:
        scores = _api.maxsim(Q[0], D_padded, d_mask=mask)
    else:
        scores = _api.maxsim_pairs(Q, D_padded, d_mask=mask)
    return _fill_empty(scores, lengths, Q.size(1)).to(D_padded.dtype)


def colbert_score_packed(Q, D_packed, D_lengths, config=None):
    """`[ndocs]` scores of one query (`[1, Lq, d]` or `[Lq, d]`) against packed documents."""
    if _interaction(config) != "colbert":
        return _original("colbert_score_packed")(Q, D_packed, D_lengths, config)
    Q, D_packed, D_lengths = _to_gpu(config, Q, D_packed, D_lengths)
    Q = Q.squeeze(0)
    assert Q.dim() == 2, Q.size()
    assert D_packed.dim() == 2, D_packed.size()
    Q = Q.to(dtype=D_packed.dtype)
    lengths = D_lengths.to(device=D_packed.device, dtype=torch.int64)
    if not _use_gpu(config):
        # colbert's CPU branch: each max starts at 0, as against one more token of zeros, placed
        # after each document's tokens by one scatter (no per-document Python loop).
        lengths = lengths + 1
        D_packed = _with_zero_token(D_packed, lengths)
    cu = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=D_packed.device)
    torch.cumsum(lengths, 0, out=cu[1:])
    scores = _api.maxsim(Q, D_packed, cu_seqlens=cu)
    return scores.to(D_packed.dtype)


def _with_zero_token(packed, lengths):
    """`packed` `[T, d]` with a zero row after each document; `lengths` already count it."""
    doc = torch.repeat_interleave(torch.arange(lengths.numel(), device=packed.device), lengths - 1)
    out = packed.new_zeros(packed.shape[0] + lengths.numel(), packed.shape[1])
    out[torch.arange(packed.shape[0], device=packed.device) + doc] = packed
    return out


def _original(name):
    if name not in _originals:
        from colbert.modeling import colbert as modeling

        _originals[name] = getattr(modeling, name)
    return _originals[name]


def patch() -> None:
    """Make an imported colbert-ai (and PLAID's index_storage) score with tilemaxsim."""
    import importlib

    modeling = importlib.import_module("colbert.modeling.colbert")
    try:
        importlib.import_module("colbert.search.index_storage")
    except ImportError:
        pass
    replacements = {}
    for name, ours in (("colbert_score", colbert_score), ("colbert_score_packed", colbert_score_packed)):
        original = getattr(modeling, name)
        if original is not ours:
            _originals[name] = original
            replacements[original] = ours
    _patcher.patch(replacements)


def unpatch() -> None:
    _patcher.unpatch()


def is_patched() -> bool:
    return _patcher.active
