# Sourced by the bench/device_*.sh kernel experiments (run on the device with .dev carried),
# from the repository root: their output folder, the kernel cache, the binary.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=${TILEMAXSIM_CACHE_DIR:-/tmp/tilemaxsim-cache} TILEMAXSIM_REQUIRE_GPU=1
B=.dev/tilemaxsim

# compute-sanitizer memcheck and racecheck over the named GPU tests (default: the tensor-core
# test), few random cases (the sanitizers slow kernels by 10-100x); prints each tool's summary
# and exit code. SANITIZERS="" skips them (bench/gpu_check.sh runs them on every kernel).
sanitize_tests() {
  local tool
  for tool in ${SANITIZERS-memcheck racecheck}; do
    TILEMAXSIM_GPU_CASES=${TILEMAXSIM_GPU_CASES:-6} timeout ${SANITIZER_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 9 .dev/test-gpu "${@:-tensor_core}" 2>&1 | tail -2
    echo "$tool exit: ${PIPESTATUS[0]}"
  done
}

# One `bench --device cuda` row (its third line) built with kernel defines $1 ("" for the
# defaults; each set compiles into its own cache), the rest bench's options; ROW_TIMEOUT seconds.
def_row() {
  echo -n "${1:-default}: "
  TILEMAXSIM_CACHE_DIR=/tmp/tmc-${1:-default} TILEMAXSIM_KERNEL_DEFINES=$1 \
    timeout "${ROW_TIMEOUT:-60}" $B bench --device cuda "${@:2}" 2>&1 | sed -n 3p
}
