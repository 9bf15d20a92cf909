"""tilemaxsim.ray.IndexSearcher on a real local Ray cluster (2 CPUs, replicas of a quarter CPU
each), over an index of 300 Cranfield documents: the replicas answer as `tilemaxsim.Index` on
the same directory does, for lists of queries and padded batches with a mask; an add or delete
through the searcher, or by another process's `Index` on the directory, is seen by every
replica's next search; bad input and a directory without an index raise `ValueError`."""

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
        # An add through the searcher: every replica's next search sees it.
        assert s.add(docs[300:305], doc_ids=ids[300:305]) == [300, 301, 302, 303, 304]
        assert all(row[0] == 302 for row in tops(s.search([docs[302]] * 4, 3)))
        names = s.doc_ids
        assert names is not None and names[302] == ids[302]
        assert s.delete([302, 0]) == 2
        assert all(302 not in row and 0 not in row for row in tops(s.search([docs[302]] * 4, 3)))
        # Another process's update of the directory, seen as well.
        other = tilemaxsim.Index(path, device="cpu")
        assert other.add([docs[305]]) == [305]
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
