//! Corpus values: `check_finite` names the document, token and column of a NaN or infinity;
//! opening a file scans its values unless the file records that they were scanned when it was
//! written, and that record is trusted only in its exact form.

mod common;

use std::path::Path;

use common::*;
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use tilemaxsim::corpus::{FiniteCheck, OpenOptions};
use tilemaxsim::{Corpus, DType, Error, OwnedElements};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn check_finite_names_the_document_row_and_column() {
    for (bad, what) in [
        (f32::NAN, "NaN"),
        (f32::INFINITY, "inf"),
        (f32::NEG_INFINITY, "-inf"),
    ] {
        for dtype in DTYPES {
            let mut v = vec![0.25f32; 4 * 6];
            v[4 * 4 + 3] = bad; // token row 4 = document 2's row 1, column 3
            let c =
                Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), 4, &[2, 1, 3]).unwrap();
            match c.check_finite() {
                Err(Error::NonFinite {
                    what: ref w,
                    row: 1,
                    col: 3,
                    value,
                }) if w == "document 2" && (value.is_nan() == bad.is_nan()) => {
                    let msg = c.check_finite().unwrap_err().to_string();
                    assert!(
                        msg.contains("document 2") && msg.contains("row 1, column 3"),
                        "{what} {dtype}: {msg}"
                    );
                }
                other => panic!("{what} {dtype}: {other:?}"),
            }
        }
    }
    Corpus::from_lengths(vec![f32::MAX; 8], 4, &[2])
        .unwrap()
        .check_finite()
        .unwrap();
}

#[test]
fn check_finite_reports_the_first_bad_document_of_many() {
    // The scan runs in parallel; the report must still be the first bad document.
    let dir = tempfile::tempdir().unwrap();
    let n = 3000;
    let dim = 8;
    let lens: Vec<usize> = (0..n).map(|j| 1 + j % 4).collect();
    let offsets = tilemaxsim::corpus::offsets_from_lengths(&lens).unwrap();
    let mut v = vec![0.5f32; offsets[n] * dim];
    for (doc, row, col, bad) in [
        (2999, 0, 0, f32::NAN),
        (2100, 2, 5, f32::INFINITY),
        (1777, 1, 7, f32::NAN),
    ] {
        v[(offsets[doc] + row) * dim + col] = bad;
    }
    for dtype in DTYPES {
        let c = Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), dim, &lens).unwrap();
        let path = dir.path().join(format!("nan-{dtype}.safetensors"));
        c.save(&path).unwrap(); // the file format does not judge values
        for (label, c) in [("memory", c), ("opened", open_unchecked(&path))] {
            match c.check_finite() {
                Err(Error::NonFinite {
                    what,
                    row: 1,
                    col: 7,
                    ..
                }) if what == "document 1777" => {}
                other => panic!("{label} {dtype}: {other:?}"),
            }
            assert_eq!(c.finite_check(), FiniteCheck::NotChecked, "{label}");
        }
        // Opened with the default options, the file is refused with the same report, and the
        // file named.
        match Corpus::open(&path) {
            Err(Error::NonFinite {
                what,
                row: 1,
                col: 7,
                ..
            }) if what == format!("document 1777 of {}", path.display()) => {}
            other => panic!("default open {dtype}: {other:?}"),
        }
    }
}

#[test]
fn opening_checks_the_values_and_names_document_id_and_token() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in DTYPES {
        let mut v = vec![0.25f32; 4 * 6];
        v[4 * 4 + 3] = f32::NAN; // document 2 ("c"), its token 1, column 3
        let c = Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), 4, &[2, 1, 3])
            .unwrap()
            .with_doc_ids(vec!["a".into(), "b".into(), "c".into()])
            .unwrap();
        let path = dir.path().join(format!("nan-{dtype}.safetensors"));
        c.save(&path).unwrap();
        let e = Corpus::open(&path).expect_err("a NaN is refused by default");
        let msg = e.to_string();
        assert!(
            matches!(e, Error::NonFinite { row: 1, col: 3, .. })
                && msg.contains("document 2 (id \"c\")")
                && msg.contains("token row 1, column 3")
                && msg.contains(&format!("nan-{dtype}.safetensors")),
            "{dtype}: {msg}"
        );
        // The opt-out opens it, unchecked; an explicit check still finds it.
        let c = OpenOptions::new().check_finite(false).open(&path).unwrap();
        assert_eq!(c.finite_check(), FiniteCheck::NotChecked);
        assert!(matches!(
            c.check_finite(),
            Err(Error::NonFinite { row: 1, col: 3, .. })
        ));
        assert_eq!(c.finite_check(), FiniteCheck::NotChecked);
    }
}

