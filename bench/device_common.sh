# Sourced by the bench/device_*.sh kernel experiments (run on the device with .dev carried).

# compute-sanitizer memcheck and racecheck over the tensor-core test, few random cases (the
# sanitizers slow kernels by 10-100x); prints each tool's summary and exit code.
sanitize_tensor_core() {
  local tool
  for tool in memcheck racecheck; do
    TILEMAXSIM_GPU_CASES=6 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 .dev/test-gpu tensor_core 2>&1 | tail -2
    echo "$tool exit: ${PIPESTATUS[0]}"
  done
}
