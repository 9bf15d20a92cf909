"""Deletes and compaction at scale (issue 28, live updates): the index `bench/index_peers.py` left
in --work (its `index`, `queries.safetensors`, `exact.trec`), a seeded --fraction of its documents
deleted with `tilemaxsim index delete`, searched live, then `tilemaxsim index compact`ed into a
new directory and searched again. For the live index and the compacted one: IVF (nprobe 8,
ndocs 4096) at batches 1 and 32 and exhaustive search at 32, on the codes, on the GPU:
queries/s, p50 / p99, recall@10 against the exact top-10 of the live documents, and whether the
two runs rank the same documents (the compacted index names each document by its old number).
Also the delete's and the compaction's seconds and both directories' bytes.
usage (GPU machine, after index_peers.py):
  python3 bench/index_compact.py --bin .dev/tilemaxsim --work /tmp/index-peers [--fraction 0.1]"""

import argparse
import pathlib
import random
import re
import shutil

from index_peers import du, index_search, read_run, recall, run


def search(a, w, index, label, flags, batch):
    out = w / f"compact_{label}_b{batch}.trec"
    log = w / f"compact_{label}_b{batch}.log"
    _, qps, p50, p99 = index_search(a, index, w / "queries.safetensors", batch, ["--rerank-k", "0", *flags], out, log)
    return read_run(out), qps, p50, p99


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--work", default="/tmp/index-peers")
    p.add_argument("--fraction", type=float, default=0.1)
    a = p.parse_args()
    w = pathlib.Path(a.work)
    index, compacted = w / "index", w / "index-compacted"
    docs = int(re.search(r'"documents":\s*(\d+)', (index / "index.json").read_text()).group(1))
    gone = sorted(random.Random(7).sample(range(docs), int(docs * a.fraction)))
    # One command; the numbers in arguments of 10,000 (an argument holds at most 128 KB).
    docs_args = [x for i in range(0, len(gone), 10_000) for x in ("--docs", ",".join(map(str, gone[i : i + 10_000])))]
    _, delete_s = run([a.bin, "index", "delete", "--index", index, *docs_args], w / "compact_delete.log")
    shutil.rmtree(compacted, ignore_errors=True)
    r, compact_s = run([a.bin, "index", "compact", "--index", index, "-o", compacted], w / "compact.log")
    print(f"{docs} documents, {len(gone)} deleted in {delete_s:.2f} s; {r.stdout.strip()}")
    print(f"bytes: live index {du(index) / 1e6:.1f} MB, compacted {du(compacted) / 1e6:.1f} MB\n")
    # The exact top-10 of the live documents: the exact run of every document, deleted ones dropped.
    dropped = {str(j) for j in gone}
    exact = {q: [d for d in ds if d not in dropped] for q, ds in read_run(w / "exact.trec").items()}
    print(
        "| search | batch | index | queries/s | p50 ms | p99 ms | recall@10 of the exact top-10's live documents "
        "| same hits |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for label, flags, batch in [
        ("ivf", ["--nprobe", "8", "--ndocs", "4096"], 1),
        ("ivf", ["--nprobe", "8", "--ndocs", "4096"], 32),
        ("exhaustive", ["--exhaustive"], 32),
    ]:
        live = search(a, w, index, f"{label}_live", flags, batch)
        after = search(a, w, compacted, f"{label}_compacted", flags, batch)
        same = live[0] == after[0]
        for name, (ranked, qps, p50, p99) in (("with its deletes", live), ("compacted", after)):
            print(
                f"| {label} | {batch} | {name} | {qps:.1f} | {p50:.2f} | {p99:.2f} | "
                f"{recall(ranked, exact):.4f} | {same} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
