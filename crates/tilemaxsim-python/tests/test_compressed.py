"""Compressed corpora from Python: `Corpus.compress(...)` for every codec, search on the codes
against the float64 reference on the decoded tokens (via `tilemaxsim corpus decode`-equivalent:
`save` then `Corpus.load` of the saved codes must search identically), `Corpus.load` of a
compressed file with and without exact reranking, and the errors."""

import os

import numpy as np
import pytest

import tilemaxsim


def unit(rng, n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_topk(Q, docs, k):
    s = np.array([[np.max(q @ d.T, axis=1).sum() for d in docs] for q in Q.astype(np.float64)])
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, 1), order


@pytest.mark.parametrize(
    "codec,kw",
    [
        ("residual", dict(nbits=2, centroids=16)),
        ("residual", dict(nbits=4, centroids=8)),
        ("pq", dict(m=8)),
        ("int8", {}),
        ("fp8", {}),
    ],
)
def test_compress_search_save_load(tmp_path, codec, kw):
    rng = np.random.default_rng(0)
    lens = [1, 7, 33, 2, 120, 5, 9]
    docs = [unit(rng, n, 32) for n in lens]
    exact = tilemaxsim.Corpus.from_tensors(docs, device="cpu", doc_ids=[f"d{i}" for i in range(7)])
    c = exact.compress(codec, seed=3, **kw)
    assert c.dtype == codec and c.codec is not None and c.codec.startswith(codec) and len(c) == 7
    assert c.bytes_per_token < exact.bytes_per_token
    Q = unit(rng, 3 * 5, 32).reshape(3, 5, 32)
    s, i = c.search(Q, k=4)
    assert s.shape == (3, 4)
    # Saved and loaded, the codes search the same; with rerank, scores are exact.
    path = tmp_path / "c.safetensors"
    c.save(path)
    back = tilemaxsim.Corpus.load(path, device="cpu")
    assert back.doc_ids == exact.doc_ids
    s2, i2 = back.search(Q, k=4)
    np.testing.assert_array_equal(i, i2)
    np.testing.assert_array_equal(s, s2)
    exact_path = tmp_path / "exact.safetensors"
    exact.save(exact_path)
    rr = tilemaxsim.Corpus.load(path, device="cpu", rerank=exact_path, rerank_k=7)
    s3, i3 = rr.search(Q, k=4)
    ref_s, ref_i = reference_topk(Q, docs, 4)
    np.testing.assert_array_equal(i3, ref_i)
    np.testing.assert_allclose(s3, ref_s, rtol=0, atol=1e-4)
    s4, i4 = exact.compress(codec, seed=3, rerank_k=7, **kw).search(Q, k=4)
    np.testing.assert_array_equal(i4, ref_i)


def test_lloyd_max_buckets_score_closer_than_quantiles():
    """The default bucket fit (Lloyd-Max) scores closer to the float64 reference than
    colbert-ai's quantiles on the same centroids (same seed); an unknown fit is refused."""
    rng = np.random.default_rng(5)
    centers = unit(rng, 12, 32)
    docs = []
    for _ in range(150):
        x = centers[rng.integers(0, 12, 24)] + 0.15 * rng.standard_normal((24, 32)).astype(np.float32)
        docs.append(x / np.linalg.norm(x, axis=1, keepdims=True))
    exact = tilemaxsim.Corpus.from_tensors(docs, device="cpu")
    Q = unit(rng, 4 * 8, 32).reshape(4, 8, 32)
    ref_s, ref_i = reference_topk(Q, docs, len(docs))
    ref = np.zeros_like(ref_s)
    np.put_along_axis(ref, ref_i, ref_s, 1)

    def error(buckets):
        s, i = exact.compress("residual", centroids=16, seed=1, buckets=buckets).search(Q, k=len(docs))
        got = np.zeros_like(ref)
        np.put_along_axis(got, i, s, 1)
        return float(np.mean((got - ref) ** 2))

    lloyd, quantiles = error("lloyd-max"), error("quantiles")
    assert lloyd < quantiles, (lloyd, quantiles)
    assert error("lloyd-max") == lloyd  # the default is seeded: the same codes twice
    with pytest.raises(ValueError, match="lloyd-max or quantiles"):
        exact.compress("residual", centroids=16, buckets="median")


