# What the device scripts of the exact path share (sourced by bench/exact_split*.sh,
# any_d_tune.sh, group_tune.sh, tuning_check.sh, from the repository root): $OUT made, the
# kernel cache and the GPU required; `device_header` (the date and the device, then the first
# start, which compiles the kernels, timed); `bench ARGS`: one line per case of
# `tilemaxsim bench --device cuda --json ARGS` (bench/bench_lines.py); `bench_with BIN ARGS`;
# `with VARIANT CMD...` (CMD under TILEMAXSIM_KERNEL_DEFINES=VARIANT, or as it is for
# "default"); `compile_variants VARIANT...` (each variant's kernels compiled at once, one NVRTC
# process each, into the cache).
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
device_header() {
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  time .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
}
bench() { .dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py ceiling "$@"; }
# `bench_with BIN ARGS`: the same by another build, as M pairs/s and ms (A/B rows of two builds).
bench_with() { local bin=$1; shift; "$bin" bench --device cuda --reps 30 --json "$@" 2>&1 | python3 bench/bench_lines.py pairs "$@"; }
with() { local v=$1; shift; if [ "$v" = default ]; then "$@"; else TILEMAXSIM_KERNEL_DEFINES=$v "$@"; fi; }
compile_variants() {
  local v
  for v in "$@"; do
    ( with "$v" timeout 300 .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1 | sed "s/^/$v: /" ) &
  done
  wait
}
