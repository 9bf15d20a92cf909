#!/usr/bin/env bash
# 2026-12-01 (twenty-first), device calls 2-4 as they ran (one command each, .dev carried), on
# the build of call 1 (9c9bb11's kernels, BULK_ROWS_SPREAD=1 a kcache variant).
# Call 2 (call2_ncu.log; the same machine as call 1): ncu of maxsim_bulk_rows_f16_k8_t32 at d = 256
# B = 100K, the landed loads against BULK_ROWS_SPREAD=1.
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache; source bench/seed_kernel_cache.sh >/dev/null 2>&1
M="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for v in default BULK_ROWS_SPREAD=1; do
  echo "== $v"; if [ $v = default ]; then E=X=1; else E=TILEMAXSIM_KERNEL_DEFINES=$v; fi
  env $E timeout 120 ncu --clock-control none -k regex:maxsim_bulk_rows --launch-skip 3 --launch-count 1 --metrics "$M" \
    .dev/tilemaxsim bench --device cuda --reps 5 --dtype f16 --docs 100000 --doc-len 32:256 --dim 256 2>&1 |
    grep -vE "^ *[-]+ *$" | awk '$NF != "0" && $NF != "0.00" && $NF != "0.000"' | tail -40
done
# Call 3 (call3_power.log; the same machine): d = 128 and 256, 200 reps, clocks and instant power
# sampled (`powered`, bench/exact_split_lib.sh).
source bench/exact_split_lib.sh >/dev/null 2>&1
p() { .dev/tilemaxsim bench --device cuda --reps 200 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"; }
for d in 128 256; do powered "d=$d" p --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; done
# Call 4 (call4_power.log; another machine, started fresh): the same with the spread loads too.
p() { .dev/tilemaxsim bench --device cuda --reps 200 "$@" 2>&1 | grep "B=100"; }
powered "d=128" p --dtype f16 --docs 100000 --doc-len 32:256 --dim 128
powered "d=256 landed" p --dtype f16 --docs 100000 --doc-len 32:256 --dim 256
TILEMAXSIM_KERNEL_DEFINES=BULK_ROWS_SPREAD=1 powered "d=256 spread" p --dtype f16 --docs 100000 --doc-len 32:256 --dim 256
