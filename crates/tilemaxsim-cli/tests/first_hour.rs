//! What a new user meets in the first hour with the binary, each checked as they would meet it:
//! k beyond the corpus, importing PyLate's padded layout and files with other key names,
//! `--normalize`, the rerank depth kept in a compressed file, notices for flags that do
//! nothing, the messages of an empty query file and a missing file, the values line of
//! `corpus info --check-finite` on a compressed file, and one reason for a missing GPU.

mod common;
use common::{bin, run_err, run_ok};

use std::path::Path;

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use tilemaxsim::Corpus;

/// Unit-norm f32 tokens, `n` of width `d`, from a seed (a small LCG; no test randomness).
fn unit_tokens(n: usize, d: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut v: Vec<f32> = (0..n * d)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        })
        .collect();
    for row in v.chunks_exact_mut(d) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn write(path: &Path, tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>) {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, dt, shape, b)| {
            (
                n.to_string(),
                TensorView::new(*dt, shape.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn import_lists_the_keys_and_takes_padded_documents_with_lengths_or_a_mask() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    // Three padded documents [3, 4, 8]: lengths 4, 1, 2 (as PyLate pads them).
    let padded = unit_tokens(12, 8, 1);
    let f32s = |v: &[f32]| bytes(v, |x: f32| x.to_le_bytes().to_vec());
    write(
        &p("other.safetensors"),
        vec![
            ("emb", Dtype::F32, vec![3, 4, 8], f32s(&padded)),
            (
                "lens",
                Dtype::I32,
                vec![3],
                bytes(&[4i32, 1, 2], |x: i32| x.to_le_bytes().to_vec()),
            ),
        ],
    );
    let import = |file: &str, extra: &[&str], out: &str| {
        let mut c = bin();
        c.args(["corpus", "import", "--safetensors"])
            .arg(p(file))
            .args(extra)
            .arg("-o")
            .arg(p(out));
        c
    };
    let err = run_err(&mut import("other.safetensors", &[], "x.safetensors"));
    assert!(
        err.contains("`emb` F32 [3, 4, 8]")
            && err.contains("`lens` I32 [3]")
            && err.contains("--embeddings-key"),
        "{err}"
    );
    let err = run_err(&mut import(
        "other.safetensors",
        &["--embeddings-key", "emb"],
        "x.safetensors",
    ));
    assert!(
        err.contains("padded") && err.contains("--lengths-key") && err.contains("--mask-key"),
        "{err}"
    );
    run_ok(&mut import(
        "other.safetensors",
        &["--embeddings-key", "emb", "--lengths-key", "lens"],
        "lens.safetensors",
    ));
    let c = Corpus::open(p("lens.safetensors")).unwrap();
    assert_eq!(c.offsets(), &[0, 4, 5, 7]);
    assert_eq!(c.doc(1).to_f32_vec()[3], padded[4 * 8 + 3]);
    assert_eq!(c.doc(2).to_f32_vec()[8], padded[9 * 8]);
    // A mask with holes: document 0 keeps rows 0 and 2, document 1 row 3, document 2 rows 1, 2.
    let mask = [1u8, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0];
    write(
        &p("masked.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![3, 4, 8], f32s(&padded)),
            ("attention_mask", Dtype::U8, vec![3, 4], mask.to_vec()),
        ],
    );
    run_ok(&mut import(
        "masked.safetensors",
        &["--mask-key", "attention_mask"],
        "mask.safetensors",
    ));
    let m = Corpus::open(p("mask.safetensors")).unwrap();
    assert_eq!(m.offsets(), &[0, 2, 3, 5]);
    assert_eq!(m.doc(0).to_f32_vec()[8], padded[2 * 8]);
    assert_eq!(m.doc(1).to_f32_vec()[0], padded[7 * 8]);
    // --normalize: tokens of any norm become unit vectors.
    let loud: Vec<f32> = padded.iter().map(|x| x * 3.0).collect();
    write(
        &p("loud.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![12, 8], f32s(&loud)),
            (
                "lengths",
                Dtype::I64,
                vec![2],
                bytes(&[5i64, 7], |x: i64| x.to_le_bytes().to_vec()),
            ),
        ],
    );
    run_ok(&mut import(
        "loud.safetensors",
        &["--normalize"],
        "unit.safetensors",
    ));
    let u = Corpus::open(p("unit.safetensors")).unwrap();
    let t = u.tokens().to_f32_vec();
    for row in t.chunks_exact(8) {
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((n - 1.0).abs() < 1e-6, "norm {n}");
    }
}

#[test]
fn compress_normalizes_keeps_the_rerank_depth_and_search_clips_k() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let lengths: Vec<usize> = (0..30).map(|i| 1 + i % 7).collect();
    let total: usize = lengths.iter().sum();
    let exact = Corpus::from_lengths(unit_tokens(total, 16, 2), 16, &lengths).unwrap();
    exact.save(p("exact.safetensors")).unwrap();
    let loud: Vec<f32> = unit_tokens(total, 16, 2).iter().map(|x| x * 5.0).collect();
    Corpus::from_lengths(loud, 16, &lengths)
        .unwrap()
        .save(p("loud.safetensors"))
        .unwrap();
    Corpus::from_lengths(unit_tokens(9, 16, 3), 16, &[4, 5])
        .unwrap()
        .save(p("q.safetensors"))
        .unwrap();

    let compress = |corpus: &str, extra: &[&str], out: &str| {
        let mut c = bin();
        c.args([
            "corpus",
            "compress",
            "--codec",
            "residual",
            "--centroids",
            "8",
            "--corpus",
        ])
        .arg(p(corpus))
        .args(extra)
        .arg("-o")
        .arg(p(out));
        c
    };
    // Unnormalized tokens: the error names the fix; a bad nbits is reported as such first.
    let err = run_err(&mut compress("loud.safetensors", &[], "x.safetensors"));
    assert!(err.contains("--normalize"), "{err}");
    let err = run_err(&mut compress(
        "loud.safetensors",
        &["--nbits", "3"],
        "x.safetensors",
    ));
    assert!(err.contains("nbits") && !err.contains("norm "), "{err}");
    run_ok(&mut compress(
        "loud.safetensors",
        &["--normalize", "--rerank-k", "12"],
        "r.safetensors",
    ));
    let info = run_ok(
        bin()
            .args(["corpus", "info", "--check-finite"])
            .arg(p("r.safetensors")),
    );
    let info = String::from_utf8(info.stdout).unwrap();
    assert!(
        info.contains("rerank     top 12") && info.contains("values     every code"),
        "{info}"
    );

    let search = |extra: &[&str], k: &str| {
        let mut c = bin();
        c.args(["search", "--device", "cpu", "-k", k, "--queries"])
            .arg(p("q.safetensors"))
            .arg("--corpus")
            .arg(p("r.safetensors"))
            .args(extra);
        c
    };
    let exact_arg = p("exact.safetensors");
    let exact_arg = exact_arg.to_str().unwrap();
    // The recorded depth is the default; a depth below k is raised with a notice.
    let out = run_ok(&mut search(&["--rerank", exact_arg], "5"));
    let err = stderr(&out);
    assert!(err.contains("top-12 reranked"), "{err}");
    let out = run_ok(&mut search(
        &["--rerank", exact_arg, "--rerank-k", "3"],
        "5",
    ));
    assert!(
        stderr(&out).contains("--rerank-k 3 is below -k 5"),
        "{}",
        stderr(&out)
    );
    // k beyond the corpus: every document, the same rule as Python and the server.
    let out = run_ok(&mut search(&[], "100"));
    let run = String::from_utf8(out.stdout).unwrap();
    assert_eq!(run.lines().count(), 2 * 30);
    // GPU-only flags on the CPU say that they do nothing.
    let out = run_ok(&mut search(
        &["--residency", "stream", "--chunk-mb", "8"],
        "3",
    ));
    assert!(
        stderr(&out).contains("--residency and --chunk-mb only apply to GPU search"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn messages_name_the_right_thing_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    Corpus::from_lengths(unit_tokens(6, 8, 4), 8, &[2, 4])
        .unwrap()
        .save(p("c.safetensors"))
        .unwrap();
    // A query file with no queries.
    write(
        &p("empty.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![0, 8], Vec::new()),
            ("offsets", Dtype::I64, vec![1], 0i64.to_le_bytes().to_vec()),
        ],
    );
    let err = run_err(
        bin()
            .args(["search", "--device", "cpu", "--corpus"])
            .arg(p("c.safetensors"))
            .arg("--queries")
            .arg(p("empty.safetensors")),
    );
    assert!(
        err.contains("holds no queries") && !err.contains("a corpus"),
        "{err}"
    );
    // A missing file: the OS's reason, once.
    let err = run_err(
        bin()
            .args(["search", "--device", "cpu", "--queries"])
            .arg(p("c.safetensors"))
            .arg("--corpus")
            .arg(p("absent.safetensors")),
    );
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn info_and_search_give_one_reason_for_a_missing_gpu() {
    if tilemaxsim::gpu_count() > 0 {
        eprintln!("notice: a GPU is present; the missing-GPU message is not checked here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    Corpus::from_lengths(unit_tokens(6, 8, 5), 8, &[2, 4])
        .unwrap()
        .save(p("c.safetensors"))
        .unwrap();
    let info = String::from_utf8(run_ok(bin().arg("info")).stdout).unwrap();
    let err = run_err(
        bin()
            .args(["search", "--device", "cuda", "--queries"])
            .arg(p("c.safetensors"))
            .arg("--corpus")
            .arg(p("c.safetensors")),
    );
    let reason = err
        .trim()
        .strip_prefix("error: ")
        .unwrap_or(&err)
        .to_string();
    assert!(
        info.contains(&reason),
        "info says:\n{info}\nsearch says: {reason}"
    );
}
