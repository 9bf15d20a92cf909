"""`tilemaxsim corpus import --plaid` on indexes written by the real PLAID implementations from
PyPI, built here on the CPU from tiny seeded data (seconds):

- fast-plaid (`FastPlaid.create`, nbits 2 and 4; the 1.4.6 that pylate 1.6.0 pins): our
  reconstruction equals its `get_embeddings` to within its f16 arithmetic (it adds,
  normalizes and divides in f16, we in f32): 2 f16 ulps plus 2^-12 per element at most;
- colbert-ai 0.2.22: its own `ResidualCodec` (bucket statistics by
  `CollectionIndexer._compute_avg_residual`, codes and residuals by `ResidualCodec.compress`,
  files by `IndexSaver`); colbert-ai's CPU `decompress` must equal ours to f32 rounding.
  colbert-ai's k-means needs faiss, which is not installed: the centroids are a seeded sample
  of normalized tokens (the codec, packing and files are colbert-ai's own).

The imported corpus is then searched on its codes and, decoded, exactly: the runs must match.
The `tilemaxsim` binary comes from `cargo test --workspace` (test.sh runs it first) or
`TILEMAXSIM_CLI`."""

import json
import os
import pathlib
import subprocess
import types
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[3]
CLI = pathlib.Path(os.environ.get("TILEMAXSIM_CLI", ROOT / "target" / "debug" / "tilemaxsim"))


def cli(*args):
    if not CLI.is_file():
        pytest.skip(f"notice: {CLI} is not built (run `cargo build -p tilemaxsim-cli` or test.sh)")
    r = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def documents(seed, n=40, dim=128):
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, 50, (n,), generator=g).tolist()
    return [torch.nn.functional.normalize(torch.randn(k, dim, generator=g), dim=-1) for k in lens]


def import_and_decode(index_dir, tmp):
    out = tmp / "imported.safetensors"
    info = cli("corpus", "import", "--plaid", index_dir, "-o", out).stdout
    assert "residual" in info
    dec = tmp / "decoded.safetensors"
    cli("corpus", "decode", "--corpus", out, "-o", dec)
    f = load_file(str(dec))
    return out, dec, f["embeddings"], f["offsets"]


