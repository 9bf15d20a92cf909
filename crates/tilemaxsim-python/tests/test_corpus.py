"""Corpus: load, search, save and from_tensors, on the real Cranfield collection and on random
data, against maxsim and the float64 reference run."""

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import tilemaxsim
from conftest import DEVICE, normalized

SHARED = Path(os.environ.get("TILEMAXSIM_DATA", Path(__file__).resolve().parents[3] / ".." / "shared" / "data"))
CRANFIELD = SHARED / "cranfield"


def test_from_tensors_search_save_and_load(tmp_path, rng):
    docs = [normalized(rng, int(n), 32).cpu() for n in rng.integers(1, 50, size=30)]
    corpus = tilemaxsim.Corpus.from_tensors(docs, doc_ids=[f"d{i}" for i in range(30)], device="cpu")
    assert len(corpus) == 30 and corpus.dim == 32 and corpus.doc_ids is not None and corpus.doc_ids[3] == "d3"
    Q = normalized(rng, 4, 7, 32).cpu()
    scores, idx = corpus.search(Q, 5)
    lens = torch.tensor([d.shape[0] for d in docs])
    packed = torch.cat(docs)
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    want_s, want_i = tilemaxsim.topk(Q, packed, 5, cu_seqlens=cu)
    assert idx.tolist() == want_i.tolist()
    np.testing.assert_allclose(scores.numpy(), want_s.numpy(), atol=1e-5)
    corpus.save(tmp_path / "c.safetensors")
    again = tilemaxsim.Corpus.load(tmp_path / "c.safetensors", device="cpu")
    s2, i2 = again.search(Q[0], 5)
    assert i2.tolist() == idx[0].tolist() and again.doc_ids == corpus.doc_ids


@pytest.mark.skipif(not CRANFIELD.exists(), reason="Cranfield data not found beside the repository")
def test_cranfield_search_reproduces_the_reference_run():
    from safetensors.numpy import load_file

    device = "cuda" if DEVICE.startswith("cuda") else "cpu"
    corpus = tilemaxsim.Corpus.load(CRANFIELD / "corpus.safetensors", device=device)
    q = load_file(str(CRANFIELD / "queries.safetensors"))
    emb, off = q["embeddings"], q["offsets"]
    ref = {}
    with open(CRANFIELD / "ref_run.trec") as f:
        for line in f:
            qid, _, doc, rank, score, _ = line.split()
            ref.setdefault(qid, []).append((doc, float(score)))
    with open(CRANFIELD / "query_ids.txt") as f:
        qids = [line.strip() for line in f]
    with open(CRANFIELD / "doc_ids.txt") as f:
        doc_ids = [line.strip() for line in f]
    for i in range(0, 225, 25):
        scores, idx = corpus.search(emb[off[i] : off[i + 1]], 10)
        want = ref[qids[i]][:10]
        got = [doc_ids[j] for j in idx.tolist()]
        np.testing.assert_allclose(scores, [s for _, s in want], atol=1e-4)
        # Ties within ~1e-6 may swap; everything else is the same ranking.
        for (gd, gs), (wd, ws) in zip(zip(got, scores), want):
            assert gd == wd or abs(gs - ws) < 1e-5


def test_load_documents_opens_a_shard_indexed_from_zero(tmp_path, rng):
    docs = [normalized(rng, int(n), 24).cpu() for n in rng.integers(1, 40, size=20)]
    whole = tilemaxsim.Corpus.from_tensors(docs, doc_ids=[f"d{i}" for i in range(20)], device="cpu")
    whole.save(tmp_path / "c.safetensors")
    lens = [d.shape[0] for d in docs]
    assert whole.offsets == [0, *np.cumsum(lens).tolist()] and whole.doc_ids is not None
    Q = normalized(rng, 3, 5, 24).cpu()
    all_scores = tilemaxsim.maxsim(Q, torch.cat(docs), cu_seqlens=torch.tensor(whole.offsets))
    for start, end in [(0, 20), (0, 1), (19, 20), (4, 13)]:
        shard = tilemaxsim.Corpus.load(tmp_path / "c.safetensors", device="cpu", documents=(start, end))
        assert len(shard) == end - start and shard.doc_ids == whole.doc_ids[start:end]
        assert shard.offsets == [o - whole.offsets[start] for o in whole.offsets[start : end + 1]]
        s, i = shard.search(Q, end - start)
        # Every document of the shard, ranked: its scores are the whole corpus's, bit for bit.
        assert torch.equal(s, all_scores[torch.arange(3)[:, None], i + start])
    for bad in [(3, 3), (5, 2), (0, 21), (-1, 4)]:
        with pytest.raises(ValueError, match="documents"):
            tilemaxsim.Corpus.load(tmp_path / "c.safetensors", device="cpu", documents=bad)


def test_search_takes_ragged_query_lists(rng):
    D = [rng.standard_normal((int(n), 8)).astype(np.float32) for n in (3, 1, 6, 2)]
    corpus = tilemaxsim.Corpus.from_tensors(D, device="cpu")
    qs = [rng.standard_normal((n, 8)).astype(np.float32) for n in (2, 5, 1)]
    s, i = corpus.search(qs, k=3)
    assert s.shape == (3, 3) and isinstance(s, np.ndarray)
    for a, q in enumerate(qs):
        one_s, one_i = corpus.search(q, k=3)
        np.testing.assert_array_equal(one_i, i[a])
        np.testing.assert_allclose(one_s, s[a], rtol=1e-6)
    ts, ti = corpus.search([torch.from_numpy(q) for q in qs], k=3)
    assert isinstance(ts, torch.Tensor) and ti.tolist() == i.tolist()
    with pytest.raises(ValueError, match="one d"):
        corpus.search([qs[0], np.ones((2, 4), np.float32)], k=1)
