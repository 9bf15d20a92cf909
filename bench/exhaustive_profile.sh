#!/usr/bin/env bash
# usage: OUT=$OUT bash bench/exhaustive_profile.sh   (on the GPU machine, .dev/tilemaxsim carried)
# Where exhaustive index search spends a batch-1 call (issue 28: 15.7 ms a query at 1M
# documents x 80 tokens on the H100, against the fused residual kernel's rate in `bench`):
#  1. `tilemaxsim bench --codec residual --nbits 2` at the index's shape (K = 131,072 and
#     65,536; Nd = 80) and at the shape of the compressed-corpora table (Nd = 128, K = 65,536);
#  2. a 200K-document index (bench/compress_peers.py's corpus), `index search --exhaustive
#     --batch 1` timed, then under ncu (one line per kernel launch: name and duration).
# Log: $OUT/exhaustive_profile.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/exact_split_lib.sh
W=/tmp/exh; rm -rf "$W"; mkdir -p "$W"
{
  device_header
  echo "== bench, residual nbits 2"
  for shape in "--docs 1000000 --doc-len 80 --centroids 131072" "--docs 1000000 --doc-len 80 --centroids 65536" \
               "--docs 100000 --doc-len 128 --centroids 65536"; do
    echo "-- $shape"
    # shellcheck disable=SC2086
    .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 --codec residual --nbits 2 $shape 2>&1 | grep -E "residual|ms"
  done
  echo "== a 200K-document index"
  PYTHONPATH=bench python3 - "$W" <<'PY'
import sys, torch
from compress_peers import corpus
from safetensors.torch import save_file
w = sys.argv[1]
x = corpus(200_000, 80, 128)
save_file({"embeddings": x.cpu(), "offsets": torch.arange(0, x.shape[0] + 1, 80, dtype=torch.int64)}, f"{w}/corpus.safetensors")
g = torch.Generator(device="cuda").manual_seed(1)
q = torch.nn.functional.normalize(x[torch.randint(0, x.shape[0], (64 * 32,), device="cuda", generator=g)].float(), dim=-1).half()
save_file({"embeddings": q.cpu(), "offsets": torch.arange(0, 64 * 32 + 1, 32, dtype=torch.int64)}, f"{w}/queries.safetensors")
PY
  .dev/tilemaxsim index build --corpus "$W/corpus.safetensors" -o "$W/index" --no-exact --device cuda 2>&1 | tail -1
  search() { .dev/tilemaxsim index search --index "$W/index" --queries "$W/queries.safetensors" -k 10 --out "$W/run.trec" --device cuda --rerank-k 0 --exhaustive "$@" 2>&1 | tail -1; }
  echo "== index search --exhaustive, batch 1 and 32"
  search --batch 1
  search --batch 32
  echo "== ncu: every kernel of a batch-1 search (64 queries)"
  timeout 240 ncu --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum \
    .dev/tilemaxsim index search --index "$W/index" --queries "$W/queries.safetensors" -k 10 \
    --out "$W/run.trec" --device cuda --rerank-k 0 --exhaustive --batch 1 > "$OUT/ncu_exhaustive.txt" 2>&1
  grep -v "^==PROF==" "$OUT/ncu_exhaustive.txt" | tail -60
} 2>&1 | tee "$OUT/exhaustive_profile.log"
