//! `tilemaxsim serve` under overload and at shutdown, over real HTTP on 127.0.0.1: a full queue
//! (429) while waiting requests form one batch, a timeout (504) whose request is never scored, a
//! client that disconnects, and SIGTERM with a request in flight.
//!
//! The engine must stay busy for a while: these serve on `--device reference` (the float64
//! oracle, slow) and follow the server's own state through `/metrics`, so they wait for what
//! they need rather than for a guessed time.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::server::*;
use serde_json::json;
use tilemaxsim::Corpus;

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
