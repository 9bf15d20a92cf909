"""Arrays as the engine takes them (torch, optional, or numpy), the CUDA stream a CUDA
tensor's work goes on (torch's current stream of its device), and fast-plaid's `subset` as one
list of document numbers a query.

Torch tensors or numpy arrays (lists become numpy arrays), float32 / float16 / bfloat16 for the
engine and float64 for the float64 path (integers refused), token rows made contiguous where
their stride along d is not 1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the checker sees torch; at run time every use is behind `is_torch` or `torch is not None`
    import torch as torch  # re-exported: the other modules take torch (or None) from here
    from typing_extensions import TypeGuard
else:
    try:  # torch is optional: numpy arrays run on the CPU engine without it
        import torch
    except ImportError:  # pragma: no cover - exercised only where torch is absent
        torch = None

FLOATS = "float32, float16, bfloat16 and float64"
# A torch tensor or a numpy array, whichever the caller gave (as in the type stubs).
Array = Any


def is_torch(x) -> TypeGuard[torch.Tensor]:
    return torch is not None and isinstance(x, torch.Tensor)


def is_float64(x) -> bool:
    return x.dtype == (torch.float64 if is_torch(x) else np.float64)


def as_array(x, name: str, *, keep_float64: bool = False) -> Array:
    """A torch tensor or numpy array of a supported float dtype whose token rows (last
    dimension) are contiguous: a view with another stride along d is copied, any other strides
    are kept (the engine reads them in place). float64 is kept for the float64 path when
    `keep_float64`, else converted to float32 (what the engine and corpus files hold)."""
    if is_torch(x):
        if x.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            raise TypeError(f"{name}: dtype {x.dtype} is not supported; {FLOATS} are")
        if x.dtype == torch.float64 and not keep_float64:
            x = x.float()
        if x.ndim and x.shape[-1] > 1 and x.stride(-1) != 1:
            x = x.contiguous()
        return x
    if isinstance(x, (list, tuple)):
        x = np.asarray(x, dtype=np.float32)
    if isinstance(x, np.ndarray):
        if x.dtype not in (np.float32, np.float16, np.float64):
            raise TypeError(f"{name}: dtype {x.dtype} is not supported; {FLOATS} are")
        if x.dtype == np.float64 and not keep_float64:
            x = x.astype(np.float32)
        if x.ndim and (any(s < 0 for s in x.strides) or (x.shape[-1] > 1 and x.strides[-1] != x.itemsize)):
            x = np.ascontiguousarray(x)
        return x
    raise TypeError(f"{name}: expected a torch tensor or a numpy array, got {type(x).__name__}")


def device_of(x) -> str:
    return str(x.device) if is_torch(x) else "cpu"


def same_device(named: dict) -> str:
    devices = {name: device_of(v) for name, v in named.items() if v is not None}
    found = set(devices.values())
    if len(found) > 1:
        detail = ", ".join(f"{k} on {v}" for k, v in devices.items())
        raise ValueError(f"tensors on different devices: {detail}")
    device = found.pop() if found else "cpu"
    if device.startswith("cuda") or device == "cpu":
        return device
    raise ValueError(f"device {device} is not supported: tilemaxsim runs on the CPU and on CUDA GPUs")


_raw_stream = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
_capturing = getattr(getattr(torch, "_C", None), "_cuda_isCurrentStreamCapturing", None)


def stream_of(x) -> int:
    """The handle of torch's current stream of a CUDA tensor's device; 0 for host memory.
    (torch.cuda.current_stream(device).cuda_stream costs 8 µs a call; torch's C queries < 1.)"""
    if is_torch(x) and x.is_cuda:
        if _capturing() if _capturing is not None else torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "tilemaxsim cannot be captured in a CUDA graph (each call uploads its shapes from the host); "
                "call it outside torch.cuda.graph"
            )
        if _raw_stream is not None:
            return _raw_stream(x.get_device())
        return torch.cuda.current_stream(x.device).cuda_stream
    return 0


_to_dlpack = getattr(getattr(torch, "_C", None), "_to_dlpack", None)


def dlpack(x):
    """What the engine imports: a torch tensor's DLPack capsule made by torch's C function
    (its Python `__dlpack__` wrapper costs several µs a call), else the object itself (numpy
    arrays and other producers go through their `__dlpack__`)."""
    if _to_dlpack is not None and type(x) is torch.Tensor:
        return _to_dlpack(x)
    return x


def empty_scores(shape, like):
    if is_torch(like):
        return torch.empty(shape, dtype=torch.float32, device=like.device)
    return np.empty(shape, dtype=np.float32)


def lengths_array(x, name: str, like):
    """Integer lengths or offsets as int64 on `like`'s device."""
    if is_torch(like):
        t = x if is_torch(x) else torch.as_tensor(np.asarray(x))
        if t.dtype.is_floating_point or t.dtype == torch.bool:
            raise TypeError(f"{name}: expected integers, got {t.dtype}")
        return t.to(device=like.device, dtype=torch.int64).contiguous()
    a = x.detach().cpu().numpy() if is_torch(x) else np.asarray(x)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name}: expected integers, got {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)


def subset_lists(subset, queries):
    """fast-plaid's `subset` as one list of document numbers a query: a list (or 1-D array) for
    every query, or a list of lists, one a query."""
    subset = subset.tolist() if getattr(subset, "ndim", 0) >= 1 else list(subset)
    if subset and (isinstance(subset[0], (list, tuple)) or getattr(subset[0], "ndim", 0) >= 1):
        lists = [[int(j) for j in (s.tolist() if getattr(s, "ndim", 0) >= 1 else s)] for s in subset]
        if len(lists) != queries:
            raise ValueError(f"subset: {len(lists)} lists for {queries} queries (one for every query, or one a query)")
    else:
        lists = [[int(j) for j in subset]] * queries
    if any(j < 0 for lst in lists for j in lst):
        raise ValueError("subset: document numbers are 0 or more")
    return lists
