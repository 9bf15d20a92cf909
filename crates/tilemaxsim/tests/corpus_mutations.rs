//! The corpus loader, fuzzed on stable: valid corpus files (every dtype, with and without ids,
//! with a recorded value check, a misaligned layout) mutated many thousand times, seeded:
//! truncations, flipped bytes, a rewritten header (length prefix, dtypes, shapes, data offsets
//! that overlap or overrun, huge numbers), offsets that decrease, overrun, go negative or have
//! the wrong length, ids that do not match; and `.npy` imports likewise. Every case must be
//! an `Error` or a corpus that is consistent (scoring a query against it returns one score
//! per document); a panic fails the test with the case that caused it.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use common::*;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tilemaxsim::corpus::OpenOptions;
use tilemaxsim::corpus::import;
use tilemaxsim::{Corpus, CpuScorer, DType, Matrix, Scorer};

/// What a case came to.
#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    err: usize,
}

/// Open `path` both ways (values checked, and not) and, when it opens, use the corpus; any
/// panic is a failure naming `case`.
fn open_case(path: &Path, case: &str, tally: &mut Tally) {
    for check in [true, false] {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let c = OpenOptions::new().check_finite(check).open(path)?;
            exercise(&c);
            Ok::<_, tilemaxsim::Error>(())
        }));
        match r {
            Ok(Ok(())) => tally.ok += 1,
            Ok(Err(e)) => {
                // Every error names the file it is about (or is about values, naming a document).
                let msg = e.to_string();
                assert!(!msg.is_empty(), "{case}: empty error message");
                tally.err += 1;
            }
            Err(_) => panic!("{case} (check_finite = {check}): the loader panicked"),
        }
    }
}

/// Use every part of a loaded corpus: its documents, ids, values, and a score per document.
fn exercise(c: &Corpus) {
    assert!(!c.is_empty());
    assert_eq!(c.offsets().len(), c.len() + 1);
    assert_eq!(c.num_tokens(), c.tokens().rows());
    let mut tokens = 0;
    for (j, d) in c.docs().enumerate() {
        assert_eq!(d.rows(), c.doc_len(j));
        assert!(d.rows() > 0);
        tokens += d.rows();
    }
    assert_eq!(tokens, c.num_tokens());
    if let Some(ids) = c.doc_ids() {
        assert_eq!(ids.len(), c.len());
    }
    let _ = c.check_finite();
    let q = vec![0.5f32; 2 * c.dim()];
    let q = Matrix::new(&q[..], c.dim()).expect("whole rows");
    let scores = CpuScorer::new().score(q, c).expect("a valid corpus scores");
    assert_eq!(scores.len(), c.len());
}

/// The valid files every mutation starts from, as bytes.
fn seeds(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut r = rng(11);
    let mut out = Vec::new();
    for (i, dtype) in [DType::F32, DType::F16, DType::BF16]
        .into_iter()
        .enumerate()
    {
        for ids in [false, true] {
            let lens = [3usize, 1, 4, 2];
            let mut c = random_corpus(&mut r, &lens, 4 + i, dtype, 1.0);
            if ids {
                c = c
                    .with_doc_ids(["a", "bb", "c-3", "d"].map(String::from).to_vec())
                    .unwrap();
                // This one records its value check in the file.
                c.check_finite().unwrap();
            }
            let path = dir.join(format!("seed-{dtype}-{ids}.safetensors"));
            c.save(&path).unwrap();
            out.push((format!("{dtype} ids={ids}"), std::fs::read(&path).unwrap()));
        }
    }
    // Embeddings that start one byte in (copied on open, not mapped).
    let c = random_corpus(&mut r, &[2, 3], 3, DType::F16, 1.0);
    out.push((
        "misaligned f16".into(),
        raw_file(
            &json!({
                "pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                "embeddings": {"dtype": "F16", "shape": [5, 3], "data_offsets": [1, 31]},
                "offsets": {"dtype": "I64", "shape": [3], "data_offsets": [31, 55]},
            }),
            &[
                &[7u8][..],
                c.tokens().elements().as_bytes(),
                &i64s(&[0, 2, 5]),
            ]
            .concat(),
        ),
    ));
    out
}

