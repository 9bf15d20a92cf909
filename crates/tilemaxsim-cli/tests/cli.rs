//! End-to-end tests of the `tilemaxsim` binary: real data (Cranfield, from ../shared/data),
//! imports from files other tools write, output formats, and error messages.

mod common;
use common::{bin, cranfield, run_err, run_ok};

use std::path::{Path, PathBuf};

use tilemaxsim::reference::maxsim_f64;
use tilemaxsim::{Corpus, Matrix};

/// Write a C-ordered .npy file of `shape`.
fn write_npy<T: npyz::AutoSerialize>(
    path: PathBuf,
    shape: &[u64],
    data: impl IntoIterator<Item = T>,
) {
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()
        .unwrap();
    w.extend(data).unwrap();
    w.finish().unwrap();
}

/// (docid, score) per query id, in rank order.
fn read_run(path: &Path) -> std::collections::BTreeMap<String, Vec<(String, f64)>> {
    let mut run = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(path).expect("run file").lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 6, "TREC run line has 6 fields: {line:?}");
        assert_eq!(f[1], "Q0");
        let hits: &mut Vec<(String, f64)> = run.entry(f[0].to_string()).or_default();
        assert_eq!(
            f[3].parse::<usize>().expect("rank"),
            hits.len() + 1,
            "ranks are 1, 2, …"
        );
        hits.push((f[2].to_string(), f[4].parse().expect("score")));
    }
    run
}

/// Every query's ranking equals the reference's, except where two neighbours' reference
/// scores are within `tie` (then either order is exact up to rounding).
fn assert_same_rankings(got: &Path, want: &Path, tie: f64) {
    let (got, want) = (read_run(got), read_run(want));
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "same queries"
    );
    for (q, w) in &want {
        let g = &got[q];
        assert_eq!(g.len(), w.len(), "query {q}: run length");
        for (i, (gh, wh)) in g.iter().zip(w).enumerate() {
            assert!(
                (gh.1 - wh.1).abs() <= 1e-4,
                "query {q} rank {}: score {} vs reference {}",
                i + 1,
                gh.1,
                wh.1
            );
            if gh.0 != wh.0 {
                let tied = w.iter().any(|x| x.0 == gh.0 && (x.1 - wh.1).abs() <= tie);
                assert!(
                    tied,
                    "query {q} rank {}: {} instead of {} (reference score {})",
                    i + 1,
                    gh.0,
                    wh.0,
                    wh.1
                );
            }
        }
    }
}

#[test]
fn cranfield_search_reproduces_the_float64_reference_run() {
    let d = cranfield();
    let dir = tempfile::tempdir().unwrap();
    // The stored corpus is f16; f32 (exact widening) must rank identically.
    let f32_corpus = dir.path().join("corpus-f32.safetensors");
    run_ok(
        bin()
            .args(["corpus", "import", "--dtype", "f32", "--safetensors"])
            .arg(d.join("corpus.safetensors"))
            .arg("-o")
            .arg(&f32_corpus),
    );
    // bf16 rounds the stored f16 values: its rankings are checked against the float64 reference
    // run on the same bf16 corpus.
    let bf16_corpus = dir.path().join("corpus-bf16.safetensors");
    run_ok(
        bin()
            .args(["corpus", "import", "--dtype", "bf16", "--safetensors"])
            .arg(d.join("corpus.safetensors"))
            .arg("-o")
            .arg(&bf16_corpus),
    );
    let search = |device: &str, corpus: &Path, run: &Path, kernel_env: Option<&str>| {
        let mut cmd = bin();
        cmd.args(["search", "--device", device, "-k", "100", "--tag", "test"])
            .arg("--queries")
            .arg(d.join("queries.safetensors"))
            .arg("--corpus")
            .arg(corpus)
            .arg("--query-ids")
            .arg(d.join("query_ids.txt"))
            .arg("--doc-ids")
            .arg(d.join("doc_ids.txt"))
            .arg("--out")
            .arg(run);
        if let Some(k) = kernel_env {
            cmd.env("TILEMAXSIM_CPU_KERNEL", k);
        }
        let out = run_ok(&mut cmd);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("queries/s"),
            "search reports throughput"
        );
    };
    let bf16_ref = dir.path().join("ref-bf16.trec");
    search("reference", &bf16_corpus, &bf16_ref, None);
    for (corpus, kernel_env, reference) in [
        (d.join("corpus.safetensors"), None, d.join("ref_run.trec")),
        (f32_corpus.clone(), None, d.join("ref_run.trec")),
        (
            d.join("corpus.safetensors"),
            Some("portable"),
            d.join("ref_run.trec"),
        ),
        (bf16_corpus.clone(), None, bf16_ref.clone()),
    ] {
        let run = dir.path().join("run.trec");
        search("cpu", &corpus, &run, kernel_env);
        assert_same_rankings(&run, &reference, 1e-6);
    }
}

