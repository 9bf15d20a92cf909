#!/usr/bin/env python3
"""CPU MaxSim peers vs tilemaxsim, side by side, in one run.

MaxSim: score(Q, D) = sum_i max_j <q_i, d_j>  (float32 inputs, float32 accumulation).

Peers (PyPI), all used the way their READMEs recommend:
  maxsim-cpu 0.1.0   maxsim_cpu.maxsim_scores(Q, D[N,Nd,d])  /  maxsim_scores_variable(Q, [D_i[Nd_i,d], ...])
  fast-maxsim 0.2.0  fast_maxsim.<same two functions>   (fork of maxsim-cpu)
  maxsim-fast 0.1.1  maxsim_fast.<same two functions>   (fork of maxsim-cpu)
Baselines: numpy (X @ Q.T -> per-doc max -> sum) and numpy sgemm 4096^3 as the machine's matrix ceiling.
Ours: `BIN bench --device cpu --dtype {f32,f16,bf16} ... --json` run as a subprocess.

Run through bench/cpu_peers.sh (sets up bench/.venv-cpu and unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE).
usage: bash bench/cpu_peers.sh [options]   (options: bench/.venv-cpu/bin/python bench/cpu_peers.py --help)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
NQ, DIM = 32, 128
PEERS = [  # (display name, pypi dist, module)
    ("maxsim-cpu", "maxsim-cpu", "maxsim_cpu"),
    ("fast-maxsim", "fast-maxsim", "fast_maxsim"),
    ("maxsim-fast", "maxsim-fast", "maxsim_fast"),
]
REL_TOL = 1e-4


# ----------------------------------------------------------------------------- helpers

def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def time_it(fn, reps: int):
    """One warm-up call, then `reps` timed calls. Returns (median_s, all_times, last_result)."""
    out = fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def machine_info() -> dict:
    model = platform.processor() or "?"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
                break
    except Exception:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    fl = line.split(":", 1)[1].split()
                    flags = " ".join(x for x in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512fp16", "amx_tile") if x in fl)
                    break
    except OSError:
        pass
    return {"cpu": model, "cores": cores, "simd": flags, "python": platform.python_version(),
            "numpy": np.__version__}


def blas_info() -> list[dict]:
    try:
        from threadpoolctl import threadpool_info
        return [{k: d.get(k) for k in ("user_api", "internal_api", "version", "architecture",
                                       "num_threads", "threading_layer", "filepath")}
                for d in threadpool_info()]
    except Exception as e:  # pragma: no cover
        return [{"error": repr(e)}]


def pkg_version(dist: str) -> str:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "?"


def sgemm_ceiling(reps: int, n: int = 4096) -> dict:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    med, times, _ = time_it(lambda: np.matmul(a, b, out=c), reps)
    return {"n": n, "ms": med * 1e3, "times_s": times, "gflop_per_s": 2.0 * n ** 3 / med / 1e9}


# ----------------------------------------------------------------------------- data

def make_case(kind: str, n_docs: int):
    """Seeded, L2-normalized float32 token embeddings packed as X[T, d] with doc offsets[N+1]."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((NQ, DIM), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    if kind == "fixed":
        lens = np.full(n_docs, 128, dtype=np.int64)
    else:
        lens = rng.integers(32, 256, size=n_docs, endpoint=True).astype(np.int64)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    x = np.empty((int(offsets[-1]), DIM), dtype=np.float32)
    chunk = 1 << 18
    for s in range(0, x.shape[0], chunk):  # chunked: keeps temporaries small
        blk = rng.standard_normal((min(chunk, x.shape[0] - s), DIM), dtype=np.float32)
        blk /= np.linalg.norm(blk, axis=1, keepdims=True)
        x[s:s + blk.shape[0]] = blk
    return q, x, lens, offsets


def reference_scores(q, x, offsets, docs_per_chunk: int = 2048) -> np.ndarray:
    """float64 MaxSim reference."""
    q64 = q.astype(np.float64)
    n = len(offsets) - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(0, n, docs_per_chunk):
        j = min(n, i + docs_per_chunk)
        a, b = offsets[i], offsets[j]
        p = x[a:b].astype(np.float64) @ q64.T
        out[i:j] = np.maximum.reduceat(p, offsets[i:j] - a, axis=0).sum(axis=1)
    return out


# ----------------------------------------------------------------------------- implementations

