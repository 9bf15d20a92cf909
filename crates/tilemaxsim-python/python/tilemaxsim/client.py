"""`Client`: queries to a `tilemaxsim serve` server over HTTP (the standard library's urllib,
no other dependency). Queries are numpy arrays or torch tensors (any device; float32, float16,
bfloat16, float64 sent as float32) and travel as base64 little-endian values.

    from tilemaxsim.client import Client
    client = Client("http://127.0.0.1:8080")
    results = client.search(Q, k=10)          # Q: [Lq, d], [A, Lq, d] or a list of [Lq_i, d]
    results[0].docs, results[0].scores        # the first query's document ids and scores
    client.add([D1, D2], ids=["a", "b"])      # a server of an index (`serve --index`) only
    client.delete(ids=["a"])

Errors the server reports (HTTP 4xx/5xx) raise `ServerError` with its status and message.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ._arrays import is_torch, subset_lists, torch


class Hit(NamedTuple):
    doc: str
    """The document's id (from the corpus file or the server's --doc-ids), else its index."""
    index: int
    """The document's 0-based row in the corpus."""
    score: float


class QueryResult(NamedTuple):
    id: str
    hits: list[Hit]
    """Best first; ties go to the lower index."""

    @property
    def docs(self) -> list[str]:
        return [h.doc for h in self.hits]

    @property
    def indices(self) -> list[int]:
        return [h.index for h in self.hits]

    @property
    def scores(self) -> list[float]:
        return [h.score for h in self.hits]


class ServerError(RuntimeError):
    """An HTTP error from the server: `status` (400 bad input, 413 body too large, 429 queue
    full, 503 loading or stopping, 504 timeout) and the server's `message`."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _encode(q, name: str) -> dict:
    """One query [Lq, d] as the server's base64 form."""
    if is_torch(q):
        q = q.detach().cpu().contiguous()
        if q.dtype == torch.bfloat16:
            data, dtype = q.view(torch.int16).numpy().astype("<i2").tobytes(), "bf16"
        elif q.dtype == torch.float16:
            data, dtype = q.numpy().astype("<f2").tobytes(), "f16"
        elif q.dtype in (torch.float32, torch.float64):
            data, dtype = q.float().numpy().astype("<f4").tobytes(), "f32"
        else:
            raise TypeError(f"{name}: dtype {q.dtype} is not supported; float32, float16, bfloat16 are")
    else:
        q = np.asarray(q)
        if q.dtype == np.float16:
            data, dtype = q.astype("<f2").tobytes(), "f16"
        elif q.dtype in (np.float32, np.float64):
            data, dtype = q.astype("<f4").tobytes(), "f32"
        else:
            raise TypeError(f"{name}: dtype {q.dtype} is not supported; float32, float16 (float64 is sent as float32)")
    if q.ndim != 2:
        raise ValueError(f"{name}: expected [Lq, d], got shape {tuple(q.shape)}")
    return {
        "embeddings_b64": base64.b64encode(data).decode("ascii"),
        "dtype": dtype,
        "shape": [int(q.shape[0]), int(q.shape[1])],
    }


def _named(items, ids, noun: str, nouns: str) -> list[dict]:
    """Each of `items` ([L, d]) in the server's base64 form, with its id when `ids` are given."""
    if ids is not None and len(ids) != len(items):
        raise ValueError(f"ids: {len(ids)} ids for {len(items)} {nouns}")
    wire = []
    for i, x in enumerate(items):
        item = _encode(x, f"{noun} {i}")
        if ids is not None:
            item["id"] = str(ids[i])
        wire.append(item)
    return wire


