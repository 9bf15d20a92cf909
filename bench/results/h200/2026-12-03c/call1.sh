#!/usr/bin/env bash
# 2026-12-03 (twenty-ninth), device call 1: the four-documents-a-warpgroup kernel
# (kernels/codec_quad.cu) with every operand copied into shared memory by cp.async ahead of its
# use (codes, norms and centroid scores CQ4_AHEAD tiles ahead, ids one more) and each
# document's extent read in one load (DeviceCodes::quad_order's entries), for issue 28's
# exhaustive search at batch 1. It ran on 1f70745 with staged_quad.patch (beside this script)
# applied, binaries by bench/device_build.sh and kernels by `bench/kernel_cache.sh CQ4_WGS=3
# CQ4_AHEAD=1`; the change was slower and not kept. (Its ncu step printed nothing: `--metrics`
# given twice, which ncu refuses; call 2 hit the same.)
# 1. Tests with the kernel asked for (TILEMAXSIM_QUAD=1): the quad test, every_codec,
#    batched_bulk, under the default build (4 warpgroups, 2 tiles ahead), CQ4_WGS=3 and
#    CQ4_AHEAD=1; memcheck and racecheck of the quad test.
# 2. One query, 1M x U[8,124], K = 262,144, nbits 2 and 1: quad (each variant) against the
#    one-warp kernel, two rounds.
# 3. Exhaustive search at 8.8M documents (bench/msmarco_scale.py's index), batch 1, quad
#    against one-warp, two rounds, the run files compared.
# 4. ncu of one quad launch (nbits 2, the bench's shape): issue, stalls, pipes.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03c/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
source bench/ivf_lib.sh
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/seed_kernel_cache.sh
L="--dtype f16 --codec residual --docs 1000000 --doc-len 8:124 --centroids 262144"
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
base="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size"
{
  (timeout 240 python3 bench/msmarco_scale.py --bin .dev/tilemaxsim --work $W --only-build > /tmp/msmarco.log 2>&1; echo "msmarco rc $?" >> /tmp/msmarco.log) &
  device_header
  for v in default CQ4_WGS=3 CQ4_AHEAD=1; do
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
      for v in one-warp default CQ4_WGS=3 CQ4_AHEAD=1; do
        echo -n "round $round nbits $nb [$v]: "
        if [ $v = one-warp ]; then TILEMAXSIM_QUAD=0 bench $L --nbits $nb
        else TILEMAXSIM_QUAD=1 with "$v" bench $L --nbits $nb; fi
      done
    done
  done
  echo "== $(date -u +%T) exhaustive search, 8.8M documents, batch 1"
  for round in 1 2; do
    echo -n "[quad] round $round: "; TILEMAXSIM_QUAD=1 ivf_search .dev/tilemaxsim 1 /tmp/e_quad.trec --exhaustive
    echo -n "[one-warp] round $round: "; TILEMAXSIM_QUAD=0 ivf_search .dev/tilemaxsim 1 /tmp/e_warp.trec --exhaustive
  done
  echo -n "[quad, CQ4_WGS=3]: "; TILEMAXSIM_QUAD=1 with CQ4_WGS=3 ivf_search .dev/tilemaxsim 1 /tmp/e_wgs3.trec --exhaustive
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
  echo "== $(date -u +%T) ncu, one quad launch"
  for v in default CQ4_WGS=3; do
    TILEMAXSIM_QUAD=1 with "$v" timeout 100 ncu --clock-control none -k regex:maxsim_codec_q4 --launch-skip 2 --launch-count 1 \
      --metrics "$base" --metrics "$stalls" .dev/tilemaxsim bench --device cuda --reps 3 $L --nbits 2 2>&1 \
      | grep -vE "^==PROF==|^ *[-]+ *$" | awk '$NF != "0" && $NF != "0.00" && $NF != "0.000"' | grep -E "maxsim|[0-9]$" | sed "s/^/[$v] /"
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
