//! `tilemaxsim serve --index` end to end, over real HTTP on 127.0.0.1: an index directory served
//! while documents are added and deleted, by other processes (`tilemaxsim index add` / `delete`)
//! and through the server's own `POST /v1/index/add` and `/v1/index/delete`. Once it has taken
//! an update (at once for its own writes, whose answers wait for it; shortly after for another
//! process's) the server answers as `index search` (another process, reading the directory)
//! does, so what the server acknowledged is on disk; bad writes are refused and change nothing.
//! A search within given documents (`"subset"`) answers as `index search --subset-run` does.
//! A server killed with SIGKILL in the middle of a stream of writes, four times over, leaves
//! every write it acknowledged in the index, once.

mod common;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use common::bin;
use common::server::*;
use serde_json::{Value, json};
use tilemaxsim::{Corpus, Matrix};

/// Each query's (document id, score) from a TREC run, best first.
fn run_hits(path: &Path) -> Vec<Vec<(String, f32)>> {
    let mut out: Vec<Vec<(String, f32)>> = Vec::new();
    let mut last = String::new();
    for l in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f[0] != last {
            out.push(Vec::new());
            last = f[0].to_string();
        }
        out.last_mut()
            .unwrap()
            .push((f[2].to_string(), f[4].parse().unwrap()));
    }
    out
}

