"""`tilemaxsim.ray.serve`: the sharded search as a Ray Serve application over HTTP.

One Serve deployment per shard (documents `start..end` of the corpus file, a replica each by
default; Serve replaces a replica that dies) and an ingress deployment that speaks the same
JSON as `tilemaxsim serve`:

- `POST /v1/search` `{"queries": [{"id": "q1", "embeddings": [[...], ...]}], "k": 10}` (or per
  query `"embeddings_b64"` little-endian with `"dtype"` f32/f16/bf16 and `"shape"` [Lq, d]) ->
  `{"results": [{"id": "q1", "hits": [{"doc": "<doc id>", "score": 17.2}]}]}`, hits best first,
  ties to the lower index;
- `GET /v1/info`, `GET /healthz`, and `GET /metrics` (Prometheus text: requests, batches and
  their queries, seconds spent waiting on the shards, under the names `tilemaxsim serve` uses).

Requests are batched by the ingress: while a batch is being scored the next requests wait, and
the next batch takes what waits (up to `max_batch_queries` queries), with no timer unless
`batch_wait_s` is set. (Serve's own `serve.batch` forms its next batch as soon as one request
waits, even while the shards are busy, so under load its batches stay at one request.) Bad
input is 400, a shard that is down or restarting 503 (no partial results), anything else 500.

    from ray import serve
    from tilemaxsim.ray.serve import build_app
    serve.run(build_app("/shared/corpus.safetensors", shards=4, device="cuda"), route_prefix="/")
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import json
import math
import time

import numpy as np
import ray
from ray import serve

from .._arrays import torch
from ._shards import _describe, _Shard, merge, plan_shards

_DTYPES = {"f32": "<f4", "float32": "<f4", "f16": "<f2", "float16": "<f2", "bf16": "bf16", "bfloat16": "bf16"}


class BadRequest(ValueError):
    """The request is malformed; answered with 400 and the message."""


class ShardsUnavailable(RuntimeError):
    """A shard did not answer (its replica died or is restarting); answered with 503."""


def _query(q, i, dim, what="queries"):
    """`(id, float32 [L, d])` of one query (or, `what="documents"`, one document) of a request,
    checked."""
    if not isinstance(q, dict):
        raise BadRequest(f"{what}[{i}]: expected an object with `embeddings` or `embeddings_b64`")
    qid = str(q.get("id", i))
    try:
        if "embeddings_b64" in q:
            dtype = _DTYPES.get(str(q.get("dtype", "f32")).lower())
            shape = q.get("shape")
            if dtype is None:
                raise BadRequest(f"{what}[{i}]: dtype {q.get('dtype')!r}: expected f32, f16 or bf16")
            if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(x, int) and x >= 0 for x in shape)):
                raise BadRequest(f"{what}[{i}]: `shape` must be [Lq, d] with `embeddings_b64`")
            raw = base64.b64decode(q["embeddings_b64"], validate=True)
            size = 4 if dtype == "<f4" else 2
            if len(raw) != shape[0] * shape[1] * size:
                raise BadRequest(
                    f"{what}[{i}]: {len(raw)} bytes do not fill shape {shape} of "
                    f"{q.get('dtype', 'f32')} ({shape[0] * shape[1] * size} bytes)"
                )
            if dtype == "bf16":  # the upper half of a float32
                values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                values = np.frombuffer(raw, dtype=dtype).astype(np.float32)
            emb = values.reshape(shape[0], shape[1])
        else:
            emb = np.asarray(q.get("embeddings"), dtype=np.float32)
    except (binascii.Error, TypeError, ValueError) as e:
        if isinstance(e, BadRequest):
            raise
        raise BadRequest(f"{what}[{i}]: embeddings are not a matrix of numbers ({e})") from e
    if emb.ndim != 2 or emb.shape[0] == 0:
        raise BadRequest(f"{what}[{i}]: expected [Lq, d] embeddings with Lq >= 1, got shape {list(emb.shape)}")
    if emb.shape[1] != dim:
        raise BadRequest(f"{what}[{i}]: d = {emb.shape[1]}, but the corpus has d = {dim}")
    if not np.isfinite(emb).all():
        raise BadRequest(f"{what}[{i}]: holds a NaN or an infinity")
    return qid, emb


def parse_request(body: bytes, dim: int, max_k: int):
    """`(ids, [Lq_i, d] float32 queries, k)` of a search request body, or `BadRequest`."""
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not JSON: {e}") from e
    if not isinstance(req, dict) or not isinstance(req.get("queries"), list) or not req["queries"]:
        raise BadRequest('expected {"queries": [{"id": ..., "embeddings": [[...], ...]}, ...], "k": 10}')
    k = req.get("k", 10)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise BadRequest(f"k = {k!r}: must be an integer from 1 to {max_k}")
    parsed = [_query(q, i, dim) for i, q in enumerate(req["queries"])]
    return [p[0] for p in parsed], [p[1] for p in parsed], k


def _narrowed(batch, dtype):
    """`batch` (float32) in the corpus's 16-bit type `dtype` when every value is exactly one
    (queries sent as f16 or bf16, or f32 holding such values), so a GPU scores it on its tensor
    cores; else `batch` unchanged."""
    if dtype == "f16":
        narrow = batch.astype(np.float16)
        return narrow if np.array_equal(narrow.astype(np.float32), batch) else batch
    if dtype == "bf16" and torch is not None:
        wide = torch.from_numpy(batch)
        narrow = wide.bfloat16()
        return narrow if torch.equal(narrow.float(), wide) else batch
    return batch


class _ServeShard(_Shard):
    """A shard as a Serve replica: an error opening its range fails the deployment at once
    (`serve.run` raises it) rather than leaving an unhealthy replica to be restarted."""

    def __init__(self, *args):
        super().__init__(*args)
        if self.error is not None:
            raise self.error


class Ingress:
    """The HTTP front: parses requests, batches their queries, scatters each batch to every
    shard deployment and merges the shards' top-k."""

    def __init__(self, shards, ranges, path, dim, documents, max_k, max_batch_queries, batch_wait_s, narrow=None):
        self.shards, self.ranges = list(shards), [tuple(r) for r in ranges]
        self.path, self.dim, self.documents, self.max_k = path, dim, documents, max_k
        self.narrow = narrow  # the corpus's 16-bit type, for shards on GPUs
        self.max_batch_queries = max_batch_queries
        self.batch_wait_s = batch_wait_s
        # Waiting requests `(queries, k, future)`, and the task that batches them (started on
        # the replica's event loop by the first request).
        self._waiting = collections.deque()
        self._wake = None
        self._batcher = None
        # This replica's counters, for /metrics.
        self.requests = self.batches = self.batch_queries = 0
        self.shard_seconds = 0.0

    def metrics(self):
        """The counters as Prometheus text."""
        lines = []
        for name, kind, value, help_ in [
            ("tilemaxsim_requests_total", "counter", self.requests, "Search requests answered (any status)."),
            ("tilemaxsim_batch_queries_sum", "counter", self.batch_queries, "Queries in the batches sent to shards."),
            ("tilemaxsim_batch_queries_count", "counter", self.batches, "Batches sent to the shards."),
            (
                "tilemaxsim_compute_duration_seconds_sum",
                "counter",
                self.shard_seconds,
                "Seconds from sending a batch to every shard's answer.",
            ),
        ]:
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name} {value}"]
        return "\n".join(lines) + "\n"

    async def __call__(self, request):
        from starlette.responses import JSONResponse, PlainTextResponse

        route = (request.method, request.url.path.rstrip("/"))
        if route == ("GET", "/healthz"):
            return PlainTextResponse("ok")
        if route == ("GET", "/metrics"):
            return PlainTextResponse(self.metrics())
        if route == ("GET", "/v1/info"):
            return JSONResponse(
                {
                    "path": self.path,
                    "dim": self.dim,
                    "documents": self.documents,
                    "shards": [list(r) for r in self.ranges],
                }
            )
        if route != ("POST", "/v1/search"):
            return JSONResponse({"error": f"no route {request.method} {request.url.path}"}, status_code=404)
        self.requests += 1
        try:
            ids, queries, k = parse_request(await request.body(), self.dim, self.max_k)
            # A request larger than a batch goes as several (the batcher refuses larger items).
            step = self.max_batch_queries
            parts = await asyncio.gather(
                *(self._submit(queries[a : a + step], k) for a in range(0, len(queries), step))
            )
            hits = [h for part in parts for h in part]
            answer = self._answer(ids, hits)
        except BadRequest as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        except ShardsUnavailable as e:
            return JSONResponse({"error": str(e)}, status_code=503)
        return JSONResponse(answer)

    def _answer(self, ids, hits):
        """The JSON answer of a search: each query's hits (`_search_batch`'s answer for it)."""
        return {
            "results": [
                {"id": qid, "hits": [{"doc": d, "score": float(s)} for d, s in zip(names, scores)]}
                for qid, (scores, names) in zip(ids, hits)
            ]
        }

    async def _submit(self, queries, k):
        """The hits of `queries` (at most a batch), searched in the next batch."""
        loop = asyncio.get_running_loop()
        if self._batcher is None:
            self._wake = asyncio.Event()
            self._batcher = loop.create_task(self._batches())
        done = loop.create_future()
        self._waiting.append((queries, k, done))
        assert self._wake is not None
        self._wake.set()
        return await done

    async def _batches(self):
        """One batch at a time: when the shards answer, the next batch takes every request that
        waits, up to `max_batch_queries` queries (a request is never split)."""
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.batch_wait_s > 0:
                await asyncio.sleep(self.batch_wait_s)
            while self._waiting:
                items, n = [], 0
                while self._waiting and (not items or n + len(self._waiting[0][0]) <= self.max_batch_queries):
                    item = self._waiting.popleft()
                    if not item[2].done():  # a request whose client left is dropped
                        items.append(item)
                        n += len(item[0])
                if not items:
                    continue
                try:
                    answers = await self._search_batch([(q, k) for q, k, _ in items])
                except Exception as e:  # noqa: BLE001 - every request of the batch gets it
                    for _, _, done in items:
                        if not done.done():
                            done.set_exception(e)
                else:
                    for (_, _, done), answer in zip(items, answers):
                        if not done.done():
                            done.set_result(answer)

    async def _search_batch(self, items):
        """Every waiting request's queries in one pass: padded with zero rows (which add exactly
        0 to a score) to one `[A, Lq, d]` batch, searched with the largest k of the batch; each
        request takes its first k hits (a prefix of the ranking)."""
        flat = [q for queries, _ in items for q in queries]
        k = max(k for _, k in items)
        batch = np.zeros((len(flat), max(len(q) for q in flat), self.dim), dtype=np.float32)
        for a, q in enumerate(flat):
            batch[a, : len(q)] = q
        ref = ray.put(_narrowed(batch, self.narrow))
        started = time.perf_counter()
        parts = await asyncio.gather(*(h.search.remote(ref, k) for h in self.shards), return_exceptions=True)
        self.batches += 1
        self.batch_queries += len(flat)
        self.shard_seconds += time.perf_counter() - started
        for i, p in enumerate(parts):
            if isinstance(p, BaseException):  # every request of the batch gets it
                raise ShardsUnavailable(
                    f"shard {i} (documents {self.ranges[i][0]}..{self.ranges[i][1]}) did not answer; "
                    f"no partial results are returned, retry ({type(p).__name__}: {p})"
                ) from p
        scores, _, names = merge(parts, k)
        out, a = [], 0
        for queries, kq in items:
            out.append([(scores[a + j, :kq].tolist(), names[a + j][:kq]) for j in range(len(queries))])
            a += len(queries)
        return out


