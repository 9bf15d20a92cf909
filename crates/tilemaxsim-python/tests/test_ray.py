"""tilemaxsim.ray on a real local Ray cluster (2 CPUs; shard actors of a quarter CPU each, so
every test's actors fit beside the module's searcher): the merged top-k of the shards equals
the single-process search of the whole Cranfield corpus, ids map back to the corpus's, bad input
and bad shards raise typed errors, a shard actor killed mid-run makes the searches in flight
raise ShardError until Ray has restarted it, after which the answers are whole and correct
again; and the Ray Serve application answers the same over real HTTP on the loopback address,
503 while a killed shard replica is replaced."""

import os
import re
import time
from typing import Any, cast

import numpy as np
import pytest
import torch

import tilemaxsim

# Where Ray is absent (the GPU machine) these tests are skipped with a notice and the rest of
# the suite runs; test.sh sets TILEMAXSIM_REQUIRE_RAY so a missing Ray fails there instead.
if os.environ.get("TILEMAXSIM_REQUIRE_RAY"):
    import ray
else:
    ray = pytest.importorskip("ray", reason="Ray is not installed here")
from test_corpus import CRANFIELD
from tilemaxsim.ray import ShardedSearcher, ShardError, merge, plan_shards  # noqa: E402

# Ray Serve's own pydantic models warn on import; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
needs_cranfield = pytest.mark.skipif(not CRANFIELD.exists(), reason="Cranfield data not found beside the repository")
CORPUS = CRANFIELD / "corpus.safetensors"


@pytest.fixture(scope="module")
def cluster():
    # Every GPU of the machine (none here; one per shard on a GPU machine).
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    ray.init(num_cpus=2, num_gpus=gpus, include_dashboard=False, object_store_memory=128 << 20, log_to_driver=False)
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


@pytest.fixture(scope="module")
def searcher(cluster):
    """Three shard actors of a quarter CPU each over the Cranfield file (no ids in it)."""
    with ShardedSearcher(CORPUS, shards=3, num_cpus=0.25, timeout=120) as s:
        yield s


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


def test_merge_of_shard_top_k_is_the_global_top_k_with_ties(rng):
    # Scores from a handful of values: ties everywhere, broken by the lower global index.
    A, n = 6, 300
    scores = rng.integers(0, 7, size=(A, n)).astype(np.float32) / 4
    offsets = np.arange(n + 1)
    for shards in (1, 2, 5, 300):
        for k in (1, 3, 40, 300, 1000):
            parts = []
            for start, end in plan_shards(offsets, shards):
                s = scores[:, start:end]
                order = np.lexsort((np.broadcast_to(np.arange(start, end), s.shape), -s), axis=-1)[:, :k]
                parts.append((np.take_along_axis(s, order, 1), order + start, None))
            got_s, got_i, ids = merge(parts, k)
            want_i = np.lexsort((np.broadcast_to(np.arange(n), scores.shape), -scores), axis=-1)[:, :k]
            np.testing.assert_array_equal(got_i, want_i)
            np.testing.assert_array_equal(got_s, np.take_along_axis(scores, want_i, 1))
            assert ids == [[str(j) for j in row] for row in want_i.tolist()]


@needs_cranfield
def test_merged_top_k_equals_the_single_process_search(searcher, queries, whole):
    Q, mask = queries
    info = searcher.info()
    assert [i["documents"] for i in info] == searcher.shards and searcher.shards[-1][1] == len(whole) == 1400
    assert len({i["pid"] for i in info}) == 3  # three actor processes
    # Every document ranked for every query; a top-k is its first k columns (the order is
    # total), checked on a few queries for small k (each shard then returns only k).
    ws, wi = whole.search(Q, 1400, q_mask=mask)
    for k, n in ((5000, 225), (10, 40), (1, 40)):
        s, i = searcher.search(Q[:n], k, q_mask=mask[:n], timeout=60)
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


