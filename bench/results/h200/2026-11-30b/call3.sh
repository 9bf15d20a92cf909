#!/usr/bin/env bash
# 2026-11-30 (twelfth), device call 3: the f32 planes' runs of about 512 KB a block
# (`planes_run`) against call 1's runs (SPLIT_RUN_FACTOR: 32 documents at B = 100K, as
# TILEMAXSIM_BULK=2,32), per shape, in one run; f16's launch shape swept the same way; the f32 GPU tests; the f32
# row of the peers.
# usage: OUT=$OUT bash bench/results/h200/2026-11-30b/call3.sh  (carry .dev .whl)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
export TILEMAXSIM_REQUIRE_NVRTC=1
{
  device_header
  echo "== tests/gpu_f32.rs"
  timeout 200 .dev/test-gpu_f32 2>&1 | grep -E "^test |test result|panicked|case"; echo "f32 tests exit: ${PIPESTATUS[0]}"
  echo "== A/B: planes_run against 32 a block"
  for args in "--docs 100000 --doc-len 128" "--docs 100000 --doc-len 128 --dim 64" "--docs 100000 --doc-len 128 --dim 32" "--docs 100000 --doc-len 128 --dim 96" "--docs 10000 --doc-len 128" "--docs 100000 --doc-len 32:256" "--docs 500000 --doc-len 128" "--docs 100000 --doc-len 128"; do
    TILEMAXSIM_BULK=2,32 bench --dtype f32 $args | sed 's/^/2,32: /'
    bench --dtype f32 $args
  done
  echo "== f16 B = 100K (unchanged): the engine's shape, then fixed ones (stages,group)"
  bench --dtype f16 --docs 100000 --doc-len 128 | sed 's/^/default: /'
  for sg in 2,8 3,8 3,16 3,32 4,8 4,32 4,64; do TILEMAXSIM_BULK=$sg bench --dtype f16 --docs 100000 --doc-len 128 | sed "s/^/$sg: /"; done
  echo "== $(date -u +%FT%TZ) peers: f32 B = 100K"
} 2>&1 | tee "$OUT/call3.log"
OUT="$OUT" bash bench/peers_gpu.sh --cases fp32 --budget-s 150 2>&1 | tail -30 | tee -a "$OUT/call3.log"
