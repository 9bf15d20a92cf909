#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/codec_bulk.sh [--sweep]   (on the GPU machine, .dev carried)
# The bulk-copy codec kernels (kernels/codec_bulk.cu: residual, int8, fp8), one device call:
# the codec GPU tests (every kernel forced, and the default choice), memcheck and racecheck of
# the forced-kernel test, side by side; then, B = 100K x 128 tokens, d = 128: the f16 exact bulk
# kernel (the ">= 1.8x our f16" ratio), and per codec the one-warp (mma), bulk-copy (bulk) and
# batched (wgmma) kernels forced at 1 to 4 queries (QS, KS, CODECS narrow them), the one-warp
# and bulk-copy kernels at d = 64 (CODECS64), then with --sweep the ring depth swept
# (TILEMAXSIM_BULK=stages,group). Log in $OUT/codec_bulk.log (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
bin=.dev/tilemaxsim
rate() {  # label, bench flags...: M docs (pairs)/s of one run
  local label=$1; shift
  r=$(timeout 90 $bin bench --device cuda --docs 100000 --reps 30 --json "$@" 2>&1)
  echo "$r" | python3 -c 'import sys, json
try:
    r = json.load(sys.stdin)["results"][0]
    d, n = r["docs_per_s"] / 1e6, r["name"]
    print(f"  {sys.argv[1]:<34} {d:8.1f} M pairs/s  {n}")
except Exception as e:
    print("  failed:", sys.argv[1], e)' "$label" || echo "$r" | tail -3
}
codec_flags() {  # residualN -> --codec residual --nbits N
  case $1 in residual*) echo "--codec residual --nbits ${1#residual}" ;; *) echo "--codec $1" ;; esac
}
tmp=$(mktemp -d)
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(git rev-parse --short HEAD 2>/dev/null)"
  $bin bench --device cuda --docs 1000 --reps 3 --codec fp8 2>&1 | head -1  # compile once
  ( timeout 300 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|score\[|tolerance" | head -30
    echo "codec tests exit: ${PIPESTATUS[0]}" ) >"$tmp/tests" &
  ( export TILEMAXSIM_SANITIZER=1
    TILEMAXSIM_GPU_CASES=2 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs --test-threads 1 batched every_codec 2>&1 | tail -3
    echo "memcheck exit: ${PIPESTATUS[0]}" ) >"$tmp/memcheck" &
  ( export TILEMAXSIM_SANITIZER=1
    TILEMAXSIM_GPU_CASES=1 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_codecs --test-threads 1 batched 2>&1 | tail -3
    echo "racecheck exit: ${PIPESTATUS[0]}" ) >"$tmp/racecheck" &
  wait
  echo "== codec GPU tests"; cat "$tmp/tests"
  echo "== memcheck"; cat "$tmp/memcheck"
  echo "== racecheck"; cat "$tmp/racecheck"
  echo "== $(date -u +%FT%TZ) f16 exact, one query"
  rate "f16 bulk" --dtype f16
  for c in ${CODECS:-residual2 residual4 residual1 fp8 int8}; do
    echo "== $c: kernels forced"
    for q in ${QS:-1 2 3 4}; do
      for k in ${KS:-mma bulk wgmma}; do
        # shellcheck disable=SC2046
        rate "$c Q=$q $k" $(codec_flags "$c") --queries "$q" --kernel "$k"
      done
    done
    # shellcheck disable=SC2046
    rate "$c Q=1 default" $(codec_flags "$c")
  done
  echo "== d = 64, one query"
  for c in ${CODECS64:-residual2 residual4 fp8 int8}; do
    for k in mma bulk; do
      # shellcheck disable=SC2046
      rate "$c d=64 Q=1 $k" $(codec_flags "$c") --dim 64 --kernel "$k"
    done
  done
  if [ "${1:-}" = --sweep ]; then
    echo "== one query: stages, group (TILEMAXSIM_BULK)"
    for c in residual2 fp8; do
      for sg in 2,8 3,8 4,8 6,8 4,16; do
        # shellcheck disable=SC2046
        TILEMAXSIM_BULK=$sg rate "$c bulk $sg" $(codec_flags "$c") --kernel bulk
      done
    done
  fi
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/codec_bulk.log"
