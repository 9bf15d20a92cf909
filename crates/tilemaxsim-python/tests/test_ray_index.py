"""tilemaxsim.ray.IndexSearcher on a real local Ray cluster (2 CPUs, replicas of a quarter CPU
each), over an index of 300 Cranfield documents: the replicas answer as `tilemaxsim.Index` on
the same directory does, for lists of queries and padded batches with a mask; an add or delete
through the searcher, or by another process's `Index` on the directory, is seen by every
replica's next search; bad input and a directory without an index raise `ValueError`. And
`tilemaxsim.ray.serve_index`'s Serve application over the same kind of index, over HTTP."""

import os

import numpy as np
import pytest

import tilemaxsim

if os.environ.get("TILEMAXSIM_REQUIRE_RAY"):
    import ray
else:
    ray = pytest.importorskip("ray", reason="Ray is not installed here")
from test_corpus import CRANFIELD
from tilemaxsim.ray import IndexSearcher  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
    pytest.mark.skipif(not CRANFIELD.exists(), reason="Cranfield data not found beside the repository"),
]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, object_store_memory=128 << 20, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cranfield():
    """The first 310 documents (float32), their ids, and 40 queries."""
    from safetensors.numpy import load_file

    c = load_file(str(CRANFIELD / "corpus.safetensors"))
    emb, off = c["embeddings"].astype(np.float32), c["offsets"]
    docs = [emb[off[j] : off[j + 1]] for j in range(310)]
    with open(CRANFIELD / "doc_ids.txt") as f:
        ids = [line.strip() for line in f][:310]
    q = load_file(str(CRANFIELD / "queries.safetensors"))
    qe, qo = q["embeddings"].astype(np.float32), q["offsets"]
    queries = [qe[qo[i] : qo[i + 1]] for i in range(40)]
    return docs, ids, queries


def tops(hits):
    return [[j for j, _ in row] for row in hits]


def test_replicas_answer_as_the_index_and_take_updates_through_any(cluster, cranfield, tmp_path):
    docs, ids, queries = cranfield
    path = tmp_path / "idx"
    tilemaxsim.Index(path, device="cpu").create(docs[:300], doc_ids=ids[:300], n_centroids=32)
    with IndexSearcher(path, replicas=2, device="cpu", num_cpus=0.25) as s:
        assert [i["documents"] for i in s.info()] == [300, 300]
        assert s.search(queries, 10) == tilemaxsim.Index(path, device="cpu").search(queries, 10)
        # A padded batch with its mask, split over the replicas.
        lq = max(len(q) for q in queries[:7])
        Q = np.zeros((7, lq, 128), dtype=np.float32)
        mask = np.zeros((7, lq), dtype=bool)
        for i, q in enumerate(queries[:7]):
            Q[i, : len(q)], mask[i, : len(q)] = q, True
        got = s.search(Q, 5, q_mask=mask, n_ivf_probe=4)
        assert got == tilemaxsim.Index(path, device="cpu").search(Q, 5, q_mask=mask, n_ivf_probe=4)
        # subset: one list a query, split over the replicas with their queries; one for all.
        lists = [[j, j + 1, 299 - j] for j in range(7)]
        for subset in (lists, [5, 50, 150]):
            got = s.search(queries[:7], 2, subset=subset)
            assert got == tilemaxsim.Index(path, device="cpu").search(queries[:7], 2, subset=subset)
        assert all({d for d, _ in row} <= set(lst) for row, lst in zip(s.search(queries[:7], 3, subset=lists), lists))
        # An add through the searcher: every replica's next search sees it.
        assert s.add(docs[300:305], doc_ids=ids[300:305]) == [300, 301, 302, 303, 304]
        assert all(row[0] == 302 for row in tops(s.search([docs[302]] * 4, 3)))
        names = s.doc_ids
        assert names is not None and names[302] == ids[302]
        assert s.delete([302, 0]) == 2
        assert all(302 not in row and 0 not in row for row in tops(s.search([docs[302]] * 4, 3)))
        # Another process's update of the directory, seen as well.
        other = tilemaxsim.Index(path, device="cpu")
        assert other.add([docs[305]], doc_ids=[ids[305]]) == [305]
        assert all(row[0] == 305 for row in tops(s.search([docs[305]] * 2, 1)))
        assert s.search(queries, 10) == tilemaxsim.Index(path, device="cpu").search(queries, 10)
        with pytest.raises(ValueError):
            s.search([np.ones((3, 64), dtype=np.float32)], 5)
        with pytest.raises(ValueError, match="top_k"):
            s.search(queries, 0)
        with pytest.raises(ValueError):
            s.add([np.ones((3, 64), dtype=np.float32) / 8.0])
    with pytest.raises(ValueError, match="no index"):
        IndexSearcher(tmp_path / "none", replicas=1, num_cpus=0.25)


