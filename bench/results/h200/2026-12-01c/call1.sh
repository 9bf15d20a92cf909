#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device call 1: the rows kernel's B loads spread over every bank
# (BULK_ROWS_SPREAD=1, a kcache variant) against the landed loads, whose quarter warps put
# rows 2p and 2p + 1 of a chunk on the same 16 banks whenever 2 d is a multiple of 128.
# The rows test under the variant and the default (f7a5f14's store, not yet run), then f16
# U[32,256] at the rows kernel's d, the two alternating, B = 10K and 100K; rows against the
# spanning kernel at d = 200-224; ncu's shared-memory wavefronts and bank conflicts at d = 256.
# usage: OUT=$OUT bash bench/results/h200/2026-12-01c/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
BENCH='.dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"'
ab() { echo -n "[$1] "; shift; env "$@"; }
S=TILEMAXSIM_KERNEL_DEFINES=BULK_ROWS_SPREAD=1
base="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread"
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
prof() {
  local tag=$1; shift
  env "$@" timeout 90 ncu --clock-control none -k regex:maxsim_bulk_rows --launch-skip 3 --launch-count 1 \
    --metrics "$base" --metrics "$stalls" .dev/tilemaxsim bench --device cuda --reps 5 --dtype f16 --docs 100000 --doc-len 32:256 --dim 256 2>&1 \
    | grep -vE "^==PROF==|^ *[-]+ *$" | awk '$NF != "0" && $NF != "0.00" && $NF != "0.000"' | grep -E "maxsim|[0-9]$" | sed "s/^/[$tag] /"
}
{
  device_header
  echo "== $(date -u +%T) tests"
  ab spread $S timeout 100 .dev/test-gpu_any_dim rows_kernel 2>&1 | grep -E "^test |test result|panicked|score\["
  ab default timeout 100 .dev/test-gpu_any_dim 2>&1 | grep -E "^test |test result|panicked|score\["
  echo "== $(date -u +%T) f16 U[32,256] B = 10K, landed / spread"
  for d in 232 256 264 320 352 376; do
    ab "d=$d landed" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "d=$d spread" $S bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) d = 200-224 and 384, B = 10K: the engine's kernel / rows spread (32 and 64)"
  for d in 200 216 224 384; do
    ab "d=$d engine" bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "d=$d rows32 spread" $S TILEMAXSIM_ROWS=32 bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
    ab "d=$d rows64 spread" $S TILEMAXSIM_ROWS=64 bash -c "$BENCH" _ --dtype f16 --docs 10000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) B = 100K, landed / spread"
  for d in 256 320; do
    ab "d=$d landed" bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
    ab "d=$d spread" $S bash -c "$BENCH" _ --dtype f16 --docs 100000 --doc-len 32:256 --dim $d
  done
  echo "== $(date -u +%T) ncu, d = 256 B = 100K"
  prof landed TILEMAXSIM_X=0
  prof spread $S
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
