#!/usr/bin/env bash
# 2026-11-29 (tenth), device call 6: why f32 B = 100K runs 9% slower back to back (the bench's
# median, 1.62 ms) than one launch under ncu (1.48 ms, call 2): the SM clock, power and
# throttle reasons sampled every 50 ms by nvidia-smi while the bench runs long (f32, then f16
# and bf16 for comparison), each with its bench line.
# usage: OUT=$OUT bash bench/results/h200/2026-11-29j/call6.sh  (carry .dev .devcache)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
mkdir -p $TILEMAXSIM_CACHE_DIR && tar -xJf .devcache/kcache.tar.xz -C $TILEMAXSIM_CACHE_DIR
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader)"
  for dt in f32 f16 bf16 f32; do
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > /tmp/smi_$dt.csv 2>&1 & smi=$!
    line=$(.dev/tilemaxsim bench --device cuda --reps 3000 --json --dtype $dt --docs 100000 --doc-len 128 2>&1 | python3 bench/bench_lines.py ceiling --dtype $dt --docs 100000 --doc-len 128)
    kill $smi; sleep 0.2
    echo "$line"
    python3 - /tmp/smi_$dt.csv <<'PY'
import sys, collections
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 3]
busy = [r for r in rows if float(r[1].split()[0]) > 250]  # samples while kernels run
if not busy: print("  no busy samples"); sys.exit()
clk = sorted(int(r[0].split()[0]) for r in busy); pw = sorted(float(r[1].split()[0]) for r in busy)
print(f"  {len(busy)} busy samples: SM clock median {clk[len(clk)//2]} MHz (min {clk[0]}, max {clk[-1]}), power median {pw[len(pw)//2]:.0f} W (max {pw[-1]:.0f}), temp {busy[-1][2]} C")
print("  throttle reasons:", dict(collections.Counter(r[3] for r in busy)))
PY
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call6.log"