/// An index of 300 seeded documents (d = 32, f16, 16 centroids) served with `--nprobe 4`, and
/// six queries.
struct Fixture {
    dir: tempfile::TempDir,
    index: PathBuf,
    queries: PathBuf,
    server: Server,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let corpus = synth(dir.path(), "c.safetensors", 300, "1:30", 32, "f16", 21);
        let queries = synth(dir.path(), "q.safetensors", 6, "1:9", 32, "f32", 23);
        let index = dir.path().join("idx");
        common::run_ok(
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
                .arg(&corpus)
                .arg("-o")
                .arg(&index),
        );
        let server = Server::start_index(&index, &["--device", "cpu", "--nprobe", "4"]);
        Fixture {
            dir,
            index,
            queries,
            server,
        }
    }

    /// The server's `/v1/info` field `key`.
    fn info(&self, key: &str) -> Value {
        let info: Value = http()
            .get(self.server.at("/v1/info"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        info[key].clone()
    }

    fn documents(&self) -> u64 {
        self.info("documents").as_u64().unwrap()
    }

    /// The server's answer to the six queries equals `index search`'s with the same settings,
    /// on the index as it is on disk now; returns every hit (id, number, score).
    fn same_as_index_search(&self, label: &str) -> Vec<(String, usize, f32)> {
        let qfile = Corpus::open(&self.queries).unwrap();
        let queries: Vec<Matrix<'_>> = qfile.docs().collect();
        let body = json!({"queries": queries.iter().map(|q| json!({"embeddings": rows(q)})).collect::<Vec<_>>(), "k": 10});
        let (status, answer) = self.server.post(&body);
        assert_eq!(status, 200, "{label}: {answer}");
        let run = self.dir.path().join(format!("{label}.trec"));
        common::run_ok(
            bin()
                .args([
                    "index", "search", "--device", "cpu", "-k", "10", "--nprobe", "4", "--index",
                ])
                .arg(&self.index)
                .arg("--queries")
                .arg(&self.queries)
                .arg("--out")
                .arg(&run),
        );
        let want = run_hits(&run);
        let results = answer["results"].as_array().unwrap();
        assert_eq!(results.len(), want.len(), "{label}");
        for (q, (r, w)) in results.iter().zip(&want).enumerate() {
            let got = hits(r);
            assert_eq!(got.len(), w.len(), "{label}, query {q}");
            for ((doc, _, score), (wdoc, wscore)) in got.iter().zip(w) {
                assert_eq!(doc, wdoc, "{label}, query {q}");
                assert!(
                    (score - wscore).abs() <= 1e-4,
                    "{label}, query {q}: {score} {wscore}"
                );
            }
        }
        results.iter().flat_map(hits).collect()
    }
}

#[test]
fn an_index_is_served_and_takes_the_updates_made_while_it_serves() {
    let f = Fixture::new();
    let added = synth(f.dir.path(), "a.safetensors", 40, "1:30", 32, "f16", 22);
    let before = f.same_as_index_search("before");
    assert_eq!(f.documents(), 300);
    // Another process adds 40 documents and deletes three the server has returned.
    common::run_ok(
        bin()
            .args(["index", "add", "--index"])
            .arg(&f.index)
            .arg("--corpus")
            .arg(&added),
    );
    let gone: Vec<usize> = before.iter().map(|h| h.1).take(3).collect();
    let list = gone
        .iter()
        .map(|j| j.to_string())
        .collect::<Vec<_>>()
        .join(",");
    common::run_ok(
        bin()
            .args(["index", "delete", "--index"])
            .arg(&f.index)
            .args(["--docs", &list]),
    );
    // The server takes them on a thread of its own, then serves with them.
    let want = 340 - gone.len() as u64;
    f.server
        .wait_for(std::time::Duration::from_secs(60), || f.documents() == want);
    let after = f.same_as_index_search("after");
    assert!(
        after.iter().all(|h| !gone.contains(&h.1)),
        "deleted documents came back"
    );
    assert!(
        after.iter().any(|h| h.1 >= 300),
        "no added document is ever found"
    );
    // Flags that need --index, or contradict it, are refused before listening.
    let out = bin()
        .args(["serve", "--nprobe", "4", "--corpus"])
        .arg(f.dir.path().join("c.safetensors"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = bin()
        .args(["serve", "--index"])
        .arg(f.dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no index here"));
}

#[test]
fn a_search_within_given_documents_answers_as_index_search_with_its_subset() {
    let f = Fixture::new();
    let qfile = Corpus::open(&f.queries).unwrap();
    let queries: Vec<Value> = qfile
        .docs()
        .map(|q| json!({"embeddings": rows(&q)}))
        .collect();
    // Query i within every seventh document from i on; the last within three (fewer than k).
    let lists: Vec<Vec<usize>> = (0..queries.len())
        .map(|i| {
            if i + 1 == queries.len() {
                vec![250, 5, 17, 5]
            } else {
                (i..300).step_by(7).collect()
            }
        })
        .collect();
    let (status, answer) = f
        .server
        .post(&json!({"queries": queries, "k": 10, "subset": lists}));
    assert_eq!(status, 200, "{answer}");
    // The same lists as a TREC run for `index search --subset-run` (the corpus has no ids: its
    // ids are the numbers, and the queries' their positions).
    let mut lines = String::new();
    for (i, list) in lists.iter().enumerate() {
        for d in list {
            lines += &format!("{i} Q0 {d} 1 0 first\n");
        }
    }
    let sub = f.dir.path().join("subset.trec");
    std::fs::write(&sub, lines).unwrap();
    let run = f.dir.path().join("within.trec");
    common::run_ok(
        bin()
            .args(["index", "search", "--device", "cpu", "-k", "10", "--index"])
            .arg(&f.index)
            .arg("--queries")
            .arg(&f.queries)
            .arg("--subset-run")
            .arg(&sub)
            .arg("--out")
            .arg(&run),
    );
    let want = run_hits(&run);
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), want.len());
    for (q, (r, w)) in results.iter().zip(&want).enumerate() {
        let got = hits(r);
        assert_eq!(got.len(), w.len().min(10), "query {q}");
        for ((doc, number, score), (wdoc, wscore)) in got.iter().zip(w) {
            assert_eq!(doc, wdoc, "query {q}");
            assert!(lists[q].contains(number), "query {q}: {number}");
            assert!(
                (score - wscore).abs() <= 1e-4,
                "query {q}: {score} {wscore}"
            );
        }
    }
    assert_eq!(
        hits(&results[5]).len(),
        3,
        "three documents listed, one twice"
    );
    // One list for every query, in a request beside one without.
    let one =
        json!({"queries": [queries[0].clone(), queries[1].clone()], "k": 5, "subset": [3, 4]});
    let (status, answer) = f.server.post(&one);
    assert_eq!(status, 200, "{answer}");
    for r in answer["results"].as_array().unwrap() {
        let got: Vec<usize> = hits(r).iter().map(|h| h.1).collect();
        assert!(
            got.len() == 2 && got.contains(&3) && got.contains(&4),
            "{got:?}"
        );
    }
    f.same_as_index_search("beside");
    // A number past the index is the request's error, a 400 naming it; the server goes on.
    let (status, answer) = f
        .server
        .post(&json!({"queries": [queries[0].clone()], "subset": [1, 100000]}));
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("100000"),
        "{answer}"
    );
    let (status, answer) = f
        .server
        .post(&json!({"queries": [queries[0].clone()], "subset": [[1], [2]]}));
    assert_eq!(status, 400, "{answer}");
    f.same_as_index_search("after the errors");
}

#[test]
fn compactions_in_place_are_served_whoever_makes_them() {
    let f = Fixture::new();
    let new = synth(f.dir.path(), "n.safetensors", 6, "3:20", 32, "f16", 25);
    let new = Corpus::open(&new).unwrap();
    let docs: Vec<Matrix<'_>> = new.docs().collect();
    let body = json!({"documents": docs.iter().enumerate()
        .map(|(i, d)| document(Some(&format!("new-{i}")), d, false)).collect::<Vec<_>>()});
    let (status, answer) = f.server.post_to("/v1/index/add", &body);
    assert_eq!(status, 200, "{answer}");
    let before = f.same_as_index_search("before");
    let gone: Vec<usize> = before
        .iter()
        .map(|h| h.1)
        .filter(|&j| j < 300)
        .take(4)
        .collect();
    let (status, answer) = f
        .server
        .post_to("/v1/index/delete", &json!({"indices": gone}));
    assert_eq!(status, 200, "{answer}");
    let deleted = f.same_as_index_search("deleted");
    let named = |hits: &[(String, usize, f32)]| -> Vec<(String, f32)> {
        hits.iter().map(|h| (h.0.clone(), h.2)).collect()
    };

    // Through the server: answered once the new generation serves; the same documents by id
    // with the same scores, numbered again.
    let (status, answer) = f.server.post_to("/v1/index/compact", &json!({}));
    assert_eq!(status, 200, "{answer}");
    let live = 306 - gone.len() as u64;
    assert_eq!(
        (
            answer["documents"].as_u64(),
            answer["removed"].as_u64(),
            answer["generation"].as_u64()
        ),
        (Some(live), Some(gone.len() as u64), Some(1))
    );
    assert_eq!(f.info("generation"), 1);
    assert_eq!(f.documents(), live);
    // A delete by the numbers of generation 0 is refused (they name other documents now);
    // search answers say which generation numbered their hits.
    let (status, answer) = f.server.post_to(
        "/v1/index/delete",
        &json!({"indices": [gone[0]], "generation": 0}),
    );
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("compacted"),
        "{answer}"
    );
    assert_eq!(f.documents(), live);
    let query = json!({"queries": [{"embeddings": rows(&docs[3])}], "k": 3});
    let (_, answer) = f.server.post(&query);
    assert_eq!(answer["generation"], 1, "{answer}");
    let compacted = f.same_as_index_search("compacted");
    assert_eq!(named(&compacted), named(&deleted));
    assert!(compacted.iter().all(|h| h.1 < live as usize));
    // Deletes by id name the new numbers.
    let (status, answer) = f
        .server
        .post_to("/v1/index/delete", &json!({"ids": ["new-3"]}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["deleted"], 1);
    let (_, answer) = f.server.post(&query);
    assert!(
        hits(&answer["results"][0]).iter().all(|h| h.0 != "new-3"),
        "{answer}"
    );

    // By another process: the server takes the next generation while it serves.
    // (The index's documents carry ids since the adds above, so an add names its documents:
    // one without ids is refused.)
    let added = synth(f.dir.path(), "a.safetensors", 10, "1:30", 32, "f16", 26);
    let ids = f.dir.path().join("a.ids");
    std::fs::write(
        &ids,
        (0..10).map(|i| format!("other-{i}\n")).collect::<String>(),
    )
    .unwrap();
    let add = |with_ids: bool| {
        let mut c = bin();
        c.args(["index", "add", "--index"])
            .arg(&f.index)
            .arg("--corpus")
            .arg(&added);
        if with_ids {
            c.arg("--ids").arg(&ids);
        }
        c.output().unwrap()
    };
    let refused = add(false);
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("carry ids"),
        "{refused:?}"
    );
    let out = add(true);
    assert!(out.status.success(), "{out:?}");
    common::run_ok(
        bin()
            .args(["index", "compact", "--in-place", "--index"])
            .arg(&f.index),
    );
    f.server.wait_for(std::time::Duration::from_secs(60), || {
        f.info("generation") == 2
    });
    assert_eq!(f.documents(), live - 1 + 10);
    f.same_as_index_search("compacted by another process");

    // A compaction takes no parameters.
    let (status, answer) = f.server.post_to("/v1/index/compact", &json!({"to": "x"}));
    assert_eq!(status, 400, "{answer}");
    assert_eq!(f.info("generation"), 2);
}

