//! The `tilemaxsim` binary on compressed corpora, on real data (the first 300 Cranfield
//! documents, 20 queries): `corpus compress` for every codec, `corpus info`, `search` on the
//! codes (the same run as searching the decoded corpus), `--rerank` (exact scores of the
//! compressed top-K'), `score` on the codes, `corpus decode`, and the errors a user can meet.

mod common;
use common::{bin, run_err, run_ok};

use std::path::{Path, PathBuf};

use tilemaxsim::reference::maxsim_f64;
use tilemaxsim::{Corpus, Matrix};

/// The first `n` items of a Cranfield file, with their ids, saved to `out`.
fn subset(file: &str, ids: &str, n: usize, out: &Path) -> Corpus {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cranfield");
    let c = Corpus::open(d.join(file)).expect("the real data is in ../shared/data/cranfield");
    let docs: Vec<Matrix<'_>> = c.docs().take(n).collect();
    let ids: Vec<String> = std::fs::read_to_string(d.join(ids))
        .unwrap()
        .lines()
        .take(n)
        .map(String::from)
        .collect();
    let s = Corpus::from_docs(&docs).unwrap().with_doc_ids(ids).unwrap();
    s.save(out).unwrap();
    s
}

/// (qid, docid, score) lines of a run.
fn run_lines(path: &Path) -> Vec<(String, String, f64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].into(), f[2].into(), f[4].parse().unwrap())
        })
        .collect()
}

fn search(dir: &Path, q: &Path, corpus: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}.trec"));
    run_ok(
        bin()
            .args(["search", "--device", "cpu", "-k", "10", "--queries"])
            .arg(q)
            .arg("--corpus")
            .arg(corpus)
            .args(extra)
            .arg("--out")
            .arg(&out),
    );
    out
}

#[test]
fn compress_search_rerank_decode_on_cranfield() {
    let dir = tempfile::tempdir().unwrap();
    let exact_path = dir.path().join("exact.safetensors");
    let q_path = dir.path().join("queries.safetensors");
    let exact = subset("corpus.safetensors", "doc_ids.txt", 300, &exact_path);
    let queries = subset("queries.safetensors", "query_ids.txt", 20, &q_path);
    let codecs: [&[&str]; 4] = [
        &["--codec", "residual", "--nbits", "2", "--centroids", "64"],
        &["--codec", "pq", "--m", "16", "--kmeans-iters", "3"],
        &["--codec", "int8"],
        &["--codec", "fp8"],
    ];
    for args in codecs {
        let name = args[1];
        let cpath = dir.path().join(format!("{name}.safetensors"));
        let out = run_ok(
            bin()
                .args(["corpus", "compress", "--corpus"])
                .arg(&exact_path)
                .args(args)
                .arg("-o")
                .arg(&cpath),
        );
        let info = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            info.contains(name) && info.contains("bytes per token"),
            "{info}"
        );
        let info = run_ok(bin().args(["corpus", "info"]).arg(&cpath));
        assert!(String::from_utf8_lossy(&info.stdout).contains("documents  300"));

        // Searching the codes is searching their decoding.
        let dec = dir.path().join(format!("{name}-decoded.safetensors"));
        run_ok(
            bin()
                .args(["corpus", "decode", "--corpus"])
                .arg(&cpath)
                .arg("-o")
                .arg(&dec),
        );
        let on_codes = search(dir.path(), &q_path, &cpath, name, &[]);
        let on_decoded = search(dir.path(), &q_path, &dec, &format!("{name}-dec"), &[]);
        assert_eq!(
            std::fs::read_to_string(&on_codes).unwrap(),
            std::fs::read_to_string(&on_decoded).unwrap(),
            "{name}"
        );

        // `score` on the codes gives the decoded corpus's scores, bit for bit.
        let score = |corpus: &Path| {
            let out = run_ok(
                bin()
                    .args(["score", "--device", "cpu", "--queries"])
                    .arg(&q_path)
                    .arg("--corpus")
                    .arg(corpus),
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let on_codes = score(&cpath);
        assert_eq!(on_codes.lines().count(), 20 * 300);
        assert_eq!(on_codes, score(&dec), "{name}: score");

        // Reranked: every score is the exact score of that document, best first.
        let rr = search(
            dir.path(),
            &q_path,
            &cpath,
            &format!("{name}-rr"),
            &["--rerank", exact_path.to_str().unwrap(), "--rerank-k", "40"],
        );
        let lines = run_lines(&rr);
        assert_eq!(lines.len(), 20 * 10);
        let ids = exact.doc_ids().unwrap();
        let qids = queries.doc_ids().unwrap();
        for (qid, doc, score) in &lines {
            let qi = qids.iter().position(|x| x == qid).unwrap();
            let di = ids.iter().position(|x| x == doc).unwrap();
            let want = maxsim_f64(queries.doc(qi), exact.doc(di));
            assert!(
                (score - want).abs() < 1e-4,
                "{name} {qid} {doc}: {score} vs {want}"
            );
        }
        for w in lines.windows(2) {
            if w[0].0 == w[1].0 {
                assert!(w[0].2 >= w[1].2);
            }
        }
    }
}

#[test]
fn compressed_user_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let exact_path = dir.path().join("exact.safetensors");
    let small_path = dir.path().join("small.safetensors");
    let q_path = dir.path().join("queries.safetensors");
    subset("corpus.safetensors", "doc_ids.txt", 30, &exact_path);
    subset("corpus.safetensors", "doc_ids.txt", 10, &small_path);
    subset("queries.safetensors", "query_ids.txt", 2, &q_path);
    let cpath = dir.path().join("int8.safetensors");
    run_ok(
        bin()
            .args(["corpus", "compress", "--codec", "int8", "--corpus"])
            .arg(&exact_path)
            .arg("-o")
            .arg(&cpath),
    );
    let search = |corpus: &Path, extra: &[&str]| {
        run_err(
            bin()
                .args(["search", "--queries"])
                .arg(&q_path)
                .arg("--corpus")
                .arg(corpus)
                .args(extra),
        )
    };
    let e = search(&exact_path, &["--rerank", exact_path.to_str().unwrap()]);
    assert!(e.contains("--rerank needs a compressed"), "{e}");
    let e = search(&cpath, &["--rerank", small_path.to_str().unwrap()]);
    assert!(e.contains("same documents"), "{e}");
    // No GPU here (no driver): an explicit GPU is an error naming cuda:0, never a silent
    // fall-back to the CPU.
    let e = search(&cpath, &["--device", "cuda"]);
    assert!(e.contains("cuda:0"), "{e}");
    let e = run_err(
        bin()
            .args([
                "corpus", "compress", "--codec", "int8", "--device", "cuda", "--corpus",
            ])
            .arg(&exact_path)
            .arg("-o")
            .arg(dir.path().join("x")),
    );
    assert!(e.contains("cuda:0"), "{e}");
    let e = run_err(
        bin()
            .args([
                "corpus", "compress", "--codec", "pq", "--m", "12", "--corpus",
            ])
            .arg(&exact_path)
            .arg("-o")
            .arg(dir.path().join("x")),
    );
    assert!(e.contains("12"), "{e}");
    let e = run_err(
        bin()
            .args(["corpus", "import", "--plaid"])
            .arg(dir.path())
            .arg("-o")
            .arg(dir.path().join("x")),
    );
    assert!(e.contains("not a PLAID index"), "{e}");
    // A truncated compressed file.
    let bytes = std::fs::read(&cpath).unwrap();
    let cut = dir.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let e = run_err(bin().args(["corpus", "info"]).arg(&cut));
    assert!(e.contains("cut.safetensors"), "{e}");
}
