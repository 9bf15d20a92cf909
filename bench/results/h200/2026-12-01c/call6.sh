#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device call 6: every peers_gpu.sh case in one run on the build that
# lands (one-warp streaming blocks by default, the rows kernel, the tail), then the any-d tests.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01c/call6.sh  (carry .dev and .whl)
cd "$(dirname "$0")/../../../.."
bash bench/peers_gpu.sh --budget-s 380
echo "== $(date -u +%T) any-d tests"
timeout 60 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
