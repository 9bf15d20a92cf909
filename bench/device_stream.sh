#!/usr/bin/env bash
# One short device call for streamed search only: the search tests, Cranfield streamed on one
# and on all GPUs against the float64 reference, bench-search's streamed cases (the corpus
# page-locked in place, and staged through pinned buffers) against the host→device copy rate,
# and compute-sanitizer on the search tests. Build first with bench/device_build.sh; carry .dev.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
B=.dev/tilemaxsim C=.dev/cranfield R=/tmp/runs
mkdir -p $R
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) × $(nvidia-smi -L | wc -l), $(nproc) cores"
  echo "== search tests"; timeout 120 .dev/test-gpu gpu_index device_top_k 2>&1 | tail -4
  s() { timeout 60 $B search --queries $C/queries.safetensors --query-ids $C/query_ids.txt --doc-ids $C/doc_ids.txt -k 100 --corpus $C/corpus.safetensors "$@"; }
  s --device cuda --residency stream --chunk-mb 1 --out $R/s1.trec 2>&1 | tail -1
  s --devices all --residency stream --chunk-mb 2 --out $R/s2.trec 2>&1 | tail -1
  for r in s1 s2; do python3 bench/compare_runs.py $R/$r.trec $C/ref_run.trec; done
  echo "== bench-search, streamed cases"
  timeout 200 $B bench-search --device cuda --docs 1000 --batches 1,32 --multi-docs 0 2>&1
  echo "== compute-sanitizer memcheck (search tests)"
  TILEMAXSIM_SANITIZER=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu --test-threads 1 gpu_index 2>&1 | tail -3
  echo "memcheck exit: ${PIPESTATUS[0]}"
} 2>&1 | tee "$OUT/stream.log"
