"""Bad input raises a clear Python exception and never crashes the interpreter."""

import numpy as np
import pytest
import torch

import tilemaxsim
from conftest import DEVICE, normalized


def test_bad_inputs_raise(rng):
    Q, D = normalized(rng, 2, 4, 16), normalized(rng, 3, 5, 16)
    with pytest.raises(ValueError, match="dimension mismatch"):
        tilemaxsim.maxsim(Q, normalized(rng, 3, 5, 8))
    with pytest.raises(TypeError, match="float32, float16, bfloat16 and float64"):
        tilemaxsim.maxsim(Q.to(torch.int32), D)
    with pytest.raises(TypeError, match="float32, float16, bfloat16 and float64"):
        tilemaxsim.maxsim(np.ones((2, 3), dtype=np.int64), np.ones((1, 2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="empty"):
        tilemaxsim.maxsim(Q[:, :0], D)
    with pytest.raises(ValueError, match="empty"):
        tilemaxsim.maxsim(Q, D[:0])
    with pytest.raises(ValueError, match="q_mask"):
        tilemaxsim.maxsim(Q, D, q_mask=torch.ones(2, 5, dtype=torch.bool, device=DEVICE))
    with pytest.raises(ValueError, match="d_mask"):
        tilemaxsim.maxsim(Q, D, d_mask=torch.ones(3, 4, dtype=torch.bool, device=DEVICE))
    with pytest.raises(ValueError, match="doc_lengths"):
        tilemaxsim.maxsim(Q, D, doc_lengths=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="not both"):
        tilemaxsim.maxsim(Q, D, doc_lengths=torch.tensor([1, 2, 3]), d_mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch tensor or a numpy array"):
        tilemaxsim.maxsim("not a tensor", D)
    with pytest.raises(ValueError, match="device meta is not supported|different devices"):
        tilemaxsim.maxsim(Q.to("meta"), D.to("meta"))
    with pytest.raises(ValueError, match="different devices"):
        tilemaxsim.maxsim(Q, D.to("meta"))
    with pytest.raises(ValueError, match="pairs"):
        tilemaxsim.maxsim_pairs(Q, D)
    bad = Q.clone()
    bad[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        tilemaxsim.maxsim(bad, D, check=True)
    bad[1, 2, 3] = float("inf")
    with pytest.raises(ValueError, match="inf"):
        tilemaxsim.maxsim(bad, D, check=True)


def test_empty_documents_score_minus_inf_and_bad_offsets_raise(rng):
    # The same on both devices: a document of no tokens has no maximum to add: -inf.
    Q, D = normalized(rng, 2, 4, 16), normalized(rng, 3, 5, 16)
    got = tilemaxsim.maxsim(Q, D, doc_lengths=torch.tensor([5, 0, 2], device=DEVICE))
    assert torch.isneginf(got[:, 1]).all() and torch.isfinite(got[:, [0, 2]]).all()
    packed = tilemaxsim.maxsim(Q, D[0], cu_seqlens=torch.tensor([0, 3, 3, 5], device=DEVICE))
    assert torch.isneginf(packed[:, 1]).all() and torch.isfinite(packed[:, [0, 2]]).all()
    if DEVICE == "cpu":  # on a GPU, offsets live on the device and are not read back
        with pytest.raises(ValueError, match="cu_seqlens"):
            tilemaxsim.maxsim(Q, D[0], cu_seqlens=torch.tensor([0, 3, 2]))
        with pytest.raises(ValueError, match="cu_seqlens"):
            tilemaxsim.maxsim(Q, D[0], cu_seqlens=torch.tensor([0, 3, 9]))


def test_corpus_errors(tmp_path, rng):
    with pytest.raises(OSError):
        tilemaxsim.Corpus.load(tmp_path / "missing.safetensors", device="cpu")
    (tmp_path / "junk.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises((OSError, ValueError)):
        tilemaxsim.Corpus.load(tmp_path / "junk.safetensors", device="cpu")
    emb = np.ones((4, 8), dtype=np.float32)
    emb[2, 3] = np.nan
    with pytest.raises(ValueError, match="document 1"):
        tilemaxsim.Corpus.from_tensors(emb, [0, 2, 4], device="cpu")
    with pytest.raises(ValueError, match="device"):
        tilemaxsim.Corpus.from_tensors(np.ones((4, 8), np.float32), [0, 4], device="tpu")
