#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 7: the resident grid sized to the fewest blocks of the same
# rounds (`resident_blocks`: 385 blocks at B = 10K where 396 fit, so no 26th round is left to
# 99 blocks) against the grid of every resident block (.devold, 1984e72), alternating, two
# rounds; the resident-grid GPU tests; then the peers at B = 10K and d = 768 with the new grid.
# Both builds take 1984e72's kernels (the new one was built with their text, so the carried
# kernel cache serves both).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call7.sh  (carry .dev .devold .devcache .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export LIK_SUPPRESS_NORM_WARN=1
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for b in .devold .dev; do $b/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s|^|$b: |"; done
  echo "-- tests ($(date -u +%T))"
  timeout 120 .dev/test-gpu resident_grids every_task_of_a_large tensor_core_path fp32_split f32_queries_on 2>&1 | grep -E "^test |test result|panicked"
  for r in 1 2; do
    for c in "--dtype f16 --docs 10000 --doc-len 128 --dim 768" "--dtype f16 --docs 10000 --doc-len 128" "--dtype f32 --docs 10000 --doc-len 128" "--dtype bf16 --docs 10000 --doc-len 128" "--dtype f16 --docs 10000 --doc-len 128 --dim 512" "--dtype f16 --docs 5000 --doc-len 128"; do
      for b in .devold .dev; do
        echo -n "[$b] "
        # shellcheck disable=SC2086
        $b/tilemaxsim bench --device cuda --reps 30 --json $c 2>&1 | python3 bench/bench_lines.py ceiling $c
      done
    done
  done
  echo "-- peers ($(date -u +%T))"
  OUT=$OUT/peers timeout 150 bash bench/peers_gpu.sh --cases b10k,d768 --compile-cases none 2>&1 | grep -E "^\| (f16 B=10K|f16 d=768).*\*\*" | tail -4
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call7.log"
