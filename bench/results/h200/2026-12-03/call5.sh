#!/usr/bin/env bash
# 2026-12-03 (twenty-seventh), device call 5: a second round of bench/train_step.py (call 3 ran
# the first), the "kernel:" and "ours:" lines filtered from the log; the full rows are in
# call5/train_step.json.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03/call5.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
source bench/seed_kernel_cache.sh
echo "== $(date -u +%FT%TZ) train_step.py round 2"
PYTHONPATH=/tmp/site timeout 120 python3 bench/train_step.py --out $OUT/train_2 2>&1 | grep -v "kernel:\|ours:"
