"""flash-maxsim drop-ins (flash_maxsim 0.3.0, flash_maxsim/flash_maxsim.py): `flash_maxsim`
and `flash_maxsim_batched` with its signatures.

Tokens past a document's length (or a query's) are excluded, as there, and a padded document of
length 0 scores -inf, as there (packed, an empty document is an error on the CPU). One
difference, on purpose: flash-maxsim's packed and varlen paths convert the inputs to fp16
(`.half()`), and its padded kernel loads them "as native dtype and converts to FP16 inline";
here they are scored as given (float32 exactly). Scores are float32, as there.
`query_chunk_size`, `splitk` and `pad_lq` are tuning knobs of its kernels, accepted and ignored.
"""

from __future__ import annotations

import torch

from .. import _api
from ._patching import Patcher

_patcher = Patcher("flash_maxsim")


def flash_maxsim(
    Q: torch.Tensor, D: torch.Tensor, doc_lengths=None, query_chunk_size: int = 128, splitk: bool = False
) -> torch.Tensor:
    """One query `[Lq, d]` against padded `[B, Ld, d]` (doc_lengths `[B]` or None) or packed
    `[T, d]` documents (doc_lengths then cu_seqlens `[B + 1]`): `[B]`."""
    assert Q.dim() == 2
    if D.dim() == 2:
        assert doc_lengths is not None, "Packed D [total_d, d] requires doc_lengths as cu_seqlens [B+1]"
        return _api.maxsim(Q, D, cu_seqlens=doc_lengths)
    assert D.dim() == 3 and Q.shape[1] == D.shape[2]
    if doc_lengths is None:
        return _api.maxsim(Q, D)
    lengths = torch.as_tensor(doc_lengths, device=D.device).to(torch.int64)
    # A document of length 0 is scored on one token, then set to -inf (flash's value for it).
    return _empty_to_neg_inf(_api.maxsim(Q, D, doc_lengths=lengths.clamp(min=1)), lengths)


def _empty_to_neg_inf(scores, lengths):
    return torch.where(lengths > 0, scores, torch.full_like(scores, float("-inf")))


def flash_maxsim_batched(
    Q: torch.Tensor,
    D: torch.Tensor,
    doc_lengths=None,
    shared_docs: bool = True,
    query_lengths=None,
    pad_lq: bool = True,
    query_chunk_size: int = 128,
) -> torch.Tensor:
    """Queries `[Nq, Lq, d]` against shared documents `[B, Ld, d]` (shared_docs) or each
    against its own `[Nq, B, Ld, d]`: `[Nq, B]`; `query_lengths` `[Nq]` and `doc_lengths`
    (`[B]`, or `[Nq * B]` when not shared) exclude the tokens past them."""
    assert Q.dim() == 3 and Q.shape[2] == D.shape[-1]
    Nq, Lq, _ = Q.shape
    q_mask = None
    if query_lengths is not None:
        ql = torch.as_tensor(query_lengths, device=Q.device)
        q_mask = torch.arange(Lq, device=Q.device)[None, :] < ql[:, None]
    if shared_docs:
        assert D.dim() == 3
        return _api.maxsim(Q, D, q_mask=q_mask, doc_lengths=doc_lengths)
    assert D.dim() == 4 and D.shape[0] == Nq
    B = D.shape[1]
    Qr = Q.repeat_interleave(B, dim=0)
    qm = None if q_mask is None else q_mask.repeat_interleave(B, dim=0)
    lengths = None if doc_lengths is None else torch.as_tensor(doc_lengths, device=D.device).reshape(-1)
    scores = _api.maxsim_pairs(Qr, D.reshape(Nq * B, *D.shape[2:]), q_mask=qm, doc_lengths=lengths)
    return scores.reshape(Nq, B)


def patch() -> None:
    """Make an imported flash_maxsim's two entry points run tilemaxsim."""
    # flash-maxsim is optional (installed by whoever patches it): not in the checked environment.
    import flash_maxsim as fm  # pyright: ignore[reportMissingImports]
    import flash_maxsim.flash_maxsim as impl  # pyright: ignore[reportMissingImports]

    replacements = {}
    for name, ours in (("flash_maxsim", flash_maxsim), ("flash_maxsim_batched", flash_maxsim_batched)):
        original = getattr(impl, name)
        if original is not ours:
            replacements[original] = ours
    _patcher.patch(replacements)
    del fm


def unpatch() -> None:
    _patcher.unpatch()
