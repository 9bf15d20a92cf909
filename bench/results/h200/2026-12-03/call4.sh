#!/usr/bin/env bash
# 2026-12-03 (twenty-seventh), device call 4: issue 28's quality on a second real collection,
# CISI (1,460 documents, 76 judged queries; ../shared/data/make_data.py cisi, then
# reference.py's float64 top-100), beside fast-plaid 1.7.0 on the same GPU in one run:
# `python3 bench/index_quality.py --device cuda --fast-plaid` (our index built on the GPU, IVF
# at several nprobe and exhaustive, each with and without the exact stage; fast-plaid's index
# at nbits 2 searched at n_ivf_probe 8, n_full_scores 4096), batch 1.
# Carried: .devcache (the CISI fixture, corpus xz'd; the release binary xz'd; the kernel cache)
# and .whlc (fast-plaid 1.7.0.2110, fastkmeans 0.5.0, joblib), to stay under the carry limit.
# usage: OUT=$OUT bash bench/results/h200/2026-12-03/call4.sh  (carry .devcache .whlc)
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache
source bench/peer_wheels.sh
mkdir -p .dev/kcache /tmp/cisi /tmp/tm && cp .devcache/kcache/*.xz .dev/kcache/
source bench/seed_kernel_cache.sh
xz -dc .devcache/tilemaxsim.xz > /tmp/tm/tilemaxsim && chmod +x /tmp/tm/tilemaxsim
cp .devcache/data/*.txt .devcache/data/*.trec .devcache/data/queries.safetensors /tmp/cisi/
xz -dc .devcache/data/corpus.safetensors.xz > /tmp/cisi/corpus.safetensors
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  cd bench && timeout 500 python3 index_quality.py --bin /tmp/tm/tilemaxsim --data /tmp/cisi \
    --work /tmp/iq --device cuda --fast-plaid 2>&1
  echo "== $(date -u +%FT%TZ) done"
} | tee "$OUT/call4.log"