/// One random change to the header JSON.
fn mutate_header(r: &mut StdRng, h: &mut Value) -> String {
    let Some(obj) = h.as_object_mut() else {
        return "not an object".into();
    };
    let names: Vec<String> = obj.keys().cloned().collect();
    let name = names[r.random_range(0..names.len())].clone();
    let what = r.random_range(0..10);
    let t = obj.get_mut(&name).unwrap();
    if !t.is_object() {
        // Replaced by an earlier change: a tensor entry that is not even an object.
        *t = json!({});
        return format!("{name} → {{}}");
    }
    if name == "__metadata__" {
        *t = match what % 3 {
            0 => json!({"format": "tilemaxsim.corpus", "version": "1", "values": "finite"}),
            1 => json!({"values": 1}),
            _ => json!([1, 2]),
        };
        return format!("metadata of {name} → {t}");
    }
    match what {
        0 => {
            let dtypes = [
                "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64",
                "BOOL", "F8_E4M3", "X",
            ];
            t["dtype"] = json!(dtypes[r.random_range(0..dtypes.len())]);
        }
        1 => {
            // One dimension replaced.
            if let Some(shape) = t["shape"].as_array_mut().filter(|s| !s.is_empty()) {
                let i = r.random_range(0..shape.len());
                let near = shape[i].as_u64().unwrap_or(1);
                shape[i] = nasty_number(r, near);
            }
        }
        2 => {
            // A dimension added or removed.
            if let Some(shape) = t["shape"].as_array_mut() {
                if r.random_bool(0.5) || shape.is_empty() {
                    shape.push(json!(r.random_range(0..3)));
                } else {
                    shape.pop();
                }
            }
        }
        3 => {
            // The shape of a size that matches the bytes in another factorization.
            let numel: u64 = t["shape"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(Value::as_u64)
                        .fold(1u64, u64::saturating_mul)
                })
                .unwrap_or(1);
            t["shape"] = json!([1, numel]);
        }
        4..=6 => {
            // Data offsets: one end moved, swapped, overlapping the neighbour, or huge.
            if let Some(o) = t["data_offsets"].as_array_mut().filter(|o| o.len() == 2) {
                let (s, e) = (o[0].as_u64().unwrap_or(0), o[1].as_u64().unwrap_or(0));
                *o = match r.random_range(0..6) {
                    0 => vec![json!(e), json!(s)],
                    1 => vec![json!(s.saturating_sub(r.random_range(1..9))), json!(e)],
                    2 => vec![json!(s), json!(e.saturating_add(r.random_range(1..9)))],
                    3 => vec![json!(s), nasty_number(r, e)],
                    4 => vec![nasty_number(r, s), json!(e)],
                    _ => vec![json!(s)],
                };
            }
        }
        7 => {
            obj.remove(&name);
            return format!("removed {name}");
        }
        8 => {
            let renamed = ["embeddings", "offsets", "doc_ids", "other"][r.random_range(0..4)];
            let t = obj.remove(&name).unwrap();
            obj.insert(renamed.into(), t);
            return format!("renamed {name} → {renamed}");
        }
        _ => {
            *t = [json!(null), json!([]), json!({}), json!("x"), json!(3)][r.random_range(0..5)]
                .clone();
        }
    }
    format!("{name} → {t}")
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn truncated_and_extended_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut tally = Tally::default();
    let mut r = rng(12);
    for (label, bytes) in seeds(dir.path()) {
        for len in 0..bytes.len() {
            write(&path, &bytes[..len]);
            open_case(&path, &format!("{label}: cut at {len}"), &mut tally);
        }
        for extra in [1usize, 7, 8, 64] {
            let mut longer = bytes.clone();
            longer.extend((0..extra).map(|_| r.random::<u8>()));
            write(&path, &longer);
            open_case(&path, &format!("{label}: {extra} bytes more"), &mut tally);
        }
    }
    // Only the untouched seeds open; every cut fails.
    eprintln!("{tally:?}");
    assert!(tally.err > 5000, "{tally:?}");
}

