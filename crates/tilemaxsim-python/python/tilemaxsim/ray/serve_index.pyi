"""Type stubs of tilemaxsim.ray.serve_index: an index directory as a Ray Serve application."""

from os import PathLike
from typing import Any

def build_index_app(
    path: str | PathLike,
    *,
    replicas: int = 1,
    device: str = "cpu",
    num_cpus: float = 1,
    num_gpus: float | None = None,
    n_ivf_probe: int | None = None,
    n_full_scores: int | None = None,
    rerank_k: int | None = None,
    residency: str = "auto",
    max_k: int = 1000,
    max_batch_queries: int = 64,
    batch_wait_s: float = 0.0,
    ingress_options: dict[str, Any] | None = None,
) -> Any:
    """A Serve application: `replicas` replicas of the index at `path` and the HTTP ingress
    (search, add, delete, info, health, metrics)."""
