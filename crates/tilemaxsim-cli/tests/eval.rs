//! `tilemaxsim eval` and `tilemaxsim::eval`: hand-computed cases of trec_eval's rules, the
//! Cranfield reference figures, and every query compared with pytrec_eval (trec_eval's own code)
//! on real and synthetic runs.
//!
//! The pytrec_eval comparison runs `bench/pytrec_metrics.py` with `$TILEMAXSIM_PYTHON` (default
//! `python3`); without pytrec_eval it is skipped with a notice, unless `TILEMAXSIM_REQUIRE_PYTREC`
//! is set.

mod common;
use common::{bin, cranfield};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tilemaxsim::eval::{Evaluation, Metrics, Qrels, Run, evaluate};

fn eval(qrels: &str, run: &str) -> Evaluation {
    let qrels = Qrels::parse(qrels, "qrels").expect("qrels parse");
    let run = Run::parse(run, "run").expect("run parse");
    evaluate(&qrels, &run).expect("evaluate")
}

fn only(e: &Evaluation) -> Metrics {
    assert_eq!(e.per_query.len(), 1);
    e.per_query[0].1
}

fn assert_close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-12,
        "{what}: got {got}, expected {want}"
    );
}

fn log2(x: f64) -> f64 {
    x.log2()
}

#[test]
fn order_is_score_then_docid_descending_and_ranks_are_ignored() {
    // Equal scores: "b" > "a", so b comes first although the rank column says otherwise.
    let m = only(&eval("q 0 a 1\n", "q Q0 a 1 1.0 t\nq Q0 b 2 1.0 t\n"));
    assert_close(m.mrr_10, 0.5, "mrr");
    assert_close(m.ndcg_10, 1.0 / log2(3.0), "ndcg");
    assert_close(m.map, 0.5, "map");
    assert_close(m.recall_10, 1.0, "recall_10");
    // -0 and 0 tie; docid order is bytewise ("B" < "a").
    let m = only(&eval("q 0 B 1\n", "q Q0 B 1 0 t\nq Q0 a 2 -0 t\n"));
    assert_close(m.mrr_10, 0.5, "-0 ties 0");
    // The rank column is ignored: scores decide.
    let m = only(&eval("q 0 a 1\n", "q Q0 z 1 0.1 t\nq Q0 a 2 0.9 t\n"));
    assert_close(m.mrr_10, 1.0, "ranks ignored");
}

#[test]
fn graded_ndcg_uses_the_grade_as_gain() {
    let qrels = "q 0 a 3\nq 0 b 2\nq 0 c 1\nq 0 d 0\n";
    let run = "q Q0 d 1 4 t\nq Q0 c 2 3 t\nq Q0 b 3 2 t\nq Q0 a 4 1 t\n";
    let m = only(&eval(qrels, run));
    // Grades by rank: 0, 1, 2, 3; ideal 3, 2, 1.
    let dcg = 1.0 / log2(3.0) + 2.0 / log2(4.0) + 3.0 / log2(5.0);
    let idcg = 3.0 + 2.0 / log2(3.0) + 1.0 / log2(4.0);
    assert_close(m.ndcg_10, dcg / idcg, "ndcg");
    let dcg = 1.0 / log2(3.0) + 3.0 / log2(4.0) + 7.0 / log2(5.0);
    let idcg = 7.0 + 3.0 / log2(3.0) + 1.0 / log2(4.0);
    assert_close(m.ndcg_exp_10, dcg / idcg, "ndcg with 2^g - 1");
    assert_close(m.mrr_10, 0.5, "mrr");
    assert_close(m.map, (1.0 / 2.0 + 2.0 / 3.0 + 3.0 / 4.0) / 3.0, "map");
    assert_close(m.recall_10, 1.0, "recall");
}

#[test]
fn unjudged_zero_and_negative_grades_are_not_relevant() {
    // x is not in the qrels, b is "unjudged" (-1), c is judged non-relevant (0); e is relevant
    // but not retrieved.
    let qrels = "q 0 a 2\nq 0 b -1\nq 0 c 0\nq 0 e 1\n";
    let run = "q Q0 x 1 5 t\nq Q0 b 2 4 t\nq Q0 c 3 3 t\nq Q0 a 4 2 t\n";
    let m = only(&eval(qrels, run));
    assert_close(m.mrr_10, 0.25, "mrr");
    assert_close(m.recall_10, 0.5, "recall");
    assert_close(m.map, 0.25 / 2.0, "map");
    assert_close(
        m.ndcg_10,
        (2.0 / log2(5.0)) / (2.0 + 1.0 / log2(3.0)),
        "ndcg",
    );
}

