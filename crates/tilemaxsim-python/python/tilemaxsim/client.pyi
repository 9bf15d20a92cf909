"""Type stubs of tilemaxsim.client: a client of `tilemaxsim serve`."""

from collections.abc import Sequence
from typing import Any, NamedTuple

Array = Any  # torch.Tensor | numpy.ndarray

class Hit(NamedTuple):
    doc: str
    index: int
    score: float

class QueryResult(NamedTuple):
    id: str
    hits: list[Hit]
    @property
    def docs(self) -> list[str]: ...
    @property
    def indices(self) -> list[int]: ...
    @property
    def scores(self) -> list[float]: ...

class ServerError(RuntimeError):
    status: int
    message: str
    def __init__(self, status: int, message: str) -> None: ...

class Client:
    url: str
    timeout: float
    def __init__(self, url: str = "http://127.0.0.1:8080", timeout: float = 60.0) -> None: ...
    def search(
        self,
        Q: Array,
        k: int = 10,
        *,
        ids: Sequence[str] | None = None,
        subset: Sequence[int] | Sequence[Sequence[int]] | Array | None = None,
    ) -> list[QueryResult]: ...
    def search_at(
        self,
        Q: Array,
        k: int = 10,
        *,
        ids: Sequence[str] | None = None,
        subset: Sequence[int] | Sequence[Sequence[int]] | Array | None = None,
    ) -> tuple[int | None, list[QueryResult]]: ...
    def add(self, documents: Array | Sequence[Array], *, ids: Sequence[str] | None = None) -> list[tuple[str, int]]: ...
    def delete(
        self, *, ids: Sequence[str] | None = None, indices: Sequence[int] | None = None, generation: int | None = None
    ) -> int: ...
    def compact(self) -> dict: ...
    def info(self) -> dict: ...
    def ready(self) -> bool: ...
