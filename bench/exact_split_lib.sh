# What the device scripts of the exact path share (sourced by bench/exact_split*.sh,
# any_d_tune.sh, group_tune.sh, tuning_check.sh, from the repository root): $OUT made, the
# kernel cache and the GPU required; `device_header` (the date and the device, then the first
# start, which compiles the kernels, timed); `bench ARGS`: one line per case of
# `tilemaxsim bench --device cuda --json ARGS`.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache TILEMAXSIM_REQUIRE_GPU=1
device_header() {
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  time .dev/tilemaxsim bench --device cuda --docs 1000 --reps 3 --dtype f16 2>&1 | head -1
}
bench() { .dev/tilemaxsim bench --device cuda --reps 30 --json "$@" 2>&1 |
  python3 -c 'import sys, json
text = sys.stdin.read()
try:
    r = json.loads(text[text.index("{"):])
except ValueError:
    print(" ".join(sys.argv[1:]), "| failed:", text[-400:]); sys.exit()
for c in r["results"]:
    print(" ".join(sys.argv[1:]), "|", c["name"], "| %.2f M docs/s | %.0f GB/s | %.1f%% of %.0f (loads %.0f, copies %.0f) | %.4f ms"
          % (c["docs_per_s"] / 1e6, c["gb_per_s"], c["pct_ceiling"], r["ceiling_read_gbps"],
             r.get("ceiling_read_loads_gbps") or 0, r.get("ceiling_read_copies_gbps") or 0, c["ms"])
          + ("" if c.get("case_ceiling_gbps") is None else " | case bytes ceiling %.0f GB/s (%.1f%% of it)"
             % (c["case_ceiling_gbps"], 100 * c["gb_per_s"] / c["case_ceiling_gbps"])))' "$@"; }
