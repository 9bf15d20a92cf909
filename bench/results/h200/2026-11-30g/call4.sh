#!/usr/bin/env bash
# 2026-11-30 (eighteenth), device call 4: gpu_check PART=1 (the exact path's tests, memcheck and
# racecheck, the NVRTC compile of every kernel for sm_80 and sm_90) on 14ebe9f's kernels.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30g/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
PART=1 bash bench/gpu_check.sh > /dev/null 2>&1
cp "$OUT/gpu_check.log" "$OUT/gpu_check_part1.log"