def build_app(
    path,
    shards,
    *,
    device="cpu",
    num_cpus=1,
    num_gpus=None,
    replicas=1,
    residency="auto",
    check_finite=True,
    max_k=1000,
    max_batch_queries=64,
    batch_wait_s=0.0,
    ingress_options=None,
):
    """A Serve application: `shards` shard deployments (each `replicas` replicas of one document
    range, with `num_cpus` / `num_gpus` each; `num_gpus` defaults to 1 on `device="cuda"`) and
    the ingress. Reads the file's structure through a Ray task, so Ray must be reachable.
    `ingress_options`: Serve options of the ingress deployment; by default no CPU and 1,024
    requests in flight, so concurrent requests wait in its batcher (Serve's default of 5 would
    hold the rest in its router, which backs off and starves the batches)."""
    path = str(path)
    if num_gpus is None:
        num_gpus = 1 if str(device).startswith("cuda") else 0
    meta = ray.get(ray.remote(num_cpus=0)(_describe).remote(path))
    ranges = plan_shards(meta["offsets"], int(shards))
    threads = str(max(1, math.ceil(num_cpus)))  # the CPU engine's threads, as in ShardedSearcher
    shard = serve.deployment(_ServeShard)
    bound = [
        shard.options(
            name=f"shard-{i}",
            num_replicas=replicas,
            ray_actor_options={
                "num_cpus": num_cpus,
                "num_gpus": num_gpus,
                "runtime_env": {"env_vars": {"RAYON_NUM_THREADS": threads}},
            },
        ).bind(path, s, e, device, residency, check_finite)
        for i, (s, e) in enumerate(ranges)
    ]
    ingress = serve.deployment(Ingress).options(
        name="ingress", **(ingress_options or {"ray_actor_options": {"num_cpus": 0}, "max_ongoing_requests": 1024})
    )
    # On GPUs, queries whose values are all f16 (bf16) go to shards of such a corpus as f16
    # (bf16): the tensor-core kernels score them, not the f32-query path.
    narrow = None if str(device) == "cpu" else meta["dtype"]
    return ingress.bind(
        bound, ranges, path, meta["dim"], len(meta["offsets"]) - 1, max_k, max_batch_queries, batch_wait_s, narrow
    )
