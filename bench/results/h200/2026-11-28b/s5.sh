#!/usr/bin/env bash
# 2026-11-28 afternoon session, device call 5 (issue 27): the adopted launch bounds (f32 split
# 3 blocks a SM; the any-d spanning kernels 5 at two chunks, 4 at three): the kernels compiled,
# tests/gpu_any_dim.rs and the f32 tests of tests/gpu.rs, then the f32 and d rows, and f32
# beside LIK (peers_gpu.sh --cases fp32).
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
export OUT
source bench/exact_split_lib.sh
device_header
echo "== tests $(date -u +%T)"
(timeout 200 .dev/test-gpu_any_dim 2>&1 | grep -E -A3 "^test |test result|panicked" > $OUT/gpu_any_dim.log; echo "exit ${PIPESTATUS[0]}" >> $OUT/gpu_any_dim.log) &
(timeout 240 .dev/test-gpu fp32 f32_queries tensor_core_path 2>&1 | grep -E -A3 "^test |test result|panicked" > $OUT/gpu_f32.log; echo "exit ${PIPESTATUS[0]}" >> $OUT/gpu_f32.log) &
wait
cat $OUT/gpu_any_dim.log $OUT/gpu_f32.log
echo "== benches $(date -u +%T)"
{
  for r in 1 2; do bench --dtype f32 --docs 100000 --doc-len 128; done
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  bench --dtype bf16 --query-dtype f32 --docs 100000 --doc-len 128
  for d in 16 48 64 77 96 100 127 128; do bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; done
  for d in 48 77; do bench --dtype bf16 --docs 100000 --doc-len 32:256 --dim $d; done
} 2>&1 | tee $OUT/bounds.log
echo "== peers fp32 $(date -u +%T)"
timeout 150 bash bench/peers_gpu.sh --cases fp32 --compile-cases none 2>&1 | tail -25
tar -cJf $OUT/kcache.tar.xz -C /tmp/tilemaxsim-cache .
date -u +%T
