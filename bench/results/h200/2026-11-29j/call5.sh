#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 5: the PyLate step of bench/python_gpu.py (32 queries × 256
# documents) three times over, each with the host's wall time a step beside the events' time,
# then bench/train_step.py (issue 27's training target: 64 × 512, bf16), wheel of 1984e72.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call5.sh  (carry .dev .devcache .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo)"
  for r in 1 2 3; do timeout 60 python3 bench/python_gpu.py --cases training --out /tmp/pg$r 2>&1 | grep "PyLate step"; done
  timeout 60 python3 - <<'PY'
import time, torch, tilemaxsim
from tilemaxsim.integrations import pylate as dropin
torch.manual_seed(0)
dev = "cuda"
def norm(*s):
    x = torch.randn(*s, device=dev); return (x / x.norm(dim=-1, keepdim=True)).half()
Q = norm(32, 32, 128).requires_grad_(); D = norm(256, 180, 128).requires_grad_()
dm = (torch.rand(256, 180, device=dev) < 0.8).half(); target = torch.arange(32, device=dev) * 8
def ours():
    s = dropin.colbert_scores(Q, D, None, dm)
    torch.nn.functional.cross_entropy(s.float(), target).backward()
for _ in range(50): ours()
torch.cuda.synchronize()
for n in (1, 200):
    t = time.perf_counter()
    for _ in range(n): ours()
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    print(f"host wall a step, {n} steps queued: {host*1e3:.3f} ms")
t = time.perf_counter()
for _ in range(200): ours(); torch.cuda.synchronize()
print(f"a step with a sync after each: {(time.perf_counter()-t)/200*1e3:.3f} ms")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as p:
    for _ in range(20): ours()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
print(p.key_averages().table(sort_by="self_cuda_time_total", row_limit=8))
PY
  echo "== $(date -u +%T) train_step.py"
  timeout 150 python3 bench/train_step.py --out $OUT/train 2>&1 | tail -30
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call5.log"
