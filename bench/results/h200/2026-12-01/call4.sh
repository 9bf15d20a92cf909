#!/usr/bin/env bash
# 2026-12-01 (nineteenth), device call 4: the wide bulk kernels with the products of 2 or 4
# 8-token tiles made before their partials are stored (BULK_WIDE_GROUP=2, 4; the default, 1,
# stores each tile's partials after its own products, and the stores order the next tile's
# loads after them: call 3's ncu of d = 320 put 13% of the stall samples on the NOPs of two
# dependent HMMA chains). The any-d and tensor-core tests under each, then f16 U[32,256]
# B = 10K at d = 264, 320, 448, 512, 1016 and Nd = 128 B = 10K at d = 768, two rounds.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
V="default BULK_WIDE_GROUP=2 BULK_WIDE_GROUP=4"
{
  device_header
  for v in $V; do
    echo "== $(date -u +%T) [$v] tests"
    with "$v" timeout 60 .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked|score\["
    with "$v" timeout 60 .dev/test-gpu tensor_core random_shapes 2>&1 | grep -E "test result|panicked"
  done
  echo "== $(date -u +%T) A/B"
  for round in 1 2; do
    for args in "--doc-len 32:256 --dim 320" "--doc-len 32:256 --dim 264" "--doc-len 32:256 --dim 448" "--doc-len 32:256 --dim 512" "--doc-len 32:256 --dim 1016" "--doc-len 128 --dim 768"; do
      for v in $V; do
        echo -n "round $round [$v] "
        # shellcheck disable=SC2086
        with "$v" bench --dtype f16 --docs 10000 $args
      done
    done
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
