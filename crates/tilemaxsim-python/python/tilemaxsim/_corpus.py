"""`Corpus`: documents kept for many searches, on the CPU, resident on a GPU, streamed from host
memory, or sharded over several GPUs (as the Rust `Searcher` chooses for the device)."""

from __future__ import annotations

import os

import numpy as np

from . import _native
from ._arrays import as_array, is_torch, torch
from ._engine import _queries


def _ragged(queries):
    """A list of `[Lq_i, d]` queries as one zero-padded host array `[A, max Lq, d]` and the
    lengths (each query scores only its own tokens)."""
    qs = [as_array(q, f"Q[{n}]") for n, q in enumerate(queries)]
    if any(q.ndim != 2 for q in qs) or len({q.shape[1] for q in qs}) != 1:
        raise ValueError(f"Q: a list of queries must hold [Lq, d] arrays of one d, got {[tuple(q.shape) for q in qs]}")
    if any(q.shape[0] == 0 for q in qs):
        raise ValueError("Q: a query has no tokens; every query needs a token")
    torch_out = is_torch(qs[0])
    hosts = [q.detach().cpu().float().numpy() if is_torch(q) else np.asarray(q, dtype=np.float32) for q in qs]
    lengths = [h.shape[0] for h in hosts]
    padded = np.zeros((len(hosts), max(lengths), hosts[0].shape[1]), dtype=np.float32)
    for n, h in enumerate(hosts):
        padded[n, : h.shape[0]] = h
    return padded, lengths, False, torch_out