def same_runs(compressed, decoded, dim, tmp):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((6 * 9, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    qpath = tmp / "queries.safetensors"
    save_file({"embeddings": q, "offsets": np.arange(0, 6 * 9 + 1, 9, dtype=np.int64)}, str(qpath))
    runs = []
    for corpus in (compressed, decoded):
        run = tmp / f"{corpus.stem}.trec"
        cli("search", "--queries", qpath, "--corpus", corpus, "-k", 7, "--device", "cpu", "--out", run)
        runs.append(run.read_text())
    assert runs[0] == runs[1]


@pytest.mark.parametrize("nbits", [2, 4])
def test_fast_plaid_index(tmp_path, nbits):
    search = pytest.importorskip("fast_plaid.search")
    docs = documents(nbits)
    index = tmp_path / "fast-plaid"
    fp = search.FastPlaid(index=str(index), device="cpu")
    fp.create(documents_embeddings=docs, nbits=nbits, kmeans_niters=2, seed=1)
    theirs = torch.cat(fp.get_embeddings(list(range(len(docs))))).float().numpy()
    out, dec, ours, offsets = import_and_decode(index, tmp_path)
    assert offsets.tolist() == np.cumsum([0] + [len(d) for d in docs]).tolist()
    assert ours.shape == theirs.shape
    # fast-plaid rounds the quotient to f16 (2 ulps of the value) after rounding the sum
    # centroid + weight and the norm (an ulp at the inputs' scale, 2^-12 for |x| < 0.5).
    diff = np.abs(ours - theirs)
    ulp = np.spacing(np.abs(theirs).astype(np.float16)).astype(np.float32)
    assert (diff <= 2 * ulp + 2.0**-12).all(), (diff - 2 * ulp).max()
    same = (ours.astype(np.float16) == theirs.astype(np.float16)).mean()
    print(f"fast-plaid nbits={nbits}: max |diff| {diff.max():.2e}, same f16 value {same:.3f}")
    same_runs(out, dec, docs[0].shape[1], tmp_path)


def test_colbert_ai_index(tmp_path, monkeypatch):
    pytest.importorskip("colbert")
    from colbert.infra.config.settings import RunSettings

    # colbert-ai's CPU codec, also on a GPU machine (its GPU codec compiles a CUDA extension).
    monkeypatch.setattr(RunSettings, "total_visible_gpus", 0)
    from colbert.indexing.codecs.residual import ResidualCodec
    from colbert.indexing.codecs.residual_embeddings import ResidualEmbeddings
    from colbert.indexing.collection_indexer import CollectionIndexer
    from colbert.indexing.index_saver import IndexSaver
    from colbert.infra.config import ColBERTConfig

    docs = documents(11)
    dim, nbits = 128, 2
    index = tmp_path / "colbert"
    index.mkdir()
    config = ColBERTConfig(nbits=nbits, dim=dim, index_path=str(index))
    embs = torch.cat(docs)
    g = torch.Generator().manual_seed(3)
    centroids = embs[torch.randperm(len(embs), generator=g)[:64]].clone()
    heldout = embs[torch.randperm(len(embs), generator=g)[:200]]
    this = types.SimpleNamespace(config=config, use_gpu=False, verbose=0)
    # A stand-in `self`: the method reads only these attributes of it.
    cutoffs, weights, avg = CollectionIndexer._compute_avg_residual(
        this,  # pyright: ignore[reportArgumentType]
        centroids,
        heldout,
    )
    codec = ResidualCodec(config, centroids, avg, cutoffs, weights)
    saver = IndexSaver(config)
    saver.save_codec(codec)
    chunks = [docs[:15], docs[15:]]
    # plan.json and metadata.json as CollectionIndexer writes them (the config, the counts).
    meta = {"config": config.export(), "num_chunks": len(chunks), "num_embeddings": len(embs)}
    (index / "plan.json").write_text(json.dumps(meta))
    with saver.thread():
        offset = 0
        for i, chunk in enumerate(chunks):
            saver.save_chunk(i, offset, torch.cat(chunk), [len(d) for d in chunk])
            offset += len(chunk)
    (index / "metadata.json").write_text(json.dumps(meta))
    codec = ResidualCodec.load(str(index))
    loaded = ResidualEmbeddings.load_chunks(str(index), range(len(chunks)), len(embs))
    # load_chunks pads 512 uninitialized rows for strided access: leave them out.
    n = len(embs)
    theirs = codec.decompress(ResidualEmbeddings(loaded.codes[:n], loaded.residuals[:n])).numpy()
    out, dec, ours, offsets = import_and_decode(index, tmp_path)
    assert offsets.tolist() == np.cumsum([0] + [len(d) for d in docs]).tolist()
    diff = np.abs(ours - theirs)
    assert diff.max() <= 1e-6, diff.max()
    print(f"colbert-ai nbits={nbits}: max |diff| {diff.max():.2e}")
    same_runs(out, dec, dim, tmp_path)


# Each byte with its bits in the reverse order: late-interaction-kernels' reading of a residual
# byte (the first dimension in the low bits) against colbert-ai's and fast-plaid's.
BIT_REVERSED = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=np.uint8)


@pytest.mark.parametrize("nbits", [2, 4])
def test_maxsim_residual_on_a_fast_plaid_index(tmp_path, nbits):
    """`tilemaxsim.maxsim_residual` on the tensors of a real fast-plaid index, loaded as a user
    loads them: equal to the float64 MaxSim of fast-plaid's own reconstruction (`get_embeddings`,
    to its f16 rounding), and to late-interaction-kernels' PyTorch reference of its
    `maxsim_residual_varlen` given the bytes in its bit order."""
    import tilemaxsim

    search = pytest.importorskip("fast_plaid.search")
    docs = documents(20 + nbits)
    index = tmp_path / "fast-plaid"
    fp = search.FastPlaid(index=str(index), device="cpu")
    fp.create(documents_embeddings=docs, nbits=nbits, kmeans_niters=2, seed=1)
    chunks = 0
    while (index / f"doclens.{chunks}.json").is_file():
        chunks += 1
    codes = np.concatenate([np.load(index / f"{i}.codes.npy") for i in range(chunks)])
    residuals = np.concatenate([np.load(index / f"{i}.residuals.npy") for i in range(chunks)])
    lens = sum((json.loads((index / f"doclens.{i}.json").read_text()) for i in range(chunks)), [])
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int32)
    centroids = torch.from_numpy(np.load(index / "centroids.npy"))
    weights = torch.from_numpy(np.load(index / "bucket_weights.npy"))
    g = torch.Generator().manual_seed(7)
    Q = torch.nn.functional.normalize(torch.randn(3, 9, 128, generator=g), dim=-1)
    args = (torch.from_numpy(codes), torch.from_numpy(residuals), cu, centroids, weights, nbits)

    got = tilemaxsim.maxsim_residual(Q, *args)
    assert got.shape == (3, len(docs)) and got.dtype == torch.float32
    theirs = [e.double().numpy() for e in fp.get_embeddings(list(range(len(docs))))]
    want = np.array([[np.max(q.double().numpy() @ e.T, axis=1).sum() for e in theirs] for q in Q])
    # fast-plaid's reconstruction is f16 (2 ulps + 2^-12 per element, as above): 9 tokens.
    np.testing.assert_allclose(got.numpy(), want, atol=9 * 2e-3)
    single = tilemaxsim.maxsim_residual(Q[1], *args)
    assert torch.equal(single, got[1])

    lik = pytest.importorskip("late_interaction_kernels.reference")
    padded = max(lens)
    c = torch.zeros(len(docs), padded, dtype=torch.long)
    r = torch.zeros(len(docs), padded, residuals.shape[1], dtype=torch.uint8)
    flipped = torch.from_numpy(BIT_REVERSED[residuals])
    for j in range(len(docs)):
        c[j, : lens[j]] = args[0][cu[j] : cu[j + 1]]
        r[j, : lens[j]] = flipped[cu[j] : cu[j + 1]]
    ref = lik.maxsim_residual_reference(Q, c, r, torch.tensor(lens), centroids, weights, nbits)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-4)
    # Without the reversal late-interaction-kernels decodes other buckets: a different score.
    unflipped = torch.zeros_like(r)
    for j in range(len(docs)):
        unflipped[j, : lens[j]] = args[1][cu[j] : cu[j + 1]]
    other = lik.maxsim_residual_reference(Q, c, unflipped, torch.tensor(lens), centroids, weights, nbits)
    assert not np.allclose(got.numpy(), other.numpy(), atol=1e-4)