class Client:
    """A client of one `tilemaxsim serve` server at `url`; `timeout` in seconds per request."""

    def __init__(self, url: str = "http://127.0.0.1:8080", timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _request(self, method: str, path: str, body: bytes | None = None) -> dict:
        req = urllib.request.Request(
            self.url + path, data=body, method=method, headers={"Content-Type": "application/json"} if body else {}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode("utf-8", "replace") or e.reason
            raise ServerError(e.code, message) from None
        except urllib.error.URLError as e:
            raise ConnectionError(f"cannot reach the tilemaxsim server at {self.url}: {e.reason}") from None

    def search(self, Q, k: int = 10, *, ids: Sequence[str] | None = None, subset=None) -> list[QueryResult]:
        """The `k` best documents of each query: one `QueryResult` per query, in order. `Q` is
        one query `[Lq, d]`, a batch `[A, Lq, d]`, or a list of `[Lq_i, d]` queries; `ids`
        names them in the results (default "0", "1", ...). `subset` (a served index only):
        document numbers to search within, one list for every query or one list a query
        (fast-plaid's `subset`)."""
        return self.search_at(Q, k, ids=ids, subset=subset)[1]

    def search_at(
        self, Q, k: int = 10, *, ids: Sequence[str] | None = None, subset=None
    ) -> tuple[int | None, list[QueryResult]]:
        """`search`, and the generation of the index whose numbers the hits carry (None for a
        corpus): a delete by those numbers may name it (`delete(indices=..., generation=...)`)
        and is refused if the index was compacted in place since."""
        if isinstance(Q, (list, tuple)):
            queries = list(Q)
        elif getattr(Q, "ndim", None) == 3:
            queries = [Q[i] for i in range(Q.shape[0])]
        elif getattr(Q, "ndim", None) == 2:
            queries = [Q]
        else:
            raise ValueError(
                f"Q: expected [Lq, d], [A, Lq, d] or a list of [Lq, d], got {type(Q).__name__} "
                f"of shape {tuple(getattr(Q, 'shape', ()))}"
            )
        wire = _named(queries, ids, "query", "queries")
        body = {"queries": wire, "k": int(k)}
        if subset is not None:
            body["subset"] = subset_lists(subset, len(queries))
        answer = self._request("POST", "/v1/search", json.dumps(body).encode())
        results = [
            QueryResult(r["id"], [Hit(h["doc"], int(h["index"]), float(h["score"])) for h in r["hits"]])
            for r in answer["results"]
        ]
        return answer.get("generation"), results

    def add(self, documents, *, ids: Sequence[str] | None = None) -> list[tuple[str, int]]:
        """Add documents to the index the server serves (`tilemaxsim serve --index`): a list of
        unit-norm `[Ld_i, d]` documents (or one `[Ld, d]`), named by `ids` (default: their
        numbers). Returns each one's `(id, number)`. On disk when this returns, and every search
        sent after it sees them."""
        docs = [documents] if getattr(documents, "ndim", None) == 2 else list(documents)
        wire = _named(docs, ids, "document", "documents")
        answer = self._request("POST", "/v1/index/add", json.dumps({"documents": wire}).encode())
        return [(a["doc"], int(a["index"])) for a in answer["added"]]

    def delete(
        self,
        *,
        ids: Sequence[str] | None = None,
        indices: Sequence[int] | None = None,
        generation: int | None = None,
    ) -> int:
        """Delete documents of the index the server serves, by `ids` (every document carrying
        one) or by `indices` (their numbers): how many were newly deleted. A name the index does
        not hold raises `ServerError`, and nothing is deleted. `generation` (the index's
        generation the numbers are of, as `search_at` or `info()` reports it) makes the server
        refuse the delete (409) once the index was compacted since, which numbers its documents
        again."""
        if (ids is None) == (indices is None):
            raise ValueError("name the documents by ids= or by indices= (one of the two)")
        body: dict = {"ids": [str(i) for i in ids]} if ids is not None else {"indices": [int(j) for j in indices or []]}
        if generation is not None:
            body["generation"] = int(generation)
        return int(self._request("POST", "/v1/index/delete", json.dumps(body).encode())["deleted"])

    def compact(self) -> dict:
        """Compact the index the server serves, in place: its next generation, the deleted
        documents left out and the live ones numbered from 0 again (ids kept). Returns
        `{"documents", "removed", "tokens", "generation"}`; searches sent after it see the new
        generation."""
        return self._request("POST", "/v1/index/compact", b"{}")

    def info(self) -> dict:
        """The server's corpus and limits: dim, documents, dtype, engine, devices, max_k, ..."""
        return self._request("GET", "/v1/info")

    def ready(self) -> bool:
        """Whether the server has loaded its corpus (False while it loads or cannot be reached)."""
        try:
            return bool(self._request("GET", "/readyz").get("ready"))
        except (ServerError, ConnectionError):
            return False
