#!/usr/bin/env bash
# Multi-GPU runs of the Rust engine in one device call (a machine of several GPUs, .dev carried
# from bench/device_build.sh): the exact and codec GPU tests (warming the kernel cache), then
# `bench search` with the corpus sharded over 1, 2, 4, … and every GPU, exact and compressed
# (residual nbits 2, int8; each checked to give one GPU's hits), then `tilemaxsim serve
# --devices all` against one GPU under the same load (bench/serve_load.sh), on one synthetic
# corpus of --serve-docs documents. bench/ray_gpu.sh runs the Ray half.
# usage: OUT=$OUT bash bench/multi_gpu.sh [--multi-docs 1000000] [--serve-docs 500000]
#   Writes $OUT/multi_gpu.log (everything printed), $OUT/search_multi.json and
#   $OUT/serve_{all,one}.json (serve_load's levels); nothing else is left under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
MULTI_DOCS=1000000 SERVE_DOCS=500000
while [ $# -gt 0 ]; do
  case "$1" in
    --multi-docs) MULTI_DOCS=$2; shift 2 ;;
    --serve-docs) SERVE_DOCS=$2; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
# NVLink multicast stays off on shared multi-GPU hosts (the device README).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
BIN=.dev/tilemaxsim
SYNTH=/tmp/synth-f16-$SERVE_DOCS-128-128.safetensors
{
  echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
  nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -8
  echo "== GPU tests (exact, codecs) on GPU 0"
  timeout 300 .dev/test-gpu -q --test-threads 1 2>&1 | tail -4
  timeout 300 .dev/test-gpu_search -q --test-threads 1 2>&1 | tail -4
  timeout 300 .dev/test-gpu_codecs -q --test-threads 1 2>&1 | tail -4
  echo "== $(date -u +%T) bench-search: $MULTI_DOCS documents sharded over 1, 2, 4, … GPUs"
  timeout 420 "$BIN" bench-search --docs 100000 --batches 1,32 --stream-docs 0 \
    --multi-docs "$MULTI_DOCS" --multi-codecs exact,residual,int8 --json >"$OUT/search_multi.json"
  python3 - "$OUT/search_multi.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
one = {(x["name"].split(" ", 2)[2], x["batch"]): x for x in r["rows"] if x["name"].startswith("1 GPU(s)")}
print(f"{'case':<24} {'docs':>9} {'batch':>5} {'p50 ms':>9} {'p99 ms':>9} {'M docs/s':>9} {'× 1 GPU':>7}  same hits  searcher")
for x in r["rows"]:
    base = one.get((x["name"].split(" ", 2)[-1], x["batch"])) if "GPU(s)" in x["name"] else None
    up = f"{base['ms_p50'] / x['ms_p50']:.2f}" if base else ""
    print(f"{x['name']:<24} {x['docs']:>9} {x['batch']:>5} {x['ms_p50']:>9.3f} {x['ms_p99']:>9.3f} "
          f"{x['docs_per_s'] / 1e6:>9.1f} {up:>7}  {str(x.get('same_hits_as_one_gpu', '')):<9}  {x['searcher']}")
EOF
  echo "== $(date -u +%T) serve: one synthetic corpus of $SERVE_DOCS documents"
  [ -f "$SYNTH" ] || "$BIN" corpus synth --docs "$SERVE_DOCS" --doc-len 128 --dim 128 --dtype f16 -o "$SYNTH" >/dev/null
  for run in all one; do
    dir=$OUT/serve_$run; mkdir -p "$dir"; ln -sf "$SYNTH" "$dir/"
    if [ $run = all ]; then dev=(--device cuda --devices all); else dev=(--device cuda:0); fi
    echo "== $(date -u +%T) serve ${dev[*]}"
    OUT=$dir timeout 300 bash bench/serve_load.sh "${dev[@]}" --docs "$SERVE_DOCS" --duration 5 \
      --concurrency 1,8,32,64,128,256 --pairs 1 2>&1 | grep -v '^\s*$'
    cat "$dir/summary.md" 2>/dev/null
    cp "$dir/load.json" "$OUT/serve_$run.json" 2>/dev/null
    rm -rf "$dir"
  done
  echo "== $(date -u +%T) done"
} 2>&1 | tee "$OUT/multi_gpu.log"
