#!/usr/bin/env bash
# 2026-11-30 (fifteenth), device call 3: issue 27's "done means", `bash bench/peers_gpu.sh`, every
# case (torch.compile in none, to fit one call), on this session's kernels (.dev, the kernels
# compiled here in .dev/kcache; .whl: flash-maxsim 0.3.0 and late-interaction-kernels 0.4.5).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30e/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
export LIK_SUPPRESS_NORM_WARN=1
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=$OUT timeout 555 bash bench/peers_gpu.sh --compile-cases none
echo "== $(date -u +%FT%TZ) done"
