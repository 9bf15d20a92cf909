"""`tilemaxsim.ray.serve_index`: an index directory (`tilemaxsim.Index`) as a Ray Serve
application over HTTP, searched and updated live.

One Serve deployment, `index`, of `replicas` replicas, each opening the directory (shared
storage; Serve replaces a replica that dies, and the new one reopens the index), and an ingress
that speaks `tilemaxsim serve --index`'s JSON:

- `POST /v1/search` as `tilemaxsim.ray.serve` (the ingress batches the queries; each batch goes
  to one replica, which Serve's router picks), hits `{"doc": <id>, "index": <number>, "score"}`
  and the answer's `"generation"` (the index's generation those numbers are of);
- `POST /v1/index/add` `{"documents": [{"id": "d1", "embeddings": [[...], ...]}]}` (or per
  document `"embeddings_b64"`, `"dtype"`, `"shape"`, as queries; ids to every document or none)
  -> `{"added": [{"doc": "d1", "index": 1400}], "documents": <live documents>}`;
- `POST /v1/index/delete` `{"ids": [...]}` (every document carrying one) or `{"indices": [...]}`
  (with `"generation"`, the index's generation the numbers are of: refused once the index was
  compacted since) -> `{"deleted": <newly deleted>, "already": <deleted before>, "documents":
  ...}`; a name the index does not hold is refused with 400 and nothing is deleted;
- `POST /v1/index/compact` (no parameters): the index compacted in place, its next generation
  (deleted documents left out, the live ones numbered from 0 again under their ids)
  -> `{"documents": ..., "removed": ..., "tokens": ..., "generation": ...}`;
- `GET /v1/info`, `GET /healthz`, `GET /metrics` (as `tilemaxsim.ray.serve`).

A write goes through one replica and is answered once its record is on disk; every replica reads
the index's log before each search (`Index.refresh`), so a search sent after the answer sees it,
as do another process's updates. Bad input is 400, a replica that does not answer 503.

    from ray import serve
    from tilemaxsim.ray.serve_index import build_index_app
    serve.run(build_index_app("/shared/my_index", replicas=2, device="cuda"), route_prefix="/")
"""

from __future__ import annotations

import json
import threading
import time

import ray
from ray import serve
from ray.exceptions import RayActorError

from ._index import _TRIES, _Replica
from .serve import BadRequest, Ingress, ShardsUnavailable, _query


class _ServeIndex:
    """A replica: one opening of the index. An error opening it fails the deployment at once
    (`serve.run` raises it)."""

    def __init__(self, path, device, options):
        self.replica = _Replica(path, device)
        if self.replica.error is not None:
            raise self.replica.error
        self.options = dict(options)
        self._ids_lock = threading.RLock()  # requests may run on several threads of the replica
        self._forget_ids(0)

    def _forget_ids(self, generation):
        """Start the id lists afresh (at the start, and for a new generation of the index: a
        compaction in place numbers the documents again)."""
        with self._ids_lock:
            self._ids, self._ids_generation = None, generation
            # id -> document numbers, extended as documents are added (not rebuilt per delete).
            self._by_id, self._by_id_upto = {}, 0

    def info(self):
        self.replica.index.refresh()
        return self.replica.info()

    def _names(self):
        """Every document number's id: read whole once, then only the added documents' ids."""
        index = self.replica.index
        with self._ids_lock:
            if index.generation != self._ids_generation:
                self._forget_ids(index.generation)
            n = len(index)
            if self._ids is None:
                self._ids = index.doc_ids
            elif len(self._ids) < n and index._native is not None:
                self._ids.extend(index._native.ids(len(self._ids), n))
            return self._ids

    def search(self, queries, k):
        """The generation searched (its documents' numbers), and per query its hits as `(id,
        number, score)`, best first. The ids are that generation's: read again while another
        thread's compaction moved the generation before they were read."""
        for _ in range(_TRIES):
            generation, hits = self.replica.search_at(queries, k, self.options)
            ids = self._names()
            if self.replica.index.generation == generation:
                return generation, [[(ids[j] if ids else str(j), j, s) for j, s in row] for row in hits]
        raise RuntimeError(f"the index was compacted during each of {_TRIES} searches; retry")

    def add(self, documents, doc_ids):
        """`[(id, number)]` of the added documents, and the live documents after."""
        try:
            numbers = self.replica.add(documents, doc_ids)
        except ValueError as e:
            raise BadRequest(str(e)) from e
        ids = self._names()
        index = self.replica.index
        return [(ids[j] if ids else str(j), j) for j in numbers], len(index) - index.deleted

    def compact(self):
        """The index compacted in place (its next generation): `{documents, removed, tokens,
        generation}`; `BadRequest` when every document is deleted or two live ones share an id.
        The other replicas take the new generation at their next refresh."""
        index = self.replica.index
        index.refresh()
        native = index._native
        if native is None:  # the replica opened an index: never here
            raise BadRequest("no index to compact")
        try:
            documents, removed, tokens = native.compact_in_place()
        except ValueError as e:
            raise BadRequest(str(e)) from e
        self._forget_ids(index.generation)
        return {"documents": documents, "removed": removed, "tokens": tokens, "generation": index.generation}

    def delete(self, ids, indices, generation=None):
        """`(newly deleted, deleted before, live documents)` for documents named by `ids` or by
        `indices`; `BadRequest` (nothing deleted) for a name the index does not hold, or when
        `generation` (of the numbers) is not the index's: it was compacted since."""
        index = self.replica.index
        index.refresh()  # other processes' documents can be named too
        if generation is not None and generation != index.generation:
            raise BadRequest(
                f"the index was compacted since generation {generation} (it is at generation "
                f"{index.generation}): its document numbers name other documents now; nothing was deleted"
            )
        n = len(index)
        if ids is not None:
            names = self._names()
            with self._ids_lock:
                for j in range(self._by_id_upto, n):
                    self._by_id.setdefault(names[j] if names else str(j), []).append(j)
                self._by_id_upto = max(self._by_id_upto, n)
            missing = [i for i in ids if i not in self._by_id]
            if missing:
                raise BadRequest(f"no document has the id {missing[0]!r}")
            numbers = [j for i in ids for j in self._by_id[i]]
        else:
            bad = [j for j in indices if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n]
            if bad:
                raise BadRequest(f"index {bad[0]!r}: not a document number (0 to {n - 1})")
            numbers = list(indices)
        distinct = sorted(set(numbers))
        deleted = self.replica.delete(distinct)
        return deleted, len(distinct) - deleted, len(index) - index.deleted


