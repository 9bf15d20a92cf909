#!/usr/bin/env bash
# 2026-11-30 (fourteenth), device call 3: `PART=1 bash bench/gpu_check.sh` (tests/gpu.rs,
# gpu_f32.rs, gpu_search.rs, gpu_any_dim.rs and their memcheck and racecheck runs) on the landed
# code: `maxsim_stream` by default at d = 8-56 of 16-byte rows, and add_planes' grid-stride launch
# (the thirteenth session's tidy-up, not yet run on a GPU).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30d/call3.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
PART=1 OUT=$OUT bash bench/gpu_check.sh
