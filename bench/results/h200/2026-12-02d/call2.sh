#!/usr/bin/env bash
# 2026-12-02 (twenty-fifth), device call 2: gpu_check PART=1 on the final kernels (last clean on
# 14ebe9f's, eighteenth session; the bulk, rows, stream and padded-pitch kernels changed since):
# the NVRTC compile check, tests/gpu.rs, gpu_f32, gpu_search, gpu_any_dim, and their memcheck
# and racecheck runs side by side.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02d/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
PART=1 timeout 590 bash bench/gpu_check.sh