def bench_case(kind: str, n_docs: int, reps: int, peers: dict) -> dict:
    t0 = time.perf_counter()
    q, x, lens, offsets = make_case(kind, n_docs)
    tokens = int(offsets[-1])
    flops = 2.0 * NQ * DIM * tokens
    log(f"[{kind}] generated {n_docs} docs / {tokens} tokens ({x.nbytes / 2**20:.0f} MiB) "
        f"in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    ref = reference_scores(q, x, offsets)
    log(f"[{kind}] float64 reference in {time.perf_counter() - t0:.1f}s")

    rows = []

    def record(name, fn, api, notes="", peer=True):
        log(f"[{kind}] {name} ...")
        try:
            med, times, scores = time_it(fn, reps)
        except Exception as e:
            log(f"[{kind}] {name} FAILED: {e!r}")
            rows.append({"name": name, "api": api, "error": repr(e), "peer": peer, "notes": notes})
            return
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        rel = float(np.max(np.abs(scores - ref) / np.maximum(np.abs(ref), 1e-30)))
        rows.append({
            "name": name, "api": api, "notes": notes, "peer": peer,
            "ms": med * 1e3, "times_s": times,
            "docs_per_s": n_docs / med, "gflop_per_s": flops / med / 1e9,
            "max_rel_err": rel, "agrees": rel <= REL_TOL,
        })
        log(f"[{kind}] {name}: {med * 1e3:.1f} ms, {flops / med / 1e9:.1f} GFLOP/s, max rel err {rel:.2e}")

    if kind == "fixed":
        nd = int(lens[0])
        d3 = x.reshape(n_docs, nd, DIM)  # zero-copy view, C-contiguous
        for disp, mod in peers.items():
            record(disp, lambda m=mod: m.maxsim_scores(q, d3), "maxsim_scores(Q, D[N,Nd,d])")
        qt = np.ascontiguousarray(q.T)
        record("numpy (X@Q.T, max, sum)",
               lambda: (x @ qt).reshape(n_docs, nd, NQ).max(axis=1).sum(axis=1),
               "(X @ Q.T).reshape(N,Nd,Nq).max(1).sum(1)")
    else:
        doc_list = np.split(x, offsets[1:-1])  # list of zero-copy, C-contiguous [Nd_i, d] views
        for disp, mod in peers.items():
            record(disp, lambda m=mod: m.maxsim_scores_variable(q, doc_list),
                   "maxsim_scores_variable(Q, [D_i])", "native variable length (list of arrays)")
        if peers:
            # Informative only: the padded-batch alternative with the first peer's fixed-shape API.
            disp, mod = next(iter(peers.items()))
            maxlen = int(lens.max())
            padded = np.zeros((n_docs, maxlen, DIM), dtype=np.float32)
            for i in range(n_docs):
                padded[i, :lens[i]] = doc_list[i]
            record(f"{disp} padded to {maxlen}", lambda m=mod: m.maxsim_scores(q, padded),
                   "maxsim_scores(Q, zero-padded D[N,256,d])",
                   "informative, not a peer row: zero padding is only correct when every max > 0; "
                   f"{n_docs * maxlen / tokens:.2f}x tokens", peer=False)
            del padded
        qt = np.ascontiguousarray(q.T)
        starts = offsets[:-1]
        record("numpy (X@Q.T, max, sum)",
               lambda: np.maximum.reduceat(x @ qt, starts, axis=0).sum(axis=1),
               "np.maximum.reduceat(X @ Q.T, starts).sum(1)")

    return {"case": kind, "docs": n_docs, "tokens": tokens, "flops": flops,
            "doc_len": "128" if kind == "fixed" else "32:256",
            "ref_score_mean": float(ref.mean()), "rows": rows}


def run_binary(bin_path: str, kind: str, dtype: str, n_docs: int, timeout: float) -> dict:
    doc_len = "128" if kind == "fixed" else "32:256"
    cmd = [bin_path, "bench", "--device", "cpu", "--dtype", dtype, "--nq", str(NQ), "--dim", str(DIM),
           "--docs", str(n_docs), "--doc-len", doc_len, "--json"]
    row = {"name": f"tilemaxsim {dtype}", "cmd": shlex.join(cmd), "peer": False, "ours": True,
           "dtype": dtype}
    log(f"[{kind}] {shlex.join(cmd)}")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row["error"] = f"timed out after {timeout:.0f}s"
        return row
    except OSError as e:
        row["error"] = f"could not run: {e}"
        return row
    if p.returncode != 0:
        row["error"] = f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}"
        return row
    out = p.stdout.strip()
    try:
        js = json.loads(out)
    except json.JSONDecodeError:
        try:
            js = json.loads(out[out.index("{"):out.rindex("}") + 1])
        except Exception:
            row["error"] = f"stdout is not JSON: {out[:200]!r}"
            return row
    try:
        r = js["results"][0]
        row.update({
            "raw": js, "ms": float(r["ms"]), "docs_per_s": float(r["docs_per_s"]),
            "gflop_per_s": float(r["gflop_per_s"]), "tokens": int(r.get("tokens", 0)),
            "own_pct_ceiling": r.get("pct_ceiling"), "own_ceiling_gflops": js.get("ceiling_gflops"),
            "device": js.get("device"), "dtype": r.get("dtype", dtype),
            "notes": (f"own data ({r.get('tokens', '?')} tokens); inputs {r.get('dtype', dtype)}; "
                      f"{r.get('pct_ceiling', 0):.1f}% of its own measured FMA ceiling ({js.get('ceiling_gflops', 0):.1f} GFLOP/s)"),
        })
    except (KeyError, IndexError, TypeError, ValueError) as e:
        row["error"] = f"unexpected JSON ({e!r}): {out[:200]!r}"
    return row


