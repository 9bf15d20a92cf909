//! `tilemaxsim serve` end to end: the real binary on 127.0.0.1 (any free port), spoken to over
//! real HTTP. Results equal the library's and `tilemaxsim search`'s on the same seeded corpus;
//! every row of the status table (400, 413, 429, 504), continuous batching, a client that
//! disconnects, and SIGTERM with a request in flight.
//!
//! The overload cases need the engine busy for a while: they serve on `--device reference`
//! (the float64 oracle, slow) and follow the server's own state through `/metrics`, so they
//! wait for what they need rather than for a guessed time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tilemaxsim::{Corpus, Matrix, ReferenceScorer, Scorer};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tilemaxsim"))
}

/// Write a seeded synthetic corpus (`corpus synth`) and return its path.
fn synth(
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
struct Server {
    child: Option<Child>,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    fn start(corpus: &Path, args: &[&str]) -> Server {
        let mut child = bin()
            .arg("serve")
            .arg("--corpus")
            .arg(corpus)
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

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    fn post(&self, body: &Value) -> (u16, Value) {
        let r = http()
            .post(self.at("/v1/search"))
            .json(body)
            .send()
            .expect("the server answers");
        let status = r.status().as_u16();
        (status, r.json().expect("a JSON answer"))
    }

    /// The value of an unlabeled metric (histograms: their `_count`).
    fn metric(&self, name: &str) -> f64 {
        let text = http()
            .get(self.at("/metrics"))
            .send()
            .and_then(|r| r.text())
            .expect("metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    fn wait_for(&self, limit: Duration, mut cond: impl FnMut() -> bool) {
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

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("an HTTP client")
}

/// Query `i` of a query file as JSON rows.
fn rows(q: &Matrix<'_>) -> Value {
    let v = q.to_f32_vec();
    Value::Array(v.chunks(q.dim()).map(|r| json!(r)).collect())
}

fn b64_f32(q: &Matrix<'_>) -> String {
    let bytes: Vec<u8> = q
        .to_f32_vec()
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// (doc, index, score) of every hit of result `r`.
fn hits(r: &Value) -> Vec<(String, usize, f32)> {
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

fn assert_error(status: u16, body: &Value, want: u16, needle: &str) {
    let msg = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"));
    assert_eq!(status, want, "{msg}");
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
}

#[test]
fn results_equal_the_library_and_search_with_doc_ids() {
    let dir = tempfile::tempdir().unwrap();
    let corpus_path = synth(dir.path(), "c.safetensors", 300, "1:40", 24, "f16", 7);
    let query_path = synth(dir.path(), "q.safetensors", 12, "1:9", 24, "f32", 9);
    let ids: Vec<String> = (0..300).map(|j| format!("doc-{:04}", 299 - j)).collect();
    let ids_path = dir.path().join("ids.txt");
    std::fs::write(&ids_path, ids.join("\n") + "\n").unwrap();
    let server = Server::start(
        &corpus_path,
        &["--device", "cpu", "--doc-ids", ids_path.to_str().unwrap()],
    );

    let info: Value = http()
        .get(server.at("/v1/info"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(info["dim"], 24);
    assert_eq!(info["documents"], 300);
    assert_eq!(info["dtype"], "f16");
    assert_eq!(info["doc_ids"], true);
    let health = http().get(server.at("/healthz")).send().unwrap();
    assert_eq!(health.status(), 200);

    let corpus = Corpus::open(&corpus_path).unwrap();
    let qfile = Corpus::open(&query_path).unwrap();
    let queries: Vec<Matrix<'_>> = qfile.docs().collect();
    let k = 7;
    let want = tilemaxsim::CpuScorer::new()
        .top_k_batch(&queries, &corpus, k)
        .unwrap();

    // Concurrent clients, each query alone or in pairs, as JSON rows or base64 f32.
    let got: Vec<Vec<(String, usize, f32)>> = std::thread::scope(|s| {
        let handles: Vec<_> = queries
            .chunks(2)
            .enumerate()
            .map(|(c, pair)| {
                let server = &server;
                s.spawn(move || {
                    let qs: Vec<Value> = pair
                        .iter()
                        .enumerate()
                        .map(|(i, q)| {
                            if (c + i) % 2 == 0 {
                                json!({"id": format!("q{}", 2 * c + i), "embeddings": rows(q)})
                            } else {
                                json!({"embeddings_b64": b64_f32(q), "dtype": "f32",
                                       "shape": [q.rows(), q.dim()]})
                            }
                        })
                        .collect();
                    let (status, body) = server.post(&json!({"queries": qs, "k": k}));
                    assert_eq!(status, 200, "{body}");
                    let results = body["results"].as_array().unwrap().clone();
                    assert_eq!(results.len(), pair.len());
                    for (i, r) in results.iter().enumerate() {
                        let id = if (c + i) % 2 == 0 {
                            format!("q{}", 2 * c + i)
                        } else {
                            i.to_string()
                        };
                        assert_eq!(r["id"], id.as_str());
                    }
                    results.iter().map(hits).collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for (q, (g, w)) in got.iter().zip(&want).enumerate() {
        let w: Vec<(String, usize, f32)> = w
            .iter()
            .map(|h| (ids[h.doc].clone(), h.doc, h.score))
            .collect();
        assert_eq!(g, &w, "query {q}");
    }

    // `tilemaxsim search` on the same files gives the same run.
    let run = dir.path().join("run.trec");
    let out = bin()
        .args(["search", "--device", "cpu", "-k", &k.to_string()])
        .arg("--queries")
        .arg(&query_path)
        .arg("--corpus")
        .arg(&corpus_path)
        .arg("--doc-ids")
        .arg(&ids_path)
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&run).unwrap();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), queries.len() * k);
    for (q, g) in got.iter().enumerate() {
        for (rank, (doc, _, score)) in g.iter().enumerate() {
            let l = &lines[q * k + rank];
            assert_eq!(l[0], q.to_string());
            assert_eq!(l[2], doc);
            assert!((l[4].parse::<f64>().unwrap() - f64::from(*score)).abs() < 1e-5);
        }
    }

    // f16 and bf16 queries score as the library scores the same f16/bf16 matrix.
    let vals: Vec<f32> = queries[0].to_f32_vec();
    for dtype in ["f16", "bf16"] {
        let (bytes, elems): (Vec<u8>, tilemaxsim::OwnedElements) = if dtype == "f16" {
            let h: Vec<half::f16> = vals.iter().map(|&x| half::f16::from_f32(x)).collect();
            (h.iter().flat_map(|x| x.to_le_bytes()).collect(), h.into())
        } else {
            let h: Vec<half::bf16> = vals.iter().map(|&x| half::bf16::from_f32(x)).collect();
            (h.iter().flat_map(|x| x.to_le_bytes()).collect(), h.into())
        };
        let m = Matrix::new(elems.as_elements(), 24).unwrap();
        let want = tilemaxsim::CpuScorer::new().top_k(m, &corpus, 5).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let (status, body) = server.post(&json!({"queries": [{"embeddings_b64": b64,
            "dtype": dtype, "shape": [m.rows(), 24]}], "k": 5}));
        assert_eq!(status, 200, "{body}");
        let got = hits(&body["results"][0]);
        let want: Vec<_> = want
            .iter()
            .map(|h| (ids[h.doc].clone(), h.doc, h.score))
            .collect();
        assert_eq!(got, want, "{dtype}");
    }

    let text = http()
        .get(server.at("/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    for needle in [
        "tilemaxsim_requests_total{endpoint=\"/v1/search\",status=\"200\"} 8",
        "tilemaxsim_batch_queries_count",
        "tilemaxsim_queue_depth 0",
        "tilemaxsim_request_duration_seconds_bucket",
        "tilemaxsim_ready 1",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

/// A corpus on which `--device reference` takes about a second for a 320-token query.
fn slow_corpus(dir: &Path) -> PathBuf {
    synth(dir, "slow.safetensors", 2000, "64", 64, "f32", 1)
}

/// A deterministic `tokens × d` query.
fn query_values(tokens: usize, dim: usize, seed: usize) -> Vec<f32> {
    (0..tokens * dim)
        .map(|i| (((i + 7919 * seed) as f32) * 0.618).sin())
        .collect()
}

fn query_json(tokens: usize, dim: usize, seed: usize) -> Value {
    let v = query_values(tokens, dim, seed);
    Value::Array(v.chunks(dim).map(|r| json!(r)).collect())
}

/// The reference top-k of a `query_values` query, as (index, score).
fn reference_top_k(corpus: &Corpus, tokens: usize, seed: usize, k: usize) -> Vec<(usize, f32)> {
    let v = query_values(tokens, corpus.dim(), seed);
    let m = Matrix::new(&v[..], corpus.dim()).unwrap();
    ReferenceScorer
        .top_k(m, corpus, k)
        .unwrap()
        .iter()
        .map(|h| (h.doc, h.score))
        .collect()
}

fn index_scores(r: &Value) -> Vec<(usize, f32)> {
    hits(r).into_iter().map(|(_, i, s)| (i, s)).collect()
}

#[test]
fn bad_input_400_big_body_413_unknown_path_404() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = synth(dir.path(), "c.safetensors", 50, "1:20", 8, "f32", 3);
    let server = Server::start(&corpus, &["--device", "cpu", "--max-body-mb", "1"]);
    let q = json!({"embeddings": query_json(3, 8, 1)});
    let nan = base64::engine::general_purpose::STANDARD.encode(
        [1.0f32, f32::NAN]
            .repeat(4)
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"queries": [{"embeddings": query_json(2, 7, 1)}]}),
            "d = 8",
        ),
        (
            json!({"queries": [{"embeddings_b64": nan, "dtype": "f32", "shape": [1, 8]}]}),
            "non-finite",
        ),
        (json!({"queries": [q], "k": 0}), "out of range"),
        (json!({"queries": [q], "k": 51}), "out of range"),
        (json!({"queries": [{"embeddings": []}]}), "empty"),
        (json!({"queries": []}), "no queries"),
        (json!({"queries": [q], "top_k": 3}), "unknown field"),
    ];
    for (body, needle) in cases {
        let (status, answer) = server.post(&body);
        assert_error(status, &answer, 400, needle);
    }
    // JSON has no Inf; a number beyond f32 is one.
    let r = http()
        .post(server.at("/v1/search"))
        .header("content-type", "application/json")
        .body(r#"{"queries": [{"embeddings": [[1e39, 0, 0, 0, 0, 0, 0, 0]]}]}"#)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    assert_error(status, &r.json().unwrap(), 400, "non-finite");
    for body in ["{\"queries\": [", "", "[1, 2]"] {
        let r = http()
            .post(server.at("/v1/search"))
            .body(body)
            .send()
            .unwrap();
        let status = r.status().as_u16();
        assert_error(status, &r.json().unwrap(), 400, "malformed");
    }
    // 1 MiB is the limit; this body is 1.2 MB.
    let big = format!(r#"{{"queries": [], "pad": "{}"}}"#, "x".repeat(1_200_000));
    let r = http()
        .post(server.at("/v1/search"))
        .body(big)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    assert_error(status, &r.json().unwrap(), 413, "larger than the limit");
    let r = http().get(server.at("/v2/search")).send().unwrap();
    let status = r.status().as_u16();
    assert_error(status, &r.json().unwrap(), 404, "no endpoint");
    // Still serving, and the statuses are counted.
    let (status, body) = server.post(&json!({"queries": [q], "k": 3}));
    assert_eq!(status, 200, "{body}");
    let text = http()
        .get(server.at("/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    for needle in [
        "tilemaxsim_requests_total{endpoint=\"/v1/search\",status=\"400\"} 11",
        "tilemaxsim_requests_total{endpoint=\"/v1/search\",status=\"413\"} 1",
        "tilemaxsim_requests_total{endpoint=\"/v1/search\",status=\"200\"} 1",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

#[test]
fn queue_full_429_and_waiting_requests_form_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let corpus_path = slow_corpus(dir.path());
    let server = Server::start(&corpus_path, &["--device", "reference", "--max-queue", "3"]);
    let corpus = Corpus::open(&corpus_path).unwrap();
    std::thread::scope(|s| {
        let server = &server;
        let slow = s.spawn(move || {
            server.post(&json!({"queries": [{"embeddings": query_json(320, 64, 0)}], "k": 4}))
        });
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_engine_queries") == 1.0
        });
        // Three requests wait while the engine is busy...
        let waiting: Vec<_> = (1..=3)
            .map(|seed| {
                s.spawn(move || {
                    server.post(
                        &json!({"queries": [{"embeddings": query_json(2, 64, seed)}], "k": 4}),
                    )
                })
            })
            .collect();
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_queue_depth") == 3.0
        });
        // ... so the queue is full.
        let (status, body) =
            server.post(&json!({"queries": [{"embeddings": query_json(2, 64, 9)}]}));
        assert_error(status, &body, 429, "queue is full");
        let (status, body) = slow.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            index_scores(&body["results"][0]),
            reference_top_k(&corpus, 320, 0, 4)
        );
        assert_eq!(body["timing"]["batch_queries"], 1);
        for (seed, w) in (1..=3).zip(waiting) {
            let (status, body) = w.join().unwrap();
            assert_eq!(status, 200, "{body}");
            // The engine took all three together when it was free again.
            assert_eq!(body["timing"]["batch_queries"], 3, "{body}");
            assert_eq!(
                index_scores(&body["results"][0]),
                reference_top_k(&corpus, 2, seed, 4)
            );
        }
    });
    assert_eq!(server.metric("tilemaxsim_batch_queries_count"), 2.0);
    assert_eq!(server.metric("tilemaxsim_queries_total"), 4.0);
}

#[test]
fn timeout_504_and_the_timed_out_request_is_never_scored() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = slow_corpus(dir.path());
    let server = Server::start(
        &corpus,
        &["--device", "reference", "--request-timeout-ms", "300"],
    );
    std::thread::scope(|s| {
        let server = &server;
        let slow = s.spawn(move || {
            server.post(&json!({"queries": [{"embeddings": query_json(320, 64, 0)}]}))
        });
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_engine_queries") == 1.0
        });
        let (status, body) =
            server.post(&json!({"queries": [{"embeddings": query_json(2, 64, 1)}]}));
        assert_error(status, &body, 504, "no answer within 300 ms");
        let (status, body) = slow.join().unwrap();
        assert_error(status, &body, 504, "no answer within 300 ms");
    });
    // The slow one was scored and its answer discarded; the queued one was dropped unscored.
    server.wait_for(Duration::from_secs(60), || {
        server.metric("tilemaxsim_dropped_queued_total") == 1.0
            && server.metric("tilemaxsim_dropped_scoring_total") == 1.0
    });
    assert_eq!(server.metric("tilemaxsim_queries_total"), 1.0);
    assert_eq!(server.metric("tilemaxsim_engine_queries"), 0.0);
}

#[test]
fn a_client_that_disconnects_is_dropped_from_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = slow_corpus(dir.path());
    let server = Server::start(&corpus, &["--device", "reference"]);
    std::thread::scope(|s| {
        let server = &server;
        let slow = s.spawn(move || {
            server.post(&json!({"queries": [{"embeddings": query_json(320, 64, 0)}]}))
        });
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_engine_queries") == 1.0
        });
        // A raw client sends a whole request, then hangs up before the answer.
        let body = json!({"queries": [{"embeddings": query_json(2, 64, 1)}]}).to_string();
        let host = server.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).unwrap();
        write!(
            stream,
            "POST /v1/search HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        stream.flush().unwrap();
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_queue_depth") == 1.0
        });
        drop(stream);
        let (status, body) = slow.join().unwrap();
        assert_eq!(status, 200, "{body}");
    });
    server.wait_for(Duration::from_secs(60), || {
        server.metric("tilemaxsim_dropped_queued_total") == 1.0
    });
    assert_eq!(server.metric("tilemaxsim_queries_total"), 1.0);
    assert_eq!(server.metric("tilemaxsim_batch_queries_count"), 1.0);
}

#[test]
fn sigterm_stops_accepting_finishes_the_requests_in_flight_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let corpus_path = slow_corpus(dir.path());
    let mut server = Server::start(&corpus_path, &["--device", "reference"]);
    let corpus = Corpus::open(&corpus_path).unwrap();
    let host = server.url.trim_start_matches("http://").to_string();
    let (slow, queued) = std::thread::scope(|s| {
        let server = &server;
        let slow = s.spawn(move || {
            let qs = [query_json(320, 64, 0), query_json(320, 64, 1)];
            server.post(&json!({"queries": [{"embeddings": qs[0]}, {"embeddings": qs[1]}], "k": 5}))
        });
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_engine_queries") == 2.0
        });
        let queued = s.spawn(move || {
            server.post(&json!({"queries": [{"embeddings": query_json(3, 64, 2)}], "k": 5}))
        });
        server.wait_for(Duration::from_secs(60), || {
            server.metric("tilemaxsim_queue_depth") == 1.0
        });
        let pid = server.child.as_ref().unwrap().id();
        let kill = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        // New connections are refused while the work in flight goes on.
        server.wait_for(Duration::from_secs(30), || {
            TcpStream::connect(&host).is_err()
        });
        assert!(
            !slow.is_finished(),
            "the slow request ended before the listener closed"
        );
        (slow.join().unwrap(), queued.join().unwrap())
    });
    let (status, body) = slow;
    assert_eq!(status, 200, "{body}");
    for q in 0..2 {
        assert_eq!(
            index_scores(&body["results"][q]),
            reference_top_k(&corpus, 320, q, 5)
        );
    }
    let (status, body) = queued;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        index_scores(&body["results"][0]),
        reference_top_k(&corpus, 3, 2, 5)
    );
    let mut child = server.child.take().unwrap();
    let t = Instant::now();
    let code = loop {
        if let Some(code) = child.try_wait().unwrap() {
            break code;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the server did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        code.success(),
        "exit status {code}; log:\n{}",
        server.log.lock().unwrap()
    );
    let log = server.log.lock().unwrap();
    assert!(log.contains("shutting down"), "{log}");
}

/// A corpus the server cannot serve (a compressed file, a missing one) ends it with status 1
/// and a message, before it ever reports ready.
#[test]
fn a_corpus_it_cannot_serve_ends_it_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let exact = synth(dir.path(), "s.safetensors", 20, "8", 16, "f16", 1);
    let packed = dir.path().join("s8.safetensors");
    let out = bin()
        .args(["corpus", "compress", "--corpus"])
        .arg(&exact)
        .args(["--codec", "int8", "-o"])
        .arg(&packed)
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let missing = dir.path().join("none.safetensors");
    for (corpus, needle) in [
        (&packed, "is a compressed corpus"),
        (&missing, "none.safetensors"),
    ] {
        let mut child = bin()
            .args([
                "serve",
                "--device",
                "cpu",
                "--addr",
                "127.0.0.1:0",
                "--corpus",
            ])
            .arg(corpus)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("serve --corpus {} did not exit", corpus.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains(needle) && !err.contains("panicked"), "{err}");
    }
}
