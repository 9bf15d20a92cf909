#!/usr/bin/env bash
# 2026-12-03 (thirtieth), device call 1: two changes to the one-warp residual kernel
# (kernels/codec.cu) for issue 28's exhaustive search at batch 1, as kernel variants:
# CODEC_KSPLIT=1 (each tile's products in two accumulator sets by k16 step: four chains a tile)
# and CODEC_LATE_GATHER=1 (a group's load reads its ids only; its centroid scores are gathered
# when its product starts), and both. Binaries by bench/device_build.sh, kernels by
# `bench/kernel_cache.sh CODEC_KSPLIT=1 CODEC_LATE_GATHER=1 CODEC_KSPLIT=1,CODEC_LATE_GATHER=1`.
# 1. Tests: gpu_codecs whole under the default build, with the quad kernel asked for
#    (09c00cd: its order uploaded only then); every_codec and the one-warp tests per variant.
# 2. One query, 1M x U[8,124], K = 262,144: nbits 2, 1, 4 and int8, each variant, two rounds.
# 3. Exhaustive search at 8.8M documents (bench/msmarco_scale.py's index), batch 1, each
#    variant twice, the run files compared with the default's.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03d/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
L="--dtype f16 --docs 1000000 --doc-len 8:124 --centroids 262144"
V=(default CODEC_KSPLIT=1 CODEC_LATE_GATHER=1 CODEC_KSPLIT=1,CODEC_LATE_GATHER=1)
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  echo "-- [default] gpu_codecs, quad kernel asked for"
  TILEMAXSIM_QUAD=1 timeout 150 .dev/test-gpu_codecs 2>&1 | grep -E "^test |test result|panicked|assert" | head -20
  for v in "${V[@]:1}"; do
    echo "-- [$v] every_codec, one_warp, bf16"
    with "$v" timeout 100 .dev/test-gpu_codecs every_codec one_warp bf16 2>&1 | grep -E "^test |test result|panicked|assert" | head -10
  done
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "index build|rc" /tmp/msmarco.log | tail -2
  echo "== $(date -u +%T) one query, 1M x U[8,124]"
  for round in 1 2; do
    for c in "--codec residual --nbits 2" "--codec residual --nbits 1" "--codec residual --nbits 4" "--codec int8"; do
      for v in "${V[@]}"; do
        echo -n "round $round [$v]: "; with "$v" bench $L $c
      done
    done
  done
  echo "== $(date -u +%T) exhaustive search, 8.8M documents, batch 1"
  for round in 1 2; do
    i=0
    for v in "${V[@]}"; do
      echo -n "[$v] round $round: "; with "$v" ivf_search .dev/tilemaxsim 1 /tmp/e_$i.trec --exhaustive
      i=$((i + 1))
    done
  done
  for i in 1 2 3; do
    cmp -s /tmp/e_0.trec /tmp/e_$i.trec && echo "variant $i: same run file" || python3 - /tmp/e_0.trec /tmp/e_$i.trec <<'PY'
import sys
def ranks(p):
    r = {}
    for l in open(p):
        q, _, d, k, s, _ = l.split()
        r.setdefault(q, []).append(d)
    return r
a, b = ranks(sys.argv[1]), ranks(sys.argv[2])
print(f"{sys.argv[2]}: {sum(a[q] == b.get(q) for q in a)}/{len(a)} queries ranked the same, "
      f"{sum(set(a[q]) == set(b.get(q, [])) for q in a)}/{len(a)} the same top-10 sets")
PY
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