#[test]
fn import_from_npy_and_python_safetensors_then_score() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (dim, lens) = (5usize, [3usize, 1, 4]);
    let total: usize = lens.iter().sum();
    let emb: Vec<f32> = (0..total * dim)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
        .collect();
    write_npy(
        p("emb.npy"),
        &[total as u64, dim as u64],
        emb.iter().copied(),
    );
    write_npy(p("lens.npy"), &[3], lens.iter().map(|&l| l as i64));
    run_ok(
        bin()
            .args(["corpus", "import", "--npy"])
            .arg(p("emb.npy"))
            .arg("--lengths")
            .arg(p("lens.npy"))
            .arg("-o")
            .arg(p("a.safetensors")),
    );

    // One file per document, named so that name order and number order differ.
    std::fs::create_dir(p("docs")).unwrap();
    let mut start = 0;
    for (j, &l) in lens.iter().enumerate() {
        let name = format!("doc{}.npy", [9, 10, 11][j]);
        let part = emb[start * dim..(start + l) * dim].to_vec();
        write_npy(p("docs").join(name), &[l as u64, dim as u64], part);
        start += l;
    }
    run_ok(
        bin()
            .args(["corpus", "import", "--npy-dir"])
            .arg(p("docs"))
            .arg("-o")
            .arg(p("b.safetensors")),
    );

    let a = Corpus::open(p("a.safetensors")).unwrap();
    let b = Corpus::open(p("b.safetensors")).unwrap();
    assert_eq!(a.offsets(), b.offsets());
    assert_eq!(a.tokens().to_f32_vec(), emb);
    assert_eq!(b.tokens().to_f32_vec(), emb);
    assert_eq!(b.doc_ids().unwrap(), ["doc9", "doc10", "doc11"]);

    // Queries: 2 queries in the same format; scores to .npy and to text.
    let q: Vec<f32> = (0..3 * dim)
        .map(|i| ((i * 13 % 7) as f32 - 3.0) / 4.0)
        .collect();
    Corpus::from_lengths(q.clone(), dim, &[2, 1])
        .unwrap()
        .save(p("q.safetensors"))
        .unwrap();
    run_ok(
        bin()
            .args(["score", "--device", "cpu", "--queries"])
            .arg(p("q.safetensors"))
            .arg("--corpus")
            .arg(p("b.safetensors"))
            .arg("--out")
            .arg(p("s.npy")),
    );
    let bytes = std::fs::read(p("s.npy")).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(npy.shape(), &[2, 3]);
    let scores: Vec<f32> = npy.into_vec().unwrap();
    let queries = Corpus::open(p("q.safetensors")).unwrap();
    for (qi, qm) in queries.docs().enumerate() {
        for j in 0..3 {
            let want = maxsim_f64(qm, b.doc(j));
            assert!(
                (scores[qi * 3 + j] as f64 - want).abs() < 1e-5,
                "score[{qi}][{j}]"
            );
        }
    }
    let text = run_ok(
        bin()
            .args(["score", "--device", "cpu", "--queries"])
            .arg(p("q.safetensors"))
            .arg("--corpus")
            .arg(p("b.safetensors")),
    );
    let text = String::from_utf8(text.stdout).unwrap();
    assert_eq!(text.lines().count(), 6);
    assert!(text.lines().next().unwrap().starts_with("0\tdoc9\t"));

    // Re-ranking a candidate list keeps the list's order.
    std::fs::write(p("cand.txt"), "doc11\ndoc9\n").unwrap();
    let text = run_ok(
        bin()
            .args(["score", "--device", "cpu", "--candidates"])
            .arg(p("cand.txt"))
            .arg("--queries")
            .arg(p("q.safetensors"))
            .arg("--corpus")
            .arg(p("b.safetensors")),
    );
    let lines: Vec<String> = String::from_utf8(text.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with("0\tdoc11\t") && lines[1].starts_with("0\tdoc9\t"));

    // Safetensors as Python writes it: embeddings + lengths (I32), other key names.
    let emb_bytes: Vec<u8> = emb.iter().flat_map(|x| x.to_le_bytes()).collect();
    let len_bytes: Vec<u8> = lens
        .iter()
        .flat_map(|&l| (l as i32).to_le_bytes())
        .collect();
    let tensors = vec![
        (
            "vecs",
            safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                vec![total, dim],
                &emb_bytes,
            )
            .unwrap(),
        ),
        (
            "doc_lens",
            safetensors::tensor::TensorView::new(safetensors::Dtype::I32, vec![3], &len_bytes)
                .unwrap(),
        ),
    ];
    safetensors::serialize_to_file(tensors, None, &p("py.safetensors")).unwrap();
    std::fs::write(p("ids.txt"), "x\ny\nz\n").unwrap();
    run_ok(
        bin()
            .args([
                "corpus",
                "import",
                "--embeddings-key",
                "vecs",
                "--lengths-key",
                "doc_lens",
                "--dtype",
                "bf16",
                "--safetensors",
            ])
            .arg(p("py.safetensors"))
            .arg("--ids")
            .arg(p("ids.txt"))
            .arg("-o")
            .arg(p("c.safetensors")),
    );
    let c = Corpus::open(p("c.safetensors")).unwrap();
    assert_eq!(c.dtype(), tilemaxsim::DType::BF16);
    assert_eq!(c.doc_ids().unwrap(), ["x", "y", "z"]);
    let info = run_ok(
        bin()
            .args(["corpus", "info", "--check-finite"])
            .arg(p("c.safetensors")),
    );
    assert!(String::from_utf8_lossy(&info.stdout).contains("documents  3"));
}