/// The file's metadata, as safetensors reads it.
fn metadata(path: &Path) -> std::collections::HashMap<String, String> {
    let bytes = std::fs::read(path).unwrap();
    let (_, m) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    m.metadata().clone().unwrap_or_default()
}

#[test]
fn a_scan_is_recorded_in_the_file_and_trusted_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let mut r = rng(5);
    let c = random_corpus(&mut r, &[3, 1, 4], 8, DType::F16, 1.0);
    // Never scanned: the file does not claim anything, and opening it scans it.
    assert_eq!(c.finite_check(), FiniteCheck::NotChecked);
    c.save(p("plain.safetensors")).unwrap();
    assert_eq!(metadata(&p("plain.safetensors")).get("values"), None);
    let opened = Corpus::open(p("plain.safetensors")).unwrap();
    assert_eq!(opened.finite_check(), FiniteCheck::Scanned);
    // Scanned (on open, or by check_finite): saved with the record, and opened without a scan.
    opened.save(p("scanned.safetensors")).unwrap();
    c.check_finite().unwrap();
    assert_eq!(c.finite_check(), FiniteCheck::Scanned);
    c.save(p("checked.safetensors")).unwrap();
    for name in ["scanned.safetensors", "checked.safetensors"] {
        let m = metadata(&p(name));
        assert_eq!(
            m.get("values").map(String::as_str),
            Some("finite"),
            "{name}"
        );
        assert_eq!(
            m.get("format").map(String::as_str),
            Some("tilemaxsim.corpus")
        );
        let back = Corpus::open(p(name)).unwrap();
        assert_eq!(back.finite_check(), FiniteCheck::Recorded, "{name}");
        assert_same_corpus(name, &back, &c);
        // A record read from one file is not a scan: saving it again does not pass it on.
        back.save(p("resaved.safetensors")).unwrap();
        assert_eq!(metadata(&p("resaved.safetensors")).get("values"), None);
        // An explicit check always scans.
        back.check_finite().unwrap();
        assert_eq!(back.finite_check(), FiniteCheck::Scanned);
    }
    // Clones keep what is known.
    assert_eq!(c.clone().finite_check(), FiniteCheck::Scanned);
}

#[test]
fn the_record_is_trusted_only_with_the_exact_metadata() {
    // A NaN under metadata that claims a scan: trusted only when every key is exactly ours (a
    // stale record is the documented risk; an explicit check_finite still finds the NaN).
    let dir = tempfile::tempdir().unwrap();
    let mut v = [0.5f32; 5 * 4];
    v[9] = f32::NAN;
    let emb: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let off = i64s(&[0, 2, 5]);
    let ours = [
        ("format", "tilemaxsim.corpus"),
        ("version", "1"),
        ("values", "finite"),
    ];
    let mut cases: Vec<(Vec<(&str, &str)>, bool)> = vec![(ours.to_vec(), true)];
    for i in 0..3 {
        let mut missing = ours.to_vec();
        missing.remove(i);
        cases.push((missing, false));
        for wrong in ["", "Finite", "true", "finite "] {
            let mut m = ours.to_vec();
            m[i].1 = wrong;
            cases.push((m, false));
        }
    }
    for (i, (meta, trusted)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("meta-{i}.safetensors"));
        let views = vec![
            (
                "embeddings".to_string(),
                TensorView::new(Dtype::F32, vec![5, 4], &emb).unwrap(),
            ),
            (
                "offsets".to_string(),
                TensorView::new(Dtype::I64, vec![3], &off).unwrap(),
            ),
        ];
        let meta: std::collections::HashMap<String, String> = meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        safetensors::serialize_to_file(views, Some(meta.clone()), &path).unwrap();
        match Corpus::open(&path) {
            Ok(c) if *trusted => {
                assert_eq!(c.finite_check(), FiniteCheck::Recorded);
                assert!(matches!(
                    c.check_finite(),
                    Err(Error::NonFinite { row: 0, col: 1, .. })
                ));
            }
            Err(Error::NonFinite { row: 0, col: 1, .. }) if !*trusted => {}
            other => panic!("{meta:?}: {other:?}"),
        }
    }
}
