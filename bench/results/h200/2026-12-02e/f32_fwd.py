"""The f32 training kernels alone at PyLate's in-batch shape (64 queries x 512 documents, Lq
32, Ld 180, d 128), six rounds each (for ncu's --launch-skip), then CUDA-event medians of the
forward (with its split), dQ and dD, beside the bf16 kernels.
usage: python3 f32_fwd.py [--profile]"""
import statistics
import sys

import torch
from tilemaxsim import _autograd, _native
from tilemaxsim._arrays import dlpack, stream_of


def timed(fn, reps=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        t.append(a.elapsed_time(b))
    return statistics.median(t)


torch.manual_seed(0)
for dtype in (torch.float32, torch.bfloat16):
    Q = torch.nn.functional.normalize(torch.randn(64, 32, 128, device="cuda"), dim=-1).to(dtype)
    D = torch.nn.functional.normalize(torch.randn(512, 180, 128, device="cuda"), dim=-1).to(dtype)
    assert _autograd.fused_ok(Q, D)
    _, am = _autograd._forward(Q, D, {}, 0, keep_argmax=True)
    g = torch.randn(64, 512, device="cuda")
    dq, dd = torch.empty_like(Q), torch.empty_like(D)

    def bwd(want_q, want_d):
        _native.train_backward(dlpack(Q), dlpack(D), dlpack(am), dlpack(g), dlpack(dq) if want_q else None,
                               dlpack(dd) if want_d else None, group=0, split_checked=dtype == torch.float32,
                               stream=stream_of(Q))

    fns = (("forward + argmax", lambda: _autograd._forward(Q, D, {}, 0, keep_argmax=True)),
           ("dQ", lambda: bwd(True, False)), ("dD", lambda: bwd(False, True)))
    if "--profile" in sys.argv:
        for _, fn in fns:
            for _ in range(6):
                fn()
        torch.cuda.synchronize()
        continue
    for name, fn in fns:
        print(f"{str(dtype)[6:]:9s} {name:18s} {timed(fn):8.3f} ms", flush=True)