#[test]
fn cutoffs_count_ranks_after_sorting() {
    // Relevant documents at ranks 11, 50 and 500 of 600; a fourth is not retrieved.
    let mut run = String::new();
    for i in 1..=600 {
        let doc = match i {
            11 | 50 | 500 => format!("rel{i}"),
            _ => format!("d{i}"),
        };
        run += &format!("q Q0 {doc} {} {} t\n", 601 - i, 1000 - i);
    }
    let qrels = "q 0 rel11 1\nq 0 rel50 1\nq 0 rel500 1\nq 0 never 1\n";
    let m = only(&eval(qrels, &run));
    assert_close(m.mrr_10, 0.0, "mrr@10 (first relevant at 11)");
    assert_close(m.ndcg_10, 0.0, "ndcg@10");
    assert_close(m.recall_10, 0.0, "recall_10");
    assert_close(m.recall_100, 0.5, "recall_100");
    assert_close(m.recall_1000, 0.75, "recall_1000");
    assert_close(m.map, (1.0 / 11.0 + 2.0 / 50.0 + 3.0 / 500.0) / 4.0, "map");
}

#[test]
fn which_queries_count() {
    // q1: perfect. q2: judged, nothing relevant: zeros, but counted. q3: not judged: skipped.
    // q4: judged, not in the run: ignored.
    let qrels = "q1 0 a 1\nq2 0 a 0\nq2 0 b -3\nq4 0 a 1\n";
    let run = "q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq2 Q0 b 2 0 t\nq3 Q0 a 1 1 t\n";
    let e = eval(qrels, run);
    let qids: Vec<&str> = e.per_query.iter().map(|(q, _)| q.as_str()).collect();
    assert_eq!(qids, ["q1", "q2"]);
    assert_eq!(e.per_query[1].1, Metrics::default(), "no relevant docs");
    assert_eq!(e.unjudged, ["q3"]);
    assert_eq!(e.missing, 1);
    for (_, key, v) in e.mean.named() {
        assert_close(v, 0.5, key);
    }
}

#[test]
fn malformed_input_is_an_error_naming_the_line() {
    let qrels_err = |text: &str| Qrels::parse(text, "q.txt").unwrap_err().to_string();
    let run_err = |text: &str| Run::parse(text, "r.trec").unwrap_err().to_string();
    let e = qrels_err("1 0 a 1\n\n1 0 b\n");
    assert!(e.contains("q.txt, line 3") && e.contains("4 fields"), "{e}");
    let e = qrels_err("1 0 a 1.5\n");
    assert!(e.contains("line 1") && e.contains("not an integer"), "{e}");
    let e = qrels_err("1 0 a 1\n1 0 a 2\n");
    assert!(e.contains("line 2") && e.contains("judged twice"), "{e}");
    let e = run_err("1 Q0 a 1 0.5\n");
    assert!(
        e.contains("r.trec, line 1") && e.contains("6 fields"),
        "{e}"
    );
    for bad in ["NaN", "inf", "high"] {
        let e = run_err(&format!("1 Q0 a 1 {bad} t\n"));
        assert!(e.contains("not a finite number"), "{e}");
    }
    let e = run_err("1 Q0 a 1 0.5 t\n2 Q0 a 1 0.5 t\n1 Q0 a 2 0.4 t\n");
    assert!(
        e.contains("line 3") && e.contains("twice") && e.contains("line 1"),
        "{e}"
    );
    let no_overlap = evaluate(
        &Qrels::parse("1 0 a 1\n", "q").unwrap(),
        &Run::parse("2 Q0 a 1 1 t\n", "r").unwrap(),
    );
    assert!(no_overlap.is_err());

    // The command reports them without panicking.
    let dir = tempfile::tempdir().unwrap();
    let (q, r) = (dir.path().join("q.txt"), dir.path().join("r.trec"));
    std::fs::write(&q, "1 0 a 1\n").unwrap();
    std::fs::write(&r, "1 Q0 a 1 oops t\n").unwrap();
    let out = eval_cmd(&q, &r).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && !err.contains("panicked"), "{err}");
    assert!(err.contains("line 1") && err.contains("\"oops\""), "{err}");
}

