# What the device scripts of the exact path share (sourced by bench/exact_split*.sh,
# any_d_tune.sh, group_tune.sh, tuning_check.sh, from the repository root): $OUT made, the
# kernel cache and the GPU required; `device_header` (the date and the device, then the first
# start, which compiles the kernels, timed); `bench ARGS`: one line per case of
# `tilemaxsim bench --device cuda --json ARGS` (bench/bench_lines.py); `bench_with BIN ARGS`;
# `with VARIANT CMD...` (CMD under TILEMAXSIM_KERNEL_DEFINES=VARIANT, or as it is for
# "default"); `compile_variants VARIANT...` (each variant's kernels compiled at once, one NVRTC
# process each, into the cache); `powered LABEL CMD...` (CMD's output, then the SM and memory
# clocks, instant power and throttle reasons sampled every 20 ms while it ran: `power.draw` is a
# one-second average on the H200's driver).
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
source bench/seed_kernel_cache.sh
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
powered() {
  local label=$1; shift
  local q=clocks.sm,clocks.mem,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active
  nvidia-smi --query-gpu=$q --format=csv,noheader -lms 20 > /tmp/powered.csv 2>&1 & local smi=$!
  "$@"; kill $smi; sleep 0.2
  python3 - /tmp/powered.csv "$label" <<'PY'
import sys, collections
rows = [[x.strip() for x in l.split(",")] for l in open(sys.argv[1]) if l.count(",") >= 4]
def num(x):
    try: return float(x.split()[0])
    except ValueError: return None
busy = [r for r in rows if (num(r[2]) or 0) > 250]
if not busy: print(f"  {sys.argv[2]}: no busy samples"); sys.exit()
def med(i):
    v = sorted(x for x in (num(r[i]) for r in busy) if x is not None)
    return f"{v[len(v)//2]:.0f}" if v else "n/a"
def throttled(x):
    try: return int(x, 16) & 0x4
    except ValueError: return 0
power = sum(1 for r in busy if throttled(r[4]))
print(f"  {sys.argv[2]}: {len(busy)} busy samples, SM {med(0)} MHz, mem {med(1)} MHz, {med(2)} W, "
      f"{med(3)} C, throttled for power in {100 * power // len(busy)}%")
PY
}
