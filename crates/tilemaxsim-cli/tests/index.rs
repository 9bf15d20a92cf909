//! `tilemaxsim index build` and `index search` on the whole Cranfield collection: an index
//! built with the defaults and searched with them (IVF, reranked by the exact tokens it keeps)
//! keeps recall@10 against the float64 reference ranking at 0.95 or above; `--exhaustive`
//! without reranking returns the same run as `search` on the same codes; IVF without it keeps
//! the codes' quality; a search within given documents (`--subset`, `--subset-run`) is the
//! exhaustive run filtered to them; and the errors a user can meet (a directory that is not
//! empty, a directory with no index, contradicting flags, ids the index does not hold).

mod common;
use common::{bin, cranfield, run_err, run_ok};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `index search` on the CPU of Cranfield's queries over `index`, top `k`, into `run`.
fn index_search(
    index: &Path,
    data: &Path,
    k: usize,
    extra: &[&str],
    run: &Path,
) -> std::process::Command {
    let mut cmd = bin();
    cmd.args(["index", "search", "--device", "cpu", "-k", &k.to_string()])
        .arg("--index")
        .arg(index)
        .arg("--queries")
        .arg(data.join("queries.safetensors"))
        .arg("--query-ids")
        .arg(data.join("query_ids.txt"))
        .args(extra)
        .arg("--out")
        .arg(run);
    cmd
}

/// Each query's documents, best first.
fn ranking(path: &Path) -> BTreeMap<String, Vec<String>> {
    let mut r: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        r.entry(f[0].into()).or_default().push(f[2].into());
    }
    r
}

fn recall_at(
    got: &BTreeMap<String, Vec<String>>,
    want: &BTreeMap<String, Vec<String>>,
    k: usize,
) -> f64 {
    let per: Vec<f64> = want
        .iter()
        .map(|(q, w)| {
            let w: BTreeSet<&String> = w.iter().take(k).collect();
            let g: BTreeSet<&String> = got
                .get(q)
                .map_or(BTreeSet::new(), |g| g.iter().take(k).collect());
            g.intersection(&w).count() as f64 / w.len() as f64
        })
        .collect();
    per.iter().sum::<f64>() / per.len() as f64
}

#[test]
fn index_build_and_search_on_cranfield() {
    let data = cranfield();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let out = run_ok(
        bin()
            .args(["index", "build", "--device", "cpu", "--corpus"])
            .arg(data.join("corpus.safetensors"))
            .arg("--doc-ids")
            .arg(data.join("doc_ids.txt"))
            .arg("-o")
            .arg(&index),
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("compressed on cpu") && log.contains("IVF in"),
        "{log}"
    );
    let search_in = |at: &Path, name: &str, extra: &[&str]| {
        let run = dir.path().join(format!("{name}.trec"));
        run_ok(&mut index_search(at, &data, 10, extra, &run));
        ranking(&run)
    };
    let search = |name: &str, extra: &[&str]| search_in(&index, name, extra);
    let reference = ranking(&data.join("ref_run.trec"));
    let defaults = search("defaults", &[]);
    let r10 = recall_at(&defaults, &reference, 10);
    assert!(r10 >= 0.95, "recall@10 with the defaults: {r10}");
    assert_eq!(defaults.len(), 225);
    // Exhaustive on the codes, no exact stage: `search` on the index's codes file, the same run.
    let exhaustive = search("exhaustive", &["--exhaustive", "--rerank-k", "0"]);
    let plain = dir.path().join("plain.trec");
    run_ok(
        bin()
            .args(["search", "--device", "cpu", "-k", "10", "--corpus"])
            .arg(index.join("codes.safetensors"))
            .arg("--queries")
            .arg(data.join("queries.safetensors"))
            .arg("--query-ids")
            .arg(data.join("query_ids.txt"))
            .arg("--out")
            .arg(&plain),
    );
    assert_eq!(exhaustive, ranking(&plain));
    within_given_documents(dir.path(), &index, &data);
    // IVF without the exact stage: the codes' own ranking quality (0.908 here, BENCHMARKS.md).
    let ivf = search("ivf", &["--rerank-k", "0"]);
    let r10 = recall_at(&ivf, &reference, 10);
    assert!(r10 >= 0.85, "recall@10 of IVF on the codes: {r10}");

    // Deletes, then a compaction: the compacted index ranks the live documents as the index
    // with its deletes does (exhaustive on the codes: the same codes, the same scores).
    let gone: Vec<String> = (0..1400).step_by(3).map(|j| j.to_string()).collect();
    run_ok(
        bin()
            .args(["index", "delete", "--index"])
            .arg(&index)
            .arg("--docs")
            .arg(gone.join(",")),
    );
    let compacted = dir.path().join("compacted");
    let out = run_ok(
        bin()
            .args(["index", "compact", "--index"])
            .arg(&index)
            .arg("-o")
            .arg(&compacted),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("{} deleted left out", gone.len())),
        "{said}"
    );
    let plain = ["--exhaustive", "--rerank-k", "0"];
    let before = search("deleted", &plain);
    assert_ne!(before, exhaustive);
    assert_eq!(search_in(&compacted, "compacted", &plain), before);
    // The same in place: the directory's next generation, searched alike.
    let out = run_ok(
        bin()
            .args(["index", "compact", "--in-place", "--index"])
            .arg(&index),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("in place (generation 1)"), "{said}");
    assert!(!index.join("codes.safetensors").exists());
    assert_eq!(search("in-place", &plain), before);
    let err = run_err(
        bin()
            .args(["index", "compact", "--in-place", "-o"])
            .arg(&compacted)
            .arg("--index")
            .arg(&index),
    );
    assert!(err.contains("cannot be used with"), "{err}");

    // Errors.
    let err = run_err(
        bin()
            .args(["index", "build", "--device", "cpu", "--corpus"])
            .arg(data.join("corpus.safetensors"))
            .arg("-o")
            .arg(&index),
    );
    assert!(err.contains("already holds an index"), "{err}");
    let err = run_err(
        bin()
            .args(["index", "search", "--index"])
            .arg(dir.path())
            .arg("--queries")
            .arg(data.join("queries.safetensors")),
    );
    assert!(err.contains("no index here"), "{err}");
    let err = run_err(
        bin()
            .args([
                "index",
                "search",
                "--exhaustive",
                "--nprobe",
                "4",
                "--index",
            ])
            .arg(&index)
            .arg("--queries")
            .arg(data.join("queries.safetensors")),
    );
    assert!(err.contains("cannot be used with"), "{err}");
    let err = run_err(
        bin()
            .args(["index", "search", "--nprobe", "0", "--index"])
            .arg(&index)
            .arg("--queries")
            .arg(data.join("queries.safetensors")),
    );
    assert!(err.contains("at least 1"), "{err}");
}

