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
    cutoffs, weights, avg = CollectionIndexer._compute_avg_residual(this, centroids, heldout)
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