def _documents(body, dim):
    """`(documents [Ld_i, d] float32, ids or None)` of an add request, or `BadRequest`."""
    req = _json(body)
    docs = req.get("documents") if isinstance(req, dict) else None
    if not isinstance(docs, list) or not docs:
        raise BadRequest('expected {"documents": [{"id": ..., "embeddings": [[...], ...]}, ...]}')
    with_ids = sum(isinstance(d, dict) and "id" in d for d in docs)
    if with_ids not in (0, len(docs)):
        raise BadRequest(f'{with_ids} of {len(docs)} documents have an "id": give every document one, or none')
    parsed = [_query(d, i, dim, what="documents") for i, d in enumerate(docs)]
    ids = [p[0] for p in parsed] if with_ids else None
    if ids is not None and len(set(ids)) != len(ids):
        raise BadRequest("the documents' ids must be unique within a request")
    return [p[1] for p in parsed], ids


def _names(body):
    """`(ids, indices, generation)` of a delete request (one of the first two None; the last
    None unless given), or `BadRequest`."""
    req = _json(body)
    if not isinstance(req, dict) or (("ids" in req) == ("indices" in req)):
        raise BadRequest('name the documents by "ids" or by "indices" (one of the two)')
    names = req.get("ids", req.get("indices"))
    if not isinstance(names, list) or not names:
        raise BadRequest("no documents named")
    generation = req.get("generation")
    if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
        raise BadRequest(f"generation {generation!r}: a whole number")
    if "ids" in req:
        return [str(i) for i in names], None, generation
    return None, names, generation


def _json(body):
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not JSON: {e}") from e


