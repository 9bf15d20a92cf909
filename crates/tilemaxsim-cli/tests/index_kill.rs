//! Crash safety of live index updates: `tilemaxsim index add` killed with SIGKILL at random
//! moments, over and over. After every kill the index opens; every add that reported success
//! is in it (an acknowledged update survives `kill -9`); no add is in it twice or in part (the
//! document count is the build's plus a whole number of adds); a delete and a search still work
//! on what is left. (Each cut of a torn record is tested byte by byte in the library's
//! tests/index_updates.rs; here the kills land where they land.)

mod common;
use common::{bin, run_ok};

use std::time::Instant;

use tilemaxsim::index::{Index, LOG};

const BASE: usize = 200;
const ADD: usize = 400;

#[test]
fn killed_adds_leave_every_acknowledged_add_and_nothing_in_part() {
    let dir = tempfile::tempdir().unwrap();
    let (base, more, index) = (
        dir.path().join("base.safetensors"),
        dir.path().join("more.safetensors"),
        dir.path().join("index"),
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
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = full.mul_f64((rng % 1000) as f64 / 300.0);
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
