#!/usr/bin/env bash
# 2026-12-02 (twenty-fourth), device call 2: the training forward with the block's documents
# read once through a ring in shared memory (TRAIN_SMEM=1, kernels/train.cu) against each warp
# loading them from L2 itself (TRAIN_SMEM=0, the kernel before): the autograd tests on CUDA
# (float64 twins, poisoned outputs; the new packed_all mode is every query against packed
# documents), memcheck and racecheck on the bf16 in-batch tests, then bench/train_step.py and
# python_gpu.py's 32 × 256 step under both, twice. Wheel and kernels of this tree.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02c/call2.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
source bench/seed_kernel_cache.sh
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
mkdir -p "$OUT"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== $(date -u +%T) autograd tests on CUDA"
  (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 240 python3 -m pytest -q -x -rfs --tb=short \
    -W ignore::DeprecationWarning -p no:cacheprovider tests/test_autograd.py 2>&1 | tail -8)
  echo "== $(date -u +%T) sanitizers: the in-batch training tests, bf16"
  for tool in memcheck racecheck; do
    (cd crates/tilemaxsim-python && TILEMAXSIM_TEST_DEVICE=cuda timeout 150 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider tests/test_autograd.py \
      -k "training and bfloat16 and (all or holes)" 2>&1 | tail -3; echo "$tool exit ${PIPESTATUS[0]}")
  done
  for round in 1 2; do
    for v in default TRAIN_SMEM=0; do
      echo "== $(date -u +%T) round $round [$v] train_step.py"
      if [ $v = default ]; then env=(); else env=(TILEMAXSIM_KERNEL_DEFINES=$v); fi
      env "${env[@]}" timeout 90 python3 bench/train_step.py --out "$OUT/train_${v}_$round" 2>&1 | grep -E "fwd|kernel|ours" 
      env "${env[@]}" timeout 60 python3 bench/python_gpu.py --cases training --out "$OUT/pg_${v}_$round" 2>&1 | grep "PyLate step"
    done
  done
  echo "== $(date -u +%T) where the distillation step's time goes (bf16, Q [64, 32, 128], D [64, 32, 180, 128])"
  timeout 90 python3 - <<'PY'
import torch
from tilemaxsim.integrations import pylate as dropin
torch.manual_seed(0)
A, K, Lq, Ld, d = 64, 32, 32, 180, 128
Q = torch.nn.functional.normalize(torch.randn(A, Lq, d, device="cuda"), dim=-1).bfloat16().requires_grad_()
D = torch.nn.functional.normalize(torch.randn(A, K, Ld, d, device="cuda"), dim=-1).bfloat16().requires_grad_()
teacher = torch.log_softmax(torch.randn(A, K, device="cuda"), dim=-1)
def step():
    Q.grad = D.grad = None
    s = dropin.colbert_kd_scores(Q, D)
    torch.nn.functional.kl_div(torch.log_softmax(s.float(), dim=-1), teacher, log_target=True, reduction="batchmean").backward()
for _ in range(10): step()
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as p:
    for _ in range(10): step()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by="self_cuda_time_total", row_limit=12))
PY
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
