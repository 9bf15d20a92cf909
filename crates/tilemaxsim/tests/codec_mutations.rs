//! The compressed corpus loader, fuzzed in the style of `corpus_mutations.rs`: valid files of
//! every codec (with and without ids, fp8 with a recorded NaN scan) truncated at every length,
//! with flipped bytes, with rewritten headers (dtypes, shapes, data offsets, metadata: codec,
//! dim, nbits, m, version), with centroid ids past K and NaN scales. Every case must be an
//! `Error` or a corpus that decodes and scores (one finite-or-not score per document, no
//! panic); a panic fails the test with the case that caused it.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use common::*;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tilemaxsim::codec::{CodecSpec, CompressedCorpus, PqOptions, ResidualOptions, compress};
use tilemaxsim::corpus::OpenOptions;
use tilemaxsim::{CpuScorer, DType, Matrix, Scorer};

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    err: usize,
}

fn open_case(path: &Path, case: &str, tally: &mut Tally) {
    for check in [true, false] {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let c = OpenOptions::new()
                .check_finite(check)
                .open_compressed(path)?;
            exercise(&c);
            Ok::<_, tilemaxsim::Error>(())
        }));
        match r {
            Ok(Ok(())) => tally.ok += 1,
            Ok(Err(e)) => {
                assert!(!e.to_string().is_empty(), "{case}: empty error message");
                tally.err += 1;
            }
            Err(_) => panic!("{case} (check_finite = {check}): the loader panicked"),
        }
    }
}

/// Decode every document and score one query against all of them.
fn exercise(c: &CompressedCorpus) {
    assert!(!c.is_empty());
    assert_eq!(c.offsets().len(), c.len() + 1);
    let mut buf = Vec::new();
    for j in 0..c.len() {
        c.decode_doc_into(j, &mut buf);
        assert_eq!(buf.len(), c.doc_len(j) * c.dim());
    }
    let q = vec![0.5f32; 2 * c.dim()];
    let q = Matrix::new(&q[..], c.dim()).expect("whole rows");
    let scores = CpuScorer::new()
        .score_batch(&[q], c)
        .expect("a valid corpus scores");
    assert_eq!(scores.len(), c.len());
}

/// Valid files of every codec, as bytes.
fn seeds(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let specs = [
        CodecSpec::Residual(ResidualOptions {
            nbits: 2,
            centroids: Some(4),
            kmeans_iters: 2,
            ..Default::default()
        }),
        CodecSpec::Residual(ResidualOptions {
            nbits: 1,
            centroids: Some(3),
            kmeans_iters: 2,
            ..Default::default()
        }),
        CodecSpec::Pq(PqOptions {
            m: 2,
            kmeans_iters: 2,
            ..Default::default()
        }),
        CodecSpec::Int8,
        CodecSpec::Fp8,
    ];
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let mut c = unit_corpus(i as u64, &[3, 1, 4], 6, DType::F32);
        if i % 2 == 0 {
            c = c
                .with_doc_ids(["a", "bb", "c"].map(String::from).to_vec())
                .unwrap();
        }
        let cc = compress(&c, spec, 1, &|_, _, _| {}).unwrap();
        let path = dir.join(format!("seed-{i}.safetensors"));
        cc.save(&path).unwrap();
        out.push((
            format!("{} #{i}", cc.codec().name()),
            std::fs::read(&path).unwrap(),
        ));
    }
    out
}

fn mutate_header(r: &mut StdRng, h: &mut Value) -> String {
    let Some(obj) = h.as_object_mut() else {
        return "not an object".into();
    };
    let names: Vec<String> = obj.keys().cloned().collect();
    let name = names[r.random_range(0..names.len())].clone();
    let t = obj.get_mut(&name).unwrap();
    if name == "__metadata__" {
        let keys = ["codec", "dim", "nbits", "m", "version", "format", "values"];
        let k = keys[r.random_range(0..keys.len())];
        let vals = [
            "residual",
            "pq",
            "int8",
            "fp8",
            "0",
            "1",
            "2",
            "3",
            "4",
            "5",
            "6",
            "8",
            "64",
            "18446744073709551615",
            "x",
            "finite",
        ];
        t[k] = json!(vals[r.random_range(0..vals.len())]);
        return format!("metadata {k} → {}", t[k]);
    }
    if !t.is_object() {
        *t = json!({});
        return format!("{name} → {{}}");
    }
    match r.random_range(0..4) {
        0 => {
            let dtypes = [
                "F32", "F16", "I32", "I64", "U8", "I8", "F8_E4M3", "U32", "BOOL",
            ];
            t["dtype"] = json!(dtypes[r.random_range(0..dtypes.len())]);
        }
        1 => {
            if let Some(shape) = t["shape"].as_array_mut().filter(|s| !s.is_empty()) {
                let i = r.random_range(0..shape.len());
                let near = shape[i].as_u64().unwrap_or(1);
                shape[i] = nasty_number(r, near);
            }
        }
        2 => {
            if let Some(off) = t["data_offsets"].as_array_mut() {
                let i = r.random_range(0..2);
                let near = off[i].as_u64().unwrap_or(0);
                off[i] = nasty_number(r, near);
            }
        }
        _ => {
            obj.remove(&name);
            return format!("{name} removed");
        }
    }
    format!("{name} → {t}")
}

