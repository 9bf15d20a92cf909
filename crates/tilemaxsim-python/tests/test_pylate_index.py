"""`TileMaxSimIndex` searched by PyLate's own retriever (`pylate.retrieve.ColBERT`): each query,
made of a document's own tokens plus noise, finds that document; exact rescoring gives the
float64 reference's scores; removed ids never come back and may be added again; `subset`
restricts the results; a reopened folder answers the same; and the errors."""

import numpy as np
import pytest
import torch

pytest.importorskip("pylate")
from pylate import retrieve  # noqa: E402

from tilemaxsim.integrations.pylate_index import TileMaxSimIndex  # noqa: E402


def unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def corpus(rng, n, d=32):
    return [unit(rng.standard_normal((int(L), d))) for L in rng.integers(4, 30, size=n)]


def queries_from(rng, docs, which):
    """A query a document: eight of its tokens (with repeats for short ones) plus a little noise."""
    return [
        unit(docs[j][rng.integers(0, len(docs[j]), size=8)] + 0.05 * rng.standard_normal((8, docs[j].shape[1])))
        for j in which
    ]


def reference(q, d):
    return float(np.max(q.astype(np.float64) @ d.astype(np.float64).T, axis=1).sum())


def test_pylate_retriever_finds_each_querys_document(tmp_path):
    rng = np.random.default_rng(5)
    docs = corpus(rng, 120)
    ids = [f"doc-{j}" for j in range(len(docs))]
    index = TileMaxSimIndex(index_folder=str(tmp_path), index_name="idx", override=True)
    # Half given as torch tensors, half as arrays, in two calls: a build, then an add.
    index.add_documents(documents_ids=ids[:80], documents_embeddings=[torch.from_numpy(d) for d in docs[:80]])
    index.add_documents(documents_ids=ids[80:], documents_embeddings=docs[80:])
    which = rng.choice(len(docs), size=30, replace=False)
    queries = queries_from(rng, docs, which)
    results = retrieve.ColBERT(index=index).retrieve(queries_embeddings=queries, k=5)
    assert len(results) == 30 and all(len(r) == 5 for r in results)
    top1 = sum(r[0]["id"] == f"doc-{j}" for r, j in zip(results, which))
    assert top1 >= 28, f"{top1} of 30 queries found their own document first"
    # Exact rescoring: the scores are the float64 reference's, best first.
    for q, r in zip(queries, results):
        scores = [h["score"] for h in r]
        assert scores == sorted(scores, reverse=True)
        for h in r:
            assert abs(h["score"] - reference(q, docs[ids.index(str(h["id"]))])) < 1e-4
    # One query as [Lq, d], and a batch as one [A, Lq, d] array.
    one = index(queries[0], k=3)
    assert [h["id"] for h in one[0]] == [h["id"] for h in results[0][:3]]
    batch = index(np.stack(queries[:4]), k=5)
    assert [[h["id"] for h in r] for r in batch] == [[h["id"] for h in r] for r in results[:4]]


def test_remove_update_subset_and_reopen(tmp_path):
    rng = np.random.default_rng(6)
    docs = corpus(rng, 60)
    ids = [f"d{j}" for j in range(60)]
    index = TileMaxSimIndex(index_folder=str(tmp_path), index_name="idx", override=True)
    index.add_documents(documents_ids=ids, documents_embeddings=docs)
    queries = queries_from(rng, docs, [3, 7, 11])
    first = index(queries, k=3)
    assert [r[0]["id"] for r in first] == ["d3", "d7", "d11"]
    index.remove_documents(["d3", "unknown"])
    after = index(queries, k=10)
    assert all(h["id"] != "d3" for r in after for h in r)
    # Added again under the same id (new embeddings: d7's), found again.
    index.add_documents(documents_ids=["d3"], documents_embeddings=[docs[7]])
    again = index(queries[1:2], k=2)
    assert {h["id"] for h in again[0]} == {"d3", "d7"}
    # update_documents: d11 replaced by d3's old tokens.
    index.update_documents(["d11"], [docs[3]])
    assert index(queries[:1], k=1)[0][0]["id"] == "d11"
    # subset: one list for every query, or one a query.
    sub = index(queries, k=5, subset=["d20", "d21", "d7"])
    assert all({h["id"] for h in r} <= {"d20", "d21", "d7"} for r in sub)
    assert sub[1][0]["id"] == "d7"
    per = index(queries[:2], k=5, subset=[["d30"], ["d7", "d31"]])
    assert [h["id"] for h in per[0]] == ["d30"] and per[1][0]["id"] == "d7"
    # Reopened: the same answers, removed ids still gone.
    reopened = TileMaxSimIndex(index_folder=str(tmp_path), index_name="idx")
    assert reopened(queries, k=10) == index(queries, k=10)
    with pytest.raises(ValueError, match="already in the index"):
        reopened.add_documents(documents_ids=["d5"], documents_embeddings=[docs[5]])


def test_errors(tmp_path):
    index = TileMaxSimIndex(index_folder=str(tmp_path), index_name="idx", override=True)
    with pytest.raises(ValueError, match="empty"):
        index(np.ones((1, 4, 8), np.float32), k=1)
    rng = np.random.default_rng(7)
    docs = corpus(rng, 3, d=8)
    with pytest.raises(ValueError, match="documents_ids for"):
        index.add_documents(documents_ids=["a", "b"], documents_embeddings=docs)
    with pytest.raises(ValueError, match="twice"):
        index.add_documents(documents_ids=["a", "a", "b"], documents_embeddings=docs)
    index.add_documents(documents_ids=["a", "b", "c"], documents_embeddings=docs)
    with pytest.raises(NotImplementedError):
        index.get_documents_embeddings([["a"]])
    with pytest.raises(ValueError, match="lists for"):
        index(np.stack([docs[0][:2], docs[1][:2]]), k=1, subset=[["a"]])
