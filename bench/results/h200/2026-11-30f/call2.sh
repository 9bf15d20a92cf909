#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 2: the Python package's pytest suite on CUDA tensors
# (bench/python_gpu.sh --no-bench: PyLate's own tests from its sdist, the colbert-ai drop-in tests
# against the original, the CUDA-only stream and graph tests), wheel of d34e60c.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call2.sh  (carry .dev/kcache .whl)
cd "$(dirname "$0")/../../../.."
OUT=$OUT bash bench/python_gpu.sh --no-bench
