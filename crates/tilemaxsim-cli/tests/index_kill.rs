//! Crash safety of live index updates: `tilemaxsim index add` killed with SIGKILL at random
//! moments, over and over. After every kill the index opens; every add that reported success
//! is in it (an acknowledged update survives `kill -9`); no add is in it twice or in part (the
//! document count is the build's plus a whole number of adds); a delete and a search still work
//! on what is left. (Each cut of a torn record is tested byte by byte in the library's
//! tests/index_updates.rs; here the kills land where they land.) `tilemaxsim index compact
//! --in-place` killed the same way leaves one whole generation every time, the old or the new:
//! the same live documents, scored alike.

mod common;
use common::{bin, run_ok};

use std::path::PathBuf;
use std::time::Instant;

use tilemaxsim::index::{Index, IndexSearch, LOG};
use tilemaxsim::{Corpus, Device, Matrix, SearchOptions};

const BASE: usize = 200;
const ADD: usize = 400;

/// Synthetic corpora of `BASE` and `ADD` documents in `dir` and an index of the first; their
/// paths.
fn corpora_and_index(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    let (base, more, index) = (
        dir.join("base.safetensors"),
        dir.join("more.safetensors"),
        dir.join("index"),
    );
    for (path, docs, seed) in [(&base, BASE, "1"), (&more, ADD, "2")] {
        run_ok(
            bin()
                .args([
                    "corpus",
                    "synth",
                    "--doc-len",
                    "48",
                    "--dim",
                    "64",
                    "--seed",
                    seed,
                    "--docs",
                ])
                .arg(docs.to_string())
                .arg("-o")
                .arg(path),
        );
    }
    run_ok(
        bin()
            .args([
                "index",
                "build",
                "--device",
                "cpu",
                "--centroids",
                "16",
                "--corpus",
            ])
            .arg(&base)
            .arg("-o")
            .arg(&index),
    );
    (base, more, index)
}

/// A xorshift step.
fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

#[test]
fn killed_adds_leave_every_acknowledged_add_and_nothing_in_part() {
    let dir = tempfile::tempdir().unwrap();
    let (base, more, index) = corpora_and_index(dir.path());
    let add = || {
        bin()
            .args(["index", "add", "--index"])
            .arg(&index)
            .arg("--corpus")
            .arg(&more)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // One add run to its end: how long one takes here.
    let t = Instant::now();
    let out = add().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full = t.elapsed();
    let record = std::fs::metadata(index.join(LOG)).unwrap().len(); // every add's record is this long
    let mut acknowledged = 1;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let (mut killed, mut torn) = (0, 0);
    for round in 0..30 {
        // A kill anywhere from the start of an add to well past its end (adds slow down as the
        // log they replay grows).
        let delay = full.mul_f64((next(&mut rng) % 1000) as f64 / 300.0);
        let mut child = add();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL; an error means it had exited already
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("added documents"));
            acknowledged += 1;
        } else {
            killed += 1;
        }
        let log = std::fs::metadata(index.join(LOG)).map_or(0, |m| m.len());
        let opened = Index::open(&index).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let adds = (opened.len() - BASE) / ADD;
        assert_eq!(
            opened.len(),
            BASE + adds * ADD,
            "round {round}: an add in part"
        );
        // Every acknowledged add is there; at most the killed ones besides (a kill after the
        // record reached the disk, before the reply).
        assert!(
            adds >= acknowledged && adds <= round + 2,
            "round {round}: {adds} adds, {acknowledged} acknowledged"
        );
        acknowledged = adds; // what the next round must keep
        if log != adds as u64 * record {
            torn += 1; // a record cut short: ignored by the reader, cut by the next add
        }
    }
    eprintln!(
        "30 rounds: {killed} adds killed, {torn} torn records seen, {acknowledged} adds in the index"
    );
    assert!(
        acknowledged > 1,
        "no add survived its round: the kills all came too early"
    );
    assert!(killed > 0, "no add was killed: the test tested nothing");
    // What is left still takes a delete and answers searches.
    run_ok(
        bin()
            .args(["index", "delete", "--docs", "0,5,250", "--index"])
            .arg(&index),
    );
    let run = dir.path().join("run.trec");
    run_ok(
        bin()
            .args(["index", "search", "--device", "cpu", "-k", "5", "--index"])
            .arg(&index)
            .arg("--queries")
            .arg(&base)
            .arg("--out")
            .arg(&run),
    );
    let text = std::fs::read_to_string(&run).unwrap();
    assert_eq!(text.lines().count(), BASE * 5);
    for deleted in ["0", "5", "250"] {
        assert!(
            !text
                .lines()
                .any(|l| l.split_whitespace().nth(2) == Some(deleted))
        );
    }
}