#[test]
fn truncated_at_every_length_and_flipped_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut tally = Tally::default();
    for (s, (label, bytes)) in seeds(dir.path()).into_iter().enumerate() {
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = CompressedCorpus::open(&path) {
            panic!("{label}: the seed does not open: {e}");
        }
        for len in 0..bytes.len() {
            std::fs::write(&path, &bytes[..len]).unwrap();
            open_case(&path, &format!("{label}: cut at {len}"), &mut tally);
        }
        for case in 0..600u64 {
            let seed = s as u64 * 1_000_000 + case;
            let mut r = rng(seed);
            let mut b = bytes.clone();
            let header_end =
                (u64::from_le_bytes(b[..8].try_into().unwrap()) as usize + 8).min(b.len());
            for _ in 0..r.random_range(1..=4) {
                let i = if r.random_bool(0.5) {
                    r.random_range(0..header_end)
                } else {
                    r.random_range(header_end.min(b.len() - 1)..b.len())
                };
                b[i] = match r.random_range(0..3) {
                    0 => b[i] ^ (1 << r.random_range(0..8)),
                    1 => r.random(),
                    _ => *b"0123456789[]{},\":-".get(r.random_range(0..18)).unwrap(),
                };
            }
            std::fs::write(&path, &b).unwrap();
            open_case(&path, &format!("{label}: flips, seed {seed}"), &mut tally);
        }
    }
    eprintln!("{tally:?}");
    assert!(tally.ok > 0 && tally.err > 3000, "{tally:?}");
}

#[test]
fn rewritten_headers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut tally = Tally::default();
    for (s, (label, bytes)) in seeds(dir.path()).into_iter().enumerate() {
        let (header, data) = split(&bytes).expect("seed parses");
        for case in 0..600u64 {
            let seed = s as u64 * 1_000_000 + case;
            let mut r = rng(seed);
            let mut h = header.clone();
            let changes: Vec<String> = (0..r.random_range(1..=3))
                .map(|_| mutate_header(&mut r, &mut h))
                .collect();
            std::fs::write(&path, raw_file(&h, &data)).unwrap();
            open_case(
                &path,
                &format!("{label}: header seed {seed}: {changes:?}"),
                &mut tally,
            );
        }
    }
    eprintln!("{tally:?}");
    assert!(tally.ok > 0 && tally.err > 0, "{tally:?}");
}

/// Rewrite one tensor's bytes of a seed file (same shape and dtype).
fn with_tensor(bytes: &[u8], name: &str, f: impl Fn(&mut [u8])) -> Vec<u8> {
    let (h, mut data) = split(bytes).unwrap();
    let off = &h[name]["data_offsets"];
    let (a, b) = (
        off[0].as_u64().unwrap() as usize,
        off[1].as_u64().unwrap() as usize,
    );
    f(&mut data[a..b]);
    raw_file(&h, &data)
}

#[test]
fn bad_codes_and_scales_are_errors_naming_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let seeds = seeds(dir.path());
    // A centroid id past K (4 centroids) in the residual seed, a negative one.
    for v in [4i32, -1, i32::MAX] {
        let b = with_tensor(&seeds[0].1, "codes", |d| {
            d[12..16].copy_from_slice(&v.to_le_bytes())
        });
        std::fs::write(&path, b).unwrap();
        let e = CompressedCorpus::open(&path).unwrap_err().to_string();
        assert!(
            e.contains("out of range") && e.contains("document 1"),
            "{e}"
        );
    }
    // A NaN scale (int8), an infinite one, a negative one.
    for v in [f32::NAN, f32::INFINITY, -1.0] {
        let b = with_tensor(&seeds[3].1, "scales", |d| {
            d[4..8].copy_from_slice(&v.to_le_bytes())
        });
        std::fs::write(&path, b).unwrap();
        let e = CompressedCorpus::open(&path).unwrap_err().to_string();
        assert!(e.contains("scale"), "{e}");
    }
    // An fp8 NaN code: an error when checked; skipped with the check off. (The seed records
    // its scan in the metadata, which is trusted as for exact corpora: drop the record.)
    let b = with_tensor(&seeds[4].1, "codes", |d| d[7] = 0x7F);
    let (mut h, data) = split(&b).unwrap();
    assert_eq!(h["__metadata__"]["values"], "finite");
    h["__metadata__"].as_object_mut().unwrap().remove("values");
    std::fs::write(&path, raw_file(&h, &data)).unwrap();
    let e = CompressedCorpus::open(&path).unwrap_err().to_string();
    assert!(e.contains("NaN"), "{e}");
    if let Err(e) = OpenOptions::new()
        .check_finite(false)
        .open_compressed(&path)
    {
        panic!("unchecked open: {e}");
    }
}
