#!/usr/bin/env bash
# One device call for GPU search (issue 4), on a machine with two GPUs (nvidia-h200-x2):
# GPU tests (incl. device top-k and resident/streamed/sharded search), Cranfield rankings from
# every exact GPU mode against the float64 reference, `bench-search` (latency, streaming vs the
# host→device copy rate, 1 vs 2 GPUs), the end-to-end peers (bench/search_peers.py), then
# compute-sanitizer on the new kernel and search paths. Build first with bench/device_build.sh
# (it also copies the Cranfield files into .dev/cranfield); carry .dev and .whl. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/flash_maxsim-0.3.0-py3-none-any.whl
export PYTHONPATH=/tmp/site
B=.dev/tilemaxsim C=.dev/cranfield R=/tmp/runs
mkdir -p $R
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) × $(nvidia-smi -L | wc -l), $(nproc) cores"
  echo "== GPU tests"; timeout 240 .dev/test-gpu 2>&1 | tail -14
  echo "== Cranfield: every exact GPU mode against the float64 reference run"
  $B corpus import --safetensors $C/corpus.safetensors --dtype f32 -o $R/c32.st >/dev/null
  $B corpus import --safetensors $C/corpus.safetensors --dtype bf16 -o $R/cbf.st >/dev/null
  s() { timeout 60 $B search --queries $C/queries.safetensors --query-ids $C/query_ids.txt --doc-ids $C/doc_ids.txt -k 100 "$@"; }
  s --device cuda --corpus $C/corpus.safetensors --out $R/f16.trec 2>&1 | tail -1
  s --device cuda --corpus $C/corpus.safetensors --residency stream --chunk-mb 1 --out $R/f16s.trec 2>&1 | tail -1
  s --devices all --corpus $C/corpus.safetensors --out $R/f16m.trec 2>&1 | tail -1
  s --devices all --corpus $C/corpus.safetensors --residency stream --chunk-mb 2 --out $R/f16ms.trec 2>&1 | tail -1
  s --device cuda --corpus $R/c32.st --out $R/f32.trec 2>&1 | tail -1
  s --device cuda --corpus $R/cbf.st --out $R/bf16.trec 2>&1 | tail -1
  s --device reference --corpus $R/cbf.st --out $R/bf16ref.trec 2>&1 | tail -1
  for r in f16 f16s f16m f16ms f32; do python3 bench/compare_runs.py $R/$r.trec $C/ref_run.trec; done
  python3 bench/compare_runs.py $R/bf16.trec $R/bf16ref.trec
  $B eval --qrels $C/qrels.txt --run $R/f16.trec 2>&1 | tail -12
  echo "== bench-search (resident latency, streamed vs copy rate, 1 vs all GPUs)"
  timeout 200 $B bench-search --device cuda 2>&1
  echo "== scoring alone (no top-k), f16, Nq=32, Nd=128, d=128"
  for n in 100000 500000; do timeout 60 $B bench --device cuda --dtype f16 --docs $n --reps 10 2>&1 | sed -n 3p; done
  echo "== end-to-end peers"
  timeout 150 python3 bench/search_peers.py --json "$OUT/search_peers.json" 2>"$OUT/search_peers.err"
  tail -3 "$OUT/search_peers.err"
  echo "== compute-sanitizer memcheck (top-k kernel, GPU search)"
  TILEMAXSIM_SANITIZER=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu --test-threads 1 device_top_k gpu_index 2>&1 | tail -5
  echo "memcheck exit: ${PIPESTATUS[0]}"
  echo "== compute-sanitizer racecheck (top-k kernel)"
  TILEMAXSIM_SANITIZER=1 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu device_top_k 2>&1 | tail -4
  echo "racecheck exit: ${PIPESTATUS[0]}"
} 2>&1 | tee "$OUT/issue4.log"
