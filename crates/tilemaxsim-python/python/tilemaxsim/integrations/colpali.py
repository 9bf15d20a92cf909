"""colpali-engine drop-in: `score_multi_vector(qs, ps, batch_size=128, device=None)` with the
signature and semantics of `BaseVisualRetrieverProcessor.score_multi_vector`
(colpali_engine/utils/processing_utils.py:133-188, 0.3.18).

Ragged lists of `[L_i, d]` tensors (or padded 3-D tensors) are zero-padded and there is no
mask, so a padded document token takes part in the max as a similarity of 0 and a padded query
row adds 0; the result is `[n_queries, n_passages]` float32 on the CPU. `device` defaults to
CUDA when there is one, as colpali's `get_torch_device("auto")` does (MPS aside); `batch_size`
only bounds colpali's own memory and is accepted. `patch()` replaces the static method on the
base class, which every model's processor inherits.
"""

from __future__ import annotations

import torch

from .. import _api

_saved: list = []


def _padded(xs, device):
    if isinstance(xs, torch.Tensor):
        return xs.to(device)
    return torch.nn.utils.rnn.pad_sequence(list(xs), batch_first=True, padding_value=0).to(device)


def score_multi_vector(qs, ps, batch_size: int = 128, device=None) -> torch.Tensor:
    if len(qs) == 0:
        raise ValueError("No queries provided")
    if len(ps) == 0:
        raise ValueError("No passages provided")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    Q, D = _padded(qs, device), _padded(ps, device)
    if Q.dtype != D.dtype:
        D = D.to(Q.dtype)
    return _api.maxsim(Q, D).cpu().to(torch.float32)


def patch() -> None:
    # colpali-engine is optional (installed by whoever patches it): not in the checked environment.
    from colpali_engine.utils.processing_utils import (  # pyright: ignore[reportMissingImports]
        BaseVisualRetrieverProcessor as base,
    )

    if not _saved:
        _saved.append((base, base.__dict__["score_multi_vector"]))
        base.score_multi_vector = staticmethod(score_multi_vector)


def unpatch() -> None:
    while _saved:
        cls, original = _saved.pop()
        cls.score_multi_vector = original