class Corpus:
    """A packed multi-vector corpus with its searcher.

    `Corpus.load(path)` opens a corpus file (safetensors: `embeddings` `[T, d]`, `offsets`
    `[B + 1]`, optional `doc_ids`), checking its values unless the file records that they were
    checked; `Corpus.from_tensors(...)` builds one from arrays; `save(path)` writes one.
    `device`: `"auto"` (a GPU when usable, else the CPU), `"cpu"`, `"cuda"` or `"cuda:N"`;
    `devices=[0, 1]` shards over GPUs; `residency`: `"auto"`, `"resident"` or `"stream"`.
    `Corpus.load(path, documents=(start, end))` opens a shard of a file (see `tilemaxsim.ray`).

    Compressed corpora: `corpus.compress("residual", nbits=2)` (or `"pq"` with `m=16`, `"int8"`,
    `"fp8"`) returns a new `Corpus` searched on its codes (on the CPU until the GPU kernels
    exist), reranked exactly against this one when `rerank_k` is given; `save` writes it and
    `Corpus.load` opens it (a file written by `tilemaxsim corpus compress` or
    `corpus import --plaid` too), with `rerank=EXACT_PATH, rerank_k=K'` for two stages.
    """

    def __init__(self, native):
        self._native = native

    @classmethod
    def load(
        cls,
        path,
        device="auto",
        *,
        devices=None,
        residency="auto",
        check_finite=True,
        documents=None,
        rerank=None,
        rerank_k=None,
    ):
        """`documents=(start, end)` opens only those documents of the file (a shard, indexed from
        0 with their ids): the file is memory-mapped and only the range's values are read, so
        processes opening shards of one file share the page cache. A compressed file is
        reranked exactly against `rerank` (an exact corpus file) over its top `rerank_k`
        (default: the depth recorded in the file by `compress(..., rerank_k=K)`, else 100)."""
        if documents is not None:
            start, end = (int(x) for x in documents)
            if start < 0 or end < 0:
                raise ValueError(f"documents=({start}, {end}): negative")
            documents = (start, end)
        return cls(
            _native.Corpus.load(
                os.fspath(path),
                device,
                devices=devices,
                residency=residency,
                check_finite=check_finite,
                documents=documents,
                rerank=None if rerank is None else os.fspath(rerank),
                rerank_k=rerank_k,
            )
        )

    def compress(
        self,
        codec,
        *,
        nbits=2,
        centroids=None,
        m=16,
        kmeans_iters=None,
        buckets="lloyd-max",
        seed=0,
        rerank_k=None,
        normalize=False,
        device=None,
    ):
        """This corpus compressed with `codec`: `"residual"` (ColBERTv2/PLAID; `nbits` 1, 2 or 4,
        `centroids` K, default PLAID's), `"pq"` (`m` sub-spaces of 256 centroids), `"int8"` or
        `"fp8"` (e4m3, per-token scales). k-means is seeded (`seed`). With `rerank_k`, searches
        rescore the compressed top-`rerank_k` exactly against this corpus, and `save` records the
        depth in the file. The residual codec needs unit-norm tokens (as ColBERT encoders give
        them): `normalize=True` scales every token to unit L2 norm first. Training and encoding
        run on `device` (`"cpu"`, `"cuda"`, `"cuda:N"`, `"auto"`; default: this corpus's
        device, so a corpus on a GPU compresses there); a seed gives the same codes twice on the
        same device. The residual bucket cutoffs and weights are fitted by `buckets`:
        `"lloyd-max"` (the least squared error, the default) or `"quantiles"` (colbert-ai's and
        fast-plaid's)."""
        return type(self)(
            self._native.compress(
                codec,
                nbits=nbits,
                centroids=centroids,
                m=m,
                kmeans_iters=kmeans_iters,
                buckets=buckets,
                seed=seed,
                rerank_k=rerank_k,
                normalize=normalize,
                device=device,
            )
        )

    @classmethod
    def from_tensors(
        cls,
        embeddings,
        cu_seqlens=None,
        *,
        doc_lengths=None,
        doc_ids=None,
        device="auto",
        devices=None,
        residency="auto",
    ):
        """From packed rows `[T, d]` with `cu_seqlens` `[B + 1]` (or `doc_lengths` `[B]`), or from
        a list of `[Ld_i, d]` documents. Values are copied to host memory and checked."""
        if isinstance(embeddings, (list, tuple)) and len(embeddings) and getattr(embeddings[0], "ndim", 0) == 2:
            docs = [as_array(e, "embeddings") for e in embeddings]
            doc_lengths = [int(e.shape[0]) for e in docs]
            embeddings = torch.cat([e.cpu() for e in docs]) if is_torch(docs[0]) else np.concatenate(docs)
        emb = as_array(embeddings, "embeddings")
        if is_torch(emb):
            emb = emb.detach().cpu().contiguous()
        if cu_seqlens is None:
            if doc_lengths is None:
                raise ValueError("give cu_seqlens or doc_lengths (or a list of documents)")
            lengths = np.asarray(doc_lengths.cpu() if is_torch(doc_lengths) else doc_lengths, dtype=np.int64)
            cu_seqlens = np.concatenate([[0], np.cumsum(lengths)])
        offsets = np.asarray(cu_seqlens.cpu() if is_torch(cu_seqlens) else cu_seqlens, dtype=np.int64)
        if (offsets < 0).any():
            raise ValueError("cu_seqlens: negative offsets")
        return cls(
            _native.Corpus.from_arrays(
                emb, [int(o) for o in offsets], doc_ids, device, devices=devices, residency=residency
            )
        )

    def search(self, Q, k, *, q_mask=None):
        """The `k` best documents per query: (scores, indices), `[min(k, N)]` for one query
        `[Lq, d]`, else `[A, min(k, N)]`; best first, ties to the lower index. A `k` larger than
        the corpus returns every document (the rule of `topk`, the CLI and the server). `Q` may
        also be a list of queries of different lengths (`[Lq_i, d]` each). numpy arrays, or CPU
        torch tensors when the queries are torch tensors."""
        if k < 1:
            raise ValueError(f"k = {k}: must be at least 1")
        if isinstance(Q, (list, tuple)) and Q and getattr(Q[0], "ndim", 0) == 2:
            if q_mask is not None:
                raise ValueError("q_mask: not with a list of queries (each query is its tokens)")
            host, lengths, single, torch_out = _ragged(Q)
        else:
            Q, single = _queries(Q, q_mask)
            torch_out = is_torch(Q)
            host = Q.detach().cpu().contiguous() if torch_out else np.ascontiguousarray(Q)
            lengths = [int(Q.shape[1])] * int(Q.shape[0])
        scores, index = self._native.search(host, lengths, int(k))
        kk = min(int(k), len(self))
        s = np.asarray(scores, dtype=np.float32).reshape(len(lengths), kk)
        i = np.asarray(index, dtype=np.int64).reshape(len(lengths), kk)
        if torch_out:
            s, i = torch.from_numpy(s), torch.from_numpy(i)
        return (s[0], i[0]) if single else (s, i)

    def save(self, path):
        self._native.save(os.fspath(path))

    def __len__(self):
        return len(self._native)

    @property
    def dim(self) -> int:
        return self._native.dim

    @property
    def dtype(self) -> str:
        """`f32`, `f16` or `bf16`; for a compressed corpus, its codec's name."""
        return self._native.dtype

    @property
    def codec(self):
        """A description of the codec of a compressed corpus (`None` when exact)."""
        return self._native.codec

    @property
    def bytes_per_token(self) -> int:
        return self._native.bytes_per_token

    @property
    def num_tokens(self) -> int:
        return self._native.num_tokens

    @property
    def offsets(self) -> list:
        """The `B + 1` document offsets into the token rows (document j is rows
        `offsets[j]:offsets[j + 1]`)."""
        return self._native.offsets

    @property
    def doc_ids(self):
        return self._native.doc_ids

    @property
    def device(self) -> str:
        """The searcher in use (e.g. `cpu-avx512`, `cuda:0 resident`)."""
        return self._native.device

    def __repr__(self):
        return f"Corpus({len(self)} documents, {self.num_tokens} tokens, d={self.dim}, {self.dtype}, {self.device})"
