"""Type stubs of tilemaxsim.ray.serve: the sharded search as a Ray Serve application."""

from os import PathLike
from typing import Any

class BadRequest(ValueError):
    """A malformed search request (answered with 400)."""

class ShardsUnavailable(RuntimeError):
    """A shard did not answer (answered with 503)."""

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
