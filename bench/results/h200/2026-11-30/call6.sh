#!/usr/bin/env bash
# 2026-11-30 (eleventh), device call 6: the power of f32 queries on f16 corpora (two products a step, no split: the nearest
# shape to an f32 corpus split at upload), beside f32 and f16: the SM and memory clocks, instant power, temperatures and throttle
# reasons sampled every 20 ms while long runs go (f32 queries on f16, f32, f16), each with its
# bench line. .dev built from 049a996 (later commits change kernel comments only).
# usage: OUT=$OUT bash bench/results/h200/2026-11-30/call6.sh  (carry .dev)
cd "$(dirname "$0")/../../../.."
source bench/exact_split_lib.sh
q=clocks.sm,clocks.mem,power.draw.instant,temperature.gpu,temperature.memory,clocks_throttle_reasons.active
{
  device_header
  nvidia-smi --query-gpu=$q --format=csv,noheader | sed 's/^/idle: /'
  for case in "f16 f32" "f32 f32" "f16 f16"; do
    set -- $case; dt=$1; qt=$2
    reps=$([ $dt = f32 ] && echo 3000 || echo 6000)
    nvidia-smi --query-gpu=$q --format=csv,noheader -lms 20 > /tmp/smi_$dt.csv 2>&1 & smi=$!
    .dev/tilemaxsim bench --device cuda --reps $reps --json --dtype $dt --query-dtype $qt --docs 100000 --doc-len 128 2>/dev/null |
      python3 bench/bench_lines.py ceiling --dtype $dt --query-dtype $qt --docs 100000 --doc-len 128
    kill $smi; sleep 0.2
    python3 - /tmp/smi_$dt.csv <<'PY'
import sys, collections
rows = [[x.strip() for x in l.split(",")] for l in open(sys.argv[1]) if l.count(",") >= 5]
def num(x):
    try: return float(x.split()[0])
    except ValueError: return None
busy = [r for r in rows if (num(r[2]) or 0) > 250]
if not busy: print("  no busy samples"); sys.exit()
def med(i):
    v = sorted(x for x in (num(r[i]) for r in busy) if x is not None)
    return f"{v[len(v)//2]:.0f} (min {v[0]:.0f}, max {v[-1]:.0f})" if v else "n/a"
print(f"  {len(busy)} busy samples of {len(rows)}: SM MHz {med(0)}, mem MHz {med(1)}, power W {med(2)}, GPU C {med(3)}, HBM C {med(4)}")
print("  throttle reasons:", dict(collections.Counter(r[5] for r in busy)))
PY
  done
  echo "== $(date -u +%FT%TZ) done"
} 2>&1 | tee "$OUT/call6.log"