def test_compressed_errors(tmp_path):
    rng = np.random.default_rng(1)
    exact = tilemaxsim.Corpus.from_tensors([unit(rng, 4, 16), unit(rng, 2, 16)], device="cpu")
    with pytest.raises(ValueError, match="codec"):
        exact.compress("zip")
    with pytest.raises(ValueError, match="divide"):
        exact.compress("pq", m=3)
    loud = tilemaxsim.Corpus.from_tensors(
        [rng.standard_normal((3, 16)).astype(np.float32) * 4], doc_lengths=[3], device="cpu"
    )
    with pytest.raises(ValueError, match="normalize"):
        loud.compress("residual")
    with pytest.raises(ValueError, match="device"):
        exact.compress("int8", device="tpu")
    # Compressed on its own device by default; int8 codes are the same on every device, so a
    # corpus compressed on the test device (TILEMAXSIM_TEST_DEVICE) searches as the CPU's.
    here = os.environ.get("TILEMAXSIM_TEST_DEVICE", "cpu")
    Q = unit(rng, 4, 16).reshape(1, 4, 16)
    a = exact.compress("int8", device="cpu").search(Q, k=2)
    b = exact.compress("int8", device=here).search(Q, k=2)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-5)
    c = exact.compress("int8")
    with pytest.raises(ValueError, match="already compressed"):
        c.compress("fp8")
    with pytest.raises(ValueError):
        c.search(unit(rng, 2, 8), k=1)
    path = tmp_path / "c.safetensors"
    c.save(path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(OSError):
        tilemaxsim.Corpus.load(path)
    exact.save(tmp_path / "e.safetensors")
    with pytest.raises(ValueError, match="rerank"):
        tilemaxsim.Corpus.load(tmp_path / "e.safetensors", rerank=tmp_path / "e.safetensors")


def test_rerank_depth_is_kept_in_the_file_and_normalize(tmp_path):
    rng = np.random.default_rng(2)
    docs = [unit(rng, int(n), 16) for n in rng.integers(1, 9, 40)]
    exact = tilemaxsim.Corpus.from_tensors(docs, device="cpu")
    exact_path = tmp_path / "exact.safetensors"
    exact.save(exact_path)
    c = exact.compress("int8", rerank_k=3)
    c.save(tmp_path / "c.safetensors")
    back = tilemaxsim.Corpus.load(tmp_path / "c.safetensors", device="cpu", rerank=exact_path)
    assert "top-3 reranked" in back.device
    assert (
        "top-5 reranked"
        in tilemaxsim.Corpus.load(tmp_path / "c.safetensors", device="cpu", rerank=exact_path, rerank_k=5).device
    )
    plain = exact.compress("int8")
    plain.save(tmp_path / "p.safetensors")
    assert (
        "top-100 reranked" in tilemaxsim.Corpus.load(tmp_path / "p.safetensors", device="cpu", rerank=exact_path).device
    )
    # Unnormalized tokens: the residual codec asks for normalize=True, which it then accepts;
    # a bad nbits is reported as such before the norms are looked at.
    loud = tilemaxsim.Corpus.from_tensors([d * 4 for d in docs], device="cpu")  # exactly 4x
    with pytest.raises(ValueError, match="nbits must be 1, 2 or 4"):
        loud.compress("residual", nbits=3)
    with pytest.raises(ValueError, match="normalize=True"):
        loud.compress("residual", centroids=4)
    small = loud.compress("residual", centroids=4, normalize=True)
    Q = unit(rng, 6, 16).reshape(2, 3, 16)
    same = exact.compress("residual", centroids=4, normalize=True)  # the same unit tokens, bit for bit
    np.testing.assert_array_equal(small.search(Q, 5)[0], same.search(Q, 5)[0])


def test_compressed_files_open_as_shards(tmp_path):
    # As tilemaxsim.ray opens one per actor: documents (start, end) of a compressed file,
    # indexed from 0, searching as those documents of the whole file do.
    rng = np.random.default_rng(4)
    docs = [unit(rng, int(n), 16) for n in rng.integers(1, 9, 30)]
    exact = tilemaxsim.Corpus.from_tensors(docs, device="cpu", doc_ids=[f"d{j}" for j in range(30)])
    path = tmp_path / "c.safetensors"
    exact.compress("int8").save(path)
    whole = tilemaxsim.Corpus.load(path, device="cpu")
    shard = tilemaxsim.Corpus.load(path, device="cpu", documents=(10, 25))
    ids = whole.doc_ids
    assert ids is not None and len(shard) == 15 and shard.doc_ids == ids[10:25] and shard.dtype == "int8"
    Q = unit(rng, 8, 16).reshape(2, 4, 16)
    s, i = shard.search(Q, k=15)
    ws, wi = whole.search(Q, k=30)
    for a in range(2):
        inside = [(x, j - 10) for x, j in zip(ws[a], wi[a]) if 10 <= j < 25]
        assert [j for _, j in inside] == list(i[a]) and np.allclose([x for x, _ in inside], s[a])
