#!/usr/bin/env bash
# Device call 2 (nvidia-h200): the batched codec kernels before (.devold/tilemaxsim: HEAD
# b3e42b7) and after (.dev: the residual decode by nibble table, RunWalk's run ends staged in
# shared memory, the packed consumers' one-pass fold of a half split by one document end):
# the codec GPU tests (bit for bit across run lengths), then old / new alternated at 32 queries,
# B = 100K; exhaustive search at 8.8M documents if the time allows. The kernel cache comes back
# in $OUT/kcache.tar.xz for call 3.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29e/call2.sh   (carry .dev, .devold)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
T0=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - T0) )); }
{
  device_header
  ( .devold/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 > /dev/null 2>&1 ) &
  echo "== $(date -u +%T) codec GPU tests"
  timeout 270 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|assert" | head -40
  wait
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  echo "== $(date -u +%T) old / new, 32 queries, B = 100K ($(left 600) s left)"
  for case in "8:124 residual --nbits 2" "128 residual --nbits 2" "32:256 residual --nbits 2" "8:124 residual --nbits 1" \
              "8:124 residual --nbits 4" "8:124 int8" "8:124 pq --m 16"; do
    set -- $case; len=$1; shift
    for bin in old new; do
      b=.dev/tilemaxsim; [ $bin = old ] && b=.devold/tilemaxsim
      echo -n "$bin "; bench_with $b --docs 100000 --doc-len $len --queries 32 --kernel wgmma --codec "$@"
    done
  done
  if [ "$(left 600)" -gt 175 ]; then
    echo "== $(date -u +%T) msmarco_scale --only-exhaustive (new)"
    timeout $(( $(left 600) - 10 )) python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work /tmp/msmarco --only-exhaustive
  fi
  echo "== $(date -u +%T), $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/call2.log"