/// A corpus of 3 documents (ids d0, d1, d2; d = 4) with a NaN in document 1's token 1,
/// column 2, and a clean query file.
fn poisoned_corpus(dir: &Path) -> (PathBuf, PathBuf) {
    let mut v = vec![0.5f32; 4 * 5];
    v[(2 + 1) * 4 + 2] = f32::NAN; // rows 0-1: d0, 2-3: d1, 4: d2
    let corpus = dir.join("nan.safetensors");
    Corpus::from_lengths(v, 4, &[2, 2, 1])
        .unwrap()
        .with_doc_ids(vec!["d0".into(), "d1".into(), "d2".into()])
        .unwrap()
        .save(&corpus)
        .unwrap();
    let queries = dir.join("q.safetensors");
    Corpus::from_lengths(vec![0.25f32; 8], 4, &[2])
        .unwrap()
        .save(&queries)
        .unwrap();
    (corpus, queries)
}

#[test]
fn a_non_finite_corpus_is_refused_unless_the_check_is_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, queries) = poisoned_corpus(dir.path());
    for command in ["search", "score"] {
        let cmd = || {
            let mut c = bin();
            c.args([command, "--device", "cpu", "--queries"])
                .arg(&queries)
                .arg("--corpus")
                .arg(&corpus);
            c
        };
        let err = run_err(&mut cmd());
        assert!(
            err.contains("nan.safetensors")
                && err.contains("non-finite value NaN in document 1 (id \"d1\")")
                && err.contains("token row 1, column 2")
                && err.contains("--no-check-finite"),
            "{command}: {err}"
        );
        // Ids given on the command line name the document.
        std::fs::write(dir.path().join("ids.txt"), "x\ny\nz\n").unwrap();
        let err = run_err(cmd().arg("--doc-ids").arg(dir.path().join("ids.txt")));
        assert!(err.contains("document 1 (id \"y\")"), "{command}: {err}");
        // Turned off, the command runs (the caller vouches for the values).
        let out = run_ok(cmd().arg("--no-check-finite"));
        assert!(!out.stdout.is_empty(), "{command}");
    }
}

