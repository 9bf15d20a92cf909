#!/usr/bin/env bash
# Load test of `tilemaxsim serve`: the seeded corpus `bench` scores (written by `corpus synth`),
# the engine's own batched rate on it (`bench --queries 32`), then the server on 127.0.0.1
# under closed-loop load at each concurrency (bench/serve_load.rs: QPS, p50/p90/p99, mean batch),
# the saturated QPS as a share of the engine's rate, optionally a soak (an open loop at half the
# saturated rate, sampling the server's memory), and a SIGTERM whose exit status is checked.
# Every loop is bounded in time and count; nothing leaves the loopback interface.
# usage: bash bench/serve_load.sh [--device cpu|cuda|cuda:N] [--devices all|0,1] [--docs N]
#          [--duration S] [--concurrency 1,2,...] [--pairs N] [--soak SECONDS] [--port P]
#          [--encoding f16|f32|json]
#   --encoding: how requests carry their query (default f16, the corpus's dtype; on a GPU an f32
#   query against an f16 corpus runs the CUDA-core kernel, not the tensor cores: BENCHMARKS.md, "Serving on the H200").
#   --pairs N: after the sweep, N pairs of (engine bench, server at concurrency 2 x 32) back to
#   back, the ratio taken per pair: on a machine shared with other work the rate moves between
#   minutes, and only neighbouring measurements compare.
#   here: builds the release binary and the load generator if needed; GPU machine: after
#   bench/device_build.sh, with .dev carried (it uses .dev/tilemaxsim and .dev/serve_load).
#   Writes $OUT (default target/serve-load, or gpu-out where .dev is used): bench.json,
#   load.json, soak.json, server.log, summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=cpu DEVICES="" DOCS="" DURATION=10 CONC=1,2,4,8,16,32,64,128,256 SOAK=0 PORT=18080 PAIRS=3
ENCODING=f16 DTYPE=f16 DOC_LEN=128 DIM=128 NQ=32 BATCH=32
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --devices) DEVICES=$2; shift 2 ;;
    --docs) DOCS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --concurrency) CONC=$2; shift 2 ;;
    --soak) SOAK=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --encoding) ENCODING=$2; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in cpu) DOCS=${DOCS:-1000} ;; *) DOCS=${DOCS:-100000} ;; esac

if [ -x .dev/tilemaxsim ] && [ -x .dev/serve_load ]; then
  BIN=.dev/tilemaxsim LOAD=.dev/serve_load OUT=${OUT:-gpu-out}
else
  cargo build --release -q -p tilemaxsim-cli --bin tilemaxsim --example serve_load
  BIN=target/release/tilemaxsim LOAD=target/release/examples/serve_load OUT=${OUT:-target/serve-load}
fi
mkdir -p "$OUT"
rm -f "$OUT"/pair*-bench.json "$OUT"/pair*-load.json "$OUT/soak.json"
CORPUS="$OUT/synth-$DTYPE-$DOCS-$DOC_LEN-$DIM.safetensors"
[ -f "$CORPUS" ] || "$BIN" corpus synth --docs "$DOCS" --doc-len "$DOC_LEN" --dim "$DIM" --dtype "$DTYPE" -o "$CORPUS" >/dev/null

echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, device $DEVICE${DEVICES:+ devices $DEVICES}"
echo "== engine: $BIN bench --device $DEVICE --dtype $DTYPE --doc-len $DOC_LEN --docs $DOCS --nq $NQ --dim $DIM --queries $BATCH"
"$BIN" bench --device "$DEVICE" --dtype "$DTYPE" --doc-len "$DOC_LEN" --docs "$DOCS" --nq "$NQ" \
  --dim "$DIM" --queries "$BATCH" --reps 5 --json >"$OUT/bench.json"

