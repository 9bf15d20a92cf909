//! Index directories fuzzed in the style of `codec_mutations.rs`: a valid index whose IVF file
//! is truncated at every length, has bytes flipped and its header rewritten (dtypes, shapes,
//! data offsets, metadata), whose IVF lists hold documents out of order or out of range, and
//! whose manifest has each field replaced by numbers that break assumptions, other types or
//! nothing. Every case must open to an `Error` with a message, or to an index that searches
//! (IVF and exhaustive, one list of hits per query); a panic fails the test with its case.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use common::*;
use rand::Rng;
use serde_json::{Value, json};
use tilemaxsim::codec::ResidualOptions;
use tilemaxsim::index::{BuildOptions, Index, IndexSearch, Source, build};
use tilemaxsim::{DType, Device, Matrix, SearchOptions};

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    err: usize,
}

/// Open `dir` and, when it opens, search it both ways.
fn open_case(dir: &Path, case: &str, tally: &mut Tally) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let index = Index::open(dir)?;
        let q = vec![0.25f32; 3 * index.codes().dim()];
        let q = Matrix::new(&q[..], index.codes().dim()).expect("whole rows");
        for exhaustive in [false, true] {
            let how = IndexSearch {
                exhaustive,
                ..Default::default()
            };
            let (s, _) = index.searcher(Device::Cpu, &how, &SearchOptions::default())?;
            let hits = s.search(&[q], 5)?;
            assert_eq!(hits.len(), 1, "{case}");
            assert!(
                hits[0].iter().all(|h| h.doc < index.codes().len()),
                "{case}"
            );
        }
        Ok::<_, tilemaxsim::Error>(())
    }));
    match r {
        Ok(Ok(())) => tally.ok += 1,
        Ok(Err(e)) => {
            assert!(!e.to_string().is_empty(), "{case}: empty error message");
            tally.err += 1;
        }
        Err(_) => panic!("{case}: opening or searching the index panicked"),
    }
}

/// A fresh copy of `src` in `dir/name` with `file` replaced by `bytes`.
fn variant(src: &Path, dir: &Path, name: &str, file: &str, bytes: &[u8]) -> std::path::PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    for f in std::fs::read_dir(src).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(d.join(file), bytes).unwrap();
    d
}

