"""Where PyLate's float32 in-batch step (64 queries x 512 documents, Lq 32, Ld 180, d 128,
cross-entropy) spends its time on the torch path of `_autograd.MaxSim` (float16 parts for the
argmax, embedding_bag gradients): each stage alone by CUDA events (median of 20), then one step
under torch.profiler, its CUDA kernels by total time.
usage: python3 f32_profile.py"""
import statistics

import tilemaxsim
import torch
from tilemaxsim import _autograd


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        t.append(a.elapsed_time(b))
    return statistics.median(t)


torch.manual_seed(0)
A, B, Lq, Ld, d = 64, 512, 32, 180, 128
Q = torch.nn.functional.normalize(torch.randn(A, Lq, d, device="cuda"), dim=-1).requires_grad_()
D = torch.nn.functional.normalize(torch.randn(B, Ld, d, device="cuda"), dim=-1).requires_grad_()
target = torch.arange(A, device="cuda") * (B // A)
print("split ok:", _autograd._split_ok(Q.detach(), D.detach(), False))
with torch.no_grad():
    print(f"_split_ok               {timed(lambda: _autograd._split_ok(Q, D, False)):8.3f} ms")
    print(f"_best split             {timed(lambda: _autograd._best(Q, D, None, False, True)):8.3f} ms")
    print(f"_best plain f32 (IEEE)  {timed(lambda: _autograd._best(Q, D, None, False, False)):8.3f} ms")
    print(f"engine scores only      {timed(lambda: tilemaxsim.maxsim(Q, D)):8.3f} ms")
s = tilemaxsim.maxsim(Q, D)
g = torch.randn_like(s)
print(f"fwd + bwd (no loss)     {timed(lambda: torch.autograd.grad(tilemaxsim.maxsim(Q, D), (Q, D), g)):8.3f} ms")
print(f"fwd only (with grad)    {timed(lambda: tilemaxsim.maxsim(Q, D)):8.3f} ms")


def step():
    Q.grad = D.grad = None
    torch.nn.functional.cross_entropy(tilemaxsim.maxsim(Q, D), target).backward()


print(f"step                    {timed(step):8.3f} ms")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as p:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=60))
