"""tilemaxsim.ray on a real local Ray cluster (2 CPUs, shard actors of half a CPU each): the
merged top-k of the shards equals the single-process search of the whole Cranfield corpus, ids
map back to the corpus's, bad input and bad shards raise typed errors, and a shard actor killed
mid-run makes the searches in flight raise ShardError until Ray has restarted it, after which
the answers are whole and correct again."""

import time

import numpy as np
import pytest
import torch

import ray
import tilemaxsim
from tilemaxsim.ray import ShardedSearcher, ShardError, plan_shards
from test_corpus import CRANFIELD

needs_cranfield = pytest.mark.skipif(not CRANFIELD.exists(), reason="Cranfield data not found beside the repository")
CORPUS = CRANFIELD / "corpus.safetensors"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=128 << 20, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def queries():
    """All 225 Cranfield queries, zero-padded to [225, 32, 128], and their token mask."""
    from safetensors.numpy import load_file

    q = load_file(str(CRANFIELD / "queries.safetensors"))
    emb, off = q["embeddings"], q["offsets"]
    n, lq = len(off) - 1, int(np.diff(off).max())
    Q = np.zeros((n, lq, emb.shape[1]), dtype=emb.dtype)
    mask = np.zeros((n, lq), dtype=bool)
    for i in range(n):
        Q[i, : off[i + 1] - off[i]] = emb[off[i] : off[i + 1]]
        mask[i, : off[i + 1] - off[i]] = True
    return Q, mask


@pytest.fixture(scope="module")
def whole():
    return tilemaxsim.Corpus.load(CORPUS, device="cpu")


def test_plan_shards_covers_the_corpus_in_balanced_ranges(rng):
    for n, shards in [(1, 1), (5, 5), (7, 3), (1400, 3), (1000, 64)]:
        lengths = rng.integers(1, 300, size=n)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        plan = plan_shards(offsets, shards)
        assert len(plan) == shards and plan[0][0] == 0 and plan[-1][1] == n
        assert all(a < b for a, b in plan) and all(p[1] == q[0] for p, q in zip(plan, plan[1:]))
        tokens = [offsets[b] - offsets[a] for a, b in plan]
        if n >= 10 * shards:  # room to balance: each shard within a document or two of its share
            assert max(tokens) - min(tokens) <= 2 * lengths.max()
    for bad in (0, 8):
        with pytest.raises(ValueError, match="shards"):
            plan_shards(np.arange(8), bad)


@needs_cranfield
def test_merged_top_k_equals_the_single_process_search(cluster, queries, whole):
    Q, mask = queries
    with ShardedSearcher(CORPUS, shards=3, num_cpus=0.5) as searcher:
        info = searcher.info()
        assert [i["documents"] for i in info] == searcher.shards and searcher.shards[-1][1] == len(whole) == 1400
        assert len({i["pid"] for i in info}) == 3  # three actor processes
        # Every document ranked for every query; a top-k is its first k columns (the order is
        # total), checked on a few queries for small k (each shard then returns only k).
        ws, wi = whole.search(Q, 1400, q_mask=mask)
        for k, n in ((5000, 225), (10, 40), (1, 40)):
            s, i = searcher.search(Q[:n], k, q_mask=mask[:n])
            assert s.shape == i.shape == (n, min(k, 1400))
            # The same documents scored by the same engine: identical bits and ranking.
            np.testing.assert_array_equal(i, wi[:n, :k])
            np.testing.assert_array_equal(s, ws[:n, :k])
        # One query [Lq, d] gives [k]; a torch query gives torch tensors; ids default to indices.
        s, i = searcher.search(Q[7], 10)
        one = whole.search(Q[7], 10)[1]
        assert s.shape == (10,) and i.tolist() == one.tolist()
        s, i = searcher.search(torch.from_numpy(Q[:4]), 10)
        assert isinstance(s, torch.Tensor) and i.tolist() == whole.search(Q[:4], 10)[1].tolist()
        _, ids = searcher.search_ids(Q[7], 10)
        assert ids == [str(j) for j in one.tolist()]