@pytest.mark.skipif(not tilemaxsim.cuda_available(), reason="no CUDA device: the GPU shards are not tested here")
def test_gpu_shards_match_the_single_gpu_search(cluster, tmp_path, rng):
    # One shard per GPU where the machine has several (each on its own GPU), else two shards
    # sharing the one GPU (half a GPU each). A seeded corpus of odd lengths (1 to 300 tokens),
    # so the test needs no data beside the repository and runs on the GPU machine too.
    from safetensors.numpy import save_file

    gpus = torch.cuda.device_count()
    shards, per_shard = (gpus, 1.0) if gpus > 1 else (2, 0.5)
    if ray.cluster_resources().get("GPU", 0) < shards * per_shard:
        pytest.skip(f"the Ray cluster holds {ray.cluster_resources().get('GPU', 0)} GPUs, not {shards * per_shard}")
    lengths = rng.integers(1, 301, size=2001)
    lengths[[0, 1000]] = 1, 300  # a 1-token document, and one at the upper end
    emb = rng.standard_normal((int(lengths.sum()), 96)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    path = tmp_path / "gpu-shards.safetensors"
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    save_file({"embeddings": emb.astype(np.float16), "offsets": offsets}, str(path))
    Q = rng.standard_normal((40, 31, 96)).astype(np.float16)
    whole = tilemaxsim.Corpus.load(path, device="cuda")
    ws, wi = whole.search(Q, 100)
    with ShardedSearcher(
        path, shards=shards, device="cuda", num_gpus=per_shard, num_cpus=0.25, timeout=120
    ) as searcher:
        info = searcher.info()
        assert all(i["device"].startswith("cuda") for i in info)
        if per_shard == 1.0:  # each shard on a GPU of its own
            assert sorted(g for i in info for g in i["gpus"]) == [str(g) for g in range(gpus)], info
        s, i = searcher.search(Q, 100, timeout=60)
    np.testing.assert_allclose(s, ws, atol=1e-5)
    # A shard may run another kernel shape than the whole corpus: ties within 1e-5 may swap.
    assert ((i == wi) | (np.abs(s - ws) < 1e-5)).all()


@needs_cranfield
def test_ids_map_back_to_the_corpus_and_reproduce_the_reference_run(cluster, queries, tmp_path):
    from safetensors.numpy import load_file

    c = load_file(str(CORPUS))
    with open(CRANFIELD / "doc_ids.txt") as f:
        doc_ids = [line.strip() for line in f]
    path = tmp_path / "cranfield-ids.safetensors"
    tilemaxsim.Corpus.from_tensors(c["embeddings"], c["offsets"], doc_ids=doc_ids, device="cpu").save(path)
    ref = {}
    with open(CRANFIELD / "ref_run.trec") as f:
        for line in f:
            qid, _, doc, _, score, _ = line.split()
            ref.setdefault(qid, []).append((doc, float(score)))
    with open(CRANFIELD / "query_ids.txt") as f:
        qids = [line.strip() for line in f]
    Q, mask = queries
    some = np.arange(0, 225, 5)
    with ShardedSearcher(path, shards=2, num_cpus=0.25, timeout=120) as searcher:
        hits = searcher.search_hits(Q[some], 10, q_mask=mask[some])
    for q, qi in enumerate(some):
        assert hits.ids[q] == [doc_ids[j] for j in hits.indices[q].tolist()]
        want = ref[qids[qi]][:10]
        np.testing.assert_allclose(hits.scores[q], [s for _, s in want], atol=1e-4)
        # Ties within ~1e-6 may swap against the float64 run; everything else is the same ranking.
        for got, score, (wd, ws) in zip(hits.ids[q], hits.scores[q], want):
            assert got == wd or abs(score - ws) < 1e-5


@needs_cranfield
def test_bad_input_and_bad_shards_raise_typed_errors(searcher, tmp_path, rng):
    from safetensors.numpy import save_file

    with pytest.raises(OSError, match="missing.safetensors"):
        ShardedSearcher(tmp_path / "missing.safetensors", shards=2, num_cpus=0.25, timeout=120)
    with pytest.raises(ValueError, match="shards"):
        ShardedSearcher(CORPUS, shards=1401, num_cpus=0.25, timeout=120)
    # A NaN in the last shard's documents: that shard refuses to open, naming the document by
    # its index in the file; the searcher is not made and its other actor ends.
    emb = rng.standard_normal((60, 16)).astype(np.float32)
    emb[55, 3] = np.nan  # document 11 (tokens 55..60)
    save_file({"embeddings": emb, "offsets": np.arange(0, 61, 5, dtype=np.int64)}, str(tmp_path / "nan.safetensors"))
    with pytest.raises(ValueError, match="document 11"):
        ShardedSearcher(tmp_path / "nan.safetensors", shards=2, num_cpus=0.25, timeout=120)
    Q = rng.standard_normal((3, 128)).astype(np.float32)
    with pytest.raises(ValueError, match="d = 8"):
        searcher.search(Q[:, :8], 5)
    with pytest.raises(ValueError, match="k = 0"):
        searcher.search(Q, 0)
    bad = Q.copy()
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="NaN or an infinity"):
        searcher.search(bad, 5)
    with pytest.raises(ValueError, match="empty"):
        searcher.search(Q[:0], 5)
    assert searcher.search(Q, 5)[1].shape == (5,)


