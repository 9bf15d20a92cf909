#!/usr/bin/env bash
# 2026-11-28 night session, device call A (nvidia-h200-x4, 512 GB RAM), issues 28 and 27.
# Issue 28: MS MARCO scale from the same f16 tokens on both sides (bench/msmarco_peers.py
# prepare: the corpus, our index build on GPU 0 beside the exact top-10 on GPUs 1-3, then
# fast-plaid's create and search started in the background, alone on GPU 0).
# Issue 27, while fast-plaid runs: bench/tail_tune.sh on GPU 3 (documents a block at B = 1K,
# 10K, d = 768, 256, 512, then the peers' rows), bounded by the call's time; then `finish`
# waits for fast-plaid for the rest of the call (exit 3 while it runs: x4b.sh goes on).
set -uo pipefail
T0=$(date +%s)
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 LIK_SUPPRESS_NORM_WARN=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
WHL=.whlc source bench/peer_wheels.sh || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; free -g | head -2; df -h /tmp /dev/shm | tail -2
(cd bench && timeout 420 python3 msmarco_peers.py prepare --bin ../.dev/tilemaxsim --work /tmp/mm 2>&1 | tee $OUT/prepare.log)
LEFT=$((540 - $(date +%s) + T0))
echo "== $(date -u +%T) tail_tune on GPU 3 for up to $LEFT s"
mkdir -p $OUT/tail
[ $LEFT -gt 60 ] && CUDA_VISIBLE_DEVICES=3 ROUNDS=1 OUT=$OUT/tail timeout $LEFT bash bench/tail_tune.sh > /dev/null 2>&1
WAIT=$((560 - $(date +%s) + T0))
echo "== $(date -u +%T) finish, waiting up to $WAIT s"
(cd bench && timeout $((WAIT + 10)) python3 msmarco_peers.py finish --bin ../.dev/tilemaxsim --work /tmp/mm --wait $((WAIT > 0 ? WAIT : 1)) 2>&1 | tee $OUT/finish.log)
rc=${PIPESTATUS[0]}
(cd /tmp/mm && tar -czf $OUT/logs.tgz *.log *.json 2>/dev/null); free -g | head -2; date -u +%T; exit $rc