#[test]
fn damaged_index_files_are_errors_or_search() {
    let dim = 16;
    let corpus = unit_corpus(11, &[3, 1, 7, 2, 9, 4, 5, 1, 6, 8], dim, DType::F16);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let options = BuildOptions {
        residual: ResidualOptions {
            nbits: 1,
            centroids: Some(4),
            kmeans_iters: 1,
            ..Default::default()
        },
        device: Device::Cpu,
        ..Default::default()
    };
    build(Source::Exact(&corpus), None, &src, &options, &|_, _, _| {}).unwrap();
    let ivf = std::fs::read(src.join("ivf.safetensors")).unwrap();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("index.json")).unwrap()).unwrap();
    let mut tally = Tally::default();
    let mut r = rng(12);
    let mut n = 0;
    let mut case = |name: String, file: &str, bytes: Vec<u8>, tally: &mut Tally| {
        n += 1;
        let d = variant(&src, dir.path(), &format!("c{n}"), file, &bytes);
        open_case(&d, &name, tally);
        std::fs::remove_dir_all(d).unwrap();
    };

    // The IVF file truncated at every length, and with bytes flipped.
    for len in 0..ivf.len() {
        case(
            format!("ivf cut at {len}"),
            "ivf.safetensors",
            ivf[..len].to_vec(),
            &mut tally,
        );
    }
    for i in 0..200 {
        let mut b = ivf.clone();
        let at = r.random_range(0..b.len());
        b[at] ^= 1 << r.random_range(0..8);
        case(
            format!("ivf flip {i} at {at}"),
            "ivf.safetensors",
            b,
            &mut tally,
        );
    }
    // Headers rewritten, and lists out of order or out of range (valid files otherwise).
    let (header, data) = split(&ivf).expect("a valid file splits");
    for (path, value) in [
        ("/offsets/dtype", json!("F32")),
        ("/offsets/dtype", json!("U8")),
        ("/docs/dtype", json!("I64")),
        ("/docs/shape", json!([1u64 << 40])),
        ("/offsets/shape", json!([2])),
        ("/docs/data_offsets", json!([0, 0])),
        ("/offsets/data_offsets", json!([8, 4])),
        ("/__metadata__/format", json!("tilemaxsim.corpus")),
        ("/__metadata__/version", json!("2")),
        ("/docs", Value::Null),
    ] {
        let mut h = header.clone();
        if let Some(v) = h.pointer_mut(path) {
            *v = value.clone();
        }
        case(
            format!("header {path} = {value}"),
            "ivf.safetensors",
            raw_file(&h, &data),
            &mut tally,
        );
    }
    let lists = |docs: &[u32], offsets: &[i64]| {
        let docs_bytes: Vec<u8> = docs.iter().flat_map(|d| d.to_le_bytes()).collect();
        let offs = i64s(offsets);
        let h = json!({
            "__metadata__": {"format": "tilemaxsim.ivf", "version": "1"},
            "offsets": {"dtype": "I64", "shape": [offsets.len()], "data_offsets": [0, offs.len()]},
            "docs": {"dtype": "U32", "shape": [docs.len()], "data_offsets": [offs.len(), offs.len() + docs_bytes.len()]},
        });
        raw_file(&h, &[offs, docs_bytes].concat())
    };
    for (name, docs, offsets) in [
        ("descending", vec![3u32, 1], vec![0i64, 2, 2, 2, 2]),
        ("repeated", vec![1, 1], vec![0, 2, 2, 2, 2]),
        ("past the end", vec![10], vec![0, 1, 1, 1, 1]),
        ("offsets fall", vec![0, 1], vec![0, 2, 1, 2, 2]),
        ("offsets short", vec![0], vec![0, 1, 1, 1, 0]),
        ("negative offset", vec![0], vec![0, -1, 1, 1, 1]),
        ("empty lists", vec![], vec![0, 0, 0, 0, 0]),
    ] {
        case(
            format!("lists {name}"),
            "ivf.safetensors",
            lists(&docs, &offsets),
            &mut tally,
        );
    }
    // The manifest: each field replaced.
    let fields = [
        "/documents",
        "/tokens",
        "/dim",
        "/nbits",
        "/centroids",
        "/codes",
        "/ivf",
        "/exact",
        "/search/nprobe",
        "/search/ndocs",
        "/search/rerank_k",
        "/version",
        "/format",
        "/search",
    ];
    for path in fields {
        for _ in 0..32 {
            let near = manifest.pointer(path).and_then(Value::as_u64).unwrap_or(4);
            let value = match r.random_range(0..4) {
                0 => nasty_number(&mut r, near),
                1 => Value::Null,
                2 => json!(
                    [
                        "..",
                        "/etc/passwd",
                        "codes.safetensors",
                        "ivf.safetensors",
                        "exact.safetensors"
                    ][r.random_range(0..5)]
                ),
                _ => json!({"x": 1}),
            };
            let mut m = manifest.clone();
            if let Some(v) = m.pointer_mut(path) {
                *v = value.clone();
            }
            let text = serde_json::to_string(&m).unwrap();
            case(
                format!("manifest {path} = {value}"),
                "index.json",
                text.into_bytes(),
                &mut tally,
            );
        }
    }
    // A compaction's manifest (version 2: a generation and its log named): each of its
    // fields replaced, or left out.
    let mut m2 = manifest.clone();
    m2["version"] = json!(2);
    m2["generation"] = json!(1);
    m2["log"] = json!("updates.1.log");
    case(
        "manifest of version 2".into(),
        "index.json",
        serde_json::to_vec(&m2).unwrap(),
        &mut tally,
    );
    for path in ["/generation", "/log", "/version"] {
        for value in [
            Value::Null,
            json!(-1),
            json!(1.5),
            json!(u64::MAX),
            json!("../updates.log"),
            json!(".updates.log"),
            json!(""),
            json!({"x": 1}),
        ] {
            let mut m = m2.clone();
            if let Some(v) = m.pointer_mut(path) {
                *v = value.clone();
            }
            case(
                format!("manifest of version 2, {path} = {value}"),
                "index.json",
                serde_json::to_vec(&m).unwrap(),
                &mut tally,
            );
        }
    }
    case(
        "manifest bytes".into(),
        "index.json",
        vec![0xff; 64],
        &mut tally,
    );
    assert!(tally.ok > 0 && tally.err > 0, "{tally:?}");
}
