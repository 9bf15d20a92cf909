#!/usr/bin/env bash
# 2026-11-30 (eleventh), device call 1: f32 corpora with one tensor-core product a tile and
# exact dots for the candidates (kernels/bulk_f32.cu) against the three products of main at
# 09929b5 (.devold), in one run: the f32 GPU tests (and memcheck), then bench rates of both
# builds interleaved with the SM clock and power sampled, the fallback threshold as a variant,
# then the f32 row of the peers (LIK, flash-maxsim) in the same run.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30/call1.sh  (carry .dev .devold .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
# `powered LABEL CMD...`: CMD's output, then the SM clock and power while it ran (50 ms samples).
powered() {
  local label=$1; shift
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 50 > /tmp/smi.csv 2>&1 & local smi=$!
  "$@"; kill $smi; sleep 0.2
  python3 - /tmp/smi.csv "$label" <<'PY'
import sys
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 1]
busy = [r for r in rows if float(r[1].split()[0]) > 250]
if not busy: print(f"  {sys.argv[2]}: no busy samples"); sys.exit()
clk = sorted(int(r[0].split()[0]) for r in busy); pw = sorted(float(r[1].split()[0]) for r in busy)
print(f"  {sys.argv[2]}: {len(busy)} busy samples, SM clock median {clk[len(clk)//2]} MHz, power median {pw[len(pw)//2]:.0f} W (max {pw[-1]:.0f})")
PY
}
old() { .devold/tilemaxsim bench --device cuda --reps "${REPS:-30}" --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@" | sed 's/^/old: /'; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader)"
  echo "== compile: new (default, F32_FALLBACK=512), old"
  time ( compile_variants default F32_FALLBACK=512 & old --dtype f16 --docs 1000 >/dev/null & wait )
  echo "== f32 GPU tests (new)"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  ( TILEMAXSIM_SANITIZER=1 TILEMAXSIM_GPU_CASES=4 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3; echo "f32 memcheck exit: ${PIPESTATUS[0]}" ) > /tmp/memcheck.log &
  mc=$!
  wait $mc; cat /tmp/memcheck.log
  echo "== A/B: f32 B = 100K Nd = 128 (d = 128), long runs with power"
  for rep in 1 2; do
    REPS=1000 powered "old f32 B=100K" old --dtype f32 --docs 100000 --doc-len 128
    powered "new f32 B=100K" .dev/tilemaxsim bench --device cuda --reps 1000 --json --dtype f32 --docs 100000 --doc-len 128 2>&1 | python3 bench/bench_lines.py ceiling --dtype f32 --docs 100000 --doc-len 128
    powered "new F32_FALLBACK=512" with F32_FALLBACK=512 .dev/tilemaxsim bench --device cuda --reps 1000 --json --dtype f32 --docs 100000 --doc-len 128 2>&1 | python3 bench/bench_lines.py ceiling --dtype f32 --docs 100000 --doc-len 128
  done
  echo "== A/B: other shapes"
  for args in "--docs 10000 --doc-len 128" "--docs 100000 --doc-len 32:256" "--docs 500000 --doc-len 128" "--docs 100000 --doc-len 128 --dim 64" "--docs 100000 --doc-len 128 --dim 32" "--docs 100000 --doc-len 128 --dim 96" "--docs 100000 --doc-len 128 --queries 8"; do
    old --dtype f32 $args; bench --dtype f32 $args
  done
  echo "== unchanged kernels, changed source: f32 queries on f16, f16"
  bench --dtype f16 --query-dtype f32 --docs 100000 --doc-len 128
  bench --dtype f16 --docs 100000 --doc-len 128
  echo "== $(date -u +%FT%TZ) peers: f32 B = 100K"
} 2>&1 | tee "$OUT/call1.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases fp32 --budget-s 150 2>&1 | tail -30 | tee -a "$OUT/call1.log"
