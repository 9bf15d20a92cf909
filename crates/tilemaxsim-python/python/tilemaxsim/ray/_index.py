"""`IndexSearcher`: one index directory (`tilemaxsim.Index`) searched by replicas on a Ray
cluster, each a Ray actor that opens the directory (shared storage) and searches its share of
each query batch; updated live through any replica.

Every replica reads the index's update log before each search (`Index.refresh`), so an add or
delete acknowledged by one (on disk when it returns) is seen by every search sent after it,
whichever replica answers; so are another process's updates (`tilemaxsim index add`, a
server). The hits are those of `tilemaxsim.Index.search` on the same directory.
"""

import math
import os

import numpy as np
import ray

from .._arrays import is_torch, subset_lists
from .._index import Index
from ._actors import ActorGroup, actor_class

# How often a search is made again while compactions in place keep moving the generation.
_TRIES = 8


class _Replica:
    """A Ray actor holding one opening of the index. An error while opening is kept and raised by
    every call, so it reaches the driver with its own type."""

    def __init__(self, path, device):
        self.error = None
        try:
            self.index = Index(path, device=device)
            if len(self.index) == 0:
                raise ValueError(f"{path}: no index here (no index.json)")
        except Exception as e:  # noqa: BLE001 - re-raised by every call, with its type
            self.error = e

    def _ready(self):
        if self.error is not None:
            raise self.error
        return self.index

    def info(self):
        index = self._ready()
        ctx = ray.get_runtime_context()
        return {
            "documents": len(index),
            "deleted": index.deleted,
            "dim": index.dim,
            "generation": index.generation,
            "gpus": [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])],
            "node": ctx.get_node_id(),
            "pid": os.getpid(),
        }

    def search(self, queries, top_k, options):
        index = self._ready()
        index.refresh()
        return index.search(queries, top_k, **options)

    def search_at(self, queries, top_k, options):
        """`(generation, hits)`: the hits and the generation that numbered them, read before and
        after the search (generations only grow), again while a compaction in place (another
        thread's of this replica, or another process's that a refresh took) moved it between."""
        index = self._ready()
        index.refresh()
        for _ in range(_TRIES):
            generation = index.generation
            hits = index.search(queries, top_k, **options)
            if index.generation == generation:
                return generation, hits
        raise RuntimeError(f"the index was compacted during each of {_TRIES} searches; retry")

    def add(self, documents, doc_ids):
        index = self._ready()
        index.refresh()
        return index.add(documents, doc_ids=doc_ids)

    def delete(self, subset):
        index = self._ready()
        index.refresh()
        return index.delete(subset)

    def doc_ids(self):
        index = self._ready()
        index.refresh()
        return index.doc_ids