/// `tilemaxsim eval --qrels QRELS --run RUN`.
fn eval_cmd(qrels: &Path, run: &Path) -> Command {
    let mut cmd = bin();
    cmd.arg("eval")
        .arg("--qrels")
        .arg(qrels)
        .arg("--run")
        .arg(run);
    cmd
}

/// `tilemaxsim eval --json --per-query` on two files.
fn ours(qrels: &Path, run: &Path) -> Value {
    let out = eval_cmd(qrels, run)
        .args(["--json", "--per-query"])
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "eval failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

#[test]
fn table_output() {
    let dir = tempfile::tempdir().unwrap();
    let (q, r) = (dir.path().join("q.txt"), dir.path().join("r.trec"));
    std::fs::write(&q, "query-one 0 a 1\nq2 0 b 1\n").unwrap();
    std::fs::write(&r, "query-one Q0 a 1 2 t\nq2 Q0 a 1 2 t\nq2 Q0 b 2 1 t\n").unwrap();
    let out = eval_cmd(&q, &r).arg("--per-query").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("qid") && lines[0].contains("nDCG@10"));
    assert!(lines[1].starts_with("query-one") && lines[1].contains("1.0000"));
    assert!(lines[2].starts_with("q2") && lines[2].contains("0.5000"));
    assert!(lines[3].starts_with("all") && lines[3].contains("0.7500"));
    assert_eq!(lines[4], "2 queries evaluated");
}

/// BENCHMARKS.md's figures for the float64 reference run (Retrieval quality on Cranfield). Its nDCG@10 (0.3561) uses gain
/// 2^g − 1 (`shared/data/reference.py`); trec_eval's `ndcg_cut_10` (gain g) is 0.3707.
#[test]
fn cranfield_reference_run_gives_the_published_figures() {
    let d = cranfield();
    let v = ours(&d.join("qrels.txt"), &d.join("ref_run.trec"));
    let mean = |k: &str| format!("{:.4}", v["mean"][k].as_f64().expect(k));
    assert_eq!(v["queries"], 225);
    assert_eq!(mean("ndcg_exp_10"), "0.3561");
    assert_eq!(mean("mrr_10"), "0.5164");
    assert_eq!(mean("recall_100"), "0.7708");
    assert_eq!(mean("ndcg_10"), "0.3707");
}

/// splitmix64: a seeded stream for the synthetic runs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Synthetic qrels and runs over the Cranfield ids, written to `dir`: (qrels, run) pairs.
fn synthetic_cases(d: &Path, dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap();
    let docs: Vec<String> = read("doc_ids.txt").lines().map(str::to_owned).collect();
    let queries: Vec<String> = read("query_ids.txt").lines().map(str::to_owned).collect();
    let mut rng = Rng(2026);
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };

    // Qrels with some grades made negative ("unjudged") and two extra queries: one with only
    // grade 0, one with only negative grades.
    let mut qrels = String::new();
    for (i, line) in read("qrels.txt").lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let grade = if i % 7 == 3 { "-1" } else { f[3] };
        qrels += &format!("{} {} {} {grade}\n", f[0], f[1], f[2]);
    }
    qrels += "900 0 5 0\n900 0 6 0\n901 0 7 -1\n901 0 8 -2\n";
    let mod_qrels = write("qrels_mod.txt", qrels);

    let mut all_queries = queries.clone();
    all_queries.extend(["900", "901", "extra-1", "extra-2"].map(String::from));
    let line =
        |q: &str, doc: &str, rank: usize, score: &str| format!("{q} Q0 {doc} {rank} {score} syn\n");

    // Coarse random scores: many ties, negatives, "-0"; 30..300 distinct documents per query.
    let mut ties = String::new();
    for q in &all_queries {
        let n = 30 + rng.below(270);
        let mut picked = std::collections::HashSet::new();
        for rank in 1..=n {
            let doc = &docs[rng.below(docs.len())];
            if !picked.insert(doc.clone()) {
                continue;
            }
            let score = match rng.below(8) {
                0 => "-0".to_string(),
                k => format!("{}", k as f64 * 0.5 - 1.5),
            };
            ties += &line(q, doc, rank, &score);
        }
    }
    let ties = write("ties.trec", ties);

    // The reference run cut to 0..12 documents per query (0: the query is left out).
    let mut cut = String::new();
    let mut kept = std::collections::HashMap::new();
    for l in read("ref_run.trec").lines() {
        let q = l.split_whitespace().next().unwrap().to_string();
        let n = kept.entry(q).or_insert_with(|| (rng.below(13), 0));
        if n.1 < n.0 {
            n.1 += 1;
            cut += &format!("{l}\n");
        }
    }
    let cut = write("truncated.trec", cut);

    // Long runs: every document (or all but a random 200) with fine random scores, so that
    // recall_1000 and MAP see deep ranks; listed in a shuffled order.
    let mut long = String::new();
    for q in &all_queries {
        let skip = if rng.below(2) == 0 { 0 } else { 200 };
        let mut order: Vec<usize> = (0..docs.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for (rank, &j) in order.iter().skip(skip).enumerate() {
            let score = format!("{:.6}", (rng.next() >> 11) as f64 / (1u64 << 53) as f64);
            long += &line(q, &docs[j], rank + 1, &score);
        }
    }
    let long = write("long.trec", long);

    let real = d.join("qrels.txt");
    let reference = d.join("ref_run.trec");
    vec![
        (real.clone(), reference.clone()),
        (mod_qrels.clone(), reference),
        (real.clone(), ties.clone()),
        (mod_qrels.clone(), ties),
        (real.clone(), cut.clone()),
        (mod_qrels.clone(), cut),
        (real, long.clone()),
        (mod_qrels, long),
    ]
}

