#!/usr/bin/env bash
# 2026-12-03 (twenty-eighth), device call 1: the four-documents-a-warpgroup kernel
# (kernels/codec_quad.cu, maxsim_codec_q4_*) for issue 28's exhaustive search at batch 1.
# 1. Tests: gpu_codecs' quad test (the kernel's choice asserted, against the float64 reference
#    and the one-warp kernel) and the codec tests with TILEMAXSIM_QUAD=1 (the kernel is off by
#    default until it has run on a GPU), under the default build and CQ4_PAIRED=0; memcheck and
#    racecheck of the quad test.
# 2. One query, 1M x U[8,124], K = 262,144: the quad kernel (TILEMAXSIM_QUAD=1) against the
#    one-warp kernel (the default; TILEMAXSIM_QUAD=0 for the binaries built before it was),
#    and CQ4_PAIRED=0, residual nbits 2 and 1.
# 3. Exhaustive search at 8.8M documents (bench/msmarco_scale.py's index), batch 1, quad
#    against one-warp, two rounds, the run files' rankings compared.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03b/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/seed_kernel_cache.sh
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  for v in default CQ4_PAIRED=0; do
    echo "-- [$v] quad + codec tests"
    TILEMAXSIM_QUAD=1 with "$v" timeout 200 .dev/test-gpu_codecs quad every_codec batched_bulk 2>&1 | grep -E "^test |test result|panicked|score|assert" | head -20
  done
  echo "-- memcheck quad"
  TILEMAXSIM_GPU_CASES=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs quad 2>&1 | tail -3
  echo "-- racecheck quad"
  TILEMAXSIM_GPU_CASES=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/test-gpu_codecs quad 2>&1 | tail -3
  while ! grep -q "msmarco rc" /tmp/msmarco.log; do sleep 1; done  # the GPU to ourselves
  grep -E "corpus|index build|rc" /tmp/msmarco.log | tail -3
  echo "== $(date -u +%T) one query, 1M x U[8,124]"
  for round in 1 2; do
    for nb in 2 1; do
      for v in quad one-warp CQ4_PAIRED=0; do
        echo -n "round $round nbits $nb [$v]: "
        case $v in
          one-warp) TILEMAXSIM_QUAD=0 bench --dtype f16 --codec residual --nbits $nb --docs 1000000 --doc-len 8:124 --centroids 262144 ;;
          quad) TILEMAXSIM_QUAD=1 bench --dtype f16 --codec residual --nbits $nb --docs 1000000 --doc-len 8:124 --centroids 262144 ;;
          *) TILEMAXSIM_QUAD=1 with "$v" bench --dtype f16 --codec residual --nbits $nb --docs 1000000 --doc-len 8:124 --centroids 262144 ;;
        esac
      done
    done
  done
  echo "== $(date -u +%T) exhaustive search, 8.8M documents, batch 1"
  for round in 1 2; do
    echo -n "[quad] round $round: "; TILEMAXSIM_QUAD=1 ivf_search .dev/tilemaxsim 1 /tmp/e_quad.trec --exhaustive
    echo -n "[one-warp] round $round: "; TILEMAXSIM_QUAD=0 ivf_search .dev/tilemaxsim 1 /tmp/e_warp.trec --exhaustive
  done
  echo -n "[quad, CQ4_PAIRED=0]: "; TILEMAXSIM_QUAD=1 with CQ4_PAIRED=0 ivf_search .dev/tilemaxsim 1 /tmp/e_unpaired.trec --exhaustive
  cmp /tmp/e_quad.trec /tmp/e_warp.trec && echo "same run files" || python3 - <<'PY'
def ranks(p):
    r = {}
    for l in open(p):
        q, _, d, k, s, _ = l.split()
        r.setdefault(q, []).append(d)
    return r
a, b = ranks("/tmp/e_quad.trec"), ranks("/tmp/e_warp.trec")
same = sum(a[q] == b.get(q) for q in a)
sets = sum(set(a[q]) == set(b.get(q, [])) for q in a)
print(f"run files differ: {same}/{len(a)} queries ranked the same, {sets}/{len(a)} the same top-k sets")
PY
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
