#!/usr/bin/env bash
# usage: OUT=$OUT [SANITIZE=1] bash bench/index_gpu.sh   (on the GPU machine; .dev from
#        bench/device_build.sh and .whlc (bench/peer_wheels.sh) carried)
# Index search on the GPU, one device call:
#  1. tests/gpu_ivf.rs (the IVF stages against the float64 reference, every centroid probed
#     against exhaustive search, the CPU's stages, bad input); with SANITIZE=1 also under
#     compute-sanitizer memcheck and racecheck;
#  2. bench/index_peers.py: 200K documents x 80 tokens, our index build and IVF / exhaustive
#     search beside fast-plaid 1.7.0's, batches of 1 and 32 (PEERS_ARGS adds flags).
# Log in $OUT/index_gpu.log (or ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
source bench/peer_wheels.sh
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(git rev-parse --short HEAD 2>/dev/null) $(nproc) CPUs"
  echo "== IVF tests (the first compiles the kernels)"
  timeout 300 .dev/test-gpu_ivf 2>&1 | grep -E "^test |test result|panicked|against|missed|shared" | head -40
  if [ "${SANITIZE:-0}" = 1 ]; then
    for tool in memcheck racecheck; do
      echo "== $tool"
      timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 .dev/test-gpu_ivf --test-threads 1 2>&1 | tail -4
      echo "$tool exit: ${PIPESTATUS[0]}"
    done
  fi
  echo "== 200K documents: tilemaxsim's index beside fast-plaid's"
  PYTHONPATH=/tmp/site:bench timeout "${PEERS_TIMEOUT:-420}" python3 bench/index_peers.py --bin .dev/tilemaxsim --work /tmp/index-peers ${PEERS_ARGS:-}
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/index_gpu.log"
