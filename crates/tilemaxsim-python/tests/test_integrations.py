"""The drop-ins against the originals installed from PyPI: colbert-ai's colbert_score /
colbert_score_packed (0.2.22); PyLate's are in test_pylate.py. flash-maxsim's
kernels need a GPU: on the CPU its documented semantics (flash_maxsim/flash_maxsim.py: padded
with doc_lengths, packed with cu_seqlens, [Nq, B] batched) are checked against the reference."""

import numpy as np
import pytest
import torch

from conftest import DEVICE, normalized, reference
from tilemaxsim.integrations import colbert as colbert_dropin
from tilemaxsim.integrations import flash_maxsim as flash_dropin


def _colbert():
    try:
        from colbert.infra.config import ColBERTConfig
        from colbert.modeling import colbert as modeling
    except Warning:  # a warning made an error by filterwarnings: a failure, not a reason to skip
        raise
    except Exception as e:  # colbert-ai may not import on every machine
        pytest.skip(f"colbert-ai does not import here: {e}")
    return modeling, ColBERTConfig


def test_colbert_score_and_packed_match_colbert(rng):
    modeling, ColBERTConfig = _colbert()
    config = ColBERTConfig()  # total_visible_gpus: torch.cuda.device_count() (settings.py:30)
    D = normalized(rng, 5, 12, 32)
    lengths = torch.tensor([12, 3, 7, 1, 9])
    mask = torch.arange(12)[None, :] < lengths[:, None]
    for Q in (normalized(rng, 1, 8, 32), normalized(rng, 5, 8, 32)):
        want = modeling.colbert_score(Q.clone(), D.clone(), mask.clone(), config=config)
        got = colbert_dropin.colbert_score(Q, D, mask, config=config)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.cpu().numpy(), want.cpu().numpy(), atol=1e-5)
    packed = torch.cat([D[i, : lengths[i]] for i in range(5)])
    Q = normalized(rng, 1, 8, 32)
    # colbert's CPU branch runs a C++ extension it compiles at first use (needs ninja on PATH).
    import os
    import sys

    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    try:
        modeling.ColBERT.try_load_torch_extensions(False)
    except Warning:  # a warning made an error by filterwarnings: a failure, not a reason to skip
        raise
    except Exception as e:
        pytest.skip(f"colbert's C++ extension does not build here: {e}")
    want = modeling.colbert_score_packed(Q, packed, lengths, config=config)
    got = colbert_dropin.colbert_score_packed(Q, packed, lengths, config=config)
    np.testing.assert_allclose(got.cpu().numpy(), want.cpu().numpy(), atol=1e-5)


def test_colbert_patch_reaches_index_storage():
    _colbert()
    import colbert.search.index_storage as storage

    original = storage.colbert_score
    colbert_dropin.patch()
    try:
        assert storage.colbert_score is colbert_dropin.colbert_score
        assert storage.colbert_score_packed is colbert_dropin.colbert_score_packed
    finally:
        colbert_dropin.unpatch()
    assert storage.colbert_score is original


def test_flash_maxsim_semantics(rng):
    # flash_maxsim/flash_maxsim.py:408-440: Q [Lq, d]; D padded [B, Ld, d] with doc_lengths [B],
    # or packed [T, d] with doc_lengths as cu_seqlens [B + 1]; returns [B].
    Q, D = normalized(rng, 1, 7, 64), normalized(rng, 4, 10, 64)
    lengths = torch.tensor([10, 2, 5, 1], device=DEVICE)
    valid = torch.arange(10, device=DEVICE)[None, :] < lengths[:, None]
    want = reference(Q, D, d_valid=valid)[0]
    np.testing.assert_allclose(flash_dropin.flash_maxsim(Q[0], D, lengths).cpu().numpy(), want, atol=1e-5)
    packed = torch.cat([D[i, : lengths[i]] for i in range(4)])
    cu = torch.tensor([0, 10, 12, 17, 18], device=DEVICE)
    np.testing.assert_allclose(flash_dropin.flash_maxsim(Q[0], packed, cu).cpu().numpy(), want, atol=1e-5)
    # flash_maxsim_batched (flash_maxsim.py:495-508): [Nq, Lq, d] x [B, Ld, d] -> [Nq, B],
    # query_lengths [Nq] masking query padding; shared_docs=False takes [Nq, B, Ld, d].
    Qs = normalized(rng, 3, 7, 64)
    ql = torch.tensor([7, 3, 1], device=DEVICE)
    qvalid = torch.arange(7, device=DEVICE)[None, :] < ql[:, None]
    got = flash_dropin.flash_maxsim_batched(Qs, D, doc_lengths=lengths, query_lengths=ql)
    np.testing.assert_allclose(got.cpu().numpy(), reference(Qs, D, qvalid, valid), atol=1e-5)
    Dn = normalized(rng, 3, 4, 10, 64)
    got = flash_dropin.flash_maxsim_batched(Qs, Dn, shared_docs=False)
    want = np.stack([reference(Qs[a : a + 1], Dn[a])[0] for a in range(3)])
    np.testing.assert_allclose(got.cpu().numpy(), want, atol=1e-5)


def test_colpali_score_multi_vector_semantics(rng):
    # colpali_engine/utils/processing_utils.py:133-188 (0.3.18): ragged lists zero-padded by
    # pad_sequence, no mask (maxsim.py:31: einsum("bnd,csd->bcns").amax(3).sum(2)), fp32 on CPU.
    from tilemaxsim.integrations import colpali

    qs = [normalized(rng, int(n), 24) for n in (3, 5)]
    ps = [normalized(rng, int(n), 24) for n in (4, 1, 6)]
    got = colpali.score_multi_vector(qs, ps, device=DEVICE)
    Q = torch.nn.utils.rnn.pad_sequence(qs, batch_first=True)
    P = torch.nn.utils.rnn.pad_sequence(ps, batch_first=True)
    want = torch.einsum("bnd,csd->bcns", Q.double(), P.double()).amax(dim=3).sum(dim=2)
    assert got.dtype == torch.float32 and got.device.type == "cpu" and got.shape == (2, 3)
    np.testing.assert_allclose(got.numpy(), want.cpu().numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="No queries"):
        colpali.score_multi_vector([], ps)
