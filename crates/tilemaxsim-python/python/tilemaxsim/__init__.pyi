"""Type stubs of tilemaxsim's public API. Arrays are torch tensors or numpy arrays."""

from collections.abc import Sequence
from os import PathLike
from typing import Any

from . import client as client

Array = Any  # torch.Tensor | numpy.ndarray

__all__ = [
    # high-level
    "Corpus",
    "Index",
    "topk",
    # core MaxSim
    "maxsim",
    "maxsim_pairs",
    # compressed
    "maxsim_residual",
    # integrations and clients
    "client",
    # utilities
    "cuda_available",
    "cuda_devices",
    "__version__",
]

# high-level

class Corpus:
    @classmethod
    def load(
        cls,
        path: str | PathLike,
        device: str = "auto",
        *,
        devices: Sequence[int] | None = None,
        residency: str = "auto",
        check_finite: bool = True,
        documents: tuple[int, int] | None = None,
        rerank: str | PathLike | None = None,
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
    @classmethod
    def from_tensors(
        cls,
        embeddings: Array | Sequence[Array],
        cu_seqlens: Array | None = None,
        *,
        doc_lengths: Array | None = None,
        doc_ids: Sequence[str] | None = None,
        device: str = "auto",
        devices: Sequence[int] | None = None,
        residency: str = "auto",
    ) -> Corpus: ...
    def search(self, Q: Array | Sequence[Array], k: int, *, q_mask: Array | None = None) -> tuple[Array, Array]: ...
    def save(self, path: str | PathLike) -> None: ...
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

class Index:
    def __init__(self, index: str | PathLike, device: str = "auto") -> None: ...
    def create(
        self,
        documents_embeddings: Sequence[Array] | Corpus,
        *,
        nbits: int = 2,
        n_centroids: int | None = None,
        kmeans_niters: int = 4,
        buckets: str = "lloyd-max",
        seed: int = 0,
        keep_exact: bool = True,
        doc_ids: Sequence[str] | None = None,
        n_ivf_probe: int | None = None,
        n_full_scores: int | None = None,
        rerank_k: int | None = None,
    ) -> Index: ...
    def search(
        self,
        queries_embeddings: Array | Sequence[Array],
        top_k: int = 10,
        *,
        n_ivf_probe: int | None = None,
        n_full_scores: int | None = None,
        rerank_k: int | None = None,
        exhaustive: bool = False,
        q_mask: Array | None = None,
        residency: str = "auto",
        subset: Sequence[int] | Sequence[Sequence[int]] | Array | None = None,
    ) -> list[list[tuple[int, float]]]: ...
    def add(
        self, documents_embeddings: Sequence[Array] | Corpus, *, doc_ids: Sequence[str] | None = None
    ) -> list[int]: ...
    def delete(self, subset: Sequence[int] | Array) -> int: ...
    def compact(self, index: str | PathLike | None = None) -> Index: ...
    @property
    def generation(self) -> int: ...
    def refresh(self) -> bool: ...
    def __len__(self) -> int: ...
    @property
    def deleted(self) -> int: ...
    @property
    def deleted_numbers(self) -> list[int]: ...
    @property
    def dim(self) -> int | None: ...
    @property
    def doc_ids(self) -> list[str] | None: ...
    @property
    def has_exact(self) -> bool: ...
    @property
    def defaults(self) -> tuple[int, int, int] | None: ...
    @property
    def searcher(self) -> str | None: ...

def topk(
    Q: Array,
    D: Array,
    k: int,
    *,
    q_mask: Array | None = None,
    d_mask: Array | None = None,
    doc_lengths: Array | None = None,
    cu_seqlens: Array | None = None,
    chunk: int = 65536,
    check: bool | None = None,
) -> tuple[Array, Array]:
    """(scores, indices), best first, ties to the lower index."""

# core MaxSim

def maxsim(
    Q: Array,
    D: Array,
    *,
    q_mask: Array | None = None,
    d_mask: Array | None = None,
    doc_lengths: Array | None = None,
    cu_seqlens: Array | None = None,
    check: bool | None = None,
) -> Array:
    """[B] for one query [Lq, d], else [A, B]; [A, K] for documents [A, K, Ld, d] (query a
    against its own K); float32 on the inputs' device. Differentiable in Q and D."""

def maxsim_pairs(
    Q: Array,
    D: Array,
    *,
    q_mask: Array | None = None,
    d_mask: Array | None = None,
    doc_lengths: Array | None = None,
    cu_seqlens: Array | None = None,
    check: bool | None = None,
) -> Array:
    """[B]: query i against document i."""

# compressed

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
    device: str | None = None,
    check: bool = True,
) -> Array:
    """[Nq, Nd] (or [Nd]): Q against a PLAID residual index's tensors, decoded on the fly
    (CUDA tensors in place on their GPU)."""

# utilities

__version__: str

def cuda_available() -> bool: ...
def cuda_devices() -> list[str]: ...
