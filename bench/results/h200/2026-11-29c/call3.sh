#!/usr/bin/env bash
# Device call 3 of 2026-11-29 (third session; nvidia-h200, .dev built at the tree of this
# session's last kernel change: tests only in a row's last chunk, four blocks an SM at three
# chunks, odd d by words at four chunks, 36-tile runs at 33 <= d < 128): the d list at the
# defaults; runs at d = 80 and 96 against the old rule's (TILEMAXSIM_BULK=2,8 / 2,16); the peers
# at d = 77, 100, 127; tests/gpu_any_dim.rs and tests/gpu.rs, racecheck and memcheck on
# gpu_any_dim. usage: OUT=$OUT bash bench/results/h200/2026-11-29c/call3.sh
source bench/exact_split_lib.sh
u() { bench --dtype f16 --docs "${B:-100000}" --doc-len 32:256 --dim "$1"; }
{
  device_header
  echo "== the d list $(date -u +%T)"
  for d in 16 32 48 64 77 80 96 100 127 128; do u $d; done
  for d in 136 200 256 320 384 512 768 1024; do B=10000 u $d; done
  echo "== runs under the old rule $(date -u +%T)"
  echo -n "BULK=2,8 "; TILEMAXSIM_BULK=2,8 u 80
  echo -n "auto "; u 80
  echo -n "BULK=2,16 "; TILEMAXSIM_BULK=2,16 u 96
  echo -n "auto "; u 96
  echo "== tests $(date -u +%T)"
  timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result"
  timeout 200 .dev/test-gpu 2>&1 | grep -E "test result|FAILED|panicked"
  echo "== racecheck, memcheck: gpu_any_dim $(date -u +%T)"
  timeout 90 compute-sanitizer --tool racecheck .dev/test-gpu_any_dim spanning 2>&1 | grep -E "RACECHECK SUMMARY|test result"
  timeout 90 compute-sanitizer --tool memcheck .dev/test-gpu_any_dim spanning 2>&1 | grep -E "ERROR SUMMARY|test result"
  echo "== peers $(date -u +%T)"
  timeout 150 bash bench/peers_gpu.sh --cases d77,d100,d127 --compile-cases none 2>&1 | grep -vE "^\s*$" | tail -45
  date -u +%T
} 2>&1 | tee "$OUT/call3.log"