def test_maxsim_residual_refuses_bad_input():
    import tilemaxsim

    Q = torch.nn.functional.normalize(torch.randn(2, 4, 8), dim=-1)
    codes = torch.tensor([0, 1, 1], dtype=torch.int32)
    res = torch.zeros(3, 2, dtype=torch.uint8)  # d = 8, nbits = 2: 2 bytes a token
    cu = torch.tensor([0, 1, 3])
    cents = torch.nn.functional.normalize(torch.randn(2, 8), dim=-1).half()
    w = torch.tensor([-0.1, -0.03, 0.03, 0.1])
    ok = tilemaxsim.maxsim_residual(Q, codes, res, cu, cents, w, 2)
    assert ok.shape == (2, 2) and torch.isfinite(ok).all()
    for bad, what in [
        (dict(codes_flat=torch.tensor([0, 2, 1])), "centroid"),  # id 2 of 2 centroids
        (dict(codes_flat=torch.tensor([0, -1, 1])), "non-negative"),
        (dict(residuals_flat=torch.zeros(3, 3, dtype=torch.uint8)), "bytes"),
        (dict(cu_seqlens_d=torch.tensor([0, 1, 4])), "cu_seqlens_d ends at 4"),
        (dict(cu_seqlens_d=torch.tensor([0, 0, 3])), "empty"),
        (dict(centroids=cents[:, :4]), "centroids"),
        (dict(bucket_weights=torch.tensor([0.0, float("nan"), 0.1, 0.2])), "bucket weights"),
        (dict(bucket_weights=torch.tensor([0.0, 0.1])), "weights"),
        (dict(nbits=8), "nbits"),
        (dict(normalize=False), "normalize"),
    ]:
        kw: dict[str, Any] = dict(
            codes_flat=codes, residuals_flat=res, cu_seqlens_d=cu, centroids=cents, bucket_weights=w, nbits=2
        )
        kw.update(bad)
        with pytest.raises((ValueError, TypeError)) as e:
            tilemaxsim.maxsim_residual(Q, **kw)
        assert what.lower() in str(e.value).lower(), (what, str(e.value))