class IndexIngress(Ingress):
    """The HTTP front of an index: `Ingress`'s batching and routes, each batch searched by one
    replica (not scattered and merged), and the write routes."""

    def __init__(self, handle, path, dim, documents, max_k, max_batch_queries, batch_wait_s):
        super().__init__([handle], [(0, documents)], path, dim, documents, max_k, max_batch_queries, batch_wait_s)
        self.handle = handle

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        route = (request.method, request.url.path.rstrip("/"))
        if route == ("GET", "/v1/info"):
            try:
                info = await self.handle.info.remote()
            except Exception as e:  # noqa: BLE001 - the replica is down or restarting
                return JSONResponse({"error": f"no replica answered: {e}"}, status_code=503)
            live = info["documents"] - info["deleted"]
            return JSONResponse(
                {"path": self.path, "dim": self.dim, "documents": live, "index": True, "generation": info["generation"]}
            )
        if route not in (("POST", "/v1/index/add"), ("POST", "/v1/index/delete"), ("POST", "/v1/index/compact")):
            return await super().__call__(request)
        self.requests += 1
        try:
            body = await request.body()
            if route[1].endswith("compact"):
                if body.strip() and _json(body) != {}:
                    raise BadRequest("a compaction takes no parameters: send {} or nothing")
                return JSONResponse(await self._write(self.handle.compact.remote()))
            if route[1].endswith("add"):
                docs, ids = _documents(body, self.dim)
                added, live = await self._write(self.handle.add.remote(docs, ids))
                return JSONResponse({"added": [{"doc": d, "index": j} for d, j in added], "documents": live})
            ids, indices, generation = _names(body)
            deleted, already, live = await self._write(self.handle.delete.remote(ids, indices, generation))
            return JSONResponse({"deleted": deleted, "already": already, "documents": live})
        except BadRequest as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        except ShardsUnavailable as e:
            return JSONResponse({"error": str(e)}, status_code=503)

    @staticmethod
    async def _write(call):
        """A write's answer; the replica's `BadRequest` (which Ray wraps) as a `BadRequest` of its
        message, a replica that did not answer as `ShardsUnavailable`."""
        try:
            return await call
        except Exception as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, BadRequest):
                raise BadRequest(str(cause)) from None
            if isinstance(e, BadRequest):
                raise BadRequest(str(e).strip().splitlines()[-1]) from None
            if isinstance(e, RayActorError):
                raise ShardsUnavailable(f"the replica did not answer; retry ({e})") from e
            raise

    async def _search_batch(self, items):
        """Every waiting request's queries in one call to one replica, with the largest k of
        the batch; each request takes its first k hits."""
        flat = [q for queries, _ in items for q in queries]
        k = max(k for _, k in items)
        started = time.perf_counter()
        try:
            generation, hits = await self.handle.search.remote(flat, k)
        except RayActorError as e:
            raise ShardsUnavailable(f"the replica did not answer; no partial results, retry ({e})") from e
        self.batches += 1
        self.batch_queries += len(flat)
        self.shard_seconds += time.perf_counter() - started
        out, a = [], 0
        for queries, kq in items:
            out.append([(generation, hits[a + j][:kq]) for j in range(len(queries))])
            a += len(queries)
        return out

    def _answer(self, ids, hits):
        """Each query's hits with their document numbers, and the generation that numbered
        them (a delete by number may name it). A request searched in several batches across a
        compaction would mix two numberings: it is answered 503, to be sent again."""
        generations = {g for g, _ in hits}
        if len(generations) > 1:
            raise ShardsUnavailable("the index was compacted while this request was searched; retry")
        results = [
            {"id": qid, "hits": [{"doc": d, "index": j, "score": float(s)} for d, j, s in row]}
            for qid, (_, row) in zip(ids, hits)
        ]
        return {"results": results, "generation": generations.pop() if generations else None}


def build_index_app(
    path,
    *,
    replicas=1,
    device="cpu",
    num_cpus=1,
    num_gpus=None,
    n_ivf_probe=None,
    n_full_scores=None,
    rerank_k=None,
    residency="auto",
    max_k=1000,
    max_batch_queries=64,
    batch_wait_s=0.0,
    ingress_options=None,
):
    """A Serve application over the index directory `path`: `replicas` replicas (with `num_cpus`
    / `num_gpus` each; `num_gpus` defaults to 1 on `device="cuda"`) searching with the given
    `Index.search` settings (None: the index's defaults), and the ingress. Reads the index's
    shape through a Ray task, so Ray must be reachable; a directory without an index raises
    `ValueError` here."""
    path = str(path)
    if num_gpus is None:
        num_gpus = 1 if str(device).startswith("cuda") else 0
    info = ray.get(ray.remote(num_cpus=0)(_describe_index).remote(path))
    options = {"n_ivf_probe": n_ivf_probe, "n_full_scores": n_full_scores, "rerank_k": rerank_k}
    options = {k: v for k, v in options.items() if v is not None}
    options["residency"] = residency
    index = serve.deployment(_ServeIndex).options(
        name="index",
        num_replicas=int(replicas),
        ray_actor_options={
            "num_cpus": num_cpus,
            "num_gpus": num_gpus,
            "runtime_env": {"env_vars": {"RAYON_NUM_THREADS": str(max(1, int(num_cpus + 0.999)))}},
        },
    )
    ingress = serve.deployment(IndexIngress).options(
        name="ingress", **(ingress_options or {"ray_actor_options": {"num_cpus": 0}, "max_ongoing_requests": 1024})
    )
    return ingress.bind(
        index.bind(path, device, options), path, info["dim"], info["documents"], max_k, max_batch_queries, batch_wait_s
    )


def _describe_index(path):
    """d and the document count of the index at `path` (a Ray task: the driver may not see it)."""
    r = _Replica(path, "cpu")
    if r.error is not None:
        raise r.error
    return {"dim": r.index.dim, "documents": len(r.index)}
