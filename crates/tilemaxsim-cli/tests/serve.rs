//! `tilemaxsim serve` end to end: the real binary on 127.0.0.1 (any free port), spoken to over
//! real HTTP. Results equal the library's and `tilemaxsim search`'s on the same seeded corpus;
//! bad input (400, 413, 404); a corpus it cannot serve. An index served live: serve_index.rs;
//! overload and shutdown: serve_overload.rs; the harness: common/server.rs.

mod common;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::bin;
use common::server::*;
use serde_json::{Value, json};
use tilemaxsim::{Corpus, Matrix, Scorer};

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
        (json!({"queries": [q], "k": 1001}), "out of range"),
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
    // A corpus takes no updates: only an index served live does.
    let (status, body) = server.post_to("/v1/index/add", &json!({"documents": []}));
    assert_error(status, &body, 404, "serve an index (--index)");
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
    // k beyond the corpus's 50 documents returns all of them (the rule everywhere).
    let (status, body) = server.post(&json!({"queries": [q], "k": 51}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["results"][0]["hits"].as_array().map(Vec::len),
        Some(50),
        "{body}"
    );
    // A known endpoint asked with the wrong method: 405 with the JSON error.
    let r = http().get(server.at("/v1/search")).send().unwrap();
    let status = r.status().as_u16();
    assert_error(status, &r.json().unwrap(), 405, "takes POST");
}

/// A compressed corpus is served through the same path as an exact one: its codes searched on
/// the CPU, and with `--rerank` its top k' rescored exactly, as `tilemaxsim search` does.
#[test]
fn a_compressed_corpus_is_served_with_its_second_stage() {
    let dir = tempfile::tempdir().unwrap();
    let exact_path = synth(dir.path(), "s.safetensors", 60, "1:20", 16, "f16", 3);
    let packed = dir.path().join("s8.safetensors");
    let out = bin()
        .args([
            "corpus",
            "compress",
            "--codec",
            "int8",
            "--rerank-k",
            "9",
            "--corpus",
        ])
        .arg(&exact_path)
        .arg("-o")
        .arg(&packed)
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let codes = tilemaxsim::CompressedCorpus::open(&packed).unwrap();
    let exact = Corpus::open(&exact_path).unwrap();
    let q = query_json(5, 16, 4);
    let rows = query_values(5, 16, 4);
    let m = Matrix::new(&rows[..], 16).unwrap();
    let cpu = tilemaxsim::CpuScorer::new();
    // Codes alone: the CPU engine on the codes.
    let server = Server::start(&packed, &["--device", "cpu"]);
    let info: Value = http()
        .get(server.at("/v1/info"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(info["dtype"], "int8");
    let (status, body) = server.post(&json!({"queries": [{"embeddings": q}], "k": 4}));
    assert_eq!(status, 200, "{body}");
    let want: Vec<_> = cpu
        .top_k(m, &codes, 4)
        .unwrap()
        .iter()
        .map(|h| (h.doc.to_string(), h.doc, h.score))
        .collect();
    assert_eq!(hits(&body["results"][0]), want);
    drop(server);
    // With the second stage: the top 9 (the file's depth) rescored exactly.
    let server = Server::start(
        &packed,
        &["--device", "cpu", "--rerank", exact_path.to_str().unwrap()],
    );
    let (status, body) = server.post(&json!({"queries": [{"embeddings": q}], "k": 4}));
    assert_eq!(status, 200, "{body}");
    let first: Vec<usize> = cpu
        .top_k(m, &codes, 9)
        .unwrap()
        .iter()
        .map(|h| h.doc)
        .collect();
    let want: Vec<_> = cpu
        .top_k_subset(m, &exact, &first, 4)
        .unwrap()
        .iter()
        .map(|h| (h.doc.to_string(), h.doc, h.score))
        .collect();
    assert_eq!(hits(&body["results"][0]), want);
}

/// A corpus the server cannot serve (a missing file, a file that is no corpus, a second stage
/// for an exact corpus) ends it with status 1 and a message, before it listens.
#[test]
fn a_corpus_it_cannot_serve_ends_it_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let exact = synth(dir.path(), "s.safetensors", 20, "8", 16, "f16", 1);
    let junk = dir.path().join("junk.safetensors");
    std::fs::write(&junk, b"not a safetensors file").unwrap();
    let missing = dir.path().join("none.safetensors");
    let rerank = ["--rerank", exact.to_str().unwrap()];
    for (corpus, extra, needle) in [
        (&missing, &[][..], "none.safetensors"),
        (&junk, &[][..], "junk.safetensors"),
        (&exact, &rerank[..], "--rerank needs a compressed --corpus"),
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
            .args(extra)
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
        // Refused before it listens: no client ever sees a server that then exits.
        assert!(!err.contains("listening"), "{err}");
    }
}
