#!/usr/bin/env bash
# 2026-11-29 (eighth), device call 3: the rewritten one-warp codec kernels as they will land
# (CODEC_MIN_BLOCKS=3 by default) and with a group's two tiles multiplied step by step
# (CODEC_ILP=1), against .devold (main before): the codec and IVF tests under both, memcheck;
# `bench` at one query for every codec by the three, twice; ncu of the ILP variant.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29h/call3.sh  (carry .dev .devold .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
ILP=CODEC_ILP=1
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for v in default $ILP; do
    ( with "$v" timeout 300 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  tar -cJf "$OUT/kcache.tar.xz" -C $TILEMAXSIM_CACHE_DIR .
  for v in default $ILP; do
    echo "-- [$v]"
    with "$v" timeout 200 .dev/test-gpu_codecs every_codec one_warp_kernels_claim bf16_and_f16 batched_bulk 2>&1 | grep -E "test result|panicked|FAILED"
    with "$v" timeout 100 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  done
  TILEMAXSIM_GPU_CASES=1 TILEMAXSIM_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/test-gpu_codecs every_codec one_warp 2>&1 | tail -2
  date -u +%T
  L="--docs 1000000 --doc-len 8:124 --centroids 262144"
  for round in 1 2; do
    for args in "--codec residual --nbits 2 $L" "--codec residual --nbits 1 $L" "--codec residual --nbits 4 $L" \
                "--codec residual --nbits 2 --docs 100000 --doc-len 32" "--codec residual --nbits 2 --docs 10000 --doc-len 8:124" \
                "--codec int8 --docs 200000 --doc-len 80" "--codec fp8 --kernel mma --docs 200000 --doc-len 80" \
                "--codec pq --m 16 --kernel mma --docs 200000 --doc-len 80"; do
      for v in default $ILP old; do
        echo -n "[$v] "
        if [ $v = old ]; then bin=.devold; v=default; else bin=.dev; fi
        # shellcheck disable=SC2086
        with "$v" timeout 120 $bin/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^(residual|int8|fp8|pq)" | tail -1
      done
    done
  done
  date -u +%T
  # shellcheck disable=SC2086
  with $ILP timeout 120 ncu --clock-control none -k regex:maxsim_codec_residual2 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics "smsp__inst_executed.sum,smsp__cycles_active.avg,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 --codec residual --nbits 2 $L > "$OUT/ncu_ilp.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|inst_executed|cycles_active|long_scoreboard|_wait_|short_scoreboard|math_pipe" "$OUT/ncu_ilp.txt"
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call3.log"
