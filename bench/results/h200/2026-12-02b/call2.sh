#!/usr/bin/env bash
# 2026-12-02 (twenty-third), device call 2: issue 27's "done means" peers run, every case of
# `bash bench/peers_gpu.sh` (torch.compile off: it alone would pass the call's 10 minutes) on the
# padded uploads, against the read ceiling now measured over 8 GB.
# usage: OUT=$OUT bash bench/results/h200/2026-12-02b/call2.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
OUT=$OUT timeout 570 bash bench/peers_gpu.sh --compile-cases none --budget-s 420
