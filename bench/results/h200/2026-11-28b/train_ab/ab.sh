#!/usr/bin/env bash
# The PyLate training step (python_gpu.py --cases training) with the wheel of 07deafa (old)
# and of this session's HEAD (new), alternating on one machine.
set -uo pipefail
export PYTHONUNBUFFERED=1 LIK_SUPPRESS_NORM_WARN=1
for v in old new; do
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_$v .whlab/$v/*.whl .whlab/peers/*.whl || exit 1
  ( TILEMAXSIM_CACHE_DIR=/tmp/cache_$v PYTHONPATH=/tmp/site_$v python3 -c "
import torch, tilemaxsim
q = torch.randn(32, 128, device='cuda', dtype=torch.half); d = torch.randn(10, 128, 128, device='cuda', dtype=torch.half)
tilemaxsim.maxsim(q, d); torch.cuda.synchronize(); print('$v compiled')" ) &
done
wait
for r in 1 2; do for v in old new; do
  echo "== $v"; TILEMAXSIM_CACHE_DIR=/tmp/cache_$v PYTHONPATH=/tmp/site_$v timeout 60 python3 bench/python_gpu.py --cases training --out /tmp/o_$v 2>&1 | grep -E "PyLate step"
done; done
