#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 4: gpu_check PART=2 alone (codec and compression tests,
# their memcheck and racecheck runs) on d34e60c's build (.dev, kernels compiled here).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
PART=2 OUT=$OUT timeout 575 bash bench/gpu_check.sh
echo "gpu_check exit: $?"
for f in "$OUT"/gpu_check_parts/*; do echo "== $f"; cat "$f"; done
