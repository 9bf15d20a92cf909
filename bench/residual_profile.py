"""Where the time of one `maxsim_residual` call on CUDA tensors goes: the kernels it enqueues
(torch.profiler, CUPTI) at the shape of bench/residual_gpu.py (B=100K × 128 tokens, d=128,
K=65,536, nbits=2, one query of 32 tokens), after warm-up.
    PYTHONPATH=/tmp/site python3 bench/residual_profile.py
"""

import torch

import tilemaxsim

B, Nd, d, K, nbits = 100_000, 128, 128, 65536, 2
g = torch.Generator(device="cuda").manual_seed(0)
T = B * Nd
cu = torch.arange(0, T + 1, Nd, device="cuda", dtype=torch.int32)
cent = torch.nn.functional.normalize(torch.randn(K, d, device="cuda", generator=g), dim=-1).half()
codes = torch.randint(0, K, (T,), device="cuda", dtype=torch.int32, generator=g)
res = torch.randint(0, 256, (T, d * nbits // 8), device="cuda", dtype=torch.uint8, generator=g)
w = torch.linspace(-0.08, 0.08, 2**nbits, device="cuda")
Q = torch.nn.functional.normalize(torch.randn(1, 32, d, device="cuda", generator=g), dim=-1).half()
for check in (True, False):
    for _ in range(3):
        tilemaxsim.maxsim_residual(Q, codes, res, cu, cent, w, nbits, check=check)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            tilemaxsim.maxsim_residual(Q, codes, res, cu, cent, w, nbits, check=check)
        torch.cuda.synchronize()
    print(f"== check={check}: 5 calls")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))
