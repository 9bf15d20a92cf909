"""Type stubs of the compiled extension (src/lib.rs). Use the Python API in `tilemaxsim`."""

from collections.abc import Sequence
from typing import Any

__version__: str

def cuda_available() -> bool:
    """Whether a CUDA GPU the engine can use is present (driver, device and NVRTC)."""

def cuda_devices() -> list[str]:
    """The GPUs the engine sees, one line each."""

def score(
    queries: Any,
    query_lengths: Sequence[int] | None,
    docs: Any,
    out: Any,
    *,
    cu_seqlens: Any | None = None,
    doc_lengths: Any | None = None,
    candidates: Any | None = None,
    pairs: bool = False,
    split_checked: bool = False,
    stream: int = 0,
) -> str:
    """Score DLPack tensors into `out` on their device; returns the kernel that ran.
    `query_lengths` None: every query is all of its rows. `split_checked`: float32 documents
    whose rows the caller checked are in the tensor cores' split range (`_split.py`)."""

def train_forward(
    queries: Any,
    docs: Any,
    out: Any,
    argmax: Any | None = None,
    *,
    cu_seqlens: Any | None = None,
    doc_lengths: Any | None = None,
    group: int = 0,
    split_checked: bool = False,
    stream: int = 0,
) -> None:
    """Training forward pass on CUDA tensors: scores into `out`, each query token's argmax (int32).
    float32 tensors need `split_checked` (the documents checked to lie in the split range)."""

def train_backward(
    queries: Any,
    docs: Any,
    argmax: Any,
    grad: Any,
    dq: Any | None = None,
    dd: Any | None = None,
    *,
    cu_seqlens: Any | None = None,
    doc_lengths: Any | None = None,
    group: int = 0,
    split_checked: bool = False,
    stream: int = 0,
) -> None:
    """Training backward pass: dQ and dD from the scores' gradient and the forward pass's argmax."""

def score_residual(
    queries: Any,
    residuals: Any,
    ids: Any,
    offsets: Any,
    centroids: Any,
    bucket_weights: Any,
    nbits: int,
    out: Any,
    *,
    stream: int = 0,
) -> None:
    """Score a PLAID residual corpus's CUDA tensors in place into `out` on `stream`."""

class Corpus:
    @staticmethod
    def load(
        path: str,
        device: str = "auto",
        *,
        devices: Sequence[int] | None = None,
        residency: str = "auto",
        check_finite: bool = True,
        documents: tuple[int, int] | None = None,
        rerank: str | None = None,
        rerank_k: int | None = None,
    ) -> Corpus: ...
    def compress(
        self,
        codec: str,
        *,
        nbits: int = 2,
        centroids: int | None = None,
        m: int = 16,
        kmeans_iters: int | None = None,
        buckets: str = "lloyd-max",
        seed: int = 0,
        rerank_k: int | None = None,
        normalize: bool = False,
        device: str | None = None,
    ) -> Corpus: ...
    @staticmethod
    def from_arrays(
        embeddings: Any,
        offsets: Sequence[int],
        doc_ids: Sequence[str] | None = None,
        device: str = "auto",
        *,
        devices: Sequence[int] | None = None,
        residency: str = "auto",
    ) -> Corpus: ...
    @staticmethod
    def from_plaid(
        codes: bytes,
        residuals: bytes,
        offsets: Sequence[int],
        centroids: bytes,
        bucket_weights: Sequence[float],
        nbits: int,
        dim: int,
        device: str = "auto",
    ) -> Corpus: ...
    def search(self, queries: Any, query_lengths: Sequence[int], k: int) -> tuple[list[float], list[int]]: ...
    def save(self, path: str) -> None: ...
    def __len__(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def codec(self) -> str | None: ...
    @property
    def bytes_per_token(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def offsets(self) -> list[int]: ...
    @property
    def doc_ids(self) -> list[str] | None: ...
    @property
    def device(self) -> str: ...
    @property
    def notice(self) -> str | None: ...

class Index:
    @staticmethod
    def open(path: str) -> Index: ...
    @staticmethod
    def build(
        corpus: Corpus,
        path: str,
        *,
        nbits: int = 2,
        centroids: int | None = None,
        kmeans_iters: int = 4,
        buckets: str = "lloyd-max",
        seed: int = 0,
        device: str = "auto",
        keep_exact: bool = True,
        nprobe: int | None = None,
        ndocs: int | None = None,
        rerank_k: int | None = None,
    ) -> Index: ...
    def search(
        self,
        queries: Any,
        query_lengths: Sequence[int],
        k: int,
        *,
        nprobe: int | None = None,
        ndocs: int | None = None,
        rerank_k: int | None = None,
        exhaustive: bool = False,
        device: str = "cpu",
        residency: str = "auto",
    ) -> tuple[list[float], list[int]]: ...
    def search_within(
        self,
        queries: Any,
        query_lengths: Sequence[int],
        k: int,
        lists: Sequence[Sequence[int]],
        rerank_k: int | None = None,
        device: str = "auto",
    ) -> tuple[list[float], list[int]]: ...
    def add(self, corpus: Corpus) -> tuple[int, int]: ...
    def refresh(self) -> bool: ...
    def delete(self, docs: Sequence[int]) -> int: ...
    def compact(self, path: str) -> tuple[int, int, int]: ...
    def compact_in_place(self) -> tuple[int, int, int]: ...
    @property
    def generation(self) -> int: ...
    def ids(self, start: int, end: int) -> list[str]: ...
    def __len__(self) -> int: ...
    @property
    def deleted(self) -> int: ...
    @property
    def deleted_numbers(self) -> list[int]: ...
    @property
    def all_ids(self) -> list[str]: ...
    @property
    def dim(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def doc_ids(self) -> list[str] | None: ...
    @property
    def has_exact(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def defaults(self) -> tuple[int, int, int]: ...
    @property
    def searcher(self) -> str | None: ...
