"""tilemaxsim.ray on the GPU machine: shard actors one per GPU against one GPU, a shard killed
mid-load, and the Ray Serve application under HTTP load (bench/serve_load.rs as the client).

On a local Ray cluster holding every GPU of the machine, over one exact corpus file:
1. `ShardedSearcher` with 1, 2, 4, … and every GPU (one actor per GPU, `num_gpus=1`): the
   hits of 64 seeded queries checked against the driver's own single-GPU search of the whole
   file, then latency at batch 1 and 32 (median and p99 of `--reps` after a warm-up) and
   throughput with `--depth` batches of one query in flight;
2. with every GPU: one shard actor killed while batches are in flight: the searches it held
   must raise `ShardError` (no partial hits), later ones answer again once Ray restarts it,
   with the same hits as before;
3. the Serve application (`build_app(..., device="cuda")`) with one shard and with one shard
   per GPU, loaded by `serve_load` over the loopback address at each concurrency, with requests
   of one query and of 32.

Writes `--out`/ray_gpu.json and prints a summary. Every step is bounded in time.
usage: python3 bench/ray_gpu.py --corpus C.safetensors --out DIR [--load .dev/serve_load]
         [--duration 5] [--concurrency 1,8,32,64,128] [--batched-concurrency 1,4,16] [--reps 20]
         [--depth 8] [--skip shards,kill,serve]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import ray
import torch

import tilemaxsim
from tilemaxsim.ray import ShardedSearcher, ShardError


def gpu_counts(gpus):
    n, out = 1, []
    while n < gpus:
        out.append(n)
        n *= 2
    return out + [gpus]


def percentiles(ms):
    ms = sorted(ms)
    return ms[len(ms) // 2], ms[round((len(ms) - 1) * 0.99)]


def same_hits(s, i, ws, wi):
    """The same ranking as the single-GPU search, ties within 1e-5 allowed to swap (a shard may
    run another kernel shape than the whole corpus)."""
    return bool(np.allclose(s, ws, atol=1e-5) and ((i == wi) | (np.abs(s - ws) < 1e-5)).all())


def shard_rows(args, Q, ws, wi, n):
    t = time.monotonic()
    with ShardedSearcher(args.corpus, shards=n, device="cuda", num_gpus=1, num_cpus=1, timeout=600) as searcher:
        ready_s = time.monotonic() - t
        info = searcher.info()
        s, i = searcher.search(Q, 10, timeout=120)
        row = {
            "gpus": n,
            "ready_s": ready_s,
            "shard_gpus": [x["gpus"] for x in info],
            "same_hits_as_one_gpu": same_hits(s, i, ws, wi),
        }
        for batch in (1, 32):
            searcher.search(Q[:batch], 10, timeout=120)
            ms = []
            for r in range(args.reps):
                b = (r * batch) % (len(Q) - batch + 1)
                t = time.perf_counter()
                searcher.search(Q[b : b + batch], 10, timeout=120)
                ms.append((time.perf_counter() - t) * 1e3)
            p50, p99 = percentiles(ms)
            row[f"batch{batch}"] = {"p50_ms": p50, "p99_ms": p99, "queries_per_s": batch / p50 * 1e3}
        # Throughput: `depth` single-query searches in flight for `duration` seconds.
        done, pending, t0, q = 0, [], time.monotonic(), 0
        while time.monotonic() - t0 < args.duration:
            while len(pending) < args.depth:
                pending.append(searcher.submit(Q[q % len(Q)], 10))
                q += 1
            pending.pop(0).result(timeout=120)
            done += 1
        for p in pending:
            p.result(timeout=120)
        row["pipelined_queries_per_s"] = (done + len(pending)) / (time.monotonic() - t0)
    return row


def kill_test(args, Q, ws, wi, n):
    batches = [slice(b, b + 8) for b in range(0, 64, 8)] * 4
    with ShardedSearcher(
        args.corpus, shards=n, device="cuda", num_gpus=1, num_cpus=1, max_restarts=2, timeout=600
    ) as searcher:
        victim = searcher.actors[n - 1]
        old_pid = searcher.info()[n - 1]["pid"]
        pending = [searcher.submit(Q[b], 10) for b in batches]
        first = pending[0].result(timeout=120)
        assert same_hits(first.scores, first.indices, ws[batches[0]], wi[batches[0]])
        ray.kill(victim, no_restart=False)
        failed = answered_before = 0
        messages = set()
        for p, b in zip(pending[1:], batches[1:]):
            try:
                h = p.result(timeout=120)
            except ShardError as e:
                assert e.shard == n - 1 and "no partial results" in str(e), e
                messages.add(str(e).split(" (")[0])
                failed += 1
            else:
                assert same_hits(h.scores, h.indices, ws[b], wi[b])
                answered_before += 1
        t, refused, answer = time.monotonic(), 0, None
        while answer is None and time.monotonic() - t < 120:
            try:
                answer = searcher.search(Q, 10, timeout=120)
            except ShardError:
                refused += 1
                time.sleep(0.2)
        assert answer is not None, "the killed shard was not restarted within 120 s"
        new_pid = searcher.actors[n - 1].info.remote()
        return {
            "gpus": n,
            "in_flight": len(pending) - 1,
            "failed_with_shard_error": failed,
            "answered_correctly_before_the_kill": answered_before,
            "refused_while_restarting": refused,
            "restart_s": time.monotonic() - t,
            "answers_after_restart_equal": same_hits(answer[0], answer[1], ws, wi),
            "new_process": ray.get(new_pid)["pid"] != old_pid,
            "shard_error_messages": sorted(messages),
        }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_rows(args, Q, ws, wi, gpus):
    import urllib.request

    from ray import serve

    from tilemaxsim.ray.serve import build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    rows = []
    try:
        for n in sorted({1, gpus}):
            t = time.monotonic()
            serve.run(
                build_app(args.corpus, shards=n, device="cuda", num_gpus=1, num_cpus=1, max_batch_queries=32),
                name="tilemaxsim",
                route_prefix="/",
            )
            ready_s = time.monotonic() - t
            # One request checked against the single-GPU search before the load.
            body = {
                "queries": [{"id": str(a), "embeddings": Q[a].astype(np.float32).tolist()} for a in range(8)],
                "k": 10,
            }
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/search", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=120) as r:
                got = json.loads(r.read())["results"]
            correct = len(got) == 8 and all(
                same_hits(
                    np.array([h["score"] for h in g["hits"]]),
                    np.array([int(h["doc"]) for h in g["hits"]]),
                    ws[a],
                    wi[a],
                )
                for a, g in enumerate(got)
            )
            row = {"gpus": n, "ready_s": ready_s, "answers_correct": correct}
            # Requests of one query, then of 32 (a client that batches its own queries).
            for per_request, levels in ((1, args.concurrency), (32, args.batched_concurrency)):
                if not levels:
                    continue
                out = os.path.join(args.out, f"ray_serve_{n}gpu_{per_request}q.json")
                cmd = [args.load, "--url", f"http://127.0.0.1:{port}", "--concurrency", levels]
                cmd += ["--duration-s", str(args.duration), "--warmup-s", "1", "--tokens", "32", "--encoding", "f16"]
                cmd += ["--queries-per-request", str(per_request), "--json", out]
                timeout = 60 + len(levels.split(",")) * (args.duration + 3)
                load = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                print(f"-- {n} GPU(s), {per_request} queries per request", load.stdout, load.stderr[-2000:], sep="\n")
                row[f"levels_{per_request}q"] = json.load(open(out))["levels"] if load.returncode == 0 else []
            rows.append(row)
            serve.delete("tilemaxsim")
    finally:
        serve.shutdown()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--load", default=".dev/serve_load")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--concurrency", default="1,8,32,64,128", help="levels of one-query requests")
    p.add_argument("--batched-concurrency", default="1,4,16", help="levels of 32-query requests")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--skip", default="", help="steps to skip: shards,kill,serve")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpus = torch.cuda.device_count()
    if gpus < 1:
        sys.exit("no GPU")
    ray.init(num_gpus=gpus, num_cpus=max(4, 2 * gpus), include_dashboard=False, log_to_driver=False)
    rng = np.random.default_rng(0)
    whole = tilemaxsim.Corpus.load(args.corpus, device="cuda")
    Q = rng.standard_normal((64, 32, whole.dim)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=2, keepdims=True)
    Q = Q.astype(np.float16)
    ws, wi = whole.search(Q, 10)
    report = {
        "gpus": gpus,
        "device": torch.cuda.get_device_name(0),
        "documents": len(whole),
        "tokens": whole.num_tokens,
    }
    del whole
    torch.cuda.empty_cache()
    skip = set(args.skip.split(","))
    steps = [
        ("shards", lambda: [shard_rows(args, Q, ws, wi, n) for n in gpu_counts(gpus)]),
        ("kill", lambda: kill_test(args, Q, ws, wi, gpus)),
        ("serve", lambda: serve_rows(args, Q, ws, wi, gpus)),
    ]
    for name, step in steps:
        if name in skip:
            continue
        t = time.monotonic()
        try:
            report[name] = step()
        except Exception as e:  # noqa: BLE001 - reported, and the next step still runs
            report[name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"== {name} ({time.monotonic() - t:.1f} s): {json.dumps(report[name], indent=1)}", flush=True)
        with open(os.path.join(args.out, "ray_gpu.json"), "w") as f:
            json.dump(report, f, indent=1)
    ray.shutdown()
    failed = [n for n, _ in steps if isinstance(report.get(n), dict) and "error" in report[n]]
    sys.exit(f"failed: {failed}" if failed else 0)


if __name__ == "__main__":
    main()
