#!/usr/bin/env bash
# 2026-11-28 session, device call 2 (issue 27): the d list at the defaults, then
# bench/peers_gpu.sh (every case; torch.compile at b10k only).
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
mkdir -p /tmp/tilemaxsim-cache && tar -xJf .dev/kcache.tar.xz -C /tmp/tilemaxsim-cache
TESTS=0 RUNS="" SMALL="16 48 77 96 100 127 128" WIDE="200 256 320 384 512 768 1024" OUT=$OUT timeout 170 bash bench/any_d_tune.sh
echo "== peers $(date -u +%T)"
OUT=$OUT timeout 400 bash bench/peers_gpu.sh --compile-cases b10k
date -u +%T
