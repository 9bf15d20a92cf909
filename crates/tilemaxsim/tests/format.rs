//! The corpus file: round trips for every dtype, and every way a file or a packing can be
//! wrong, each an error with a message that says what (never a panic).

mod common;

use common::*;
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use tilemaxsim::{Corpus, DType, Error, OwnedElements};

fn err_text<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.expect_err("should fail").to_string()
}

#[test]
fn round_trip_every_dtype_with_and_without_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(1);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for ids in [false, true] {
            let c = random_corpus(&mut r, &[3, 1, 7, 2], 5, dtype, 1.0);
            let c = if ids {
                c.with_doc_ids(vec!["a".into(), "b".into(), "c-3".into(), "d".into()])
                    .unwrap()
            } else {
                c
            };
            let path = dir.path().join(format!("c-{dtype}-{ids}.safetensors"));
            c.save(&path).unwrap();
            let back = Corpus::open(&path).unwrap();
            assert!(back.is_mapped(), "opened corpora are memory-mapped");
            assert_eq!(back.dtype(), dtype);
            assert_eq!(back.offsets(), c.offsets());
            assert_eq!(back.dim(), 5);
            assert_eq!(
                back.tokens().elements().as_bytes(),
                c.tokens().elements().as_bytes(),
                "bit-identical"
            );
            assert_eq!(back.doc_ids(), c.doc_ids());
        }
    }
}

#[test]
fn packing_errors() {
    let v = vec![0.5f32; 12];
    assert!(
        matches!(
            Corpus::new(v.clone(), 3, vec![1, 4]),
            Err(Error::Offsets(_))
        ),
        "first offset ≠ 0"
    );
    assert!(err_text(Corpus::new(v.clone(), 3, vec![0, 3, 2, 4])).contains("decrease"));
    assert!(err_text(Corpus::new(v.clone(), 3, vec![0, 3])).contains("last offset is 3"));
    assert!(matches!(
        Corpus::new(v.clone(), 3, vec![0, 2, 2, 4]),
        Err(Error::EmptyDocument { index: 1 })
    ));
    assert!(matches!(
        Corpus::from_lengths(v.clone(), 3, &[4, 0]),
        Err(Error::EmptyDocument { index: 1 })
    ));
    assert!(err_text(Corpus::new(v.clone(), 0, vec![0, 1])).contains("at least 1"));
    assert!(err_text(Corpus::new(v.clone(), 5, vec![0, 1])).contains("not a whole number of rows"));
    assert!(err_text(Corpus::new(v.clone(), 3, vec![0])).contains("at least one document"));
    let c = Corpus::from_lengths(v, 3, &[2, 2]).unwrap();
    assert!(err_text(c.clone().with_doc_ids(vec!["a".into()])).contains("1 ids given for 2"));
    assert!(
        err_text(c.clone().with_doc_ids(vec!["a".into(), "a".into()])).contains("more than once")
    );
    assert!(err_text(c.with_doc_ids(vec!["a b".into(), "c".into()])).contains("whitespace"));
}

#[test]
fn check_finite_names_the_document_row_and_column() {
    for (bad, what) in [
        (f32::NAN, "NaN"),
        (f32::INFINITY, "inf"),
        (f32::NEG_INFINITY, "-inf"),
    ] {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let mut v = vec![0.25f32; 4 * 6];
            v[4 * 4 + 3] = bad; // token row 4 = document 2's row 1, column 3
            let c =
                Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), 4, &[2, 1, 3]).unwrap();
            match c.check_finite() {
                Err(Error::NonFinite {
                    what: w,
                    row: 1,
                    col: 3,
                    ..
                }) => assert_eq!(w, "document 2"),
                other => panic!("{what} {dtype}: {other:?}"),
            }
        }
    }
    Corpus::from_lengths(vec![1.0f32; 8], 4, &[2])
        .unwrap()
        .check_finite()
        .unwrap();
}

fn write_st(path: &std::path::Path, tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>) {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn bad_files_are_errors_with_the_path_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let c = Corpus::from_lengths(vec![0.5f32; 4 * 5], 4, &[2, 3])
        .unwrap()
        .with_doc_ids(vec!["x".into(), "y".into()])
        .unwrap();
    c.save(p("good.safetensors")).unwrap();
    let bytes = std::fs::read(p("good.safetensors")).unwrap();

    // Truncated anywhere: in the length prefix, in the header, in the data.
    for cut in [0, 4, 9, 40, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(p("cut.safetensors"), &bytes[..cut]).unwrap();
        let e = err_text(Corpus::open(p("cut.safetensors")));
        assert!(
            e.contains("cut.safetensors") && e.contains("truncated or corrupt"),
            "cut at {cut}: {e}"
        );
    }
    std::fs::write(
        p("junk.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}",
    )
    .unwrap();
    assert!(err_text(Corpus::open(p("junk.safetensors"))).contains("junk.safetensors"));
    assert!(matches!(
        Corpus::open(p("absent.safetensors")),
        Err(Error::Io { .. })
    ));

    let emb = vec![0u8; 4 * 5 * 4];
    write_st(
        &p("no-offsets.safetensors"),
        vec![("embeddings", Dtype::F32, vec![5, 4], emb.clone())],
    );
    assert!(err_text(Corpus::open(p("no-offsets.safetensors"))).contains("corpus import"));
    write_st(
        &p("i32.safetensors"),
        vec![
            ("embeddings", Dtype::I32, vec![5, 4], emb.clone()),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5])),
        ],
    );
    assert!(err_text(Corpus::open(p("i32.safetensors"))).contains("supported: F32, F16, BF16"));
    write_st(
        &p("f64.safetensors"),
        vec![
            ("embeddings", Dtype::F64, vec![5, 2], emb.clone()),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5])),
        ],
    );
    assert!(err_text(Corpus::open(p("f64.safetensors"))).contains("F64"));
    write_st(
        &p("1d.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![20], emb.clone()),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5])),
        ],
    );
    assert!(err_text(Corpus::open(p("1d.safetensors"))).contains("2-D"));
    write_st(
        &p("sum.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![5, 4], emb.clone()),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 4])),
        ],
    );
    assert!(err_text(Corpus::open(p("sum.safetensors"))).contains("last offset is 4"));
    write_st(
        &p("neg.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![5, 4], emb.clone()),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, -2, 5])),
        ],
    );
    assert!(err_text(Corpus::open(p("neg.safetensors"))).contains("not a valid offset"));
    write_st(
        &p("empty-doc.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![5, 4], emb.clone()),
            ("offsets", Dtype::I64, vec![4], i64s(&[0, 2, 2, 5])),
        ],
    );
    assert!(err_text(Corpus::open(p("empty-doc.safetensors"))).contains("document 1 is empty"));
    write_st(
        &p("ids.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![5, 4], emb.clone()),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5])),
            ("doc_ids", Dtype::U8, vec![3], b"a\na".to_vec()),
        ],
    );
    assert!(err_text(Corpus::open(p("ids.safetensors"))).contains("more than once"));
    // Offsets as I32 (as some writers do) are accepted.
    let off32: Vec<u8> = [0i32, 2, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
    write_st(
        &p("off32.safetensors"),
        vec![
            ("embeddings", Dtype::F32, vec![5, 4], emb),
            ("offsets", Dtype::I32, vec![3], off32),
        ],
    );
    assert_eq!(
        Corpus::open(p("off32.safetensors")).unwrap().offsets(),
        &[0, 2, 5]
    );
}
