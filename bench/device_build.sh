#!/usr/bin/env bash
# Build here what a device run needs (the device has no Rust toolchain) into .dev/ (ignored by
# .gitignore), which the device tool's `carry` takes along: the CLI binary, the load generator
# of bench/serve_load.sh, the GPU test and NVRTC compile-check executables, the Cranfield files
# (the corpus xz-compressed: bench/device_data.sh unpacks it there).
# usage: bash bench/device_build.sh   (here, from any directory; needs ../shared/data/cranfield)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev
cargo build --release -p tilemaxsim-cli --bin tilemaxsim --example serve_load
cp target/release/tilemaxsim target/release/examples/serve_load .dev/
for t in gpu gpu_f32 gpu_search gpu_any_dim gpu_codecs gpu_compress gpu_ivf cuda_kernels_compile; do
  exe=$(cargo test -p tilemaxsim --test "$t" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable"): print(m["executable"])' | tail -1)
  cp "$exe" ".dev/test-$t" && strip ".dev/test-$t"
done
# Real data for the device's Cranfield checks (../shared does not travel).
# Cranfield only where a run needs it: TILEMAXSIM_DEVICE_DATA=1.
[ "${TILEMAXSIM_DEVICE_DATA:-0}" = 1 ] || { ls -la .dev; exit 0; }
mkdir -p .dev/cranfield
cp ../shared/data/cranfield/{queries.safetensors,doc_ids.txt,query_ids.txt,qrels.txt,ref_run.trec} .dev/cranfield/
# The corpus xz-compressed (56 -> 50 MB, under the carry limit with the binaries); the device
# scripts unpack it with bench/device_data.sh.
[ -e .dev/cranfield/corpus.safetensors.xz ] || xz -T2 -6 -c ../shared/data/cranfield/corpus.safetensors > .dev/cranfield/corpus.safetensors.xz
ls -la .dev
