#!/usr/bin/env bash
# 2026-12-03 (twenty-seventh), device call 1: issue 27's "done means" peers run on the final code,
# every case of `bash bench/peers_gpu.sh` (torch.compile off: it alone would pass the call's 10
# minutes). The scoring kernels are those of the twenty-third session's run (2ba2872); this is
# the run on the commit that closes the issue.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03/call1.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
OUT=$OUT timeout 570 bash bench/peers_gpu.sh --compile-cases none --budget-s 420
