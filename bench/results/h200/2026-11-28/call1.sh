#!/usr/bin/env bash
# 2026-11-28 session, device call 1 (issue 28): build_ab (base = 928b22e's build code, writes the
# codes after the encoding; new = HEAD, streams them) on 1M docs, then fast-plaid beside; gpu_ivf.
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
mkdir -p /tmp/tilemaxsim-cache && tar -xJf .dev/kcache.tar.xz -C /tmp/tilemaxsim-cache
nproc; free -g | head -2; df -h /tmp | tail -1
OUT=$OUT ROUNDS=2 PEER_TIMEOUT=280 bash bench/build_ab.sh
echo "== gpu_ivf $(date -u +%T)"
timeout 90 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked" | tee $OUT/gpu_ivf.log
date -u +%T
