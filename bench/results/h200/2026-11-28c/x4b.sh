#!/usr/bin/env bash
# Device calls B and C (nvidia-h200-x4, the same warm machine as call A): wait for fast-plaid
# (bench/msmarco_peers.py finish; exit 3 while it runs), then our searches and the table.
set -uo pipefail
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
cd bench && timeout 590 python3 msmarco_peers.py finish --bin ../.dev/tilemaxsim --work /tmp/mm --wait ${WAIT:-480} 2>&1 | tee $OUT/finish.log
rc=${PIPESTATUS[0]}
(cd /tmp/mm && tar -czf $OUT/finish_logs.tgz *.log *.json *.trec 2>/dev/null); tail -3 /tmp/mm/peer.log; date -u +%T; exit $rc
