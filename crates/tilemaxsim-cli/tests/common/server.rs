//! The harness of the `tilemaxsim serve` tests: seeded corpora (`corpus synth`), a server on
//! 127.0.0.1 (any free port) started and killed around a test, HTTP helpers, queries and what
//! the float64 oracle ranks for them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tilemaxsim::{Corpus, Matrix, ReferenceScorer, Scorer};

use super::bin;

/// Write a seeded synthetic corpus (`corpus synth`) and return its path.
pub fn synth(
    dir: &Path,
    name: &str,
    docs: usize,
    len: &str,
    dim: usize,
    dtype: &str,
    seed: u64,
) -> PathBuf {
    let p = dir.join(name);
    let out = bin()
        .args([
            "corpus",
            "synth",
            "--docs",
            &docs.to_string(),
            "--doc-len",
            len,
        ])
        .args([
            "--dim",
            &dim.to_string(),
            "--dtype",
            dtype,
            "--seed",
            &seed.to_string(),
        ])
        .arg("-o")
        .arg(&p)
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p
}

/// A running server; killed when dropped (a test that ends it itself waits for it instead).
pub struct Server {
    pub child: Option<Child>,
    pub url: String,
    pub log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    pub fn start(corpus: &Path, args: &[&str]) -> Server {
        Self::spawn("--corpus", corpus, args)
    }

    /// `serve --index DIR`.
    pub fn start_index(index: &Path, args: &[&str]) -> Server {
        Self::spawn("--index", index, args)
    }

    fn spawn(flag: &str, source: &Path, args: &[&str]) -> Server {
        let mut child = bin()
            .arg("serve")
            .arg(flag)
            .arg(source)
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let log2 = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("tilemaxsim serve: listening on ") {
                    let _ = tx.send(url.to_string());
                }
                log2.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server prints its address");
        let s = Server {
            child: Some(child),
            url,
            log,
        };
        s.wait_for(Duration::from_secs(120), || {
            http()
                .get(s.at("/readyz"))
                .send()
                .is_ok_and(|r| r.status() == 200)
        });
        s
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    pub fn post(&self, body: &Value) -> (u16, Value) {
        self.post_to("/v1/search", body)
    }

    pub fn post_to(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = http()
            .post(self.at(path))
            .json(body)
            .send()
            .expect("the server answers");
        let status = r.status().as_u16();
        (status, r.json().expect("a JSON answer"))
    }

    /// The value of an unlabeled metric (histograms: their `_count`).
    pub fn metric(&self, name: &str) -> f64 {
        let text = http()
            .get(self.at("/metrics"))
            .send()
            .and_then(|r| r.text())
            .expect("metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    pub fn wait_for(&self, limit: Duration, mut cond: impl FnMut() -> bool) {
        let t = Instant::now();
        while !cond() {
            assert!(
                t.elapsed() < limit,
                "timed out waiting; server log:\n{}",
                self.log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("an HTTP client")
}

/// Query `i` of a query file as JSON rows.
pub fn rows(q: &Matrix<'_>) -> Value {
    let v = q.to_f32_vec();
    Value::Array(v.chunks(q.dim()).map(|r| json!(r)).collect())
}

pub fn b64_f32(q: &Matrix<'_>) -> String {
    let bytes: Vec<u8> = q
        .to_f32_vec()
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// (doc, index, score) of every hit of result `r`.
pub fn hits(r: &Value) -> Vec<(String, usize, f32)> {
    r["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            (
                h["doc"].as_str().expect("doc").to_string(),
                h["index"].as_u64().expect("index") as usize,
                h["score"].as_f64().expect("score") as f32,
            )
        })
        .collect()
}

pub fn assert_error(status: u16, body: &Value, want: u16, needle: &str) {
    let msg = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"));
    assert_eq!(status, want, "{msg}");
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
}

/// A corpus on which `--device reference` takes about a second for a 320-token query.
pub fn slow_corpus(dir: &Path) -> PathBuf {
    synth(dir, "slow.safetensors", 2000, "64", 64, "f32", 1)
}

/// A deterministic `tokens × d` query.
pub fn query_values(tokens: usize, dim: usize, seed: usize) -> Vec<f32> {
    (0..tokens * dim)
        .map(|i| (((i + 7919 * seed) as f32) * 0.618).sin())
        .collect()
}

pub fn query_json(tokens: usize, dim: usize, seed: usize) -> Value {
    let v = query_values(tokens, dim, seed);
    Value::Array(v.chunks(dim).map(|r| json!(r)).collect())
}

/// The reference top-k of a `query_values` query, as (index, score).
pub fn reference_top_k(corpus: &Corpus, tokens: usize, seed: usize, k: usize) -> Vec<(usize, f32)> {
    let v = query_values(tokens, corpus.dim(), seed);
    let m = Matrix::new(&v[..], corpus.dim()).unwrap();
    ReferenceScorer
        .top_k(m, corpus, k)
        .unwrap()
        .iter()
        .map(|h| (h.doc, h.score))
        .collect()
}

pub fn index_scores(r: &Value) -> Vec<(usize, f32)> {
    hits(r).into_iter().map(|(_, i, s)| (i, s)).collect()
}