def test_serve_app_searches_and_takes_writes_over_http(cluster, cranfield, tmp_path):
    """`build_index_app` on a real Serve instance over loopback: searches answer as
    `tilemaxsim.Index` on the directory; adds and deletes (by id and by number) are answered once
    on disk and seen by every search sent after, whichever replica answers; bad writes are 400
    and change nothing."""
    from ray import serve

    from test_ray import _free_port, _http
    from tilemaxsim.ray.serve_index import build_index_app

    docs, ids, queries = cranfield
    path = tmp_path / "served"
    tilemaxsim.Index(path, device="cpu").create(docs[:300], doc_ids=ids[:300], n_centroids=32)

    def search(idx, k=10, generation=0):
        body = {"queries": [{"id": f"q{i}", "embeddings": queries[i].tolist()} for i in idx], "k": k}
        status, got = _http(port, "POST", "/v1/search", body)
        assert status == 200, got
        assert [r["id"] for r in got["results"]] == [f"q{i}" for i in idx]
        # The generation whose numbers the hits carry (a delete by number may name it).
        assert got["generation"] == generation, got["generation"]
        return [[(h["index"], h["doc"], h["score"]) for h in r["hits"]] for r in got["results"]]

    def same_as_the_directory(got, idx, k=10):
        want = tilemaxsim.Index(path, device="cpu").search([queries[i] for i in idx], k)
        names = tilemaxsim.Index(path, device="cpu").doc_ids
        assert names is not None
        assert [[(j, names[j]) for j, _, _ in row] for row in got] == [[(j, names[j]) for j, _ in w] for w in want]
        for row, w in zip(got, want):
            np.testing.assert_allclose([s for _, _, s in row], [s for _, s in w], rtol=1e-6)

    def top(doc, k):
        status, got = _http(port, "POST", "/v1/search", {"queries": [{"embeddings": doc.tolist()}], "k": k})
        assert status == 200, got
        return [h["index"] for h in got["results"][0]["hits"]]

    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(build_index_app(path, replicas=2, num_cpus=0.25), name="tilemaxsim-index", route_prefix="/")
        assert _http(port, "GET", "/healthz") == (200, "ok")
        status, info = _http(port, "GET", "/v1/info")
        assert status == 200 and info["dim"] == 128 and info["documents"] == 300, info
        same_as_the_directory(search(range(6)), range(6))
        # Two documents added with their ids: every search after the answer sees them (four
        # searches, so both replicas answer at least one with high probability; each reads the log
        # before it searches either way).
        add = {"documents": [{"id": ids[300 + i], "embeddings": docs[300 + i].tolist()} for i in range(2)]}
        status, got = _http(port, "POST", "/v1/index/add", add)
        assert status == 200, got
        assert got == {"added": [{"doc": ids[300], "index": 300}, {"doc": ids[301], "index": 301}], "documents": 302}
        assert all(top(docs[301], 1) == [301] for _ in range(4))
        # Deletes by id and by number (one of them deleted already).
        assert _http(port, "POST", "/v1/index/delete", {"ids": [ids[301]]}) == (
            200,
            {"deleted": 1, "already": 0, "documents": 301},
        )
        assert _http(port, "POST", "/v1/index/delete", {"indices": [301, 0]}) == (
            200,
            {"deleted": 1, "already": 1, "documents": 300},
        )
        assert all(301 not in top(docs[301], 5) and 0 not in top(docs[0], 5) for _ in range(4))
        same_as_the_directory(search(range(6)), range(6))
        # Bad writes: 400 with a message, nothing changed.
        for route, bad, what in [
            ("delete", {"ids": ["no such id"]}, "no document has the id"),
            ("delete", {"indices": [10**6]}, "not a document number"),
            ("delete", {"ids": [ids[5]], "indices": [5]}, "one of the two"),
            ("delete", b"{", "not JSON"),
            ("add", {"documents": []}, "expected"),
            ("add", {"documents": [{"embeddings": [[0.5] * 64]}]}, "d = 64"),
            ("add", {"documents": [{"id": "a", "embeddings": [[0.5] * 128]}, {"embeddings": [[0.5] * 128]}]}, "every"),
            ("add", {"documents": [{"id": "x", "embeddings": (docs[7] * 3).tolist()}]}, ""),
        ]:
            status, got = _http(port, "POST", f"/v1/index/{route}", bad)
            assert status == 400 and what in got["error"], (route, what, status, got)
        assert _http(port, "GET", "/v1/info")[1]["documents"] == 300
        assert len(tilemaxsim.Index(path, device="cpu")) == 302
        # Compacted in place through one replica: every replica takes the new generation (the
        # documents numbered again, their ids kept), and deletes by id name the new numbers.
        status, got = _http(port, "POST", "/v1/index/compact", {})
        assert (status, got) == (200, {"documents": 300, "removed": 2, "tokens": got["tokens"], "generation": 1}), got
        assert tilemaxsim.Index(path, device="cpu").generation == 1
        assert _http(port, "GET", "/v1/info")[1]["generation"] == 1
        status, got = _http(port, "POST", "/v1/index/delete", {"indices": [3], "generation": 0})
        assert status == 400 and "compacted" in got["error"], got
        same_as_the_directory(search(range(6), generation=1), range(6))
        assert _http(port, "POST", "/v1/index/delete", {"ids": [ids[7]]}) == (
            200,
            {"deleted": 1, "already": 0, "documents": 299},
        )
        # And by another process: the next searches and deletes see its generation.
        tilemaxsim.Index(path, device="cpu").compact()
        same_as_the_directory(search(range(6), generation=2), range(6))
        assert _http(port, "POST", "/v1/index/delete", {"ids": [ids[8]]})[1]["deleted"] == 1
        assert _http(port, "POST", "/v1/index/compact", {"x": 1})[0] == 400
    finally:
        serve.shutdown()
