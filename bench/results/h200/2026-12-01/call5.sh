#!/usr/bin/env bash
# 2026-12-01 (nineteenth), device call 5: each wide kernel's own number of 8-token tiles
# multiplied at once, from call 4 (every tile of a 32-token tile where the loads go untested, but
# two in maxsim_bulk_any at KQ = 4, and two where the loads are tested; both 16-token tiles past
# KQ = 4), against one at a time (BULK_WIDE_GROUP=1, call 3's kernels) at every wide d of
# issue 27's list and the any-d kernels' shapes (d = 480: the whole-chunk KQ = 4 kernel, 12 bytes
# spilled at two), and against two (BULK_WIDE_GROUP=2) at d = 256 and 384, f16 U[32,256]
# B = 10K (d = 768 also Nd = 128), one round; the any-d and tensor-core tests first.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01/call5.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 60 .dev/test-gpu_any_dim 2>&1 | grep -E "test result|panicked|score\["
  timeout 60 .dev/test-gpu tensor_core random_shapes 2>&1 | grep -E "test result|panicked"
  echo "== $(date -u +%T) A/B"
  for args in "--doc-len 32:256 --dim 320" "--doc-len 32:256 --dim 448" "--doc-len 32:256 --dim 256" "--doc-len 32:256 --dim 384" "--doc-len 32:256 --dim 512" \
              "--doc-len 128 --dim 768" "--doc-len 32:256 --dim 1024" "--doc-len 32:256 --dim 264" "--doc-len 32:256 --dim 392" "--doc-len 32:256 --dim 480" \
              "--doc-len 32:256 --dim 648" "--doc-len 32:256 --dim 1016" "--doc-len 32:256 --dim 768"; do
    for v in default BULK_WIDE_GROUP=1; do
      echo -n "[$v] "
      # shellcheck disable=SC2086
      with "$v" bench --dtype f16 --docs 10000 $args
    done
  done
  for d in 256 384; do
    echo -n "[BULK_WIDE_GROUP=2] "; with BULK_WIDE_GROUP=2 bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call5.log"
