"""`Index`: an index directory (residual codes, their IVF and the exact tokens) built and searched
with fast-plaid's shape of API: `Index(index=path)`, `.create(documents_embeddings=[...])`,
`.search(queries_embeddings=..., top_k=10)` returning `[(document, score), ...]` per query."""

from __future__ import annotations

import os

import numpy as np

from . import _native
from ._arrays import is_torch, subset_lists
from ._corpus import Corpus, _ragged
from ._engine import _queries


def _as_corpus(documents_embeddings, doc_ids):
    """A `Corpus` as given, or one on the host made of a list of `[Ld_i, d]` documents."""
    if isinstance(documents_embeddings, Corpus):
        return documents_embeddings
    if not isinstance(documents_embeddings, (list, tuple)) or not documents_embeddings:
        raise ValueError("documents_embeddings: a non-empty list of [Ld_i, d] documents (or a Corpus)")
    return Corpus.from_tensors(list(documents_embeddings), doc_ids=doc_ids, device="cpu")


def _hits(scores, index, queries, kk):
    """The native search's flat scores and numbers as one `[(number, score), ...]` a query
    (the -1 numbers past a query's hits left out)."""
    out = []
    for q in range(queries):
        row = zip(index[q * kk : (q + 1) * kk], scores[q * kk : (q + 1) * kk])
        out.append([(int(i), float(s)) for i, s in row if i >= 0])
    return out