/// A document of `tokens` as the write API takes it: rows, or base64 f16 with a shape.
fn document(id: Option<&str>, tokens: &Matrix<'_>, b64: bool) -> Value {
    let mut d = if b64 {
        let bytes: Vec<u8> = tokens
            .to_f32_vec()
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_bits().to_le_bytes())
            .collect();
        json!({
            "embeddings_b64": base64::engine::general_purpose::STANDARD.encode(bytes),
            "dtype": "f16",
            "shape": [tokens.rows(), tokens.dim()],
        })
    } else {
        json!({ "embeddings": rows(tokens) })
    };
    if let Some(id) = id {
        d["id"] = json!(id);
    }
    d
}

#[test]
fn documents_are_added_and_deleted_over_http_and_are_on_disk_when_acknowledged() {
    let f = Fixture::new();
    let new = synth(f.dir.path(), "n.safetensors", 6, "3:20", 32, "f16", 24);
    let new = Corpus::open(&new).unwrap();
    let docs: Vec<Matrix<'_>> = new.docs().collect();
    f.same_as_index_search("start");

    // Six documents, some sent as rows and some as base64 f16, with ids.
    let ids: Vec<String> = (0..docs.len()).map(|i| format!("new-{i}")).collect();
    let body = json!({"documents": docs.iter().zip(&ids).enumerate()
        .map(|(i, (d, id))| document(Some(id), d, i % 2 == 1)).collect::<Vec<_>>()});
    let (status, answer) = f.server.post_to("/v1/index/add", &body);
    assert_eq!(status, 200, "{answer}");
    let added = answer["added"].as_array().unwrap();
    assert_eq!(added.len(), 6);
    for (i, a) in added.iter().enumerate() {
        assert_eq!(a["doc"], ids[i]);
        assert_eq!(a["index"], 300 + i);
    }
    assert_eq!(answer["documents"], 306);
    assert_eq!(f.documents(), 306);
    f.same_as_index_search("added");

    // A document's own tokens as the query find it first.
    let query = json!({"queries": [{"embeddings": rows(&docs[2])}], "k": 3});
    let (status, answer) = f.server.post(&query);
    assert_eq!(status, 200, "{answer}");
    let top = hits(&answer["results"][0]);
    assert_eq!((top[0].0.as_str(), top[0].1), ("new-2", 302), "{answer}");

    // Deleted by id, it is gone from the answers; deleted again, it was already.
    let (status, answer) = f
        .server
        .post_to("/v1/index/delete", &json!({"ids": ["new-2"]}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["deleted"].as_u64(), answer["already"].as_u64()),
        (Some(1), Some(0))
    );
    let (_, answer) = f.server.post(&query);
    assert!(
        hits(&answer["results"][0]).iter().all(|h| h.0 != "new-2"),
        "{answer}"
    );
    let (status, answer) = f.server.post_to(
        "/v1/index/delete",
        &json!({"ids": ["new-2"], "indices": null}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["deleted"].as_u64(), answer["already"].as_u64()),
        (Some(0), Some(1))
    );
    // By number, the build's documents too.
    let (status, answer) = f
        .server
        .post_to("/v1/index/delete", &json!({"indices": [0, 1, 1]}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["deleted"], 2);
    assert_eq!(answer["documents"], 303);
    let after = f.same_as_index_search("deleted");
    assert!(after.iter().all(|h| ![0, 1, 302].contains(&h.1)));

    // Refused writes change nothing.
    let wrong_d = Matrix::new(&[1.0f32, 0.0, 0.0][..], 3).unwrap();
    let not_unit: Vec<f32> = docs[0].to_f32_vec().iter().map(|v| v * 3.0).collect();
    let not_unit = Matrix::new(&not_unit[..], 32).unwrap();
    let nan: Vec<f32> = docs[0]
        .to_f32_vec()
        .iter()
        .enumerate()
        .map(|(i, &v)| if i == 5 { f32::NAN } else { v })
        .collect();
    let with_nan = json!({"documents": [{"embeddings_b64": base64::engine::general_purpose::STANDARD.encode(
        nan.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()), "dtype": "f32", "shape": [docs[0].rows(), 32]}]});
    for (path, body, needle) in [
        ("/v1/index/add", json!({"documents": []}), "no documents"),
        (
            "/v1/index/add",
            json!({"documents": [document(None, &wrong_d, false)]}),
            "d = 32",
        ),
        (
            "/v1/index/add",
            json!({"documents": [document(Some("bad"), &not_unit, false)]}),
            "norm",
        ),
        // The index's documents carry ids (since the adds above): an add names its own.
        (
            "/v1/index/add",
            json!({"documents": [document(None, &docs[2], false)]}),
            "carry ids",
        ),
        // An id a live document carries.
        (
            "/v1/index/add",
            json!({"documents": [document(Some("new-1"), &docs[2], false)]}),
            "is live document 301",
        ),
        ("/v1/index/add", with_nan, "non-finite"),
        (
            "/v1/index/add",
            json!({"documents": [{"embeddings": []}]}),
            "every document needs",
        ),
        (
            "/v1/index/add",
            json!({"documents": [document(Some("x"), &docs[0], false), document(None, &docs[1], false)]}),
            "every document one, or none",
        ),
        (
            "/v1/index/add",
            json!({"documents": [document(Some("x"), &docs[0], false), document(Some("x"), &docs[1], false)]}),
            "x",
        ),
        ("/v1/index/add", json!({"docs": []}), "malformed"),
        (
            "/v1/index/delete",
            json!({"ids": ["new-0", "nope"]}),
            "nope",
        ),
        (
            "/v1/index/delete",
            json!({"indices": [5, 100000]}),
            "does not exist",
        ),
        (
            "/v1/index/delete",
            json!({"ids": ["new-0"], "indices": [5]}),
            "one of the two",
        ),
        (
            "/v1/index/delete",
            json!({"indices": []}),
            "no documents named",
        ),
    ] {
        let (status, answer) = f.server.post_to(path, &body);
        assert_error(status, &answer, 400, needle);
    }
    assert_eq!(f.documents(), 303);
    let same = f.same_as_index_search("refused");
    assert_eq!(same, after, "a refused write changed the answers");
    // A GET is not a write.
    let r = http().get(f.server.at("/v1/index/add")).send().unwrap();
    assert_eq!(r.status(), 405);
}

#[test]
fn a_server_killed_mid_write_keeps_every_write_it_acknowledged() {
    let f = Fixture::new();
    drop(f.server);
    let new = synth(f.dir.path(), "k.safetensors", 50, "5:40", 32, "f16", 25);
    let new = Corpus::open(&new).unwrap();
    let docs: Vec<Value> = new
        .docs()
        .map(|d| json!({ "embeddings": rows(&d) }))
        .collect();
    let mut acked: Vec<String> = Vec::new();
    let mut sent = 0;
    for round in 0..4u64 {
        let mut server = Server::start_index(&f.index, &["--device", "cpu", "--nprobe", "4"]);
        let url = server.at("/v1/index/add");
        let docs = docs.clone();
        // Adds of one document each, until the server is gone; the acknowledged ids come back.
        let writer = std::thread::spawn(move || {
            let mut ok = Vec::new();
            for i in 0.. {
                let id = format!("k{round}-{i}");
                let mut d = docs[i % docs.len()].clone();
                d["id"] = json!(id);
                match http().post(&url).json(&json!({ "documents": [d] })).send() {
                    Ok(r) if r.status() == 200 => ok.push(id),
                    _ => return (ok, i + 1),
                }
            }
            unreachable!()
        });
        std::thread::sleep(std::time::Duration::from_millis(150 + 70 * round));
        let mut child = server.child.take().expect("the server runs");
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (ok, tried) = writer.join().unwrap();
        assert!(
            !ok.is_empty(),
            "round {round}: no write was acknowledged before the kill"
        );
        acked.extend(ok);
        sent += tried;
    }
    // Every acknowledged add is in the index, once; at most the one in flight at each kill
    // more, and never part of one (one document a write).
    let index = tilemaxsim::index::Index::open(&f.index).unwrap();
    let ids: Vec<String> = (300..index.len()).map(|j| index.doc_id(j)).collect();
    for id in &acked {
        assert_eq!(ids.iter().filter(|x| *x == id).count(), 1, "{id}");
    }
    assert!(ids.len() >= acked.len() && ids.len() <= acked.len() + 4);
    assert!(ids.len() <= sent);
    // And it is served again, with them.
    let server = Server::start_index(&f.index, &["--device", "cpu"]);
    let info: Value = http()
        .get(server.at("/v1/info"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(info["documents"], 300 + ids.len());
}
