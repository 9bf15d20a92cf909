//! What the binary's integration tests share: the `tilemaxsim` command, running it expecting
//! success or a clean failure, and the real data's folder.

#![allow(dead_code)] // each test file uses its own part

pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tilemaxsim"))
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the binary runs");
    assert!(
        out.status.success(),
        "command failed: {cmd:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Stderr of a command that must fail with a message, not a panic.
pub fn run_err(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the binary runs");
    assert!(!out.status.success(), "command should have failed: {cmd:?}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !err.contains("panicked"),
        "panic instead of an error: {err}"
    );
    err
}

/// `../shared/data/cranfield`, checked to hold the real data.
pub fn cranfield() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cranfield");
    assert!(
        p.join("corpus.safetensors").exists() && p.join("qrels.txt").exists(),
        "the real data is expected at {}",
        p.display()
    );
    p
}