fn python() -> String {
    std::env::var("TILEMAXSIM_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn pytrec_available() -> bool {
    let ok = Command::new(python())
        .args(["-c", "import pytrec_eval"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let msg = format!(
            "pytrec_eval cannot be imported by {:?} (pip install pytrec-eval-terrier; \
             TILEMAXSIM_PYTHON picks the interpreter)",
            python()
        );
        assert!(
            std::env::var_os("TILEMAXSIM_REQUIRE_PYTREC").is_none(),
            "TILEMAXSIM_REQUIRE_PYTREC is set: {msg}"
        );
        eprintln!("notice: pytrec_eval comparison skipped: {msg}");
    }
    ok
}

fn pytrec(qrels: &Path, run: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/pytrec_metrics.py");
    let out = Command::new(python())
        .arg(script)
        .arg(qrels)
        .arg(run)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "pytrec_metrics.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON from pytrec_metrics.py")
}

fn assert_metrics_agree(got: &Value, want: &Value, what: &str) {
    let want = want.as_object().expect("object");
    assert_eq!(want.len(), 6, "{what}: pytrec_eval's measures");
    for (key, w) in want {
        let (g, w) = (got[key].as_f64(), w.as_f64().unwrap());
        let g = g.unwrap_or_else(|| panic!("{what}: no {key} in ours"));
        assert!(
            (g - w).abs() <= 1e-6,
            "{what} {key}: ours {g}, pytrec_eval {w}"
        );
    }
}

#[test]
fn every_query_agrees_with_pytrec_eval() {
    if !pytrec_available() {
        return;
    }
    let d = cranfield();
    let dir = tempfile::tempdir().unwrap();
    for (qrels, run) in synthetic_cases(&d, dir.path()) {
        let case = format!(
            "{} × {}",
            qrels.file_name().unwrap().to_string_lossy(),
            run.file_name().unwrap().to_string_lossy()
        );
        let (got, want) = (ours(&qrels, &run), pytrec(&qrels, &run));
        assert_eq!(got["queries"], want["queries"], "{case}: query count");
        let (g, w) = (
            got["per_query"].as_object().unwrap(),
            want["per_query"].as_object().unwrap(),
        );
        let mut gq: Vec<&String> = g.keys().collect();
        let mut wq: Vec<&String> = w.keys().collect();
        gq.sort();
        wq.sort();
        assert_eq!(gq, wq, "{case}: the evaluated queries");
        for (q, wm) in w {
            assert_metrics_agree(&g[q], wm, &format!("{case} query {q}"));
        }
        assert_metrics_agree(&got["mean"], &want["mean"], &format!("{case} mean"));
    }
}