/// Per query, the scores of the ten best documents, exhaustive on the codes.
fn scores(index: &Index, queries: &Corpus) -> Vec<Vec<f32>> {
    let how = IndexSearch {
        exhaustive: true,
        rerank_k: Some(0),
        ..Default::default()
    };
    let (s, _) = index
        .searcher(Device::Cpu, &how, &SearchOptions::default())
        .unwrap();
    let qs: Vec<Matrix<'_>> = queries.docs().take(8).collect();
    let hits = s.search(&qs, 10).unwrap();
    hits.iter()
        .map(|h| h.iter().map(|x| x.score).collect())
        .collect()
}

#[test]
fn killed_compactions_in_place_leave_one_whole_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (base, more, index) = corpora_and_index(dir.path());
    run_ok(
        bin()
            .args(["index", "add", "--index"])
            .arg(&index)
            .arg("--corpus")
            .arg(&more),
    );
    let gone: Vec<String> = (0..BASE + ADD).step_by(7).map(|j| j.to_string()).collect();
    run_ok(
        bin()
            .args(["index", "delete", "--index"])
            .arg(&index)
            .arg("--docs")
            .arg(gone.join(",")),
    );
    let live = BASE + ADD - gone.len();
    let queries = Corpus::open(&base).unwrap();
    let want = scores(&Index::open(&index).unwrap(), &queries);
    let compact = || {
        bin()
            .args(["index", "compact", "--in-place", "--index"])
            .arg(&index)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // How long one compaction takes here (the first, run to its end, is undone by none).
    let t = Instant::now();
    let out = compact().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full = t.elapsed();
    let mut generation = 1;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let (mut killed, mut done) = (0, 1);
    for round in 0..20 {
        let delay = full.mul_f64((next(&mut rng) % 1000) as f64 / 600.0);
        let mut child = compact();
        std::thread::sleep(delay);
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            done += 1;
        } else {
            killed += 1;
        }
        let opened = Index::open(&index).unwrap_or_else(|e| panic!("round {round}: {e}"));
        // The old generation or the next one, whole, whatever the kill cut.
        assert!(
            [generation, generation + 1].contains(&opened.generation()),
            "round {round}: generation {} after {generation}",
            opened.generation()
        );
        if out.status.success() {
            assert_eq!(opened.generation(), generation + 1, "round {round}");
        }
        generation = opened.generation();
        assert_eq!((opened.len(), opened.deleted()), (live, 0), "round {round}");
        assert_eq!(scores(&opened, &queries), want, "round {round}");
    }
    eprintln!("20 rounds: {killed} compactions killed, {done} finished, generation {generation}");
    assert!(
        killed > 0,
        "no compaction was killed: the test tested nothing"
    );
    // One more to its end: only its generation's files are left, whatever the kills left.
    run_ok(
        bin()
            .args(["index", "compact", "--in-place", "--index"])
            .arg(&index),
    );
    let g = generation + 1;
    let mut files: Vec<String> = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            format!("codes.{g}.safetensors"),
            format!("exact.{g}.safetensors"),
            "index.json".into(),
            format!("ivf.{g}.safetensors"),
        ]
    );
}
