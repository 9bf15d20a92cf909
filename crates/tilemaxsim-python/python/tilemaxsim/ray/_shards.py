"""The shards and their merge: `_Shard` (documents `start..end` of a corpus file, a Ray actor
or a Serve replica), `merge` (their top-k into the global top-k), and `ShardedSearcher`, the
driver-side API over one actor per shard."""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import ray
from ray.exceptions import RayActorError

from .._arrays import Array, is_torch, torch
from .._corpus import Corpus
from .._engine import _queries
from ._actors import ActorGroup, actor_class


class ShardError(RuntimeError):
    """A shard could not answer: its actor died, is restarting, or failed. The search that met
    it returns nothing; a later search reaches the restarted actor."""

    def __init__(self, message, shard, documents):
        super().__init__(message)
        self.shard = shard
        self.documents = documents


class Hits(NamedTuple):
    """A merged search: `scores` and global `indices` `[A, k]` (numpy; `[k]` for one query),
    and the document ids, one list per query (one list for one query)."""

    scores: Array
    indices: Array
    ids: list


def plan_shards(offsets, shards):
    """Contiguous document ranges `[(start, end), ...]`, one per shard, each non-empty, with
    about the same number of tokens each (scoring time follows tokens, not documents)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    if not 1 <= shards <= n:
        raise ValueError(f"shards = {shards}: must be 1 to the corpus's {n} documents")
    targets = offsets[-1] * np.arange(1, shards) / shards
    cuts = np.searchsorted(offsets, targets, side="left")
    bounds = [0]
    for i, c in enumerate(cuts, start=1):
        # Each range keeps at least one document, and leaves one for every later shard.
        bounds.append(int(min(max(c, bounds[-1] + 1), n - (shards - i))))
    bounds.append(n)
    return list(zip(bounds[:-1], bounds[1:]))


def _describe(path):
    """The corpus file's structure, read where the task runs (no values are read)."""
    c = Corpus.load(path, device="cpu", check_finite=False)
    # int64, not a list of Python ints: 8 bytes a document on the driver.
    return {"offsets": np.asarray(c.offsets, dtype=np.int64), "dim": c.dim, "dtype": c.dtype}


class _Shard:
    """A Ray actor: documents `start..end` of the corpus file, searched on `device`. An error
    while opening is kept and raised by every call, so it reaches the driver as its own type."""

    def __init__(self, path, start, end, device, residency, check_finite):
        self.start, self.end = start, end
        self.error = None
        try:
            self.corpus = Corpus.load(
                path, device, residency=residency, check_finite=check_finite, documents=(start, end)
            )
            self.ids = self.corpus.doc_ids  # once: the property copies them
        except Exception as e:  # noqa: BLE001 - re-raised by every call, with its type
            self.error = e

    def info(self):
        if self.error is not None:
            raise self.error
        c = self.corpus
        ctx = ray.get_runtime_context()
        return {
            "documents": (self.start, self.end),
            "tokens": c.num_tokens,
            "device": c.device,
            # The GPUs Ray gave this actor (its cuda:0 is the first of them).
            "gpus": [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])],
            "node": ctx.get_node_id(),
            "actor": ctx.get_actor_name(),
            "pid": os.getpid(),
        }

    def check_health(self):
        """Serve's health check: a shard that could not open its range is unhealthy."""
        if self.error is not None:
            raise self.error

    def search(self, queries, k):
        """This shard's top-k: scores, global indices and ids, `[A, min(k, len)]` each."""
        if self.error is not None:
            raise self.error
        s, i = self.corpus.search(queries, k)
        s, i = np.asarray(s, dtype=np.float32), np.asarray(i, dtype=np.int64) + self.start
        ids = self.ids
        names = [[ids[j - self.start] for j in row] for row in i.tolist()] if ids is not None else None
        return s, i, names


def merge(parts, k):
    """The global top-k of the shards' `(scores, global indices, ids)` (`[A, k_s]` each): scores
    `[A, k']` and indices `[A, k']` as numpy arrays and ids as lists, `k'` = min(k, the shards'
    hits). Exact: a document of the global top-k is in its shard's top-k, and the order (higher
    score first, then the lower global index) is the one every shard used."""
    scores = np.concatenate([p[0] for p in parts], axis=1)
    index = np.concatenate([p[1] for p in parts], axis=1)
    # Primary key: score, descending; then the global index, ascending (the last key leads).
    order = np.lexsort((index, -scores), axis=-1)[:, :k]
    s = np.take_along_axis(scores, order, axis=1)
    i = np.take_along_axis(index, order, axis=1)
    if all(p[2] is not None for p in parts):
        names = [sum((p[2][q] for p in parts), []) for q in range(len(i))]
        ids = [[row[j] for j in o] for row, o in zip(names, order.tolist())]
    else:
        ids = [[str(j) for j in row] for row in i.tolist()]
    return s, i, ids