# ----------------------------------------------------------------------------- report

def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def case_table(case: dict, sgemm_gf: float) -> list[str]:
    rows = case["rows"]
    peer_rows = [r for r in rows if r.get("peer") and "docs_per_s" in r]
    best = max(peer_rows, key=lambda r: r["docs_per_s"]) if peer_rows else None
    case["fastest_peer"] = best["name"] if best else None
    title = ("(a) fixed length: every doc Nd=128" if case["case"] == "fixed"
             else "(b) variable length: Nd ~ U[32, 256]")
    lines = [f"### {title} — Nq={NQ}, d={DIM}, N={case['docs']:,}, {case['tokens']:,} doc tokens, "
             f"{case['flops'] / 1e9:.2f} GFLOP per query", "",
             "| implementation | K docs/s | GFLOP/s | % of numpy sgemm | ratio vs fastest peer "
             "| median ms | max rel err vs f64 | notes |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        name = r["name"] + (" **(ours)**" if r.get("ours") else "")
        if "error" in r:
            lines.append(f"| {name} | — | — | — | — | — | — | ERROR: {r['error'].replace('|', '/')[:160]} |")
            continue
        ratio = r["docs_per_s"] / best["docs_per_s"] if best else None
        r["ratio_vs_fastest_peer"] = ratio
        r["pct_numpy_sgemm"] = 100.0 * r["gflop_per_s"] / sgemm_gf
        err = r.get("max_rel_err")
        err_s = "n/a" if err is None else (f"{err:.1e}" + ("" if err <= REL_TOL else " **MISMATCH**"))
        lines.append(f"| {name} | {r['docs_per_s'] / 1e3:,.1f} | {r['gflop_per_s']:.1f} | "
                     f"{r['pct_numpy_sgemm']:.1f}% | {fmt(ratio, '.2f')}x | {r['ms']:.1f} | {err_s} | "
                     f"{r.get('notes', '')} |")
    lines.append("")
    if best:
        lines.append(f"Fastest peer: **{best['name']}** ({best['docs_per_s'] / 1e3:,.1f} K docs/s, "
                     f"{best['gflop_per_s']:.1f} GFLOP/s).")
        ours = [r for r in rows if r.get("ours") and "docs_per_s" in r]
        if ours:
            lines.append("tilemaxsim vs fastest peer: " + ", ".join(
                f"{r['dtype']} {r['docs_per_s'] / best['docs_per_s']:.2f}x" for r in ours) + ".")
        else:
            lines.append("tilemaxsim vs fastest peer: no tilemaxsim result (see above).")
    lines.append("")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "tilemaxsim"),
                    help="tilemaxsim binary (default: %(default)s)")
    ap.add_argument("--docs", type=int, default=10_000, help="documents per case (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs after one warm-up; median reported")
    ap.add_argument("--json", metavar="PATH", help="also save everything as JSON to PATH")
    ap.add_argument("--no-bin", action="store_true", help="skip the tilemaxsim rows")
    ap.add_argument("--bin-timeout", type=float, default=150.0, help="seconds per binary run")
    ap.add_argument("--bin-dtypes", default="f32,f16,bf16", help="comma list of --dtype values for the binary")
    args = ap.parse_args()

    t_start = time.perf_counter()
    command = os.environ.get("CPU_PEERS_CMD") or shlex.join([sys.executable, *sys.argv])
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    machine = machine_info()
    blas = blas_info()
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            log(f"WARNING: {var}={os.environ[var]} is set; numpy may run a slow kernel "
                "(bench/cpu_peers.sh unsets it)")
    log(f"machine: {machine}")
    for b in blas:
        log(f"BLAS: {b}")

    peers, peer_versions = {}, {}
    for disp, dist, modname in PEERS:
        try:
            peers[disp] = __import__(modname)
            peer_versions[disp] = pkg_version(dist)
        except ImportError as e:
            log(f"WARNING: peer {disp} not importable ({e}); skipped")

    log("numpy sgemm 4096^3 ...")
    sgemm = sgemm_ceiling(args.reps)
    log(f"numpy sgemm: {sgemm['gflop_per_s']:.1f} GFLOP/s")

    cases = []
    for kind in ("fixed", "variable"):
        cases.append(bench_case(kind, args.docs, args.reps, peers))

    bin_path = args.bin
    bin_status = None
    if args.no_bin:
        bin_status = "skipped (--no-bin)"
    elif not (os.path.isfile(bin_path) and os.access(bin_path, os.X_OK)):
        bin_status = f"binary not found: {bin_path} (build it with `cargo build --release`); tilemaxsim rows skipped"
    else:
        for case in cases:
            for dt in [s.strip() for s in args.bin_dtypes.split(",") if s.strip()]:
                row = run_binary(bin_path, case["case"], dt, args.docs, args.bin_timeout)
                if "error" in row:
                    log(f"tilemaxsim {dt} [{case['case']}] FAILED: {row['error']}")
                case["rows"].insert(sum(1 for r in case["rows"] if r.get("ours")), row)
    if bin_status:
        log(bin_status)

    # ------------------------------------------------------------------ markdown
    b0 = next((b for b in blas if b.get("user_api") == "blas"), blas[0] if blas else {})
    out = [f"## CPU MaxSim peers vs tilemaxsim", "",
           f"- machine: {machine['cpu']}, {machine['cores']} cores ({machine['simd']})",
           f"- date: {date}",
           f"- command: `{command}`",
           f"- numpy {machine['numpy']} BLAS: {b0.get('internal_api')} {b0.get('version')} "
           f"kernel={b0.get('architecture')} threads={b0.get('num_threads')}; "
           f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
           f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', 'unset')}",
           f"- numpy sgemm 4096^3 float32 (ceiling): **{sgemm['gflop_per_s']:.1f} GFLOP/s**",
           "- peers: " + ", ".join(f"{k}=={v}" for k, v in peer_versions.items()),
           f"- timing: 1 warm-up + median of {args.reps} (time.perf_counter), one query vs all N docs; "
           f"FLOPs = 2*Nq*d*total_doc_tokens; seeded np.random.default_rng(0), L2-normalized float32",
           f"- ratio = docs/s / fastest peer's docs/s (peers = the three PyPI maxsim packages and numpy matmul→max→sum); "
           f"max rel err = max_i |s_i - ref_i| / |ref_i| vs a float64 numpy reference (tolerance {REL_TOL:g})",
           f"- tilemaxsim: {bin_status or bin_path + ' (generates its own data from the same shapes)'}",
           ""]
    for case in cases:
        out += case_table(case, sgemm["gflop_per_s"])
    bad = [(c["case"], r["name"]) for c in cases for r in c["rows"]
           if r.get("max_rel_err") is not None and not r["agrees"]]
    out.append("All checked implementations agree with the float64 reference."
               if not bad else f"**Disagreement with reference:** {bad}")
    elapsed = time.perf_counter() - t_start
    out.append(f"\n_total wall time {elapsed:.0f}s_")
    print("\n".join(out), flush=True)

    if args.json:
        doc = {"date": date, "command": command, "machine": machine, "blas": blas,
               "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
               "peer_versions": peer_versions, "sgemm": sgemm, "nq": NQ, "dim": DIM, "reps": args.reps,
               "bin": bin_path, "bin_status": bin_status, "cases": cases, "wall_s": elapsed}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o))
        log(f"saved {args.json}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
