# What the IVF device scripts share (sourced by bench/ivf_batch1_check.sh and
# msmarco_gpus_check.sh, from the repository root, after exact_split_lib.sh), on the index that
# bench/msmarco_scale.py leaves in $W/index:
# `ivf_search BIN BATCH RUN [FLAGS]`: one search of its queries, its summary line;
# `ivf_ab`: IVF 8/4096 at batches 1 and 32 by .dev's build and .devold's in turn, twice, then
#   their run files compared;
# `ivf_kernel_times`: ncu's kernel durations over 16 batch-1 queries (bench/ncu_kernel_times.py);
# `ivf_stage_profile KERNEL`: one launch of KERNEL profiled (after `ivf_kernel_times`).
W=${W:-/tmp/msmarco}
ivf_search() {
  local bin=$1 batch=$2 run=$3; shift 3
  "$bin" index search --index $W/index --queries $W/queries.safetensors -k 10 --device cuda --batch "$batch" \
    --rerank-k 0 --out "$run" "$@" 2>&1 | tail -1
}
ivf_ab() {
  local b bin
  for b in 1 32; do
    for bin in .dev/tilemaxsim .devold/tilemaxsim .dev/tilemaxsim .devold/tilemaxsim; do
      echo -n "$bin batch $b: "
      ivf_search $bin $b /tmp/r_$(basename $(dirname $bin))_$b.trec --nprobe 8 --ndocs 4096
    done
  done
  for b in 1 32; do cmp /tmp/r_.dev_$b.trec /tmp/r_.devold_$b.trec && echo "batch $b: same run files"; done
}
ivf_kernel_times() {
  python3 - $W <<'PY'
import sys
from safetensors.numpy import load_file, save_file
w = sys.argv[1]
q = load_file(f"{w}/queries.safetensors")
save_file({"embeddings": q["embeddings"][: 16 * 32], "offsets": q["offsets"][:17]}, f"{w}/q16.safetensors")
PY
  timeout 120 ncu --clock-control none --section SpeedOfLight --csv --print-units base \
    .dev/tilemaxsim index search --index $W/index --queries $W/q16.safetensors -k 10 --device cuda --batch 1 --nprobe 8 \
    --ndocs 4096 --rerank-k 0 --out /tmp/r.trec > /tmp/ncu.csv 2>/dev/null
  python3 bench/ncu_kernel_times.py /tmp/ncu.csv 16
}
# `ivf_stage_profile KERNEL`: ncu's speed-of-light and memory sections of one launch of KERNEL
# (say ivf_interaction) in a batch-1 search of the 16 queries of `ivf_kernel_times`.
ivf_stage_profile() {
  timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy -k "regex:$1" --launch-skip 2 --launch-count 1 \
    .dev/tilemaxsim index search --index $W/index --queries $W/q16.safetensors -k 10 --device cuda --batch 1 --nprobe 8 \
    --ndocs 4096 --rerank-k 0 --out /tmp/r.trec 2>&1 | grep -vE "^==PROF==|queries/s"
}
