#!/usr/bin/env bash
# 2026-12-03 (twenty-seventh), device call 2: issue 27's "done means" Python run on the final
# wheel, test half: the package's pytest suite on CUDA tensors (PyLate's own tests from its
# sdist with the drop-in, the colbert-ai drop-in against the original, float32 training on the
# training kernels).
# usage: OUT=$OUT bash bench/results/h200/2026-12-03/call2.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
OUT=$OUT bash bench/python_gpu.sh --no-bench
