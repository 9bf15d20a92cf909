#!/usr/bin/env bash
# Nsight Compute on the B = 100K read (f16, Nq = 32, Nd = 128, d = 128): does flash-maxsim read
# fewer DRAM bytes than the corpus (L2 carry-over between calls), or the same bytes faster?
# No cache flush, no clock lock. flash: two back-to-back calls inside a profiler range; ours
# (OURS=1): maxsim_bulk's launches 3 and 4 of one bench. Carry .dev and .whl.
# Log: bench/results/ncu_read.log.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --no-deps -q .whl/flash_maxsim-0.3.0-py3-none-any.whl 2>&1 | tail -1
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_sectors_op_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem,dram__bytes_write.sum
cat > /tmp/fl.py <<'PY'
import torch, flash_maxsim as fm
torch.manual_seed(0)
Q = torch.nn.functional.normalize(torch.randn(32, 128, device="cuda"), dim=-1).half()
D = torch.nn.functional.normalize(torch.randn(100000, 128, 128, device="cuda"), dim=-1).half()
for _ in range(3): fm.flash_maxsim(Q, D)
torch.cuda.synchronize()
torch.cuda.profiler.start()
fm.flash_maxsim(Q, D); fm.flash_maxsim(Q, D)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
PY
echo "== flash under ncu (2 calls, back to back)"
timeout 200 ncu --profile-from-start off --cache-control none --clock-control none --metrics $M python3 /tmp/fl.py 2>&1 |
  grep -E "maxsim|gpu__|dram__|lts__|launch__|sm__warps" | head -40
[ -n "${OURS:-}" ] || exit 0
echo "== ours (bulk) under ncu: launches 3 and 4"
TILEMAXSIM_CACHE_DIR=/tmp/tmc timeout 200 ncu --kernel-name regex:maxsim_bulk --launch-skip 3 --launch-count 2 \
  --cache-control none --clock-control none --metrics $M \
  .dev/tilemaxsim bench --device cuda --dtype f16 --docs 100000 --reps 5 2>&1 |
  grep -E "maxsim|gpu__|dram__|lts__|launch__|sm__warps|B=100" | head -40
