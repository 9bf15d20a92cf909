#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 3: issue 27's "done means", part 1: `bash bench/peers_gpu.sh`,
# every case (torch.compile in none, to fit one call), on main at 1984e72 (.dev, and call 2's
# kernel cache in .devcache).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call3.sh  (carry .dev .devcache .whl)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache LIK_SUPPRESS_NORM_WARN=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=$OUT timeout 560 bash bench/peers_gpu.sh --compile-cases none
echo "== $(date -u +%FT%TZ) done"
