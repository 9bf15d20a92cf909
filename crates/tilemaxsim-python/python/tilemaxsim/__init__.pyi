"""Type stubs of tilemaxsim's public API. Arrays are torch tensors or numpy arrays."""

from os import PathLike
from typing import Any, Optional, Sequence, Tuple, Union

from . import client as client

Array = Any  # torch.Tensor | numpy.ndarray

__version__: str

def cuda_available() -> bool: ...
def cuda_devices() -> list[str]: ...
def maxsim(
    Q: Array,
    D: Array,
    *,
    q_mask: Optional[Array] = None,
    d_mask: Optional[Array] = None,
    doc_lengths: Optional[Array] = None,
    cu_seqlens: Optional[Array] = None,
    check: Optional[bool] = None,
) -> Array:
    """[B] for one query [Lq, d], else [A, B]; float32 on the inputs' device."""

def maxsim_pairs(
    Q: Array,
    D: Array,
    *,
    q_mask: Optional[Array] = None,
    d_mask: Optional[Array] = None,
    doc_lengths: Optional[Array] = None,
    cu_seqlens: Optional[Array] = None,
    check: Optional[bool] = None,
) -> Array:
    """[B]: query i against document i."""

def maxsim_residual(
    Q: Array,
    codes_flat: Array,
    residuals_flat: Array,
    cu_seqlens_d: Array,
    centroids: Array,
    bucket_weights: Array,
    nbits: int,
    *,
    normalize: bool = True,
    device: str = "cpu",
) -> Array:
    """[Nq, Nd] (or [Nd]): Q against a PLAID residual index's tensors, decoded on the fly."""

def topk(
    Q: Array,
    D: Array,
    k: int,
    *,
    q_mask: Optional[Array] = None,
    d_mask: Optional[Array] = None,
    doc_lengths: Optional[Array] = None,
    cu_seqlens: Optional[Array] = None,
    chunk: int = 65536,
    check: Optional[bool] = None,
) -> Tuple[Array, Array]:
    """(scores, indices), best first, ties to the lower index."""

class Corpus:
    @classmethod
    def load(
        cls,
        path: Union[str, PathLike],
        device: str = "auto",
        *,
        devices: Optional[Sequence[int]] = None,
        residency: str = "auto",
        check_finite: bool = True,
        documents: Optional[Tuple[int, int]] = None,
        rerank: Optional[Union[str, PathLike]] = None,
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
    @classmethod
    def from_tensors(
        cls,
        embeddings: Union[Array, Sequence[Array]],
        cu_seqlens: Optional[Array] = None,
        *,
        doc_lengths: Optional[Array] = None,
        doc_ids: Optional[Sequence[str]] = None,
        device: str = "auto",
        devices: Optional[Sequence[int]] = None,
        residency: str = "auto",
    ) -> "Corpus": ...
    def search(
        self, Q: Union[Array, Sequence[Array]], k: int, *, q_mask: Optional[Array] = None
    ) -> Tuple[Array, Array]: ...
    def save(self, path: Union[str, PathLike]) -> None: ...
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
