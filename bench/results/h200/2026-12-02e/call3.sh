#!/usr/bin/env bash
# 2026-12-02 (twenty-sixth), device call 3: memcheck and racecheck of the float32 training
# kernels' tests again (call 2's runs stopped at a test whose documents could fall out of the
# split range and so took the torch path: drawn again in the split range here), then gpu_check
# PART=2 alone on this tree's kernels (tests/gpu_codecs.rs, gpu_compress.rs, their memcheck and
# racecheck; unfinished in the twenty-fifth session).
# usage: OUT=$OUT bash bench/results/h200/2026-12-02e/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/tilemaxsim-*.whl || exit 1
cp crates/tilemaxsim-python/python/tilemaxsim/*.py /tmp/site/tilemaxsim/
{
  echo "== $(date -u +%T) sanitizers: the float32 training tests"
  export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
  source bench/seed_kernel_cache.sh
  for tool in memcheck racecheck; do
    (cd crates/tilemaxsim-python && PYTHONPATH=/tmp/site TILEMAXSIM_TEST_DEVICE=cuda timeout 150 compute-sanitizer --tool $tool \
      --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider tests/test_autograd.py \
      -k "float32 and (training or kernels)" > "$OUT/$tool.log" 2>&1; echo "$tool exit $?" >> "$OUT/$tool.log") &
  done
  wait
  for f in memcheck racecheck; do tail -n 4 "$OUT/$f.log"; done
  echo "== $(date -u +%T) gpu_check PART=2"
  PART=2 timeout 500 bash bench/gpu_check.sh > /dev/null 2>&1
  echo "gpu_check exit: $?"
  for f in "$OUT"/gpu_check_parts/*; do echo "== $f"; cat "$f"; done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
