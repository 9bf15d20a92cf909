#!/usr/bin/env bash
# Device calls B, C (nvidia-h200-x4, the same warm machine as call A): `finish` waits for
# fast-plaid (exit 3 while it runs), then our searches and the table. Beside it on GPU 3
# (issue 27), once: what tail_tune.sh did not reach in call A (TAIL=1), then the wide d of the
# d list at B = 100K (never run on an H200 at that size) and the host time of a Python call.
set -uo pipefail
T0=$(date +%s)
export TILEMAXSIM_CACHE_DIR=/tmp/tilemaxsim-cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site LIK_SUPPRESS_NORM_WARN=1
if [ "${SIDE:-1}" = 1 ]; then
  (export CUDA_VISIBLE_DEVICES=3
   [ "${TAIL:-0}" = 1 ] && ROUNDS=1 OUT=$OUT/tail2 timeout 300 bash bench/tail_tune.sh > /dev/null 2>&1
   source bench/exact_split_lib.sh
   { device_header
     for d in 136 144 200 256 320 384 512 768 1024; do bench --dtype f16 --docs 100000 --doc-len 32:256 --dim $d; done
   } > $OUT/wide_100k.log 2>&1
   timeout 60 python3 bench/python_overhead.py > $OUT/python_overhead.log 2>&1) &
fi
(cd bench && timeout $((585 - $(date +%s) + T0)) python3 msmarco_peers.py finish --bin ../.dev/tilemaxsim --work /tmp/mm --wait ${WAIT:-470} 2>&1 | tee $OUT/finish.log)
rc=${PIPESTATUS[0]}
wait
(cd /tmp/mm && tar -czf $OUT/finish_logs.tgz *.log *.json *.trec 2>/dev/null); tail -3 /tmp/mm/peer.log; date -u +%T; exit $rc
