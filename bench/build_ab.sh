#!/usr/bin/env bash
# The index build of two binaries on one synthetic corpus, one device call:
#  1. tests/gpu_compress.rs (the new binary's);
#  2. after a warm-up build of each (its kernels compiled or taken from the cache),
#     `index build --device cuda --no-exact` (EXACT=1: with the exact tokens kept) of one
#     synthetic corpus (DOCS documents x 80 tokens, d = 128, f16; 1M: K = 131,072), the base
#     binary and the new one alternating, ROUNDS times: wall seconds and the build's report;
#  3. the two builds' files compared tensor by tensor, metadata included;
#  4. unless PEER=0, bench/index_peers.py at the same size (its own clustered corpus): the new
#     binary's build beside fast-plaid 1.7.0's, and IVF 8/4096 at batch 1.
# usage (GPU machine; .dev built by bench/device_build.sh with the base binary copied to
# .dev/tilemaxsim-base, and .whlc carried for the peer):
#   OUT=$OUT [DOCS=1000000] [ROUNDS=2] [EXACT=0] [PEER=1] bash bench/build_ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
DOCS=${DOCS:-1000000} ROUNDS=${ROUNDS:-2}
keep=--no-exact; [ "${EXACT:-0}" = 1 ] && keep=
w=/tmp/build-ab; rm -rf $w; mkdir -p $w
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(nproc) CPUs; $(df -h /tmp | tail -1)"
  echo "== gpu_compress"
  timeout 200 .dev/test-gpu_compress 2>&1 | grep -E "^test |test result|panicked" | head -20
  # Each binary's kernels compiled (or taken from the cache) before anything is timed.
  .dev/tilemaxsim corpus synth --docs 2000 --doc-len 80 --dim 128 --dtype f16 -o $w/tiny.safetensors >/dev/null 2>&1
  for bin in .dev/tilemaxsim-base .dev/tilemaxsim; do
    rm -rf $w/warm; $bin index build --corpus $w/tiny.safetensors -o $w/warm --device cuda --no-exact >/dev/null 2>&1 || echo "warm-up failed: $bin"
  done
  .dev/tilemaxsim corpus synth --docs "$DOCS" --doc-len 80 --dim 128 --dtype f16 --seed 3 -o $w/c.safetensors 2>&1 | tail -1
  for round in $(seq "$ROUNDS"); do
    for b in base new; do
      bin=.dev/tilemaxsim; [ $b = base ] && bin=.dev/tilemaxsim-base
      rm -rf "$w/$b"; sync
      s=$(date +%s.%N)
      $bin index build --corpus $w/c.safetensors -o "$w/$b" --device cuda $keep > $w/out.txt 2>&1
      rc=$?; e=$(date +%s.%N)
      echo "$b, round $round: rc $rc, wall $(python3 -c "print(f'{$e - $s:.2f}')") s :: $(tail -1 $w/out.txt)"
    done
  done
  echo "== the files of the two builds"
  python3 - "$w/base" "$w/new" <<'PY'
import pathlib, sys
import numpy as np
from safetensors import safe_open
base, new = map(pathlib.Path, sys.argv[1:])
for f in sorted(p.name for p in base.glob("*.safetensors")):
    with safe_open(str(base / f), "np") as a, safe_open(str(new / f), "np") as b:
        same = sorted(a.keys()) == sorted(b.keys()) and a.metadata() == b.metadata()
        diff = [k for k in a.keys() if not same or not np.array_equal(a.get_tensor(k), b.get_tensor(k))]
    print(f"  {f}: {'the same tensors and metadata' if same and not diff else f'DIFFERENT {diff}'}")
PY
  rm -rf $w
  if [ "${PEER:-1}" = 1 ]; then
    echo "== $(date -u +%T) index_peers: the new build beside fast-plaid's"
    source bench/peer_wheels.sh
    PYTHONPATH=/tmp/site:bench timeout "${PEER_TIMEOUT:-330}" python3 bench/index_peers.py --bin .dev/tilemaxsim \
      --work /tmp/index-peers --docs "$DOCS" --queries 128 --batches 1 --only "fast-plaid's"
  fi
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/build_ab.log"
