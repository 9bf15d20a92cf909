"""Whether float32 CUDA documents lie in the tensor cores' split range, checked once a tensor.

The engine scores float32 documents on the tensor cores (`maxsim_bulk_split`: each value split
into two float16 parts) only where every row's largest |x| is at most 32768 and the row is all
zeros or that largest is at least 2^-12; elsewhere the exact CUDA-core kernel scores them. The
engine checks corpora it holds itself; tensors on the device are checked here, once, and the
answer is kept until the tensor changes (torch's version counter, which in-place writes through
any view bump) or is freed. Writes that bypass that counter are not seen: through `.data`, a
raw pointer handed to other code, or a CUDA graph's replay (a captured call keeps the kernel
chosen at capture). Call with `check=True` (which checks again), or pass a fresh tensor, after
them. Inference tensors (`torch.inference_mode`) have no version counter: they are checked on
every call."""

import weakref

import torch

SPLIT_MAX = 32768.0
SPLIT_MIN = 2.0**-12
_LIMIT = 64

# id(tensor) -> (a weak reference to it, its version, its data pointer, the answer)
_seen: dict = {}


def split_checked(D, fresh: bool = False) -> bool:
    """Whether every row of the float32 CUDA tensor `D` is in the split range (see above);
    `fresh`: check again whatever was kept (calls with `check=True`)."""
    if D.numel() == 0:
        return False
    if D.is_inference():  # no version counter to keep an answer by
        return _in_range(D)
    version, ptr = D._version, D.data_ptr()
    entry = _seen.get(id(D))
    if not fresh and entry is not None and entry[0]() is D and entry[1] == version and entry[2] == ptr:
        return entry[3]
    ok = _in_range(D)
    if len(_seen) >= _LIMIT:
        _seen.clear()
    _seen[id(D)] = (weakref.ref(D), version, ptr, ok)
    return ok


def _in_range(D) -> bool:
    m = torch.linalg.vector_norm(D.detach(), ord=float("inf"), dim=-1)  # NaN rows: NaN, out of range
    return bool(((m <= SPLIT_MAX) & ((m == 0) | (m >= SPLIT_MIN))).all())
