"""Type stubs of tilemaxsim.client: a client of `tilemaxsim serve`."""

from typing import Any, List, NamedTuple, Optional, Sequence

Array = Any  # torch.Tensor | numpy.ndarray

class Hit(NamedTuple):
    doc: str
    index: int
    score: float

class QueryResult(NamedTuple):
    id: str
    hits: List[Hit]
    @property
    def docs(self) -> List[str]: ...
    @property
    def indices(self) -> List[int]: ...
    @property
    def scores(self) -> List[float]: ...

class ServerError(RuntimeError):
    status: int
    message: str
    def __init__(self, status: int, message: str) -> None: ...

class Client:
    url: str
    timeout: float
    def __init__(self, url: str = "http://127.0.0.1:8080", timeout: float = 60.0) -> None: ...
    def search(self, Q: Array, k: int = 10, *, ids: Optional[Sequence[str]] = None) -> List[QueryResult]: ...
    def info(self) -> dict: ...
    def ready(self) -> bool: ...