@needs_cranfield
def test_a_killed_shard_raises_until_restarted_then_answers_are_whole(cluster, queries, whole):
    Q, mask = queries
    ws, wi = whole.search(Q[:120], 20, q_mask=mask[:120])
    batches = [slice(i, i + 10) for i in range(0, 120, 10)]
    with ShardedSearcher(CORPUS, shards=3, num_cpus=0.25, max_restarts=2, timeout=120) as searcher:
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
        # (ray.get's first overload, for a list of refs, takes the untyped handle's ref.)
        assert cast(dict, ray.get(victim.info.remote()))["pid"] != old_pid  # a new process holds the shard


def test_parse_request_reads_every_encoding_and_refuses_bad_input(rng):
    import base64
    import json

    from tilemaxsim.ray.serve import BadRequest, parse_request

    x = torch.from_numpy(rng.standard_normal((5, 16)).astype(np.float32))
    encoded = {"f32": x.numpy(), "f16": x.half().numpy(), "bf16": x.bfloat16().view(torch.int16).numpy()}
    want = {"f32": x, "f16": x.half().float(), "bf16": x.bfloat16().float()}
    for dtype, raw in encoded.items():
        q = {"id": dtype, "embeddings_b64": base64.b64encode(raw.tobytes()).decode(), "dtype": dtype, "shape": [5, 16]}
        ids, queries, k = parse_request(
            json.dumps({"queries": [q, {"embeddings": x.tolist()}], "k": 7}).encode(), 16, 100
        )
        assert ids == [dtype, "1"] and k == 7
        np.testing.assert_array_equal(queries[0], want[dtype].numpy())
        np.testing.assert_array_equal(queries[1], x.numpy())
    ok = {"embeddings": x.tolist()}
    for bad, what in [
        (b"\xff", "not JSON"),
        (b"[]", "expected"),
        (b'{"queries": [1]}', "queries[0]"),
        ({"queries": [ok], "k": True}, "k = True"),
        ({"queries": [ok], "k": 101}, "k = 101"),
        ({"queries": [{"embeddings": []}]}, "Lq >= 1"),
        ({"queries": [{"embeddings": [[1, "a"]]}]}, "numbers"),
        ({"queries": [{"embeddings": [[1.0] * 16, [1.0] * 15]}]}, "numbers"),
        ({"queries": [{"embeddings_b64": "AAAA", "dtype": "f64", "shape": [1, 16]}]}, "dtype"),
        ({"queries": [{"embeddings_b64": "AAAA", "dtype": "f32", "shape": [1, 16]}]}, "do not fill"),
        ({"queries": [{"embeddings_b64": "AAAA", "shape": [16]}]}, "shape"),
    ]:
        body = bad if isinstance(bad, bytes) else json.dumps(bad).encode()
        with pytest.raises(BadRequest, match=re.escape(what)):
            parse_request(body, 16, 100)


