#!/usr/bin/env bash
# 2026-11-29 (eighth), device call 1 (issue 28, exhaustive search at batch 1): the one-warp
# residual kernel's variants, compiled at once: the default; CODEC_STEP_LUT=1 (a k16 step's two
# f16 pairs by one 8-byte lookup keyed by the step's code byte); CODEC_CLAIM=4 (one atomic per
# four tasks); both. The codec GPU tests under the candidate, then every variant timed at MS
# MARCO's shape (one query, 1M documents of U[8,124] tokens, K = 262,144) and ncu of the default
# and the step-table kernels (warp states, scheduler, occupancy).
# usage: OUT=$OUT bash bench/results/h200/2026-11-29h/call1.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
VARIANTS="CODEC_STEP_LUT=1 CODEC_CLAIM=4 CODEC_STEP_LUT=1,CODEC_CLAIM=4"
SHAPE="--codec residual --nbits 2 --docs 1000000 --doc-len 8:124 --centroids 262144"
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for v in default $VARIANTS; do
    ( with "$v" timeout 300 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
  echo "== compiled $(date -u +%T)"
  for v in CODEC_STEP_LUT=1,CODEC_CLAIM=4 default; do
    echo "-- test-gpu_codecs [$v]"
    with "$v" timeout 200 .dev/test-gpu_codecs 2>&1 | grep -E "test result|panicked|FAILED"
  done
  echo "-- test-gpu_ivf [CODEC_STEP_LUT=1,CODEC_CLAIM=4]"
  with CODEC_STEP_LUT=1,CODEC_CLAIM=4 timeout 150 .dev/test-gpu_ivf 2>&1 | grep -E "test result|panicked|FAILED"
  date -u +%T
  for round in 1 2; do
    for args in "$SHAPE" "--codec residual --nbits 1 --docs 1000000 --doc-len 8:124 --centroids 262144" "--codec residual --nbits 2 --docs 200000 --doc-len 80"; do
      for v in default $VARIANTS; do
        echo -n "[$v] "
        # shellcheck disable=SC2086
        with "$v" timeout 120 .dev/tilemaxsim bench --device cuda --reps 20 --dtype f16 $args 2>&1 | grep -E "^residual" | tail -1
      done
    done
  done
  date -u +%T
  for v in default CODEC_STEP_LUT=1; do
    echo "== ncu [$v]"
    # shellcheck disable=SC2086
    with "$v" timeout 150 ncu --clock-control none -k regex:maxsim_codec_residual2 --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
      --section InstructionStats --metrics "smsp__inst_executed.sum,smsp__cycles_active.avg,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      .dev/tilemaxsim bench --device cuda --reps 3 --dtype f16 $SHAPE > "$OUT/ncu_$v.txt" 2>&1
    grep -E "Duration|Registers|Achieved Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|stalled|inst_executed|cycles_active|Executed Ipc|Block Limit|Theoretical Occ|Memory Throughput|Compute \(SM\)" "$OUT/ncu_$v.txt" | head -60
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call1.log"
