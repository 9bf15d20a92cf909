# `bench ARGS`: one line per case of `tilemaxsim bench --device cuda --json ARGS` (sourced by
# bench/exact_split.sh and exact_split_tune.sh).
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
             r.get("ceiling_read_loads_gbps") or 0, r.get("ceiling_read_copies_gbps") or 0, c["ms"]))' "$@"; }