#[test]
fn corpus_import_records_the_check_and_opening_skips_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (poisoned, _) = poisoned_corpus(dir.path());
    let err = run_err(
        bin()
            .args(["corpus", "import", "--safetensors"])
            .arg(&poisoned)
            .arg("-o")
            .arg(p("out.safetensors")),
    );
    assert!(
        err.contains("non-finite") && err.contains("document 1"),
        "{err}"
    );
    assert!(!p("out.safetensors").exists());

    let read_meta = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        let (_, m) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        m.metadata().clone().unwrap_or_default()
    };
    Corpus::from_lengths(vec![0.5f32; 12], 4, &[1, 2])
        .unwrap()
        .save(p("clean.safetensors"))
        .unwrap();
    run_ok(
        bin()
            .args(["corpus", "import", "--safetensors"])
            .arg(p("clean.safetensors"))
            .arg("-o")
            .arg(p("checked.safetensors")),
    );
    assert_eq!(
        read_meta(&p("checked.safetensors"))
            .get("values")
            .map(String::as_str),
        Some("finite")
    );
    let c = Corpus::open(p("checked.safetensors")).unwrap();
    assert_eq!(c.finite_check(), tilemaxsim::corpus::FiniteCheck::Recorded);
    let info = run_ok(bin().args(["corpus", "info"]).arg(p("checked.safetensors")));
    assert!(
        String::from_utf8_lossy(&info.stdout).contains("recorded in the file"),
        "{}",
        String::from_utf8_lossy(&info.stdout)
    );
    // Imported without the check (--no-check, or its alias), nothing is recorded.
    for flag in ["--no-check", "--no-check-finite"] {
        run_ok(
            bin()
                .args(["corpus", "import", flag, "--safetensors"])
                .arg(&poisoned)
                .arg("-o")
                .arg(p("unchecked.safetensors")),
        );
        assert_eq!(read_meta(&p("unchecked.safetensors")).get("values"), None);
        assert!(Corpus::open(p("unchecked.safetensors")).is_err());
    }
}

#[test]
fn user_errors_are_clear_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    Corpus::from_lengths(vec![0.5f32; 4 * 3], 4, &[1, 2])
        .unwrap()
        .save(p("c4.safetensors"))
        .unwrap();
    Corpus::from_lengths(vec![0.5f32; 6], 3, &[2])
        .unwrap()
        .save(p("q3.safetensors"))
        .unwrap();
    let mut nan = vec![0.5f32; 8];
    nan[6] = f32::NAN;
    Corpus::from_lengths(nan, 4, &[2])
        .unwrap()
        .save(p("qnan.safetensors"))
        .unwrap();

    let err = run_err(
        bin()
            .args(["score", "--device", "cpu", "--queries"])
            .arg(p("q3.safetensors"))
            .arg("--corpus")
            .arg(p("c4.safetensors")),
    );
    assert!(
        err.contains("dimension mismatch") && err.contains("d = 3"),
        "{err}"
    );
    let err = run_err(
        bin()
            .args(["search", "--device", "cpu", "--queries"])
            .arg(p("qnan.safetensors"))
            .arg("--corpus")
            .arg(p("c4.safetensors")),
    );
    assert!(
        err.contains("non-finite") && err.contains("row 1, column 2"),
        "{err}"
    );

    // Truncated and garbage files.
    let bytes = std::fs::read(p("c4.safetensors")).unwrap();
    std::fs::write(p("cut.safetensors"), &bytes[..bytes.len() - 5]).unwrap();
    let err = run_err(bin().args(["corpus", "info"]).arg(p("cut.safetensors")));
    assert!(
        err.contains("cut.safetensors") && err.contains("truncated or corrupt"),
        "{err}"
    );
    std::fs::write(p("junk.npy"), b"not an npy file at all").unwrap();
    let err = run_err(
        bin()
            .args(["corpus", "import", "--npy"])
            .arg(p("junk.npy"))
            .arg("--lengths")
            .arg(p("junk.npy"))
            .arg("-o")
            .arg(p("x.safetensors")),
    );
    assert!(err.contains("junk.npy"), "{err}");
    assert!(
        !p("x.safetensors").exists(),
        "a failed import writes nothing"
    );
    let err = run_err(bin().args(["corpus", "info"]).arg(p("missing.safetensors")));
    assert!(err.contains("missing.safetensors"), "{err}");

    // Lengths that do not add up.
    write_npy(p("e.npy"), &[3, 2], vec![1.0f32; 6]);
    write_npy(p("l.npy"), &[2], vec![1i64, 1]);
    let err = run_err(
        bin()
            .args(["corpus", "import", "--npy"])
            .arg(p("e.npy"))
            .arg("--lengths")
            .arg(p("l.npy"))
            .arg("-o")
            .arg(p("y.safetensors")),
    );
    assert!(err.contains("add up to 2 tokens"), "{err}");
    write_npy(p("l0.npy"), &[2], vec![3i64, 0]);
    let err = run_err(
        bin()
            .args(["corpus", "import", "--npy"])
            .arg(p("e.npy"))
            .arg("--lengths")
            .arg(p("l0.npy"))
            .arg("-o")
            .arg(p("y.safetensors")),
    );
    assert!(
        err.contains("document 1") && err.contains("≥ 1 token"),
        "{err}"
    );

    // An unavailable device is an error; auto falls back with a notice.
    let err = run_err(bin().args(["bench", "--device", "cuda:0", "--docs", "10"]));
    assert!(err.contains("cuda:0"), "{err}");
}

