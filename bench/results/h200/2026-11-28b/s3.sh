#!/usr/bin/env bash
# 2026-11-28 afternoon session, device call 3 (issue 28): 200K documents beside fast-plaid 1.7.0
# (bench/index_gpu.sh: tests/gpu_ivf.rs, then bench/index_peers.py: build, IVF and exhaustive at
# batches of 1 and 32, the exact stage).
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
mkdir -p /tmp/tilemaxsim-cache && tar -xJf .dev/kcache.tar.xz -C /tmp/tilemaxsim-cache
OUT=$OUT PEERS_TIMEOUT=480 bash bench/index_gpu.sh