def _http(port, method, path, body=None) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one real HTTP request to the loopback address."""
    import json
    import urllib.error
    import urllib.request

    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_cranfield
def test_serve_app_answers_over_http_as_the_single_process_search(cluster, queries, whole):
    import base64
    from concurrent.futures import ThreadPoolExecutor

    from ray import serve

    from tilemaxsim.ray.serve import build_app

    Q, mask = queries
    lens = mask.sum(axis=1)
    # The queries as a client sends them: float32 lists (f16 values, exactly), and what the
    # single process answers for them.
    q32 = [Q[i, : lens[i]].astype(np.float32) for i in range(12)]
    want = [whole.search(q, 10) for q in q32]

    def body(idx, k=10):
        return {"queries": [{"id": f"q{i}", "embeddings": q32[i].tolist()} for i in idx], "k": k}

    def check(results, idx, k=10):
        assert [r["id"] for r in results] == [f"q{i}" for i in idx]
        for r, i in zip(results, idx):
            ws, wi = want[i]
            assert [h["doc"] for h in r["hits"]] == [str(j) for j in wi[:k].tolist()]
            assert [h["score"] for h in r["hits"]] == [float(s) for s in ws[:k]]

    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(build_app(CORPUS, shards=3, num_cpus=0.25), name="tilemaxsim", route_prefix="/")
        assert _http(port, "GET", "/healthz") == (200, "ok")
        status, info = _http(port, "GET", "/v1/info")
        assert status == 200 and info["dim"] == 128 and info["documents"] == 1400 and len(info["shards"]) == 3
        status, got = _http(port, "POST", "/v1/search", body(range(5)))
        assert status == 200, got
        check(got["results"], range(5))
        # The same query as base64 f16 (the file's own values) and bf16-free f32.
        b64 = {
            "id": "q0",
            "embeddings_b64": base64.b64encode(Q[0, : lens[0]].tobytes()).decode(),
            "dtype": "f16",
            "shape": [int(lens[0]), 128],
        }
        status, got = _http(port, "POST", "/v1/search", {"queries": [b64], "k": 10})
        assert status == 200, got
        check(got["results"], [0])
        # Concurrent requests of different k, batched together by the ingress.
        with ThreadPoolExecutor(6) as pool:
            answers = list(
                pool.map(lambda i: (i, _http(port, "POST", "/v1/search", body([i], k=1 + i % 10))), range(12))
            )
        for i, (status, got) in answers:
            assert status == 200, got
            check(got["results"], [i], k=1 + i % 10)
        # The counters (Prometheus text): 14 requests so far, their 18 queries in the batches.
        status, text = _http(port, "GET", "/metrics")
        metrics = dict(line.split() for line in text.splitlines() if not line.startswith("#"))
        assert status == 200 and float(metrics["tilemaxsim_requests_total"]) == 14, text
        assert float(metrics["tilemaxsim_batch_queries_sum"]) == 5 + 1 + 12, text
        assert 1 <= float(metrics["tilemaxsim_batch_queries_count"]) <= 14, text
        assert float(metrics["tilemaxsim_compute_duration_seconds_sum"]) > 0, text
        # Bad input: 400 with a message, the service unharmed.
        nan = body([0])
        nan["queries"][0]["embeddings"][0][0] = float("nan")
        for bad, what in [
            (b"{not json", "not JSON"),
            ({"queries": []}, "expected"),
            (body([0], k=0), "k = 0"),
            (body([0], k=1001), "k = 1001"),
            (nan, "NaN"),
            ({"queries": [{"embeddings": [[0.5] * 64]}]}, "d = 64"),
            ({"queries": [{"embeddings_b64": "!!", "dtype": "f16", "shape": [1, 128]}]}, "queries[0]"),
        ]:
            status, got = _http(port, "POST", "/v1/search", bad)
            assert status == 400 and what in got["error"], (what, status, got)
        assert _http(port, "GET", "/v1/nothing")[0] == 404
        # A shard replica killed while it scores a large request: that request is 503 (never
        # partial hits), and Serve replaces the replica; requests answer 503 or correctly
        # until then, and correctly after.
        name = serve.get_deployment_handle("shard-1", app_name="tilemaxsim").info.remote().result()["actor"]
        every = {
            "queries": [
                {
                    "id": f"q{i}",
                    "embeddings_b64": base64.b64encode(Q[i, : lens[i]].tobytes()).decode(),
                    "dtype": "f16",
                    "shape": [int(lens[i]), 128],
                }
                for i in range(225)
            ],
            "k": 10,
        }
        # The request must outlast the kill on any machine: time Cranfield's 225 queries once,
        # repeat them until the request takes about 8 s (16 times at most), and kill the
        # replica a quarter of the way in.
        started = time.monotonic()
        status, got = _http(port, "POST", "/v1/search", every)
        took = time.monotonic() - started
        assert status == 200, got
        reps = min(16, max(1, int(8.0 / max(took, 1e-3)) + 1))
        print(f"225 queries took {took:.2f} s; the killed request repeats them {reps} times")
        big_body = {"queries": every["queries"] * reps, "k": 10}
        with ThreadPoolExecutor(1) as pool:
            big = pool.submit(_http, port, "POST", "/v1/search", big_body)
            time.sleep(max(0.2, took * reps / 4))
            ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
            status, got = big.result()
        # Killed while shard 1 scores (a 503 naming it), or, when Serve had already routed the
        # rest of the request to the replacement replica, complete and correct: never partial.
        if status == 200:
            every_want = [whole.search(Q[i, : lens[i]].astype(np.float32), 10) for i in range(225)]
            assert len(got["results"]) == 225 * reps
            for r, (ws, wi) in zip(got["results"], every_want * reps):
                assert [h["doc"] for h in r["hits"]] == [str(j) for j in wi.tolist()]
                assert [h["score"] for h in r["hits"]] == [float(x) for x in ws]
        else:
            assert status == 503 and "shard 1" in got["error"] and "no partial results" in got["error"], (status, got)
        print(f"the request in flight at the kill: {status}")
        deadline, unavailable = time.monotonic() + 90, 0
        while True:
            status, got = _http(port, "POST", "/v1/search", body(range(5)))
            if status == 200:
                check(got["results"], range(5))
                break
            assert status == 503 and "no partial results" in got["error"], (status, got)
            unavailable += 1
            assert time.monotonic() < deadline, "the shard replica was not replaced within 90 s"
            time.sleep(0.2)
        print(f"{unavailable} requests answered 503 while the shard replica was replaced")
        assert serve.get_deployment_handle("shard-1", app_name="tilemaxsim").info.remote().result()["actor"] != name
        status, got = _http(port, "POST", "/v1/search", body(range(5, 12)))
        assert status == 200, got
        check(got["results"], range(5, 12))
    finally:
        serve.shutdown()


def test_batches_of_16_bit_values_go_to_gpu_shards_in_the_corpus_type(rng):
    from tilemaxsim.ray.serve import _narrowed

    x = rng.standard_normal((3, 7, 16)).astype(np.float32)
    f16 = x.astype(np.float16).astype(np.float32)
    got = _narrowed(f16, "f16")
    assert got.dtype == np.float16 and np.array_equal(got.astype(np.float32), f16)
    assert _narrowed(x, "f16") is x  # not exactly f16: scored as sent
    bf16 = torch.from_numpy(x).bfloat16().float().numpy()
    got = _narrowed(bf16, "bf16")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16 and np.array_equal(got.float().numpy(), bf16)
    assert _narrowed(x, "bf16") is x
    assert _narrowed(f16, "f32") is f16 and _narrowed(f16, None) is f16