#[test]
fn bench_json_reports_every_figure() {
    let out = run_ok(bin().args([
        "bench",
        "--device",
        "auto",
        "--docs",
        "300",
        "--doc-len",
        "3:40",
        "--nq",
        "7",
        "--dim",
        "33",
        "--reps",
        "2",
        "--json",
    ]));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("bench --json prints JSON");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("notice:"),
        "auto without a GPU says it falls back"
    );
    assert!(v["ceiling_gflops"].as_f64().unwrap() > 0.0);
    let r = &v["results"][0];
    for key in ["ms", "docs_per_s", "gb_per_s", "gflop_per_s", "pct_ceiling"] {
        assert!(r[key].as_f64().unwrap() > 0.0, "{key} = {}", r[key]);
    }
    assert_eq!(r["docs"], 300);
}

#[test]
fn bench_draws_a_roofline_png() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("roofline.png");
    // Arguments are checked before the bench runs.
    let bad = dir.path().join("roofline.jpg");
    let err = run_err(
        bin()
            .args(["bench", "--device", "cpu", "--docs", "50", "--plot"])
            .arg(&bad),
    );
    assert!(err.contains(".png"), "{err}");
    assert!(!bad.exists());
    let err = run_err(
        bin()
            .args([
                "bench",
                "--device",
                "cpu",
                "--docs",
                "50",
                "--compute-ceiling=-3",
                "--plot",
            ])
            .arg(&png),
    );
    assert!(err.contains("compute-ceiling"), "{err}");
    let out = run_ok(
        bin()
            .args([
                "bench", "--device", "cpu", "--dtype", "f16", "--docs", "200", "--reps", "1",
            ])
            .args(["--compute-ceiling", "500", "--plot"])
            .arg(&png),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("roofline picture"));
    let bytes = std::fs::read(&png).expect("the PNG is written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG file");
    // IHDR: width and height, big-endian, right after the chunk header.
    let (w, h) = (
        u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
        u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1280, 800));
    assert!(
        bytes.len() > 10_000,
        "a picture, not an empty canvas: {} bytes",
        bytes.len()
    );
}

#[test]
fn info_lists_cpu_kernels() {
    let out = run_ok(bin().arg("info"));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("kernel") && s.contains("portable"), "{s}");
    let _ = Matrix::new(&[0.0f32][..], 1).unwrap();
}

/// A run written to stdout and read by a reader that stops early (`| head`): the command ends
/// on the broken pipe by SIGPIPE, quietly, as other Unix tools do, not with a panic.
#[cfg(unix)]
#[test]
fn output_piped_into_a_reader_that_stops_early_ends_quietly() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let (c, q) = (
        dir.path().join("c.safetensors"),
        dir.path().join("q.safetensors"),
    );
    for (path, docs, seed) in [(&c, "2000", "1"), (&q, "300", "2")] {
        run_ok(
            bin()
                .args([
                    "corpus",
                    "synth",
                    "--docs",
                    docs,
                    "--doc-len",
                    "4",
                    "--dim",
                    "8",
                ])
                .args(["--seed", seed, "-o"])
                .arg(path),
        );
    }
    // 300 queries x 1000 hits: megabytes, far past what a pipe holds unread.
    let mut child = bin()
        .args(["search", "--device", "cpu", "-k", "1000", "--corpus"])
        .arg(&c)
        .arg("--queries")
        .arg(&q)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("0 Q0 "), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc_sigpipe()),
        "{:?}: {err}",
        out.status
    );
}

/// SIGPIPE's number (13 on Linux and the BSDs).
#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}
