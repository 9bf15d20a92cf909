"""`tilemaxsim.Index`, fast-plaid's shape of API over an index directory: `create` from torch
tensors and numpy arrays, `search` returning `(document, score)` lists; IVF with every centroid
probed and every candidate rescored equals exhaustive search on the codes, and equals
`Corpus.compress("residual")` searched on the same codes; exact reranking scores are the float64
reference's; reopening the directory gives the same hits; a compaction (into a new directory, or in place)
keeps every live document's id and scores; `subset` (fast-plaid's) ranks each query's own
documents, exactly as exhaustive search filtered to them; and the errors."""

import numpy as np
import pytest
import torch

import tilemaxsim
from conftest import DEVICE


def unit(rng, n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference(q, docs):
    return np.array([np.max(q.astype(np.float64) @ d.astype(np.float64).T, axis=1).sum() for d in docs])


def test_create_search_reopen(tmp_path):
    rng = np.random.default_rng(1)
    docs = [torch.from_numpy(unit(rng, n, 32)) for n in rng.integers(1, 40, size=150)]
    # Searched on the CPU, where IVF and exhaustive share one scorer (the test device builds
    # one below).
    index = tilemaxsim.Index(tmp_path / "idx", device="cpu")
    assert len(index) == 0 and "empty" in repr(index)
    index.create(documents_embeddings=docs, n_centroids=16, kmeans_niters=2, seed=3)
    assert len(index) == 150 and index.dim == 32 and index.has_exact
    assert index.defaults == (8, 256, 100)
    Q = torch.from_numpy(np.stack([unit(rng, 12, 32) for _ in range(3)]))
    hits = index.search(Q, top_k=5)
    assert len(hits) == 3 and all(len(h) == 5 for h in hits)
    assert all(isinstance(d, int) and isinstance(s, float) for h in hits for d, s in h)
    # Reranked exactly: the scores are the float64 reference's of those documents.
    host = [d.numpy() for d in docs]
    for q, h in zip(Q.numpy(), hits):
        want = reference(q, [host[d] for d, _ in h])
        np.testing.assert_allclose([s for _, s in h], want, rtol=1e-5, atol=1e-5)
        assert [s for _, s in h] == sorted((s for _, s in h), reverse=True)
    # Every centroid probed, every candidate rescored: exhaustive search's hits, with and
    # without the exact stage; and Corpus.compress's codes searched alike.
    for rerank_k in (0, 50):
        full = index.search(Q, top_k=150, n_ivf_probe=16, n_full_scores=150, rerank_k=rerank_k)
        assert full == index.search(Q, top_k=150, exhaustive=True, rerank_k=rerank_k)
        assert ("reranked" in (index.searcher or "")) == bool(rerank_k)
    # Reopened: the same hits.
    again = tilemaxsim.Index(tmp_path / "idx", device="cpu")
    assert again.search(Q, top_k=5) == hits
    # Built (compressed) on the test device, searched there exhaustively.
    on_device = tilemaxsim.Index(tmp_path / "dev", device=DEVICE).create(documents_embeddings=docs, n_centroids=16)
    assert all(len(h) == 5 for h in on_device.search(Q, top_k=5, exhaustive=True))
    # And with IVF, every stage there: with every centroid probed and every candidate rescored,
    # exhaustive search's scores (on a GPU, within the f16 centroid scores of its kernels).
    full = on_device.search(Q, top_k=20, n_ivf_probe=16, n_full_scores=150, rerank_k=0)
    if DEVICE == "cuda":
        assert "every stage on" in (on_device.searcher or "")
    every = on_device.search(Q, top_k=20, exhaustive=True, rerank_k=0)
    for a, b in zip(full, every):
        np.testing.assert_allclose([s for _, s in a], [s for _, s in b], rtol=1e-3, atol=0.02)
    # The codes held resident or streamed (on a GPU each batch's candidates are uploaded; on
    # the CPU the choice changes nothing): the same hits and scores.
    for residency in ("resident", "stream"):
        held = on_device.search(Q, top_k=20, n_ivf_probe=16, n_full_scores=150, rerank_k=0, residency=residency)
        assert [[d for d, _ in h] for h in held] == [[d for d, _ in h] for h in full], residency
        np.testing.assert_array_equal([[s for _, s in h] for h in held], [[s for _, s in h] for h in full])
    # A list of queries of different lengths, and one query [Lq, d].
    ragged = [torch.from_numpy(unit(rng, n, 32)) for n in (1, 7, 31)]
    assert len(index.search(ragged, top_k=3)) == 3
    assert len(index.search(Q[0], top_k=3)) == 1


def test_numpy_documents_without_exact_tokens(tmp_path):
    rng = np.random.default_rng(2)
    docs = [unit(rng, n, 16) for n in rng.integers(1, 20, size=60)]
    index = tilemaxsim.Index(str(tmp_path / "np"), device="cpu").create(
        documents_embeddings=docs, nbits=4, n_centroids=8, keep_exact=False, n_ivf_probe=2
    )
    assert not index.has_exact and index.defaults == (2, 256, 100)
    q = unit(rng, 5, 16)
    hits = index.search(q[None], top_k=4)
    assert len(hits[0]) <= 4 and "reranked" not in (index.searcher or "")
    codes = tilemaxsim.Corpus.from_tensors(docs, device="cpu").compress(
        "residual", nbits=4, centroids=8, kmeans_iters=4, seed=0
    )
    full = index.search(q[None], top_k=60, n_ivf_probe=8, n_full_scores=60)
    s, i = codes.search(q, 60)
    # The same codec trained with the same seed and settings: the same documents and scores.
    assert [d for d, _ in full[0]] == [int(x) for x in i]
    np.testing.assert_allclose([x for _, x in full[0]], np.asarray(s), rtol=1e-6)


def test_errors(tmp_path):
    rng = np.random.default_rng(3)
    docs = [unit(rng, 5, 16) for _ in range(20)]
    empty = tilemaxsim.Index(tmp_path / "none")
    with pytest.raises(ValueError, match="no index here yet"):
        empty.search(unit(rng, 3, 16)[None])
    index = tilemaxsim.Index(tmp_path / "idx").create(documents_embeddings=docs, n_centroids=4)
    with pytest.raises(ValueError, match="already holds an index"):
        index.create(documents_embeddings=docs)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="is not empty"):
        tilemaxsim.Index(tmp_path / "full").create(documents_embeddings=docs, n_centroids=4)
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError):
        index.search(unit(rng, 3, 8)[None])  # another d
    with pytest.raises(ValueError):
        index.search(unit(rng, 3, 16)[None], top_k=0)
    with pytest.raises(ValueError):
        index.search(unit(rng, 3, 16)[None], n_ivf_probe=0)
    with pytest.raises(ValueError, match="expected auto, resident or stream"):
        index.search(unit(rng, 3, 16)[None], residency="gpu")
    with pytest.raises(ValueError, match="lloyd-max or quantiles"):
        tilemaxsim.Index(tmp_path / "bad3").create(documents_embeddings=docs, n_centroids=4, buckets="mean")
    with pytest.raises(ValueError):
        tilemaxsim.Index(tmp_path / "bad").create(documents_embeddings=[])
    with pytest.raises(ValueError):
        tilemaxsim.Index(tmp_path / "bad2").create(documents_embeddings=docs, nbits=3)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "index.json").write_text("{")
    with pytest.raises(OSError, match="not valid JSON"):
        tilemaxsim.Index(tmp_path / "broken")


