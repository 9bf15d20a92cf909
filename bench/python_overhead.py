"""Where a Python call's host time goes, on the GPU machine: torch.empty, the current-stream
query, DLPack exports, the engine's entry alone, the whole tilemaxsim.maxsim, and a cProfile of
it (one query against 1,000 documents, where a call is host-bound).
usage (GPU machine, the wheel installed into /tmp/site): PYTHONPATH=/tmp/site python3 bench/python_overhead.py"""
import time, torch, tilemaxsim
from tilemaxsim import _native
dev = torch.device("cuda")
Q = torch.randn(32, 128, device=dev, dtype=torch.float16)
D = torch.randn(1000, 128, 128, device=dev, dtype=torch.float16)
Q3 = Q[None]
out = torch.empty((1, 1000), device=dev)
s = torch.cuda.current_stream(dev).cuda_stream
def t(name, fn, n=2000):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"{name:50s} {(t1 - t0) / n * 1e6:8.1f} us/call (host)", flush=True)
t("torch.empty", lambda: torch.empty((1, 1000), dtype=torch.float32, device=dev))
t("torch.empty, an int size", lambda: torch.empty(1000, dtype=torch.float32, device=dev))
t("torch.empty, an int size, device index", lambda: torch.empty(1000, dtype=torch.float32, device=0))
t("Q.new_empty", lambda: Q.new_empty(1000, dtype=torch.float32))
from tilemaxsim._arrays import stream_of, dlpack
t("stream_of(Q)", lambda: stream_of(Q))
t("dlpack(Q) x3", lambda: (dlpack(Q), dlpack(D), dlpack(out)))
t("current_stream().cuda_stream", lambda: torch.cuda.current_stream(dev).cuda_stream)
t("Q.__dlpack__(stream=1)", lambda: Q.__dlpack__(stream=1))
t("Q.__dlpack__()", lambda: Q.__dlpack__())
t("Q.__dlpack_device__()", lambda: Q.__dlpack_device__())
t("_native.score", lambda: _native.score(Q3, [32], D, out, stream=s))
t("_native.score, torch capsules", lambda: _native.score(torch._C._to_dlpack(Q3), [32], torch._C._to_dlpack(D), torch._C._to_dlpack(out), stream=s))
t("tilemaxsim.maxsim", lambda: tilemaxsim.maxsim(Q, D))


def before(Q, D):
    """tilemaxsim.maxsim's fast path before 2026-11-27 evening: a tuple size, a list of lengths."""
    out = torch.empty((D.shape[0],), dtype=torch.float32, device=Q.device)
    _native.score(dlpack(Q), [Q.shape[-2]] * 1, dlpack(D), dlpack(out), stream=stream_of(Q))
    return out


t("the fast path before (tuple size, list of lengths)", lambda: before(Q, D))
t("tilemaxsim.maxsim (again)", lambda: tilemaxsim.maxsim(Q, D))
t("torch einsum small", lambda: torch.einsum("ih,bjh->bij", Q, D[:10]))
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
for _ in range(2000): tilemaxsim.maxsim(Q, D)
pr.disable(); torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