@needs_cranfield
def test_ids_map_back_to_the_corpus_and_reproduce_the_reference_run(cluster, queries, tmp_path):
    from safetensors.numpy import load_file

    c = load_file(str(CORPUS))
    doc_ids = [l.strip() for l in open(CRANFIELD / "doc_ids.txt")]
    path = tmp_path / "cranfield-ids.safetensors"
    tilemaxsim.Corpus.from_tensors(c["embeddings"], c["offsets"], doc_ids=doc_ids, device="cpu").save(path)
    ref = {}
    for line in open(CRANFIELD / "ref_run.trec"):
        qid, _, doc, _, score, _ = line.split()
        ref.setdefault(qid, []).append((doc, float(score)))
    qids = [l.strip() for l in open(CRANFIELD / "query_ids.txt")]
    Q, mask = queries
    some = np.arange(0, 225, 5)
    with ShardedSearcher(path, shards=2, num_cpus=0.5) as searcher:
        hits = searcher.search_hits(Q[some], 10, q_mask=mask[some])
    for q, qi in enumerate(some):
        assert hits.ids[q] == [doc_ids[j] for j in hits.indices[q].tolist()]
        want = ref[qids[qi]][:10]
        np.testing.assert_allclose(hits.scores[q], [s for _, s in want], atol=1e-4)
        # Ties within ~1e-6 may swap against the float64 run; everything else is the same ranking.
        for got, score, (wd, ws) in zip(hits.ids[q], hits.scores[q], want):
            assert got == wd or abs(score - ws) < 1e-5


@needs_cranfield
def test_bad_input_and_bad_shards_raise_typed_errors(cluster, tmp_path, rng):
    from safetensors.numpy import save_file

    with pytest.raises(OSError, match="missing.safetensors"):
        ShardedSearcher(tmp_path / "missing.safetensors", shards=2, num_cpus=0.5)
    # A NaN in the last shard's documents: that shard refuses to open, naming the document by
    # its index in the file; the searcher is not made and its other actors end.
    emb = rng.standard_normal((60, 16)).astype(np.float32)
    emb[55, 3] = np.nan  # document 11 (tokens 55..60)
    save_file({"embeddings": emb, "offsets": np.arange(0, 61, 5, dtype=np.int64)}, str(tmp_path / "nan.safetensors"))
    with pytest.raises(ValueError, match="document 11"):
        ShardedSearcher(tmp_path / "nan.safetensors", shards=3, num_cpus=0.5)
    with pytest.raises(ValueError, match="shards"):
        ShardedSearcher(CORPUS, shards=1401, num_cpus=0.5)
    with ShardedSearcher(tmp_path / "nan.safetensors", shards=2, num_cpus=0.5, check_finite=False) as s:
        Q = rng.standard_normal((3, 16)).astype(np.float32)
        with pytest.raises(ValueError, match="d = 8"):
            s.search(Q[:, :8], 5)
        with pytest.raises(ValueError, match="k = 0"):
            s.search(Q, 0)
        bad = Q.copy()
        bad[1, 2] = np.inf
        with pytest.raises(ValueError, match="NaN or an infinity"):
            s.search(bad, 5)
        assert s.search(Q, 5)[1].shape == (5,)


@needs_cranfield
def test_a_killed_shard_raises_until_restarted_then_answers_are_whole(cluster, queries, whole):
    Q, mask = queries
    ws, wi = whole.search(Q[:120], 20, q_mask=mask[:120])
    batches = [slice(i, i + 10) for i in range(0, 120, 10)]
    with ShardedSearcher(CORPUS, shards=3, num_cpus=0.5, max_restarts=2) as searcher:
        victim = searcher.actors[1]
        old_pid = searcher.info()[1]["pid"]
        pending = [searcher.submit(Q[b], 20, q_mask=mask[b]) for b in batches]
        first = pending[0].result(timeout=60)
        np.testing.assert_array_equal(first.indices, wi[batches[0]])
        ray.kill(victim, no_restart=False)  # mid-run: the later batches are queued or running
        failed = 0
        for p, b in zip(pending[1:], batches[1:]):
            try:
                h = p.result(timeout=60)
            except ShardError as e:
                assert e.shard == 1 and e.documents == searcher.shards[1] and "no partial results" in str(e)
                failed += 1
            else:  # answered before the kill: whole and correct
                np.testing.assert_array_equal(h.indices, wi[b])
                np.testing.assert_array_equal(h.scores, ws[b])
        print(f"{failed} of {len(pending) - 1} searches in flight failed")
        assert failed > 0, "the kill came after every batch had finished; nothing was tested"
        # Searches fail clearly while Ray restarts the actor, then answer correctly again.
        deadline, answered, refused = time.monotonic() + 60, None, 0
        while answered is None and time.monotonic() < deadline:
            try:
                answered = searcher.search(Q[:40], 20, q_mask=mask[:40], timeout=60)
            except ShardError:
                refused += 1
                time.sleep(0.2)
        assert answered is not None, "the shard was not restarted within 60 s"
        print(f"{refused} searches refused while the shard restarted")
        np.testing.assert_array_equal(answered[1], wi[:40])
        np.testing.assert_array_equal(answered[0], ws[:40])
        assert ray.get(victim.info.remote())["pid"] != old_pid  # a new process holds the shard
