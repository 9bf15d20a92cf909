"""`tilemaxsim serve --index` on a device, checked end to end (what tests/serve.rs checks on the
CPU in CI): a synthetic index built on the device, served over loopback, its answers compared
with `tilemaxsim index search` on the same device before and after another process adds and
deletes documents, and again after documents are added and deleted through the server's own
`POST /v1/index/add` / `delete`; the server's latency for one query at a time, alone and while
those writes run, and each write's latency (on disk and served when answered). Then the index is
compacted in place, through the server (`POST /v1/index/compact`, timed to its answer, which
comes once the new generation serves) and by another process (`index compact --in-place`, timed
until the server reports the new generation), one query at a time sent meanwhile, and the
answers compared again. With --devices, the server and `index search` split the documents over
those GPUs. Plain Python 3 (urllib).

usage: python3 bench/serve_index_check.py --bin .dev/tilemaxsim --device cuda [--work /tmp/serve-index] [--docs 20000] [--devices 0,1]
"""

import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import time
import urllib.request

from safetensors.numpy import load_file


def sh(*cmd):
    r = subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed: {r.stderr[-2000:]}")
    return r


def post(url, body, path="/v1/search"):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def run_hits(path):
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        q, _, doc, _, score, _ = line.split()
        out.setdefault(q, []).append((doc, float(score)))
    return [out[q] for q in sorted(out, key=int)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=".dev/tilemaxsim")
    p.add_argument("--device", default="cuda")
    p.add_argument("--work", default="/tmp/serve-index")
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--devices")
    a = p.parse_args()
    devices = ["--devices", a.devices] if a.devices else []
    w = pathlib.Path(a.work)
    w.mkdir(parents=True, exist_ok=True)
    for name, docs, ln, dt, seed in (("c", a.docs, "20:80", "f16", 1), ("q", 64, "32", "f32", 2),
                                     ("a", 500, "20:80", "f16", 3), ("b", 100, "20:80", "f32", 4)):
        sh(a.bin, "corpus", "synth", "--docs", docs, "--doc-len", ln, "--dim", 128, "--dtype", dt, "--seed", seed,
           "-o", w / f"{name}.safetensors")
    index = w / "idx"
    shutil.rmtree(index, ignore_errors=True)
    sh(a.bin, "index", "build", "--device", a.device, "--corpus", w / "c.safetensors", "-o", index)
    q = load_file(str(w / "q.safetensors"))
    emb, off = q["embeddings"], q["offsets"]
    queries = [emb[off[i]:off[i + 1]].tolist() for i in range(len(off) - 1)]
    b = load_file(str(w / "b.safetensors"))
    bemb, boff = b["embeddings"], b["offsets"]
    new_docs = [bemb[boff[i]:boff[i + 1]].tolist() for i in range(len(boff) - 1)]
    server = subprocess.Popen([a.bin, "serve", "--index", index, "--device", a.device, *devices,
                               "--addr", "127.0.0.1:18091"],
                              stderr=subprocess.PIPE, text=True)
    url = "http://127.0.0.1:18091"
    try:
        t = time.time()
        while True:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.time() - t > 120:
                raise SystemExit("the server did not become ready")
            time.sleep(0.05)
        print(f"ready in {time.time() - t:.2f} s")

        def check(label):
            got = []
            for s in range(0, len(queries), 32):  # --max-batch-queries
                got += post(url, {"queries": [{"embeddings": x} for x in queries[s:s + 32]], "k": 10})["results"]
            run = w / f"{label}.trec"
            sh(a.bin, "index", "search", "--device", a.device, *devices, "-k", 10, "--index", index, "--queries",
               w / "q.safetensors", "--out", run)
            want = run_hits(run)
            worst, same = 0.0, 0
            for g, wq in zip(got, want):
                docs = [h["doc"] for h in g["hits"]]
                same += docs == [d for d, _ in wq]
                worst = max([worst] + [abs(h["score"] - s) for h, (_, s) in zip(g["hits"], wq)])
            print(f"{label}: {same} of {len(want)} queries return index search's documents in its order; "
                  f"largest score difference {worst:.2e}")
            return got

        before = check("before")
        lat = []
        for x in queries:
            t = time.perf_counter()
            post(url, {"queries": [{"embeddings": x}], "k": 10})
            lat.append((time.perf_counter() - t) * 1e3)
        print(f"one query a request, {len(lat)} requests: p50 {statistics.median(lat):.2f} ms, "
              f"max {max(lat):.2f} ms (HTTP and JSON included)")
        gone = [h["index"] for h in before[0]["hits"][:3]]
        sh(a.bin, "index", "add", "--index", index, "--corpus", w / "a.safetensors")
        sh(a.bin, "index", "delete", "--index", index, "--docs", ",".join(map(str, gone)))
        t = time.time()  # the server takes another process's updates on a thread of its own
        while json.loads(urllib.request.urlopen(url + "/v1/info", timeout=30).read())["documents"] != a.docs + 497:
            if time.time() - t > 60:
                raise SystemExit("the server did not take the other process's updates")
            time.sleep(0.01)
        print(f"the server took the other process's add and delete {time.time() - t:.3f} s after they returned")
        after = check("after")
        back = sum(h["index"] in gone for r in after for h in r["hits"])
        added = sum(h["index"] >= a.docs for r in after for h in r["hits"])
        print(f"after the add and delete: {back} deleted documents returned, {added} hits among the added ones")

        # Writes through the server (10 adds of 10 documents, then deletes by id), while this
        # thread sends one query at a time.
        import threading

        writes, done = [], threading.Event()

        def writer():
            for s in range(0, len(new_docs), 10):
                t = time.perf_counter()
                post(url, {"documents": [{"id": f"http{s + i}", "embeddings": d}
                                         for i, d in enumerate(new_docs[s:s + 10])]}, "/v1/index/add")
                writes.append(("add", (time.perf_counter() - t) * 1e3))
            t = time.perf_counter()
            post(url, {"ids": [f"http{i}" for i in range(0, 100, 7)]}, "/v1/index/delete")
            writes.append(("delete", (time.perf_counter() - t) * 1e3))
            done.set()

        th = threading.Thread(target=writer)
        th.start()
        during = []
        i = 0
        while not done.is_set():
            t = time.perf_counter()
            post(url, {"queries": [{"embeddings": queries[i % len(queries)]}], "k": 10})
            during.append((time.perf_counter() - t) * 1e3)
            i += 1
        th.join()
        adds = sorted(ms for kind, ms in writes if kind == "add")
        print(f"writes through the server: 10 adds of 10 documents, p50 {statistics.median(adds):.2f} ms, "
              f"max {adds[-1]:.2f} ms; a delete of 15 by id {writes[-1][1]:.2f} ms (on disk and served when answered)")
        print(f"one query a request while they ran, {len(during)} requests: p50 {statistics.median(during):.2f} ms, "
              f"max {max(during):.2f} ms")
        info = json.loads(urllib.request.urlopen(url + "/v1/info", timeout=30).read())
        print(f"documents served: {info['documents']} (want {a.docs + 500 - 3 + 100 - 15})")
        check("after the server's writes")

        # Compactions in place while this thread sends one query at a time.
        def info_now():
            return json.loads(urllib.request.urlopen(url + "/v1/info", timeout=30).read())

        def queries_while(work):
            done, out, lat = threading.Event(), {}, []

            def run():
                t = time.perf_counter()
                out["answer"] = work()
                out["ms"] = (time.perf_counter() - t) * 1e3
                done.set()

            th = threading.Thread(target=run)
            start = time.perf_counter()
            th.start()
            i, slow = 0, []
            while not done.is_set():
                t = time.perf_counter()
                post(url, {"queries": [{"embeddings": queries[i % len(queries)]}], "k": 10})
                lat.append((time.perf_counter() - t) * 1e3)
                slow.append((lat[-1], (t - start) * 1e3))
                i += 1
            th.join()
            slow = ", ".join(f"{ms:.0f} ms sent at {at:.0f}" for ms, at in sorted(slow)[-3:])
            print(f"  the slowest requests (ms after the work started): {slow}")
            lat.sort()
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
            med = statistics.median(lat) if lat else float("nan")
            mx = lat[-1] if lat else float("nan")
            return out, f"{len(lat)} requests meanwhile: p50 {med:.2f} ms, p99 {p99:.2f} ms, max {mx:.2f} ms"

        out, during = queries_while(lambda: post(url, {}, "/v1/index/compact"))
        print(f"compaction through the server: {out['answer']} in {out['ms']:.0f} ms (answered once the new "
              f"generation serves); one query a request, {during}")
        check("after the server's compaction")
        sh(a.bin, "index", "delete", "--index", index, "--docs", "1,2,3")

        def by_another_process():
            g = info_now()["generation"]
            sh(a.bin, "index", "compact", "--in-place", "--index", index)
            t = time.perf_counter()
            while info_now()["generation"] == g:
                time.sleep(0.005)
            return f"generation {g + 1}, served {(time.perf_counter() - t) * 1e3:.0f} ms after the command returned"

        out, during = queries_while(by_another_process)
        print(f"compaction by another process: {out['answer']}; {out['ms']:.0f} ms in all; one query a request, "
              f"{during}")
        check("after another process's compaction")
    finally:
        server.terminate()
        log = server.communicate(timeout=60)[1]
        # The server's own account: generations prepared and switched to, slow batches, notices.
        print("\n".join(line for line in log.splitlines() if not line.startswith("tilemaxsim serve: ready"))[-4000:])


if __name__ == "__main__":
    main()
