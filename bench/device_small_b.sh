#!/usr/bin/env bash
# maxsim_bulk's shape at small B and on packed documents, the launch floor, and maxsim_ring as a
# grid of blocks (TILEMAXSIM_RING_GRID) against its persistent grid. Device, .dev carried.
# TILEMAXSIM_RING_GRID was a host-only experiment, removed after this run (bench/results/
# small_b.log: 1% faster at d = 768 B = 100K, 1% slower at B = 10K, 3% slower on f32); the
# ring rows now time the persistent grid twice.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
row() {
  echo -n "${TILEMAXSIM_BULK:+bulk=$TILEMAXSIM_BULK }${TILEMAXSIM_RING_GRID:+ring-grid }$*: "
  timeout "${ROW_TIMEOUT:-60}" $B bench --device cuda "$@" 2>&1 | sed -n 3p
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== launch floor: 1, 132 and 396 documents"
  for n in 1 132 396; do row --dtype f16 --docs $n --reps 300; done
  echo "== B = 1K"
  for s in "" 2,2 2,3 2,4 1,2 1,3 3,3 2,8; do TILEMAXSIM_BULK=$s row --dtype f16 --docs 1000 --reps 300; done
  echo "== B = 10K"
  for s in "" 2,3 2,4 3,4 2,6 3,3; do TILEMAXSIM_BULK=$s row --dtype f16 --docs 10000 --reps 100; done
  echo "== U[32,256] B = 100K"
  for s in "" 2,2 2,3 3,3 3,2 2,4; do TILEMAXSIM_BULK=$s row --dtype f16 --doc-len 32:256 --docs 100000 --reps 30; done
  echo "== B = 100K / 500K, bf16"
  row --dtype f16 --docs 100000 --reps 30; row --dtype f16 --docs 500000 --reps 20; row --dtype bf16 --docs 100000 --reps 30
  echo "== ring: persistent, then a block per task, alternating"
  for a in "--dtype f16 --dim 768 --docs 10000 --reps 30" "--dtype f16 --dim 768 --docs 100000 --reps 10" "--dtype f32 --docs 100000 --reps 30"; do
    for i in 1 2; do row $a; TILEMAXSIM_RING_GRID=1 row $a; done
  done
  echo "== racecheck, tensor-core test (bulk in three shapes)"
  TILEMAXSIM_GPU_CASES=3 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu tensor_core 2>&1 | tail -3
  echo "racecheck exit: ${PIPESTATUS[0]}"
} 2>&1 | tee "$OUT/small_b.log"