#[test]
fn flipped_bytes_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut tally = Tally::default();
    for (s, (label, bytes)) in seeds(dir.path()).into_iter().enumerate() {
        for case in 0..1000u64 {
            let seed = s as u64 * 1_000_000 + case;
            let mut r = rng(seed);
            let mut b = bytes.clone();
            // Half the cases aim at the header, where one byte changes the most.
            let header_end =
                (u64::from_le_bytes(b[..8].try_into().unwrap()) as usize + 8).min(b.len());
            for _ in 0..r.random_range(1..=4) {
                let i = if r.random_bool(0.5) {
                    r.random_range(0..header_end)
                } else {
                    r.random_range(0..b.len())
                };
                b[i] = match r.random_range(0..3) {
                    0 => b[i] ^ (1 << r.random_range(0..8)),
                    1 => r.random(),
                    _ => *b"0123456789[]{},\":-".get(r.random_range(0..18)).unwrap(),
                };
            }
            write(&path, &b);
            open_case(&path, &format!("{label}: flips, seed {seed}"), &mut tally);
        }
    }
    eprintln!("{tally:?}");
    assert!(tally.ok > 0 && tally.err > 0, "{tally:?}");
}

#[test]
fn rewritten_headers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut tally = Tally::default();
    for (s, (label, bytes)) in seeds(dir.path()).into_iter().enumerate() {
        let (header, data) = split(&bytes).expect("seed parses");
        for case in 0..1000u64 {
            let seed = s as u64 * 1_000_000 + case;
            let mut r = rng(seed);
            let mut h = header.clone();
            let changes: Vec<String> = (0..r.random_range(1..=3))
                .map(|_| mutate_header(&mut r, &mut h))
                .collect();
            let mut b = raw_file(&h, &data);
            match r.random_range(0..8) {
                // The length prefix off by a little or a lot.
                0 => {
                    let n = u64::from_le_bytes(b[..8].try_into().unwrap());
                    let n = match r.random_range(0..4) {
                        0 => n.wrapping_sub(r.random_range(1..9)),
                        1 => n + r.random_range(1..9),
                        2 => 100_000_000,
                        _ => u64::MAX - r.random_range(0..9),
                    };
                    b[..8].copy_from_slice(&n.to_le_bytes());
                }
                // Data cut short or padded.
                1 => b.truncate(b.len() - r.random_range(1..=data.len().min(16))),
                2 => b.extend((0..r.random_range(1..16)).map(|_| r.random::<u8>())),
                _ => {}
            }
            write(&path, &b);
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

/// A corpus file from parts: embeddings [rows, d] f32, offsets of a dtype, ids.
fn corpus_file(
    rows: usize,
    dim: usize,
    offsets: (&str, Vec<u8>, usize),
    ids: Option<&[u8]>,
) -> Vec<u8> {
    let emb: Vec<u8> = (0..rows * dim)
        .flat_map(|i| ((i % 7) as f32 * 0.25 - 0.75).to_le_bytes())
        .collect();
    let (odt, obytes, olen) = offsets;
    let mut header = json!({
        "embeddings": {"dtype": "F32", "shape": [rows, dim], "data_offsets": [0, emb.len()]},
        "offsets": {"dtype": odt, "shape": [olen], "data_offsets": [emb.len(), emb.len() + obytes.len()]},
    });
    let mut data = [emb, obytes].concat();
    if let Some(ids) = ids {
        header["doc_ids"] = json!({"dtype": "U8", "shape": [ids.len()], "data_offsets": [data.len(), data.len() + ids.len()]});
        data.extend_from_slice(ids);
    }
    raw_file(&header, &data)
}

#[test]
fn offsets_and_ids_that_do_not_match() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut tally = Tally::default();
    let (rows, dim) = (9usize, 3usize);
    for case in 0..2500u64 {
        let mut r = rng(case);
        // Start from valid offsets, then break them.
        let n = r.random_range(1..=5);
        let mut offs: Vec<i128> = vec![0];
        for j in 0..n {
            let left = rows as i128 - offs[j];
            let step = if j + 1 == n {
                left
            } else {
                r.random_range(1..=left.max(1))
            };
            offs.push(offs[j] + step);
        }
        let mut change = String::from("none");
        match r.random_range(0..9) {
            0 => {
                let i = r.random_range(0..offs.len());
                offs[i] = [
                    -1,
                    -(1 << 40),
                    i64::MIN as i128,
                    i64::MAX as i128,
                    0,
                    rows as i128 + 1,
                ][r.random_range(0..6)];
                change = format!("offsets[{i}] = {}", offs[i]);
            }
            1 if offs.len() > 2 => {
                offs.swap(1, 2);
                change = "swapped".into();
            }
            2 => {
                offs.push(*offs.last().unwrap() + r.random_range(0..3));
                change = "one more".into();
            }
            3 => {
                offs.pop();
                change = "one fewer".into();
            }
            4 => {
                let i = r.random_range(0..offs.len());
                offs.insert(i, offs[i]);
                change = format!("repeated [{i}]");
            }
            5 => {
                offs.clear();
                change = "empty".into();
            }
            _ => {}
        }
        let (dt, width) = [
            ("I64", 8),
            ("I32", 4),
            ("U64", 8),
            ("U32", 4),
            ("I16", 2),
            ("U16", 2),
            ("F32", 4),
            ("U8", 1),
        ][r.random_range(0..8)];
        let obytes: Vec<u8> = offs
            .iter()
            .flat_map(|&o| o.to_le_bytes()[..width].to_vec())
            .collect();
        let docs = offs.len().saturating_sub(1);
        let ids: Option<Vec<u8>> = match r.random_range(0..6) {
            0 => None,
            1 => Some(
                (0..docs + 1)
                    .map(|j| format!("d{j}"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into_bytes(),
            ),
            2 => Some(
                (0..docs.saturating_sub(1))
                    .map(|j| format!("d{j}"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into_bytes(),
            ),
            3 => Some(vec!["same"; docs].join("\n").into_bytes()),
            4 => Some(vec![0xff, 0xfe, b'\n', b'a']),
            _ => Some(
                (0..docs)
                    .map(|j| format!("d{j}"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into_bytes(),
            ),
        };
        write(
            &path,
            &corpus_file(rows, dim, (dt, obytes, offs.len()), ids.as_deref()),
        );
        open_case(
            &path,
            &format!(
                "offsets case {case}: {offs:?} as {dt} ({change}), ids {:?}",
                ids.as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            ),
            &mut tally,
        );
    }
    eprintln!("{tally:?}");
    assert!(tally.ok > 0 && tally.err > 0, "{tally:?}");
}

/// Import a mutated `.npy` pair both ways (packed + lengths, one file per document).
fn import_case(emb: &Path, lens: &Path, case: &str, tally: &mut Tally) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut n = 0;
        for c in [
            import::from_npy_packed(emb, lens, None),
            import::from_npy_packed(emb, lens, Some(DType::BF16)),
            import::from_npy_files(&[emb.to_path_buf()], None),
        ]
        .into_iter()
        .flatten()
        {
            exercise(&c);
            n += 1;
        }
        n
    }));
    match r {
        Ok(n) => {
            tally.ok += n;
            tally.err += 3 - n;
        }
        Err(_) => panic!("{case}: the .npy import panicked"),
    }
}

fn npy_bytes<T: npyz::AutoSerialize>(shape: &[u64], data: impl IntoIterator<Item = T>) -> Vec<u8> {
    use npyz::WriterBuilder;
    let mut out = Vec::new();
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(std::io::Cursor::new(&mut out))
        .begin_nd()
        .unwrap();
    w.extend(data).unwrap();
    w.finish().unwrap();
    out
}

/// A version 1.0 `.npy` file with the header dict `dict` (padded as numpy pads it).
fn npy_with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = dict.to_string();
    while !(10 + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.extend_from_slice(data);
    b
}

#[test]
fn npy_imports_truncated_and_flipped() {
    let dir = tempfile::tempdir().unwrap();
    let (emb_path, lens_path) = (dir.path().join("e.npy"), dir.path().join("l.npy"));
    let emb = npy_bytes(&[6, 4], (0..24).map(|i| i as f32 * 0.125));
    let lens = npy_bytes(&[3], [1i64, 2, 3]);
    let mut tally = Tally::default();
    write(&lens_path, &lens);
    for len in 0..emb.len() {
        write(&emb_path, &emb[..len]);
        import_case(
            &emb_path,
            &lens_path,
            &format!("embeddings cut at {len}"),
            &mut tally,
        );
    }
    write(&emb_path, &emb);
    for len in 0..lens.len() {
        write(&lens_path, &lens[..len]);
        import_case(
            &emb_path,
            &lens_path,
            &format!("lengths cut at {len}"),
            &mut tally,
        );
    }
    for case in 0..1500u64 {
        let mut r = rng(case);
        let (mut e, mut l) = (emb.clone(), lens.clone());
        let target = if r.random_bool(0.7) { &mut e } else { &mut l };
        // The header (magic, version, length, the dict with descr/shape) is the first 64 bytes.
        for _ in 0..r.random_range(1..=3) {
            let i = if r.random_bool(0.7) {
                r.random_range(0..64.min(target.len()))
            } else {
                r.random_range(0..target.len())
            };
            target[i] = match r.random_range(0..3) {
                0 => target[i] ^ (1 << r.random_range(0..8)),
                1 => r.random(),
                _ => b"0123456789(),'<>fiu"[r.random_range(0..19)],
            };
        }
        write(&emb_path, &e);
        write(&lens_path, &l);
        import_case(
            &emb_path,
            &lens_path,
            &format!("npy flips, seed {case}"),
            &mut tally,
        );
    }
    // Headers written by hand: dtypes and shapes that do not match the data, or overflow.
    let data: Vec<u8> = (0..24)
        .flat_map(|i| (i as f32 * 0.125).to_le_bytes())
        .collect();
    for descr in ["<f4", ">f4", "<f2", "<f8", "<i4", "|u1", "<c8", "|O", "<U3"] {
        for shape in [
            "(6, 4)",
            "(4, 6)",
            "(24, 1)",
            "(7, 4)",
            "(5, 4)",
            "(6, 0)",
            "(0, 4)",
            "(6,)",
            "(1, 6, 4)",
            "()",
            "(4294967296, 4294967296)",
            "(18446744073709551615, 2)",
            "(9223372036854775807, 4)",
            "(1152921504606846976, 4)",
            "(-1, 4)",
        ] {
            let dict =
                format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
            write(&emb_path, &npy_with_header(&dict, &data));
            import_case(
                &emb_path,
                &lens_path,
                &format!("npy {descr} {shape}"),
                &mut tally,
            );
        }
    }
    eprintln!("{tally:?}");
    assert!(tally.ok > 0 && tally.err > 0, "{tally:?}");
}

/// Every seed opens: the mutations above start from valid files.
#[test]
fn the_seeds_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("s.safetensors");
    for (label, bytes) in seeds(dir.path()) {
        write(&path, &bytes);
        let c = Corpus::open(&path).unwrap_or_else(|e| panic!("{label}: {e}"));
        exercise(&c);
    }
}

/// Regression: a `.npy` header whose shape overflows when multiplied panicked inside npyz
/// (under overflow checks); it is now an error naming the file, as is a shape larger than the
/// data.
#[test]
fn npy_shapes_that_overflow_or_overrun_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (emb, lens) = (dir.path().join("e.npy"), dir.path().join("l.npy"));
    write(&lens, &npy_bytes(&[1], [6i64]));
    let data: Vec<u8> = (0..24).flat_map(|i| (i as f32).to_le_bytes()).collect();
    for (shape, what) in [
        ("(4294967296, 4294967296)", "overflows"),
        ("(0, 4294967296, 4294967296)", "overflows"),
        ("(1152921504606846976, 4)", "needs more data"),
        ("(6, -4)", "not a list of sizes"),
    ] {
        let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        write(&emb, &npy_with_header(&dict, &data));
        let e = import::from_npy_packed(&emb, &lens, None).expect_err(shape);
        let msg = e.to_string();
        assert!(
            msg.contains(what) && msg.contains("e.npy"),
            "{shape}: {msg}"
        );
    }
    write(
        &emb,
        &npy_with_header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 4), }",
            &data,
        ),
    );
    assert_eq!(
        import::from_npy_packed(&emb, &lens, None)
            .unwrap()
            .num_tokens(),
        6
    );
}
