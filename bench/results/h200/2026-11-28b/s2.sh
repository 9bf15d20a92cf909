#!/usr/bin/env bash
# 2026-11-28 afternoon session, device call 2 (issue 28): the MS MARCO-shaped index (8.8M
# documents, nbits 2) built and searched on one H200 (bench/msmarco_scale.py).
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .dev/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; df -h /tmp | tail -1; free -g | head -2
echo "== $(date -u +%T) msmarco_scale.py"
timeout 570 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco 2>&1 | tee $OUT/msmarco_scale.md
cp /tmp/msmarco/*.log $OUT/ 2>/dev/null; date -u +%T
