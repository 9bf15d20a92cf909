#!/usr/bin/env bash
# One device call: Nsight Compute on our kernel and on flash-maxsim 0.3.0's at the shapes where
# we trail it by under 1% (B = 100K, U[32,256]) and at d = 768, same sections for both, so the
# reasons for the last percent are read off the same counters; then maxsim_bulk's documents per
# block at wide d (TILEMAXSIM_BULK=stages,run) and d = 1024 against the ring kernel.
# Build first with bench/device_build.sh; carry .dev and .whl. Log in $OUT/profile_peer.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_common.sh
python3 -m pip install --no-deps -q .whl/flash_maxsim-0.3.0-py3-none-any.whl 2>&1 | tail -1
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis"
KEEP="Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit (Reg|Shared|Warps)|Grid Size|Block Size|Dynamic Shared|Warp Cycles Per Issued|L2 Hit|Compute \(SM\) Throughput|Waves Per SM|Active Warps"
ours() {
  echo "== ncu ours: $*"
  timeout 150 ncu --kernel-name regex:maxsim --launch-skip 5 --launch-count 1 $SECTIONS \
    $B bench --device cuda --reps 3 "$@" 2>&1 | grep -E "$KEEP" | head -30
}
flash() {
  echo "== ncu flash-maxsim: $*"
  timeout 150 ncu --profile-from-start off $SECTIONS python3 - "$@" <<'PY' 2>&1 | grep -E "$KEEP|^  [a-z_]+.*\(|==PROF==" | head -34
import sys, torch, flash_maxsim as fm
docs, dim, lo, hi = (int(x) for x in sys.argv[1:5])
g = torch.Generator(device="cuda").manual_seed(0)
Q = torch.randn(32, dim, device="cuda", generator=g).half()
if lo == hi:
    D = torch.randn(docs, lo, dim, device="cuda", generator=g).half()
    f = lambda: fm.flash_maxsim(Q, D)
else:
    lens = torch.randint(lo, hi + 1, (docs,), device="cuda", generator=g)
    cu = torch.zeros(docs + 1, dtype=torch.int32, device="cuda"); cu[1:] = lens.cumsum(0)
    D = torch.randn(int(cu[-1]), dim, device="cuda", generator=g).half()
    f = lambda: fm.flash_maxsim(Q, D, doc_lengths=cu)
for _ in range(5): f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart(); f(); torch.cuda.synchronize(); torch.cuda.cudart().cudaProfilerStop()
PY
}
row() {
  echo -n "${TILEMAXSIM_BULK:+bulk=$TILEMAXSIM_BULK }$*: "
  timeout 60 $B bench --device cuda "$@" 2>&1 | sed -n 3p
}
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  ours --dtype f16 --docs 100000;                    flash 100000 128 128 128
  ours --dtype f16 --docs 100000 --doc-len 32:256;   flash 100000 128 32 256
  ours --dtype f16 --docs 10000 --dim 768;           flash 10000 768 128 128
  echo "== wide d: ring, then bulk runs of 1..4 documents per block (2 stages)"
  for a in "--dim 768 --docs 10000 --reps 30" "--dim 768 --docs 100000 --reps 10" "--dim 1024 --docs 10000 --reps 30" \
           "--dim 256 --docs 100000 --reps 20" "--dim 768 --doc-len 32:256 --docs 10000 --reps 30"; do
    row --dtype f16 $a --kernel ring
    for s in 2,1 2,2 2,3 2,4; do TILEMAXSIM_BULK=$s row --dtype f16 $a; done
  done
} 2>&1 | tee "$OUT/profile_peer.log"