class PendingSearch:
    """A search sent to every shard; `result()` waits for all of them and merges."""

    def __init__(self, searcher, refs, k, single, as_torch):
        self._searcher, self._refs, self._k = searcher, refs, k
        self._single, self._torch = single, as_torch

    def result(self, timeout=None) -> Hits:
        """The merged hits. Raises `ShardError` when a shard's actor died or is restarting,
        `TimeoutError` when a shard did not answer within `timeout` seconds, and a shard's own
        error (e.g. `ValueError`) when one refused the queries."""
        ready, _ = ray.wait(self._refs, num_returns=len(self._refs), timeout=timeout)
        if len(ready) < len(self._refs):
            late = [i for i, r in enumerate(self._refs) if r not in ready]
            raise TimeoutError(f"shards {late} did not answer within {timeout} s; no partial results are returned")
        parts = []
        for i, ref in enumerate(self._refs):
            start, end = self._searcher.shards[i]
            try:
                parts.append(ray.get(ref))
            except RayActorError as e:
                raise ShardError(
                    f"shard {i} (documents {start}..{end} of {self._searcher.path}) did not answer: its actor "
                    f"died or is restarting; no partial results are returned, retry the search ({e})",
                    i,
                    (start, end),
                ) from e
            # Any other error is the shard's own (Ray's task error is also an instance of its type).
        return self._searcher._merge(parts, self._k, self._single, self._torch)


class ShardedSearcher(ActorGroup):
    """One corpus file, `shards` Ray actors each holding a contiguous range of its documents
    (about equal in tokens), searched together.

    `path` must be readable at the same place on every node (shared storage). `device`: where
    each actor searches, `"cpu"`, `"cuda"` (the actor's own GPU; `num_gpus` defaults to 1) or
    `"auto"`. `num_cpus` / `num_gpus`: each actor's Ray resources. `max_restarts`: how often Ray
    restarts a dead shard actor (it reopens its range). `scheduling_strategy`: Ray's, `"SPREAD"`
    by default so shards land on different nodes. The constructor waits until every shard has
    opened its range; an error opening one (a NaN in its values, a missing file) is raised here
    with its type, and no actor is left behind.
    """

    def __init__(
        self,
        path,
        shards,
        *,
        device="cpu",
        num_cpus=1,
        num_gpus=None,
        max_restarts=3,
        residency="auto",
        check_finite=True,
        scheduling_strategy="SPREAD",
        timeout=None,
    ):
        self.path = os.fspath(path)
        if num_gpus is None:
            num_gpus = 1 if str(device).startswith("cuda") else 0
        # The file's structure is read by a task in the cluster: the driver needs no access.
        describe = ray.remote(num_cpus=0)(_describe)
        meta = ray.get(describe.remote(self.path), timeout=timeout)
        self.offsets = meta["offsets"]
        self.dim, self.dtype = meta["dim"], meta["dtype"]
        self.shards = plan_shards(self.offsets, int(shards))
        actor = actor_class(
            _Shard,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=max_restarts,
            scheduling_strategy=scheduling_strategy,
        )
        self.actors = [actor.remote(self.path, s, e, device, residency, check_finite) for s, e in self.shards]
        try:
            self._info = ray.get([a.info.remote() for a in self.actors], timeout=timeout)
        except BaseException:
            self.close()
            raise

    def __len__(self):
        return len(self.offsets) - 1

    def info(self):
        """Each shard at start-up: its documents, tokens, device, the GPUs Ray gave it, Ray node
        and process id."""
        return list(self._info)

    def submit(self, Q, k, *, q_mask=None) -> PendingSearch:
        """Send a query batch to every shard without waiting; `.result()` merges."""
        Q, single = _queries(Q, q_mask)
        if int(Q.shape[2]) != self.dim:
            raise ValueError(f"Q: d = {int(Q.shape[2])}, but the corpus has d = {self.dim}")
        if k < 1:
            raise ValueError(f"k = {k}: must be at least 1")
        as_torch = is_torch(Q)
        if as_torch:
            host = Q.detach().cpu().contiguous()
            finite = bool(torch.isfinite(host).all())
        else:
            host = np.ascontiguousarray(Q)
            finite = bool(np.isfinite(host).all())
        if not finite:
            raise ValueError("Q: holds a NaN or an infinity")
        queries = ray.put(host)  # once, not once per shard
        refs = [a.search.remote(queries, int(k)) for a in self.actors]
        return PendingSearch(self, refs, int(k), single, as_torch)

    def search_hits(self, Q, k, *, q_mask=None, timeout=None) -> Hits:
        """Scores, global indices and ids of the `k` best documents per query."""
        return self.submit(Q, k, q_mask=q_mask).result(timeout)

    def search(self, Q, k, *, q_mask=None, timeout=None):
        """`(scores, indices)` as `Corpus.search` gives them for the whole file: best first, ties
        to the lower index; torch tensors when Q is one, else numpy arrays."""
        h = self.search_hits(Q, k, q_mask=q_mask, timeout=timeout)
        return h.scores, h.indices

    def search_ids(self, Q, k, *, q_mask=None, timeout=None):
        """`(scores, ids)`: the document ids of the file (decimal indices when it has none)."""
        h = self.search_hits(Q, k, q_mask=q_mask, timeout=timeout)
        return h.scores, h.ids

    def _merge(self, parts, k, single, as_torch):
        s, i, ids = merge(parts, k)
        if as_torch:
            s, i = torch.from_numpy(s), torch.from_numpy(i)
        return Hits(s[0], i[0], ids[0]) if single else Hits(s, i, ids)

    def __repr__(self):
        return f"ShardedSearcher({self.path!r}, {len(self.shards)} shards, {len(self)} documents, d={self.dim})"
