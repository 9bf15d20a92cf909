"""tilemaxsim: exact MaxSim (late-interaction) scoring, `score(Q, D) = sum_i max_j <q_i, d_j>`,
at the hardware's limit on NVIDIA GPUs and CPUs.

    import tilemaxsim
    scores = tilemaxsim.maxsim(Q, D)                      # [A, B] float32, on Q's device
    scores, idx = tilemaxsim.topk(Q, D, k=10)             # ties to the lower index
    corpus = tilemaxsim.Corpus.load("corpus.safetensors", device="auto")
    scores, idx = corpus.search(Q, k=10)
    index = tilemaxsim.Index("my_index").create(documents_embeddings=docs)   # IVF + codes
    hits = index.search(Q, top_k=10)                      # [[(document, score), ...], ...]

torch tensors (CUDA or CPU) and numpy arrays are accepted; CUDA tensors are scored in place on
torch's current stream. Drop-ins for PyLate, ColBERT/PLAID, flash-maxsim and colpali-engine are
in `tilemaxsim.integrations`; `tilemaxsim.client.Client(url).search(Q, k)` queries a
`tilemaxsim serve` server; sharded search on a Ray cluster (and Ray Serve) in `tilemaxsim.ray`.
"""

from . import client
from ._api import maxsim, maxsim_pairs, topk
from ._corpus import Corpus
from ._index import Index
from ._native import __version__, cuda_available, cuda_devices
from ._residual import maxsim_residual

__all__ = [
    # high-level: a corpus kept for many searches, and the top-k of one call
    "Corpus",
    # an index directory (residual codes, IVF, exact tokens), fast-plaid's shape of API
    "Index",
    "topk",
    # core MaxSim: every query against every document, and aligned pairs
    "maxsim",
    "maxsim_pairs",
    # compressed: a PLAID residual index's tensors scored as they lie on disk
    "maxsim_residual",
    # integrations and clients: the HTTP client (`tilemaxsim.integrations.*`, `tilemaxsim.ray`: by name)
    "client",
    # utilities
    "cuda_available",
    "cuda_devices",
    "__version__",
]
