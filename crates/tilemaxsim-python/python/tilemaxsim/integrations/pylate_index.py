"""A PyLate index on a tilemaxsim index directory: `TileMaxSimIndex`, an end-to-end index
(`pylate.indexes.base.Base`, like PyLate's `FastPlaid` and `PLAID`) that
`pylate.retrieve.ColBERT(index=...)` searches unchanged:

    from pylate import retrieve
    from tilemaxsim.integrations.pylate_index import TileMaxSimIndex

    index = TileMaxSimIndex(index_folder="indexes", index_name="docs", override=True)
    index.add_documents(documents_ids=ids, documents_embeddings=embeddings)
    results = retrieve.ColBERT(index=index).retrieve(queries_embeddings=queries, k=10)

The first `add_documents` builds the index (PLAID's residual codec, `nbits` bits a dimension,
an IVF, and the exact tokens kept for the last rescoring unless `keep_exact=False`); later ones
add documents against the same centroids, on disk before they return. `remove_documents`
deletes by id (numbers are never reused; a removed id may be added again). A search returns,
per query, `[{"id": ..., "score": ...}, ...]` best first. `subset` restricts a search to the
given ids (one list for every query, or one list a query): only those documents are scored, on
their codes, then the best rescored exactly (`Index.search`'s `subset`). The index keeps its
ids itself: reopening the folder (`override=False`) finds them. `get_documents_embeddings` is
not offered (as with `FastPlaid`): an end-to-end index does not need it.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
from pylate.indexes.base import Base

from .._index import Index


def _documents(embeddings) -> list[np.ndarray]:
    """A list of `[Ld_i, d]` float32 arrays from tensors, arrays or nested lists."""
    out = []
    for e in embeddings:
        if hasattr(e, "detach"):
            e = e.detach().float().cpu().numpy()
        out.append(np.ascontiguousarray(np.asarray(e, dtype=np.float32)))
    return out


def _queries(embeddings) -> list[np.ndarray]:
    """PyLate's query batch (a `[A, Lq, d]` array or tensor, a list of `[Lq, d]`, or one
    `[Lq, d]` query) as a list of `[Lq, d]` arrays."""
    if hasattr(embeddings, "ndim") and embeddings.ndim == 2:
        embeddings = [embeddings]
    return _documents(embeddings)


class TileMaxSimIndex(Base):
    """See the module docs. `n_ivf_probe`, `n_full_scores` and `rerank_k` default to the values
    the index records at its build (tuned for recall@10 against exact search)."""

    @property
    def is_end_to_end_index(self) -> bool:
        return True

    def __init__(
        self,
        index_folder: str = "indexes",
        index_name: str = "tilemaxsim",
        override: bool = False,
        nbits: int = 2,
        kmeans_niters: int = 4,
        seed: int = 0,
        keep_exact: bool = True,
        n_ivf_probe: int | None = None,
        n_full_scores: int | None = None,
        rerank_k: int | None = None,
        device: str = "auto",
    ) -> None:
        self.index_path = os.path.join(index_folder, index_name)
        if override and os.path.exists(self.index_path):
            shutil.rmtree(self.index_path)
        os.makedirs(self.index_path, exist_ok=True)
        self.nbits, self.kmeans_niters, self.seed, self.keep_exact = nbits, kmeans_niters, seed, keep_exact
        self.n_ivf_probe, self.n_full_scores, self.rerank_k = n_ivf_probe, n_full_scores, rerank_k
        self.index = Index(self.index_path, device=device)

    def _live(self) -> dict[str, list[int]]:
        """Each id's document numbers (an id removed and added again has several)."""
        numbers: dict[str, list[int]] = {}
        for n, i in enumerate(self.index.doc_ids or []):
            numbers.setdefault(i, []).append(n)
        return numbers

    def add_documents(self, documents_ids, documents_embeddings, batch_size: int | None = None, **kwargs):
        """Build the index from these documents, or add them to it. Returns self."""
        if isinstance(documents_ids, str):
            documents_ids = [documents_ids]
        ids = [str(i) for i in documents_ids]
        docs = _documents(documents_embeddings)
        if len(ids) != len(docs):
            raise ValueError(f"{len(ids)} documents_ids for {len(docs)} documents_embeddings")
        if len(set(ids)) != len(ids):
            raise ValueError("documents_ids: an id appears twice")
        if self.index._native is None:
            self.index.create(
                docs,
                doc_ids=ids,
                nbits=self.nbits,
                kmeans_niters=self.kmeans_niters,
                seed=self.seed,
                keep_exact=self.keep_exact,
            )
            return self
        present = self._present()
        if clash := [i for i in ids if i in present]:
            raise ValueError(f"documents_ids already in the index: {clash[:5]}; use update_documents")
        self.index.add(docs, doc_ids=ids)
        return self

    def _present(self) -> set[str]:
        """The ids of the documents not removed."""
        removed = self._removed()
        return {i for i, ns in self._live().items() if any(n not in removed for n in ns)}

    def _removed(self) -> set[int]:
        return set(self.index.deleted_numbers)

    def remove_documents(self, documents_ids):
        """Delete these ids' documents (unknown ids are ignored). Returns self."""
        if isinstance(documents_ids, str):
            documents_ids = [documents_ids]
        live = self._live()
        numbers = [n for i in documents_ids for n in live.get(str(i), [])]
        if numbers:
            self.index.delete(numbers)
        return self

    def update_documents(self, documents_ids, documents_embeddings):
        """Replace these ids' documents (ids not in the index are added). Returns self."""
        if isinstance(documents_ids, str):
            documents_ids = [documents_ids]
        self.remove_documents(documents_ids)
        return self.add_documents(documents_ids=documents_ids, documents_embeddings=documents_embeddings)

    def __call__(self, queries_embeddings, k: int = 10, subset=None):
        """`[[{"id", "score"}, ...], ...]`, one list a query, best first."""
        if self.index._native is None:
            raise ValueError("the index is empty; add documents before querying")
        queries = _queries(queries_embeddings)
        ids = self.index.doc_ids or []
        if subset is None:
            hits = self.index.search(
                queries,
                top_k=k,
                n_ivf_probe=self.n_ivf_probe,
                n_full_scores=self.n_full_scores,
                rerank_k=self.rerank_k,
            )
        else:
            per_query = subset if subset and isinstance(subset[0], (list, tuple)) else [subset] * len(queries)
            if len(per_query) != len(queries):
                raise ValueError(f"subset: {len(per_query)} lists for {len(queries)} queries")
            # Each id's numbers (unknown ids are ignored, as PyLate's FastPlaid does), searched
            # within: only those documents are scored, then rescored exactly.
            live = self._live()
            lists = [[n for i in allowed for n in live.get(str(i), [])] for allowed in per_query]
            hits = self.index.search(queries, top_k=k, rerank_k=self.rerank_k, subset=lists)
        return [[{"id": ids[n], "score": float(s)} for n, s in row] for row in hits]

    def get_documents_embeddings(self, documents_ids):
        raise NotImplementedError(
            "TileMaxSimIndex is an end-to-end index: pylate.retrieve.ColBERT searches it without "
            "document embeddings (as with PyLate's FastPlaid)"
        )
