#!/usr/bin/env bash
# 2026-12-03 (twenty-seventh), device call 3: issue 27's "done means" Python run on the final
# wheel, bench half (`bash bench/python_gpu.sh --no-tests`: issue 27's Python rows and the host
# time of one call), then PyLate's training step (bench/train_step.py: in-batch bf16/f16/f32,
# distillation) beside LIK and PyLate's torch path.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export LIK_SUPPRESS_NORM_WARN=1 PYTHONUNBUFFERED=1
OUT=$OUT timeout 420 bash bench/python_gpu.sh --no-tests > /dev/null 2>&1
cat "$OUT/python_gpu.log"
echo "== $(date -u +%T) train_step.py"
TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONPATH=/tmp/site timeout 120 python3 bench/train_step.py --out "$OUT/train" 2>&1
echo "== $(date -u +%FT%TZ) done"