SERVE=("$BIN" serve --corpus "$CORPUS" --device "$DEVICE" --addr "127.0.0.1:$PORT" --max-batch-queries "$BATCH")
[ -n "$DEVICES" ] && SERVE+=(--devices "$DEVICES")
echo "== server: ${SERVE[*]}"
"${SERVE[@]}" 2>"$OUT/server.log" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true' EXIT
ready() { python3 -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$PORT/readyz', timeout=2)" 2>/dev/null; }
for _ in $(seq 600); do ready && break; kill -0 "$PID" 2>/dev/null || { cat "$OUT/server.log"; exit 1; }; sleep 0.5; done
ready || { echo "the server did not get ready in 300 s" >&2; exit 1; }

echo "== load: $LOAD --concurrency $CONC --duration-s $DURATION --tokens $NQ (one query of $NQ tokens per request, $ENCODING, k = 10)"
"$LOAD" --url "http://127.0.0.1:$PORT" --concurrency "$CONC" --duration-s "$DURATION" --tokens "$NQ" \
  --encoding "$ENCODING" --json "$OUT/load.json"
SAT=$((2 * BATCH))
for i in $(seq "$PAIRS"); do
  echo "== pair $i of $PAIRS: bench --queries $BATCH, then the server at concurrency $SAT"
  "$BIN" bench --device "$DEVICE" --dtype "$DTYPE" --doc-len "$DOC_LEN" --docs "$DOCS" --nq "$NQ" \
    --dim "$DIM" --queries "$BATCH" --reps 5 --json >"$OUT/pair$i-bench.json"
  "$LOAD" --url "http://127.0.0.1:$PORT" --concurrency "$SAT" --duration-s "$DURATION" --tokens "$NQ" \
    --encoding "$ENCODING" --json "$OUT/pair$i-load.json" | tail -1
done
# Half load: half the saturated QPS (the pairs' median; else the sweep's best).
RATE=$(python3 -c "
import glob, json, statistics
p = [json.load(open(f))['levels'][0]['qps'] for f in glob.glob('$OUT/pair*-load.json')]
l = json.load(open('$OUT/load.json'))['levels']
print((statistics.median(p) if p else max(x['qps'] for x in l)) / 2)")
if [ "$SOAK" != 0 ]; then
  echo "== soak: $SOAK s at $RATE requests/s (half the saturated QPS), memory sampled every 10 s"
  "$LOAD" --url "http://127.0.0.1:$PORT" --rate "$RATE" --soak-s "$SOAK" --tokens "$NQ" --encoding "$ENCODING" \
    --server-pid "$PID" --json "$OUT/soak.json" >/dev/null
fi
kill -TERM "$PID"
set +e; wait "$PID"; CODE=$?; set -e
trap - EXIT
echo "== SIGTERM: the server exited with status $CODE"

python3 - "$OUT" "$SOAK" "$CODE" <<'PY' | tee "$OUT/summary.md"
import json, sys
out, soak, code = sys.argv[1], sys.argv[2] != "0", sys.argv[3]
b = json.load(open(f"{out}/bench.json"))["results"][0]
engine_qps = b["queries"] / (b["ms"] / 1e3)
levels = json.load(open(f"{out}/load.json"))["levels"]
print(f"engine (`bench --queries {b['queries']}`, median of 5): {b['ms']:.2f} ms per batch = {engine_qps:.1f} queries/s")
print("| concurrency | requests | errors | QPS | p50 ms | p90 ms | p99 ms | mean batch | ms per batch | engine busy |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for l in levels:
    print(f"| {l['concurrency']} | {l['ok']} | {sum(l['errors'].values())} | {l['qps']:.1f} | {l['p50_ms']:.2f} | {l['p90_ms']:.2f} | {l['p99_ms']:.2f} | {l['mean_batch_queries']:.1f} | {l['batch_compute_ms']:.1f} | {100 * l['engine_busy']:.0f}% |")
best = max(levels, key=lambda l: l["qps"])
print(f"\nsweep: best {best['qps']:.1f} QPS at concurrency {best['concurrency']} = {100 * best['qps'] / engine_qps:.1f}% of the engine's batched rate measured before the sweep")
import glob, statistics
ratios = []
for bf in sorted(glob.glob(f"{out}/pair*-bench.json")):
    pb = json.load(open(bf))["results"][0]
    e = pb["queries"] / (pb["ms"] / 1e3)
    l = json.load(open(bf.replace("-bench", "-load")))["levels"][0]
    ratios.append(l["qps"] / e)
    print(f"pair {bf.split('pair')[-1].split('-')[0]}: engine {pb['ms']:.1f} ms per batch = {e:.1f} queries/s; server {l['qps']:.1f} QPS at concurrency {l['concurrency']} "
          f"(p50 {l['p50_ms']:.1f} ms, p99 {l['p99_ms']:.1f} ms, mean batch {l['mean_batch_queries']:.1f}, {l['batch_compute_ms']:.1f} ms per batch in its engine, "
          f"busy {100 * l['engine_busy']:.0f}%): {100 * l['qps'] / e:.1f}%")
if ratios:
    print(f"saturation: the server at {100 * statistics.median(ratios):.1f}% of `bench --queries {b['queries']}` (median of {len(ratios)} pairs)")
if soak:
    s = json.load(open(f"{out}/soak.json"))["soak"]
    rss = [r for _, r in s["rss_kib"] if r]
    print(f"soak: {s['seconds']:.0f} s at {s['rate']:.1f} req/s: {s['ok']} ok, errors {s['errors'] or 'none'}, "
          f"skipped {s['skipped_over_1024_in_flight']}; p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms "
          f"(p99/p50 {s['p99_ms'] / s['p50_ms']:.2f}); server RSS MiB first {rss[0]/1024:.1f}, "
          f"last {rss[-1]/1024:.1f}, max {max(rss)/1024:.1f} over {len(rss)} samples")
print(f"SIGTERM: exit status {code}")
PY
