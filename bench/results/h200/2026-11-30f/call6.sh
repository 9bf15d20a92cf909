#!/usr/bin/env bash
# 2026-11-30 (seventeenth), device call 6: three register stages at d = 16 made the default
# (stream_stages), checked on the build that carries it: the any-d tests plain and under
# memcheck and racecheck; then d = 16 against the two stages
# before (STREAM_STAGES=2), f16 U[32,256] at B = 100K (three rounds), 10K and 500K.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30f/call6.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
{
  device_header
  echo "== tests $(date -u +%T)"
  timeout 100 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked"
  echo "== bench $(date -u +%T)"
  for round in 1 2 3; do
    for v in default STREAM_STAGES=2; do
      echo -n "[$v] round $round B=100K d=16: "; with "$v" bench --dtype f16 --docs 100000 --doc-len 32:256 --dim 16
    done
  done
  for args in "--docs 10000" "--docs 500000"; do
    for v in default STREAM_STAGES=2; do
      echo -n "[$v] $args d=16: "
      # shellcheck disable=SC2086
      with "$v" bench --dtype f16 --doc-len 32:256 --dim 16 $args
    done
  done
  echo "== sanitizers $(date -u +%T)"
  TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
  echo "memcheck exit: ${PIPESTATUS[0]}"
  TILEMAXSIM_SANITIZER=1 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
  echo "racecheck exit: ${PIPESTATUS[0]}"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call6.log"
