"""One line per case of `tilemaxsim bench --json` (stdin), prefixed by the bench arguments, for the
device scripts (bench/exact_split_lib.sh's `bench` and `bench_with`).
usage: tilemaxsim bench --json ARGS 2>&1 | python3 bench/bench_lines.py {ceiling|pairs} ARGS
  ceiling: M docs/s, GB/s, % of the read ceiling (each ceiling kernel's rate, the bytes it read; the
           case's bytes' ceiling where measured), ms;
  pairs:   M pairs/s and ms (the batched codec kernels' rows, where GB/s means little)."""
import json
import sys

mode, args = sys.argv[1], " ".join(sys.argv[2:])
text = sys.stdin.read()
try:
    r = json.loads(text[text.index("{"):])
except ValueError:
    print(args, "| failed:", text[-400:])
    sys.exit()
for c in r["results"]:
    if mode == "pairs":
        print(args, "|", c["name"], "| %.2f M pairs/s | %.4f ms" % (c["docs_per_s"] / 1e6, c["ms"]))
        continue
    shapes = " ".join("%dK/%d %.0f" % (s["kib"], s["stages"], s["gbps"]) for s in r.get("ceiling_read_copy_shapes", []))
    print(args, "|", c["name"], "| %.2f M docs/s | %.0f GB/s | %.1f%% of %.0f (loads %.0f, copies %.0f%s%s) | %.4f ms"
          % (c["docs_per_s"] / 1e6, c["gb_per_s"], c["pct_ceiling"], r["ceiling_read_gbps"],
             r.get("ceiling_read_loads_gbps") or 0, r.get("ceiling_read_copies_gbps") or 0,
             ": " + shapes if shapes else "",
             ", %.1f GB read" % (r["ceiling_bytes"] / 1e9) if r.get("ceiling_bytes") else "", c["ms"])
          + ("" if c.get("case_ceiling_gbps") is None else " | case bytes ceiling %.0f GB/s (%.1f%% of it)"
             % (c["case_ceiling_gbps"], 100 * c["gb_per_s"] / c["case_ceiling_gbps"])))