class IndexSearcher(ActorGroup):
    """An index directory (`tilemaxsim.Index`, e.g. built by `Index.create` or `tilemaxsim index
    build`) searched by `replicas` Ray actors, each holding the whole index and searching a
    contiguous share of every query batch.

    `path` must be readable and writable at the same place on every node (shared storage).
    `device`: where each replica searches, `"cpu"`, `"cuda"` (the actor's own GPU; `num_gpus`
    defaults to 1) or `"auto"`. `num_cpus` / `num_gpus`: each replica's Ray resources;
    `max_restarts`: how often Ray restarts a dead replica (it reopens the index). The
    constructor waits until every replica has opened the index; an error opening it is raised
    here with its type, and no actor is left behind.
    """

    def __init__(
        self,
        path,
        replicas=2,
        *,
        device="cpu",
        num_cpus=1,
        num_gpus=None,
        max_restarts=3,
        scheduling_strategy="SPREAD",
        timeout=None,
    ):
        self.path = os.fspath(path)
        if int(replicas) < 1:
            raise ValueError(f"replicas = {replicas}: must be at least 1")
        if num_gpus is None:
            num_gpus = 1 if str(device).startswith("cuda") else 0
        actor = actor_class(
            _Replica,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=max_restarts,
            scheduling_strategy=scheduling_strategy,
        )
        self.actors = [actor.remote(self.path, device) for _ in range(int(replicas))]
        try:
            self._info = ray.get([a.info.remote() for a in self.actors], timeout=timeout)
        except BaseException:
            self.close()
            raise
        self.dim = self._info[0]["dim"]

    def info(self):
        """Each replica at start-up: documents, deleted, d, the GPUs Ray gave it, node, pid."""
        return list(self._info)

    def search(self, queries_embeddings, top_k=10, *, timeout=None, **options):
        """`Index.search` over the replicas: `[[(document, score), ...], ...]`, one list per
        query, in order. `queries_embeddings`: `[A, Lq, d]`, one `[Lq, d]`, or a list of
        `[Lq_i, d]`; `options`: `Index.search`'s (`n_ivf_probe`, `n_full_scores`,
        `rerank_k`, `exhaustive`, `q_mask`, `subset`: each replica gets its queries' lists)."""
        if top_k < 1:
            raise ValueError(f"top_k = {top_k}: must be at least 1")
        queries, mask = self._split(queries_embeddings, options.pop("q_mask", None))
        if not queries:
            raise ValueError("queries_embeddings: no queries")
        n = len(queries)
        lists = subset_lists(options.pop("subset"), n) if options.get("subset") is not None else None
        per = math.ceil(n / len(self.actors))
        refs = []
        for r, a in enumerate(self.actors):
            part = queries[r * per : (r + 1) * per]
            if not part:
                break
            kw = dict(options)
            if mask is not None:
                kw["q_mask"] = mask[r * per : (r + 1) * per]
                part = np.stack(part)
            if lists is not None:
                kw["subset"] = lists[r * per : (r + 1) * per]
            refs.append(a.search.remote(part, int(top_k), kw))
        out = []
        for part in ray.get(refs, timeout=timeout):
            out.extend(part)
        return out

    @staticmethod
    def _split(Q, q_mask):
        """The queries as a list of host arrays `[Lq_i, d]` (a padded batch keeps its mask)."""
        if isinstance(Q, (list, tuple)):
            items = list(Q)
        elif getattr(Q, "ndim", None) == 2:
            items = [Q]
        elif getattr(Q, "ndim", None) == 3:
            items = [Q[i] for i in range(Q.shape[0])]
        else:
            raise ValueError(
                f"queries_embeddings: expected [A, Lq, d], [Lq, d] or a list of [Lq, d], got "
                f"{type(Q).__name__} of shape {tuple(getattr(Q, 'shape', ()))}"
            )
        host = [x.detach().cpu().float().numpy() if is_torch(x) else np.asarray(x, dtype=np.float32) for x in items]
        if q_mask is not None:
            m = q_mask.detach().cpu().numpy() if is_torch(q_mask) else np.asarray(q_mask)
            return host, m.astype(bool)
        return host, None

    def add(self, documents_embeddings, *, doc_ids=None, timeout=None):
        """`Index.add` through one replica: the new documents' numbers. On disk when this
        returns, and every search sent after it sees them."""
        docs = documents_embeddings
        if isinstance(docs, (list, tuple)):
            docs = [d.detach().cpu() if is_torch(d) else d for d in docs]
        return ray.get(self.actors[0].add.remote(docs, doc_ids), timeout=timeout)

    def delete(self, subset, *, timeout=None):
        """`Index.delete` through one replica: how many were newly deleted; every search sent
        after it leaves them out."""
        return ray.get(self.actors[0].delete.remote(subset), timeout=timeout)

    @property
    def doc_ids(self):
        """The id of every document number, as `Index.doc_ids`."""
        return ray.get(self.actors[0].doc_ids.remote())

    def __repr__(self):
        return f"IndexSearcher({self.path!r}, {len(self.actors)} replicas, d={self.dim})"