/// `--subset IDS` and `--subset-run RUN` on the codes: each query's run is the exhaustive run
/// over every document filtered to its documents; with the exact stage, its hits are its
/// documents; ids the index does not hold and malformed lines are errors.
fn within_given_documents(dir: &Path, index: &Path, data: &Path) {
    let search = |name: &str, k: usize, extra: &[&str]| {
        let run = dir.join(format!("{name}.trec"));
        (index_search(index, data, k, extra, &run), run)
    };
    let ok = |name: &str, k: usize, extra: &[&str]| {
        let (mut cmd, run) = search(name, k, extra);
        run_ok(&mut cmd);
        ranking(&run)
    };
    let err = |extra: &[&str]| run_err(&mut search("bad", 10, extra).0);
    let full = ok("full", 1400, &["--exhaustive", "--rerank-k", "0"]);
    let filtered = |q: &str, keep: &dyn Fn(&String) -> bool| -> Vec<String> {
        full[q]
            .iter()
            .filter(|d| keep(d))
            .take(10)
            .cloned()
            .collect()
    };
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();

    // Each query its own documents: every seventh of its full ranking from the third on, in
    // reverse order (order and scores are not read); the first query not named.
    let queries: Vec<&String> = full.keys().collect();
    let mut lines = String::new();
    let mut lists = BTreeMap::new();
    for q in &queries[1..] {
        let mine: Vec<String> = full[*q].iter().skip(2).step_by(7).cloned().collect();
        for (r, d) in mine.iter().rev().enumerate() {
            lines += &format!("{q} Q0 {d} {} 0.5 first-stage\n", r + 1);
        }
        lists.insert(q.to_string(), mine);
    }
    let sub_run = path("subset_run.trec");
    std::fs::write(&sub_run, lines).unwrap();
    let got = ok(
        "within_run",
        10,
        &["--subset-run", &sub_run, "--rerank-k", "0"],
    );
    assert_eq!(
        got.len(),
        queries.len() - 1,
        "the query the run does not name gets no hits"
    );
    for (q, mine) in &lists {
        assert_eq!(got[q], filtered(q, &|d| mine.contains(d)), "query {q}");
    }
    // With the index's exact stage (its defaults): every hit is one of the query's documents.
    for (q, hits) in ok("within_run_exact", 10, &["--subset-run", &sub_run]) {
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().all(|d| lists[&q].contains(d)), "query {q}");
    }

    // One list for every query: every fifth document of the first query's ranking, one twice.
    let mut ids: Vec<String> = full[queries[0]].iter().step_by(5).cloned().collect();
    ids.push(ids[0].clone());
    let sub_ids = path("subset_ids.txt");
    std::fs::write(&sub_ids, ids.join("\n") + "\n\n").unwrap();
    let got = ok("within_ids", 10, &["--subset", &sub_ids, "--rerank-k", "0"]);
    assert_eq!(got.len(), queries.len());
    for q in &queries {
        assert_eq!(got[*q], filtered(q, &|d| ids.contains(d)), "query {q}");
    }

    // Errors: an id the index does not hold, a run line of the wrong shape, a run given as
    // ids, and flags that do not apply.
    let bad = path("bad_ids.txt");
    std::fs::write(&bad, format!("{}\nno-such-doc\n", ids[0])).unwrap();
    let e = err(&["--subset", &bad]);
    assert!(
        e.contains("line 2") && e.contains("no document \"no-such-doc\""),
        "{e}"
    );
    std::fs::write(&bad, "1 Q0 5 1\n").unwrap();
    let e = err(&["--subset-run", &bad]);
    assert!(e.contains("expected a TREC run line"), "{e}");
    let e = err(&["--subset", &sub_run]);
    assert!(e.contains("--subset-run"), "{e}");
    let e = err(&["--subset", &sub_ids, "--exhaustive"]);
    assert!(e.contains("cannot be used with"), "{e}");
    let e = err(&["--subset-run", &sub_run, "--rerank", &sub_ids]);
    assert!(e.contains("cannot be used with"), "{e}");
}
