#!/usr/bin/env bash
# 2026-12-03 (twenty-ninth), device call 4: the landed kernels' gpu_codecs tests built from the
# landed tree (.dev/landed, with its kernel cache), the quad tests with TILEMAXSIM_QUAD=1: the
# many-groups test cut to 12,011 documents and one float64 check a codec (call 3's ran past
# its 150 s in the float64 reference).
# usage: OUT=$OUT bash bench/results/h200/2026-12-03c/call4.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
mkdir -p $TILEMAXSIM_CACHE_DIR
for f in .dev/landed/*.xz; do xz -dc "$f" > "$TILEMAXSIM_CACHE_DIR/$(basename "${f%.xz}")"; done
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  TILEMAXSIM_QUAD=1 timeout 200 .dev/landed/test-gpu_codecs quad 2>&1 | grep -E "^test |test result|panicked|score|assert|finished" | head -20
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call4.log"
