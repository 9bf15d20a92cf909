#!/usr/bin/env bash
# usage: [PART=1|2] bash bench/gpu_check.sh   (on the GPU machine, .dev carried)
# PART=1: tests/gpu.rs, tests/gpu_f32.rs, tests/gpu_search.rs and tests/gpu_any_dim.rs and their sanitizer runs only; PART=2: tests/gpu_codecs.rs and
# tests/gpu_compress.rs and theirs (each part fits one 600 s device call; both: over it).
# GPU correctness, one device call: the NVRTC compile check, the GPU tests (exact and compressed
# corpora, compression: tests/gpu.rs, tests/gpu_codecs.rs, tests/gpu_compress.rs) against the float64
# reference, and compute-sanitizer memcheck and racecheck, the three side by side (they only
# check results, so sharing the GPU changes nothing but the wall time: 237 + 105 + 124 s one
# after the other on the H100 at 05:19, which left the old single script no time for its bench).
# Build first with bench/device_build.sh, then run this on the device with `.dev` carried. Log in
# $OUT/gpu_check.log (or ./gpu-out). Timings: bench/gpu_bench.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 TILEMAXSIM_REQUIRE_NVRTC=1
source bench/seed_kernel_cache.sh
log="$OUT/gpu_check.log"
# Each part's output goes to its own file under $OUT as it runs, so a call that runs past its
# time limit still returns what finished (2026-11-30: PART=1 after a fresh compile took the
# whole 600 s, and its results, then in a temporary folder, were lost).
tmp="$OUT/gpu_check_parts"; mkdir -p "$tmp"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== info"; .dev/tilemaxsim info
  # Compile once (and fill the cache) before the three runs start.
  echo "== first start compiles the kernels, the second uses the cache"
  .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
  part=${PART:-all}
  one() { [ "$part" = all ] || [ "$part" = "$1" ]; }
  ( if one 1; then
      start=$SECONDS
      timeout 520 .dev/test-gpu 2>&1 | grep -E "^test |test result|panicked|case"; echo "tests exit: ${PIPESTATUS[0]} ($((SECONDS - start)) s)"
      timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
      timeout 300 .dev/test-gpu_search 2>&1 | grep -E "^test |test result|panicked"; echo "search tests exit: ${PIPESTATUS[0]}"
      timeout 120 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked"; echo "any-d tests exit: ${PIPESTATUS[0]}"
    fi
    if one 2; then
      timeout 300 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|score"; echo "codec tests exit: ${PIPESTATUS[0]}"
      timeout 300 .dev/test-gpu_compress 2>&1 | grep -E "^test |test result|panicked|token|code"; echo "compress tests exit: ${PIPESTATUS[0]}"
    fi ) >"$tmp/tests" &
  ( export TILEMAXSIM_SANITIZER=1
    if one 1; then
      TILEMAXSIM_GPU_CASES=12 timeout 420 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu --test-threads 1 2>&1 | tail -6
      echo "memcheck exit: ${PIPESTATUS[0]}"
      TILEMAXSIM_GPU_CASES=6 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3
      echo "f32 memcheck exit: ${PIPESTATUS[0]}"
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_search --test-threads 1 2>&1 | tail -3
      echo "search memcheck exit: ${PIPESTATUS[0]}"
      timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
      echo "any-d memcheck exit: ${PIPESTATUS[0]}"
    fi
    if one 2; then
      # 300 s was too short twice (2026-11-30, thirteenth and fifteenth sessions: exit 124 with
      # 0 errors so far); PART=2 alone still fits a 600 s call.
      TILEMAXSIM_GPU_CASES=3 timeout 450 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs --test-threads 1 2>&1 | tail -4
      echo "codec memcheck exit: ${PIPESTATUS[0]}"
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_compress --test-threads 1 2>&1 | tail -4
      echo "compress memcheck exit: ${PIPESTATUS[0]}"
    fi ) >"$tmp/memcheck" &
  # Every kernel, through the tests that launch them directly (the index test runs the same
  # kernels through the search pipeline and takes over 5 minutes under racecheck); few cases.
  ( export TILEMAXSIM_SANITIZER=1
    if one 1; then
      TILEMAXSIM_GPU_CASES=3 timeout 420 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu --test-threads 1 \
        tensor_core random_shapes ablation raw_device 2>&1 | tail -6
      echo "racecheck exit: ${PIPESTATUS[0]}"
      TILEMAXSIM_GPU_CASES=3 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_search --test-threads 1 \
        device_top_k 2>&1 | tail -3
      echo "top-k racecheck exit: ${PIPESTATUS[0]}"
      TILEMAXSIM_GPU_CASES=3 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_f32 --test-threads 1 2>&1 | tail -3
      echo "f32 racecheck exit: ${PIPESTATUS[0]}"
      TILEMAXSIM_GPU_CASES=9 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_any_dim 2>&1 | tail -3
      echo "any-d racecheck exit: ${PIPESTATUS[0]}"
    fi
    if one 2; then
      TILEMAXSIM_GPU_CASES=2 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_codecs --test-threads 1 every_codec residual_tensors batched lookup_table 2>&1 | tail -4
      echo "codec racecheck exit: ${PIPESTATUS[0]}"
      timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_compress --test-threads 1 residual 2>&1 | tail -4
      echo "compress racecheck exit: ${PIPESTATUS[0]}"
    fi ) >"$tmp/racecheck" &
  echo "== kernel compile (NVRTC, sm_80 + sm_90)"; .dev/test-cuda_kernels_compile 2>&1 | tail -3
  wait
  echo "== GPU tests"; cat "$tmp/tests"
  echo "== compute-sanitizer memcheck"; cat "$tmp/memcheck"
  echo "== compute-sanitizer racecheck"; cat "$tmp/racecheck"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$log"
