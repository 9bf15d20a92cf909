#!/usr/bin/env bash
# 2026-11-30 (fourteenth), device call 2: call 1's comparison again after `maxsim_stream` took d
# at compile time (an instantiation per d: each tile's load one predicated LDG at a constant
# offset, where call 1's SASS spent about 18 instructions on its 64-bit address and branches).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30d/call2.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== tests $(date -u +%T)"
  timeout 150 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\[|empty document"
  TILEMAXSIM_GPU_CASES=26 timeout 150 .dev/test-gpu tensor_core nan_in 2>&1 | grep -E "^test |test result|panicked|score\[|empty document"
  echo "== bench $(date -u +%T)"
  for round in 1 2; do
    for d in 16 24 32 40 48 56 64; do
      for s in 1 0; do
        echo -n "[stream=$s] round $round: "
        TILEMAXSIM_STREAM=$s bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
      done
    done
  done
  for args in "--dtype f16 --docs 10000 --doc-len 32:256 --dim 16" "--dtype f16 --docs 10000 --doc-len 32:256 --dim 48" \
              "--dtype bf16 --docs 100000 --doc-len 32:256 --dim 48" "--dtype f16 --docs 500000 --doc-len 32:256 --dim 16" \
              "--dtype f16 --docs 100000 --doc-len 8:124 --dim 64"; do
    for s in 1 0; do
      echo -n "[stream=$s]: "
      # shellcheck disable=SC2086
      TILEMAXSIM_STREAM=$s bench $args
    done
  done
  echo "== ncu $(date -u +%T)"
  for d in 16 32 64; do
    for s in 1 0; do
      TILEMAXSIM_STREAM=$s timeout 60 ncu --clock-control none -k regex:"maxsim_(stream|span)" --launch-skip 2 --launch-count 1 \
        --metrics "gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size" \
        .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim $d 2>&1 \
        | grep -E "maxsim_|duration|throughput|inst_exec|issue_active|warps_active|registers|grid_size" | sed "s/^/[d=$d stream=$s] /"
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call2.log"
