"""Type stubs of tilemaxsim.ray.serve: the sharded search as a Ray Serve application."""

from os import PathLike
from typing import Any

class BadRequest(ValueError):
    """A malformed search request (answered with 400)."""

class ShardsUnavailable(RuntimeError):
    """A shard did not answer (answered with 503)."""

def _query(q: Any, i: int, dim: int, what: str = "queries") -> tuple[str, Any]:
    """(id, float32 [L, d]) of one query (or document) of a request, checked."""

class Ingress:
    """The HTTP front: batching, routes, metrics."""

    shards: list[Any]
    path: str
    dim: int
    documents: int
    requests: int
    batches: int
    batch_queries: int
    shard_seconds: float
    def __init__(
        self,
        shards: Any,
        ranges: Any,
        path: str,
        dim: int,
        documents: int,
        max_k: int,
        max_batch_queries: int,
        batch_wait_s: float,
        narrow: str | None = None,
    ) -> None: ...
    async def __call__(self, request: Any) -> Any: ...
    async def _search_batch(self, items: list[tuple[list[Any], int]]) -> list[Any]: ...
    def _answer(self, ids: list[str], hits: list[Any]) -> dict[str, Any]: ...

def parse_request(body: bytes, dim: int, max_k: int) -> tuple[list[str], list[Any], int]:
    """(query ids, [Lq, d] float32 queries, k) of a request body, or BadRequest."""

def _narrowed(batch: Any, dtype: str | None) -> Any:
    """The float32 batch in the corpus's 16-bit type when every value is exactly one."""

def build_app(
    path: str | PathLike,
    shards: int,
    *,
    device: str = "cpu",
    num_cpus: float = 1,
    num_gpus: float | None = None,
    replicas: int = 1,
    residency: str = "auto",
    check_finite: bool = True,
    max_k: int = 1000,
    max_batch_queries: int = 64,
    batch_wait_s: float = 0.0,
    ingress_options: dict | None = None,
) -> Any:
    """A Serve application (ray.serve.Application): one deployment per shard and the ingress."""