def test_add_and_delete_live_then_reopen(tmp_path):
    # Adds are encoded against the index's centroids and searched beside the build's
    # documents; deletes drop documents from every search; both are on disk when they return,
    # so a reopened index (another process's view) searches the same. With every candidate
    # rescored exactly, the hits are the float64 reference's over the surviving documents.
    rng = np.random.default_rng(5)
    docs = [unit(rng, n, 24) for n in rng.integers(1, 30, size=80)]
    index = tilemaxsim.Index(tmp_path / "idx", device="cpu")
    index.create(documents_embeddings=docs, n_centroids=8, kmeans_niters=2, doc_ids=[f"d{j}" for j in range(80)])
    more = [torch.from_numpy(unit(rng, n, 24)) for n in (1, 17, 40)]
    assert index.add(more, doc_ids=["new-a", "new-b", "new-c"]) == [80, 81, 82]
    # The index's documents carry ids, so an add must name its documents too (named by their
    # numbers, they could take ids other documents carry).
    with pytest.raises(ValueError, match="carry ids"):
        index.add([unit(rng, 5, 24)])
    # Nor may an added document take an id a live document carries.
    with pytest.raises(ValueError, match="is live document 1"):
        index.add([np.eye(24, dtype=np.float32)[:2]], doc_ids=["d1"])
    assert index.add([unit(rng, 5, 24)], doc_ids=["new-d"]) == [83]
    assert index.delete([3, 81, 3]) == 2 and index.delete(np.array([3])) == 0
    assert len(index) == 84 and index.deleted == 2
    ids = index.doc_ids
    assert ids is not None and ids[:2] == ["d0", "d1"] and ids[80:] == ["new-a", "new-b", "new-c", "new-d"]
    everything = docs + [d.numpy() for d in more] + []
    everything.append(None)  # document 83, read back below
    Q = np.stack([unit(rng, 9, 24) for _ in range(4)])
    for searcher in (index, tilemaxsim.Index(tmp_path / "idx", device="cpu")):
        hits = searcher.search(Q, top_k=84, exhaustive=True, rerank_k=84)
        for q, h in zip(Q, hits):
            found = [d for d, _ in h]
            assert len(found) == 82 and 3 not in found and 81 not in found
            for d, s in h[:10]:
                if everything[d] is not None:
                    np.testing.assert_allclose(s, reference(q, [everything[d]])[0], atol=1e-4)
        # IVF with every centroid probed finds the same documents in the same order.
        ivf = searcher.search(Q, top_k=84, n_ivf_probe=8, n_full_scores=84, rerank_k=84)
        assert [[d for d, _ in h] for h in ivf] == [[d for d, _ in h] for h in hits]
    with pytest.raises(ValueError, match="document 84 does not exist"):
        index.delete([84])
    with pytest.raises(ValueError, match="norm"):
        index.add([np.full((3, 24), 0.5, dtype=np.float32)], doc_ids=["x"])
    with pytest.raises(ValueError, match="d = 23"):
        index.add([unit(rng, 3, 23)], doc_ids=["x"])
    assert len(index) == 84 and index.deleted == 2
    # Compacted into a new directory: the 82 live documents numbered from 0 under their ids,
    # each hit the same document (by id) with the same score; the original is left as it is.
    compacted = index.compact(tmp_path / "compacted")
    live = [j for j in range(84) if j not in (3, 81)]
    assert len(compacted) == 82 and compacted.deleted == 0
    new_ids = compacted.doc_ids
    assert new_ids is not None
    assert new_ids == [ids[j] for j in live]
    for how in ({"exhaustive": True, "rerank_k": 0}, {"exhaustive": True, "rerank_k": 84}):
        before = index.search(Q, top_k=20, **how)
        after = compacted.search(Q, top_k=20, **how)
        assert [[(ids[d], s) for d, s in h] for h in before] == [[(new_ids[d], s) for d, s in h] for h in after]
    assert len(index) == 84 and index.deleted == 2
    with pytest.raises(ValueError, match="already holds an index"):
        index.compact(tmp_path / "compacted")
    # In place: another opening keeps its view until it refreshes, and its deletes by the old
    # numbers are refused meanwhile; then both search as the compacted copy does.
    other = tilemaxsim.Index(tmp_path / "idx", device="cpu")
    how = {"exhaustive": True, "rerank_k": 84}
    assert index.compact() is index
    assert (index.generation, len(index), index.deleted) == (1, 82, 0)
    assert index.doc_ids == new_ids
    with pytest.raises(ValueError, match="compacted"):
        other.delete([0])
    assert other.generation == 0 and other.refresh() and other.generation == 1
    for opening in (index, other):
        assert opening.search(Q, top_k=20, **how) == compacted.search(Q, top_k=20, **how)
    assert not other.refresh()


