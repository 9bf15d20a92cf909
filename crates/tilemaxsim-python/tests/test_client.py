"""`tilemaxsim.client.Client` against the real `tilemaxsim serve` binary on 127.0.0.1, serving
Cranfield: results equal the package's own search, numpy and torch inputs of every dtype, the
server's errors raised with its message. The binary is $TILEMAXSIM_BIN (test.sh sets it to the
one `cargo test --workspace` built), else target/{debug,release}/tilemaxsim of this checkout;
without one these tests skip, or fail where TILEMAXSIM_REQUIRE_SERVER=1 (CI)."""

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import tilemaxsim
from tilemaxsim.client import Client, QueryResult, ServerError

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("TILEMAXSIM_DATA", ROOT / ".." / "shared" / "data"))
CRANFIELD = SHARED / "cranfield"


def server_binary():
    candidates = [os.environ.get("TILEMAXSIM_BIN")] + [
        str(ROOT / "target" / p / "tilemaxsim") for p in ("debug", "release")
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    reason = "no tilemaxsim binary: set TILEMAXSIM_BIN or run `cargo build -p tilemaxsim-cli`"
    if os.environ.get("TILEMAXSIM_REQUIRE_SERVER"):
        pytest.fail(reason)
    pytest.skip(reason)


@contextlib.contextmanager
def running(*args):
    """Start `tilemaxsim serve *args` on any free port; yield its client; stop it (SIGTERM, exit 0)."""
    proc = subprocess.Popen(
        [server_binary(), "serve", *args, "--device", "cpu", "--addr", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    log = []
    url = None
    for line in proc.stderr:
        log.append(line)
        if line.startswith("tilemaxsim serve: listening on "):
            url = line.split()[-1]
            break
    assert url, "".join(log)
    # Keep reading stderr so the server never blocks on it.
    stderr = proc.stderr
    reader = threading.Thread(target=lambda: log.extend(stderr), daemon=True)
    reader.start()
    client = Client(url)
    for _ in range(600):
        if client.ready():
            break
        assert proc.poll() is None, "".join(log)
        threading.Event().wait(0.1)
    assert client.ready(), "".join(log)
    try:
        yield client
    finally:
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
        reader.join(timeout=60)  # the server has exited: its stderr ends
        stderr.close()
    assert status == 0, "".join(log)


@pytest.fixture(scope="module")
def server():
    if not CRANFIELD.exists():
        pytest.skip(f"Cranfield data not found at {CRANFIELD}")
    with running(
        "--corpus", str(CRANFIELD / "corpus.safetensors"), "--doc-ids", str(CRANFIELD / "doc_ids.txt")
    ) as client:
        yield client


@pytest.fixture(scope="module")
def cranfield():
    from safetensors.numpy import load_file

    if not CRANFIELD.exists():
        pytest.skip(f"Cranfield data not found at {CRANFIELD}")
    q = load_file(str(CRANFIELD / "queries.safetensors"))
    emb, off = q["embeddings"], q["offsets"]
    queries = [emb[off[i] : off[i + 1]] for i in range(len(off) - 1)]
    corpus = tilemaxsim.Corpus.load(CRANFIELD / "corpus.safetensors", device="cpu")
    with open(CRANFIELD / "doc_ids.txt") as f:
        doc_ids = [line.strip() for line in f]
    return queries, corpus, doc_ids


def assert_same(result: QueryResult, scores, idx, doc_ids):
    idx = [int(i) for i in idx]
    assert result.indices == idx
    assert result.docs == [doc_ids[i] for i in idx]
    # JSON carries each float32 exactly (shortest round-trip form).
    np.testing.assert_array_equal(np.asarray(result.scores, dtype=np.float32), np.asarray(scores, dtype=np.float32))


def test_search_equals_the_library_on_cranfield(server, cranfield):
    queries, corpus, doc_ids = cranfield
    picked = queries[::23]
    results = server.search(picked, k=10, ids=[f"q{i}" for i in range(len(picked))])
    assert [r.id for r in results] == [f"q{i}" for i in range(len(picked))]
    for q, r in zip(picked, results):
        s, i = corpus.search(q, 10)
        assert_same(r, s, i, doc_ids)
        assert r.scores == sorted(r.scores, reverse=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_torch_tensors_one_query_and_a_batch(server, cranfield, dtype):
    queries, corpus, doc_ids = cranfield
    one = torch.from_numpy(queries[5]).to(dtype)
    [r] = server.search(one, k=7)
    s, i = corpus.search(one.float() if dtype == torch.float64 else one, 7)
    assert r.id == "0"
    assert_same(r, s, i, doc_ids)
    batch = torch.stack([torch.from_numpy(q[:8]) for q in queries[:4]]).to(dtype)  # [A, Lq, d]
    results = server.search(batch, k=3)
    s, i = corpus.search(batch.float() if dtype == torch.float64 else batch, 3)
    assert len(results) == 4
    for a, r in enumerate(results):
        assert_same(r, s[a], i[a], doc_ids)


def test_numpy_float32_and_lists(server, cranfield):
    queries, corpus, doc_ids = cranfield
    q32 = queries[7].astype(np.float32)
    [r] = server.search(q32, k=5)
    s, i = corpus.search(q32, 5)
    assert_same(r, s, i, doc_ids)
    [r2] = server.search([q32.tolist()], k=5)  # nested lists become float32 arrays
    assert r2.hits == r.hits


def test_info(server):
    info = server.info()
    assert (info["dim"], info["documents"], info["dtype"], info["doc_ids"]) == (128, 1400, "f16", True)


def test_server_errors_raise_with_its_message(server, cranfield):
    queries, _, _ = cranfield
    with pytest.raises(ServerError, match="d = 128") as e:
        server.search(np.ones((3, 64), dtype=np.float32), k=5)
    assert e.value.status == 400
    with pytest.raises(ServerError, match="out of range") as e:
        server.search(queries[0], k=0)
    assert e.value.status == 400
    with pytest.raises(ServerError, match="non-finite") as e:
        server.search(np.full((2, 128), np.nan, dtype=np.float32), k=5)
    assert e.value.status == 400
    with pytest.raises(TypeError, match="not supported"):
        server.search(np.ones((2, 128), dtype=np.int32), k=5)
    with pytest.raises(ValueError, match=r"\[Lq, d\]"):
        server.search(np.ones(128, dtype=np.float32), k=5)


def test_a_served_corpus_takes_no_subset(server, cranfield):
    queries, _, _ = cranfield
    with pytest.raises(ServerError, match="needs an index") as e:
        server.search(queries[0], k=3, subset=[1, 2])
    assert e.value.status == 400


def test_a_served_corpus_takes_no_updates(server):
    with pytest.raises(ServerError, match="serve an index") as e:
        server.add([np.ones((2, 128), dtype=np.float32) / np.sqrt(128)])
    assert e.value.status == 404
    with pytest.raises(ServerError, match="serve an index"):
        server.delete(indices=[0])


def test_unreachable_server_raises_connection_error():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = Client(f"http://127.0.0.1:{port}", timeout=5)
    assert not client.ready()
    with pytest.raises(ConnectionError, match="cannot reach"):
        client.search(np.ones((2, 4), dtype=np.float32), k=1)


def test_documents_added_and_deleted_through_a_served_index(cranfield, tmp_path):
    """An index of 300 Cranfield documents served live: documents added and deleted through the
    client are on disk when it returns (a `tilemaxsim.Index` opened on the directory answers as
    the server does), and the server's next search sees them."""
    from safetensors.numpy import load_file

    queries, _, doc_ids = cranfield
    c = load_file(str(CRANFIELD / "corpus.safetensors"))
    emb, off = c["embeddings"].astype(np.float32), c["offsets"]
    docs = [emb[off[j] : off[j + 1]] for j in range(310)]
    path = tmp_path / "idx"
    tilemaxsim.Index(path, device="cpu").create(docs[:300], doc_ids=doc_ids[:300], n_centroids=32)
    with running("--index", str(path)) as client:

        def same_as_the_index(q):
            [r] = client.search(q, k=10)
            want = tilemaxsim.Index(path, device="cpu").search(q, 10)[0]
            assert r.indices == [j for j, _ in want]
            np.testing.assert_allclose(r.scores, [s for _, s in want], rtol=1e-5, atol=1e-5)
            return r

        same_as_the_index(queries[3])
        # Within given documents: as the index's own search within them, per query or shared.
        lists = [list(range(5, 300, 9)), [7, 3, 250, 3]]
        got = client.search(queries[:2], k=10, subset=lists)
        want = tilemaxsim.Index(path, device="cpu").search(queries[:2], 10, subset=lists)
        for r, w, mine in zip(got, want, lists):
            assert r.indices == [j for j, _ in w] and set(r.indices) <= set(mine)
            np.testing.assert_allclose(r.scores, [s for _, s in w], rtol=1e-5, atol=1e-5)
        assert len(got[1].indices) == 3
        [r] = client.search(queries[3], k=2, subset=np.array([40, 41, 42]))
        assert set(r.indices) <= {40, 41, 42} and len(r.indices) == 2
        with pytest.raises(ServerError, match="100000") as e:
            client.search(queries[3], k=2, subset=[100000])
        assert e.value.status == 400
        with pytest.raises(ValueError, match="2 lists for 1 queries"):
            client.search(queries[3], k=2, subset=[[1], [2]])
        added = client.add(docs[300:310], ids=[f"new{j}" for j in range(10)])
        assert added == [(f"new{j}", 300 + j) for j in range(10)]
        assert client.info()["documents"] == 310
        # A document's own tokens as the query find it first.
        r = same_as_the_index(docs[304])
        assert (r.docs[0], r.indices[0]) == ("new4", 304)
        assert client.delete(ids=["new4"]) == 1
        assert client.delete(indices=[304, 0]) == 1
        r = same_as_the_index(docs[304])
        assert 304 not in r.indices and 0 not in r.indices
        assert client.info()["documents"] == 308
        with pytest.raises(ServerError, match="nope") as e:
            client.delete(ids=["nope"])
        assert e.value.status == 400
        with pytest.raises(ServerError, match="d = 128"):
            client.add([np.ones((3, 64), dtype=np.float32) / 8.0])
        with pytest.raises(ValueError, match="one of the two"):
            client.delete()
        assert client.info()["documents"] == 308
        # Compacted in place: the server serves the new generation once it answers.
        got = client.compact()
        assert (got["documents"], got["removed"], got["generation"]) == (308, 2, 1)
        assert client.info()["generation"] == 1
        with pytest.raises(ServerError, match="compacted") as e:
            client.delete(indices=[5], generation=0)  # numbers of before the compaction
        assert e.value.status == 409 and client.info()["documents"] == 308
        r = same_as_the_index(docs[305])
        assert (r.docs[0], r.indices[0]) == ("new5", 303)
        # A search names the generation of its numbers, and a delete by them may name it.
        generation, [r] = client.search_at(docs[305], k=3)
        assert generation == 1 and r.indices[0] == 303
        assert client.delete(indices=[303], generation=generation) == 1
        assert 303 not in client.search(docs[305], k=3)[0].indices