class Index:
    """An index directory at `index`: opened when it holds one, else made by `create`.

    `create(documents_embeddings=[[Ld_i, d] tensors or arrays], nbits=2, ...)` compresses the
    documents with PLAID's residual codec (k-means on `device`: a GPU when one is usable for
    `"auto"`), builds the IVF (centroid -> documents) and keeps the exact tokens for reranking
    unless `keep_exact=False`. The directory must be new or empty: nothing is overwritten.

    `search(queries_embeddings, top_k=10, n_ivf_probe=None, n_full_scores=None)` probes the IVF
    (each query token's `n_ivf_probe` best centroids; the `n_full_scores` best candidates by
    their centroid scores rescored on their codes; then the best `rerank_k` rescored exactly
    when the index keeps the exact tokens), or scores every document on its codes with
    `exhaustive=True`; either runs every stage on `device` (a GPU when one is usable for
    `"auto"`). Defaults come from the index (set at
    `create`). Returns one list of `(document index, score)` per query, best first.
    """

    def __init__(self, index, device="auto"):
        self._path = os.fspath(index)
        self._device = device
        self._native = (
            _native.Index.open(self._path) if os.path.exists(os.path.join(self._path, "index.json")) else None
        )

    def create(
        self,
        documents_embeddings,
        *,
        nbits=2,
        n_centroids=None,
        kmeans_niters=4,
        buckets="lloyd-max",
        seed=0,
        keep_exact=True,
        doc_ids=None,
        n_ivf_probe=None,
        n_full_scores=None,
        rerank_k=None,
    ):
        """Build the index from a list of `[Ld_i, d]` documents (or a `Corpus`); returns self.
        `buckets` fits the residual bucket cutoffs and weights: `"lloyd-max"` (the least squared
        error, the default) or `"quantiles"` (colbert-ai's and fast-plaid's)."""
        if self._native is not None:
            raise ValueError(f"{self._path}: already holds an index; an index is built in a new or empty directory")
        corpus = _as_corpus(documents_embeddings, doc_ids)
        build_device = "cpu" if self._device == "cpu" else self._device
        self._native = _native.Index.build(
            corpus._native,
            self._path,
            nbits=int(nbits),
            centroids=n_centroids,
            kmeans_iters=int(kmeans_niters),
            buckets=buckets,
            seed=int(seed),
            device=build_device,
            keep_exact=bool(keep_exact),
            nprobe=n_ivf_probe,
            ndocs=n_full_scores,
            rerank_k=rerank_k,
        )
        return self

    def search(
        self,
        queries_embeddings,
        top_k=10,
        *,
        n_ivf_probe=None,
        n_full_scores=None,
        rerank_k=None,
        exhaustive=False,
        q_mask=None,
        residency="auto",
        subset=None,
    ):
        """The `top_k` best documents of each query: `[[(document, score), ...], ...]`.
        `queries_embeddings`: `[A, Lq, d]` (or one query `[Lq, d]`, or a list of queries of any
        lengths). IVF search may find fewer than `top_k` documents for a query. On a GPU the
        codes are held `residency="auto"` (resident when they fit its free memory, else
        streamed: each batch's candidates uploaded), `"resident"` or `"stream"`.
        `subset` (fast-plaid's): document numbers to search within, one list for every query or
        one list a query. Each listed document is then scored on its codes on the host (the
        cost is the list's, not the index's), the best `rerank_k` exactly where the index keeps
        its exact tokens; `n_ivf_probe`, `n_full_scores`, `exhaustive` and `residency` do not
        apply. Deleted and repeated numbers are ignored; one past the index is an error."""
        if self._native is None:
            raise ValueError(f"{self._path}: no index here yet; call create(documents_embeddings=...) first")
        if top_k < 1:
            raise ValueError(f"top_k = {top_k}: must be at least 1")
        if (
            isinstance(queries_embeddings, (list, tuple))
            and queries_embeddings
            and getattr(queries_embeddings[0], "ndim", 0) == 2
        ):
            host, lengths, _, _ = _ragged(queries_embeddings)
        else:
            Q, _ = _queries(queries_embeddings, q_mask)
            host = Q.detach().cpu().float().contiguous() if is_torch(Q) else np.ascontiguousarray(Q, dtype=np.float32)
            lengths = [int(Q.shape[1])] * int(Q.shape[0])
        device = "cuda" if self._device == "auto" and _native.cuda_available() else self._device
        if subset is not None:
            lists = subset_lists(subset, len(lengths))
            scores, index = self._native.search_within(
                host, lengths, int(top_k), lists, rerank_k=rerank_k, device=device
            )
            return _hits(scores, index, len(lengths), min(int(top_k), len(self)))
        scores, index = self._native.search(
            host,
            lengths,
            int(top_k),
            nprobe=n_ivf_probe,
            ndocs=n_full_scores,
            rerank_k=rerank_k,
            exhaustive=bool(exhaustive),
            device=device,
            residency=residency,
        )
        return _hits(scores, index, len(lengths), min(int(top_k), len(self)))

    def add(self, documents_embeddings, *, doc_ids=None):
        """Add documents (a list of `[Ld_i, d]` unit-norm documents, or an exact `Corpus`),
        encoded against the index's centroids: their numbers, following every document before
        them. On disk when this returns (it survives a crash); searches see them at once. Once
        the index's documents carry ids (its build's, or an earlier add's), `doc_ids` must be
        given: named by their numbers, the new documents could take ids others carry; and an id
        may not be the number a document without an id goes by, nor a live document's id (a
        deleted document's may be given again)."""
        if self._native is None:
            raise ValueError(f"{self._path}: no index here yet; call create(documents_embeddings=...) first")
        corpus = _as_corpus(documents_embeddings, doc_ids)
        first, end = self._native.add(corpus._native)
        return list(range(first, end))

    def delete(self, subset):
        """Delete documents by number (as `search` returns them); how many were newly deleted.
        Numbers are never reused: the others keep theirs. On disk when this returns."""
        if self._native is None:
            raise ValueError(f"{self._path}: no index here yet")
        docs = [int(j) for j in (subset.tolist() if hasattr(subset, "tolist") else subset)]
        if any(j < 0 for j in docs):
            raise ValueError(f"subset: document numbers are 0 or more, got {min(docs)}")
        return self._native.delete(docs)

    def compact(self, index=None):
        """Compact the index: the live documents written as an index numbered from 0 again
        (deleted documents left out, added ones merged into the build, each keeping its id where
        the index has ids: `doc_ids`), the codes copied, so every document scores as before.

        With `index` (a new or empty directory) the compacted index is written there and opened
        (returned); this one is left as it is. Without, the directory is compacted in place: its
        next `generation` replaces the old one atomically (a crash leaves one or the other
        whole), this `Index` opens it and is returned. Other openings of the directory (other
        processes, a server) take it at their next `refresh`; until then their deletes by number
        are refused, since the numbers changed. Refused when every document is deleted or two
        live ones share an id."""
        if self._native is None:
            raise ValueError(f"{self._path}: no index here yet")
        if index is None:
            self._native.compact_in_place()
            return self
        self._native.compact(os.fspath(index))
        return Index(index, device=self._device)

    @property
    def generation(self):
        """0 for the index a build made, one more after each compaction in place."""
        return 0 if self._native is None else self._native.generation

    def refresh(self):
        """Read the documents other processes (another `Index` on this directory, `tilemaxsim
        index add` / `delete`, a server) added or deleted since this one last read them, or the
        new generation a compaction in place made: whether anything changed. The next search
        sees it."""
        if self._native is None:
            if os.path.exists(os.path.join(self._path, "index.json")):
                self._native = _native.Index.open(self._path)
                return True
            return False
        return self._native.refresh()

    def __len__(self):
        """Documents numbered: the build's and the added ones (deleted ones included)."""
        return 0 if self._native is None else len(self._native)

    @property
    def deleted(self):
        """How many documents were deleted since the build."""
        return 0 if self._native is None else self._native.deleted

    @property
    def deleted_numbers(self) -> list[int]:
        """The numbers of the deleted documents, ascending."""
        return [] if self._native is None else self._native.deleted_numbers

    @property
    def dim(self):
        return None if self._native is None else self._native.dim

    @property
    def doc_ids(self):
        """The id of every document number: the build's (its numbers when it had none), then
        each added document's (its number when added without one)."""
        return None if self._native is None else self._native.all_ids

    @property
    def has_exact(self) -> bool:
        return self._native is not None and self._native.has_exact

    @property
    def defaults(self):
        """`(n_ivf_probe, n_full_scores, rerank_k)` recorded in the index."""
        return None if self._native is None else self._native.defaults

    @property
    def searcher(self):
        """The searcher of the last search, by name."""
        return None if self._native is None else self._native.searcher

    def __repr__(self):
        if self._native is None:
            return f"Index({self._path!r}, empty)"
        return f"Index({self._path!r}, {len(self)} documents, d={self.dim}, exact tokens: {self.has_exact})"
