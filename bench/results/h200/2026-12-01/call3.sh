#!/usr/bin/env bash
# 2026-12-01 (nineteenth), device call 3: call 2's change with the unpredicated copy of the
# tile's products compiled only where it can run (the built widths, and the half-chunk any-d
# kernels at d = 4 · DW): at KQ = 8 the two copies spilled 12 bytes and d = 1016 fell from 84%
# of the read ceiling to 78% in call 2. The any-d tests (and memcheck) and the tensor-core tests,
# then .dev against .devold (call 1's build) at d = 1016, 968, 320, 448, 648 (f16 U[32,256]
# B = 10K, two rounds), ncu's SASS page of d = 320, then issue 27's B = 10K and d = 768 rows
# beside the peers (bench/peers_gpu.sh --cases b10k,d768, torch.compile off).
# usage: OUT=$OUT bash bench/results/h200/2026-12-01/call3.sh  (carry .dev .devold .whl)
cd "$(dirname "$0")/../../../.."
cp .devold/kcache/*.xz .dev/kcache/ 2>/dev/null
source bench/exact_split_lib.sh
old() { .devold/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@" | sed 's/^/old: /'; }
{
  device_header
  echo "== $(date -u +%T) tests"
  timeout 100 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -2
  echo "memcheck exit: ${PIPESTATUS[0]}"
  timeout 100 .dev/test-gpu tensor_core random_shapes resident 2>&1 | grep -E "^test |test result|panicked"
  echo "== $(date -u +%T) A/B"
  for round in 1 2; do
    for d in 1016 968 320 448 648; do
      old --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
      bench --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    done
  done
  echo "== $(date -u +%T) ncu d = 320"
  timeout 100 ncu --clock-control none -k regex:maxsim_bulk_any --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o "$OUT/any320" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --docs 100000 --doc-len 32:256 --dim 320 > /dev/null 2>&1
  ncu -i "$OUT/any320.ncu-rep" --page source --csv --print-source sass > "$OUT/any320_sass.csv" 2>&1
  rm -f "$OUT/any320.ncu-rep"
  python3 bench/ncu_sass_stalls.py "$OUT/any320_sass.csv" 2>&1 | head -24
  xz -T4 "$OUT/any320_sass.csv"
  echo "== $(date -u +%T) peers"
} 2>&1 | tee "$OUT/call3.log"
export LIK_SUPPRESS_NORM_WARN=1
OUT=$OUT timeout 250 bash bench/peers_gpu.sh --cases b10k,d768 --compile-cases none --budget-s 180 2>&1 | tail -40 | tee -a "$OUT/call3.log"
echo "== $(date -u +%FT%TZ) done" | tee -a "$OUT/call3.log"
