"""Type stubs of the compiled extension (src/lib.rs). Use the Python API in `tilemaxsim`."""

from typing import Any, Optional, Sequence, Tuple

__version__: str

def cuda_available() -> bool:
    """Whether a CUDA GPU the engine can use is present (driver, device and NVRTC)."""

def cuda_devices() -> list[str]:
    """The GPUs the engine sees, one line each."""

def score(
    queries: Any,
    query_lengths: Sequence[int],
    docs: Any,
    out: Any,
    *,
    cu_seqlens: Optional[Any] = None,
    doc_lengths: Optional[Any] = None,
    pairs: bool = False,
    stream: int = 0,
) -> str:
    """Score DLPack tensors into `out` on their device; returns the kernel that ran."""

class Corpus:
    @staticmethod
    def load(
        path: str,
        device: str = "auto",
        *,
        devices: Optional[Sequence[int]] = None,
        residency: str = "auto",
        check_finite: bool = True,
        documents: Optional[Tuple[int, int]] = None,
        rerank: Optional[str] = None,
        rerank_k: Optional[int] = None,
    ) -> "Corpus": ...
    def compress(
        self,
        codec: str,
        *,
        nbits: int = 2,
        centroids: Optional[int] = None,
        m: int = 16,
        kmeans_iters: Optional[int] = None,
        seed: int = 0,
        rerank_k: Optional[int] = None,
        normalize: bool = False,
    ) -> "Corpus": ...
    @staticmethod
    def from_arrays(
        embeddings: Any,
        offsets: Sequence[int],
        doc_ids: Optional[Sequence[str]] = None,
        device: str = "auto",
        *,
        devices: Optional[Sequence[int]] = None,
        residency: str = "auto",
    ) -> "Corpus": ...
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
    ) -> "Corpus": ...
    def search(self, queries: Any, query_lengths: Sequence[int], k: int) -> tuple[list[float], list[int]]: ...
    def save(self, path: str) -> None: ...
    def __len__(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def codec(self) -> Optional[str]: ...
    @property
    def bytes_per_token(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def offsets(self) -> list[int]: ...
    @property
    def doc_ids(self) -> Optional[list[str]]: ...
    @property
    def device(self) -> str: ...
    @property
    def notice(self) -> Optional[str]: ...
