"""tilemaxsim: exact MaxSim (late-interaction) scoring, `score(Q, D) = sum_i max_j <q_i, d_j>`,
at the hardware's limit on NVIDIA GPUs and CPUs.

    import tilemaxsim
    scores = tilemaxsim.maxsim(Q, D)                      # [A, B] float32, on Q's device
    scores, idx = tilemaxsim.topk(Q, D, k=10)             # ties to the lower index
    corpus = tilemaxsim.Corpus.load("corpus.safetensors", device="auto")
    scores, idx = corpus.search(Q, k=10)

torch tensors (CUDA or CPU) and numpy arrays are accepted; CUDA tensors are scored in place on
torch's current stream. Drop-ins for PyLate, ColBERT/PLAID, flash-maxsim and colpali-engine are
in `tilemaxsim.integrations`; `tilemaxsim.client.Client(url).search(Q, k)` queries a
`tilemaxsim serve` server; sharded search on a Ray cluster (and Ray Serve) in `tilemaxsim.ray`.
"""

from ._native import __version__, cuda_available, cuda_devices
from ._api import maxsim, maxsim_pairs, topk
from ._corpus import Corpus
from ._residual import maxsim_residual
from . import client

__all__ = ["Corpus", "__version__", "client", "cuda_available", "cuda_devices", "maxsim", "maxsim_pairs", "maxsim_residual", "topk"]
