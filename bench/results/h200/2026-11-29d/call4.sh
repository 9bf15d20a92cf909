#!/usr/bin/env bash
# Device call 4 of 2026-11-29 (fourth session; nvidia-h200, .whl carried): the engine's new
# rule (a resident grid of strided one-document runs from eight tasks a block,
# plan.rs bulk_resident_grid) against the old grid of runs (TILEMAXSIM_BULK_GRID=runs), in
# the same process order; the GPU tests that run the strided walk; the peers at B = 10K and
# d = 768. usage: OUT=$OUT bash bench/results/h200/2026-11-29d/call4.sh
source bench/exact_split_lib.sh
T0=$(date +%s)
left() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }
ab() { echo -n "new  "; bench "$@"; echo -n "runs "; TILEMAXSIM_BULK_GRID=runs bench "$@"; }
{
  device_header
  echo "compiled: $(( $(date +%s) - T0 )) s"
  timeout 200 .dev/test-gpu tensor_core_path every_task_of_a_large_uneven fp32_split_on_tensor f32_queries_on_16 2>&1 | grep -E "^test |test result|panicked"
  .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked"
  echo "tests: $(( $(date +%s) - T0 )) s"
  for r in 1 2; do
    ab --dtype f16 --docs 10000 --doc-len 128
    ab --dtype f16 --docs 100000 --doc-len 128
  done
  ab --dtype f16 --docs 10000 --doc-len 128 --dim 768
  ab --dtype f16 --docs 100000 --doc-len 128 --dim 768
  ab --dtype f32 --docs 100000 --doc-len 128
  ab --dtype f32 --docs 10000 --doc-len 128
  ab --dtype bf16 --docs 100000 --doc-len 128
  ab --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  ab --dtype f16 --docs 10000 --doc-len 32:256 --dim 256
  ab --dtype f16 --docs 10000 --doc-len 32:256 --dim 512
  echo -n "B=1K "; bench --dtype f16 --docs 1000 --doc-len 128
  echo "benches: $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/call4.log"
left 420 && timeout $(( 580 - ($(date +%s) - T0) )) bash bench/peers_gpu.sh --cases b10k,d768 --compile-cases none > "$OUT/peers.log" 2>&1
echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s" | tee -a "$OUT/call4.log"
