#!/usr/bin/env bash
# 2026-11-28 evening session, device call A (nvidia-h200-x4, 512 GB RAM; issue 28): MS MARCO
# scale from the same f16 tokens on both sides (bench/msmarco_peers.py): prepare (the corpus,
# 8.8M documents, 149 GB, written; our index build on GPU 0 beside the exact top-10 on GPUs
# 1-3; fast-plaid's create and search started in the background, alone), then finish for the
# rest of the call (exit 3 while fast-plaid runs: x4b.sh goes on).
set -uo pipefail
T0=$(date +%s)
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
WHL=.whlc source bench/peer_wheels.sh || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; free -g | head -2; df -h /tmp | tail -1
cd bench && timeout 500 python3 msmarco_peers.py prepare --bin ../.dev/tilemaxsim --work /tmp/mm 2>&1 | tee $OUT/prepare.log
WAIT=$((560 - $(date +%s) + T0))
echo "== $(date -u +%T) finish, waiting up to $WAIT s"
timeout $((WAIT + 10)) python3 msmarco_peers.py finish --bin ../.dev/tilemaxsim --work /tmp/mm --wait $((WAIT > 0 ? WAIT : 1)) 2>&1 | tee $OUT/finish.log
rc=${PIPESTATUS[0]}
(cd /tmp/mm && tar -czf $OUT/logs.tgz *.log *.json 2>/dev/null); free -g | head -2; df -h /tmp | tail -1; date -u +%T; exit $rc
