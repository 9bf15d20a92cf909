"""Type stubs of tilemaxsim.ray: a corpus file searched by shard actors, an index directory by
replica actors, on a Ray cluster."""

from collections.abc import Sequence
from os import PathLike
from typing import Any, NamedTuple

Array = Any  # torch.Tensor | numpy.ndarray

class ShardError(RuntimeError):
    """A shard's actor died, is restarting, or failed; the search returned nothing."""

    shard: int
    documents: tuple[int, int]

class Hits(NamedTuple):
    scores: Array
    """[A, k] float32 (or [k] for one query), best first."""
    indices: Array
    """[A, k] int64 global document indices, ties to the lower index."""
    ids: list
    """The corpus's document ids (decimal indices when it has none), one list per query."""

def plan_shards(offsets: Sequence[int] | Array, shards: int) -> list[tuple[int, int]]:
    """Contiguous, non-empty document ranges with about equal tokens each."""

def merge(parts: Sequence[tuple[Array, Array, list | None]], k: int) -> tuple[Array, Array, list]:
    """The exact global top-k of the shards' (scores, global indices, ids)."""

class PendingSearch:
    def result(self, timeout: float | None = None) -> Hits: ...

class ShardedSearcher:
    path: str
    shards: list[tuple[int, int]]
    actors: list[Any]
    offsets: Array
    """[N + 1] int64 document offsets of the file."""
    dim: int
    dtype: str
    def __init__(
        self,
        path: str | PathLike,
        shards: int,
        *,
        device: str = "cpu",
        num_cpus: float = 1,
        num_gpus: float | None = None,
        max_restarts: int = 3,
        residency: str = "auto",
        check_finite: bool = True,
        scheduling_strategy: Any = "SPREAD",
        timeout: float | None = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    def info(self) -> list[dict]: ...
    def submit(self, Q: Array, k: int, *, q_mask: Array | None = None) -> PendingSearch: ...
    def search_hits(self, Q: Array, k: int, *, q_mask: Array | None = None, timeout: float | None = None) -> Hits: ...
    def search(
        self, Q: Array, k: int, *, q_mask: Array | None = None, timeout: float | None = None
    ) -> tuple[Array, Array]: ...
    def search_ids(
        self, Q: Array, k: int, *, q_mask: Array | None = None, timeout: float | None = None
    ) -> tuple[Array, list]: ...
    def close(self) -> None: ...
    def __enter__(self) -> ShardedSearcher: ...
    def __exit__(self, *exc: Any) -> None: ...

class IndexSearcher:
    """An index directory searched by replica actors, each with the whole index and a share of
    every query batch; updated live through any replica."""

    path: str
    actors: list[Any]
    dim: int
    def __init__(
        self,
        path: str | PathLike,
        replicas: int = 2,
        *,
        device: str = "cpu",
        num_cpus: float = 1,
        num_gpus: float | None = None,
        max_restarts: int = 3,
        scheduling_strategy: Any = "SPREAD",
        timeout: float | None = None,
    ) -> None: ...
    def info(self) -> list[dict]: ...
    def search(
        self,
        queries_embeddings: Array | Sequence[Array],
        top_k: int = 10,
        *,
        timeout: float | None = None,
        **options: Any,
    ) -> list[list[tuple[int, float]]]: ...
    def add(
        self,
        documents_embeddings: Sequence[Array],
        *,
        doc_ids: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> list[int]: ...
    def delete(self, subset: Sequence[int] | Array, *, timeout: float | None = None) -> int: ...
    @property
    def doc_ids(self) -> list[str] | None: ...
    def close(self) -> None: ...
    def __enter__(self) -> IndexSearcher: ...
    def __exit__(self, *exc: Any) -> None: ...