def test_search_within_a_subset(tmp_path):
    # fast-plaid's `subset`: one list for every query, or one a query (lists, arrays, tensors);
    # each query's hits are its listed live documents in the order exhaustive search gives
    # them (on the codes alone, and with every candidate rescored exactly: the float64
    # reference's scores), repeats and deleted documents ignored. Compared on the CPU, where
    # exhaustive search scores the codes with the same scorer; the exact stage also on the
    # test device.
    rng = np.random.default_rng(9)
    docs = [unit(rng, n, 24) for n in rng.integers(1, 30, size=70)]
    index = tilemaxsim.Index(tmp_path / "idx", device="cpu")
    index.create(documents_embeddings=docs, n_centroids=8, kmeans_niters=2)
    index.add([unit(rng, 12, 24)])
    index.delete([5, 70])
    Q = np.stack([unit(rng, 9, 24) for _ in range(3)])
    lists = [[5, 1, 1, 40, 70, 69], [2], list(range(71))]
    for rerank_k in (0, 200):
        every = index.search(Q, top_k=71, exhaustive=True, rerank_k=rerank_k)
        for subset in (lists, [np.array(x) for x in lists]):
            got = index.search(Q, top_k=4, rerank_k=rerank_k, subset=subset)
            for h, e, allowed in zip(got, every, lists):
                want = [(d, s) for d, s in e if d in allowed][:4]
                assert [d for d, _ in h] == [d for d, _ in want]
                np.testing.assert_allclose([s for _, s in h], [s for _, s in want], rtol=1e-5, atol=1e-5)
        # One list for every query (a list, a tensor).
        for shared in ([3, 9, 27], torch.tensor([3, 9, 27])):
            one = index.search(Q, top_k=2, rerank_k=rerank_k, subset=shared)
            assert all({d for d, _ in h} <= {3, 9, 27} and len(h) == 2 for h in one)
    # With the exact stage, the float64 reference's scores, on the test device too.
    on_device = tilemaxsim.Index(tmp_path / "idx", device=DEVICE)
    got = on_device.search(Q, top_k=3, rerank_k=200, subset=[10, 11, 12, 13])
    for q, h in zip(Q, got):
        np.testing.assert_allclose([s for _, s in h], reference(q, [docs[d] for d, _ in h]), rtol=1e-5, atol=1e-5)
    # Empty lists and deleted-only lists find nothing.
    assert index.search(Q, top_k=3, subset=[]) == [[], [], []]
    assert index.search(Q, top_k=3, subset=[[5], [70], []]) == [[], [], []]
    with pytest.raises(ValueError, match="document 71 does not exist"):
        index.search(Q, top_k=3, subset=[0, 71])
    with pytest.raises(ValueError, match="2 lists for 3 queries"):
        index.search(Q, top_k=3, subset=[[0], [1]])
    with pytest.raises(ValueError, match="0 or more"):
        index.search(Q, top_k=3, subset=[0, -1])


def test_refresh_takes_another_openings_updates(tmp_path):
    # Two openings of one directory (two processes' views): one's updates reach the other's
    # searches once it refreshes, and a refresh with nothing new reports so.
    rng = np.random.default_rng(9)
    docs = [unit(rng, n, 24) for n in rng.integers(1, 20, size=40)]
    a = tilemaxsim.Index(tmp_path / "idx", device="cpu").create(documents_embeddings=docs, n_centroids=8)
    b = tilemaxsim.Index(tmp_path / "idx", device="cpu")
    assert b.refresh() is False
    new = unit(rng, 12, 24)
    assert a.add([new]) == [40]
    assert len(b) == 40
    assert b.refresh() is True and len(b) == 41
    assert b.search(new, top_k=1, exhaustive=True)[0][0][0] == 40
    assert a.delete([40]) == 1
    assert b.refresh() is True and b.deleted == 1
    assert all(d != 40 for d, _ in b.search(new, top_k=41, exhaustive=True)[0])
    assert b.refresh() is False
    empty = tilemaxsim.Index(tmp_path / "none", device="cpu")
    assert empty.refresh() is False
