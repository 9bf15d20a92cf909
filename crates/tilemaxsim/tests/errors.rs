//! Bad scorer input is an error of the right kind, with a message that says what and where,
//! from every entry point of every scorer (each CPU flavour and the reference): never a panic
//! and never a silent wrong answer. Plus `Matrix` shapes and the small parsers.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::all_scorers;
use tilemaxsim::scorer::alloc_scores;
use tilemaxsim::{Corpus, CpuScorer, DType, Device, Docs, Error, Isa, Matrix, OwnedElements};

/// Three documents of 1, 2 and 1 tokens, d = 4.
fn corpus() -> Corpus {
    Corpus::from_lengths(vec![0.5f32; 4 * 4], 4, &[1, 2, 1]).unwrap()
}

/// Every entry point of `s` on `queries` (single-query ones on `queries[bad]`): the errors.
fn every_call(
    s: &dyn tilemaxsim::Scorer,
    queries: &[Matrix<'_>],
    bad: usize,
    corpus: &Corpus,
) -> Vec<(&'static str, Error)> {
    let q = queries[bad];
    let n = corpus.len();
    let mut v = Vec::new();
    let mut push = |name, r: Result<(), Error>| match r {
        Ok(()) => panic!("{}: {name} accepted bad input", s.name()),
        Err(e) => v.push((name, e)),
    };
    push("score", s.score(q, corpus).map(drop));
    push("score_batch", s.score_batch(queries, corpus).map(drop));
    push("score_subset", s.score_subset(q, corpus, &[2, 0]).map(drop));
    push("top_k", s.top_k(q, corpus, 2).map(drop));
    push("top_k_batch", s.top_k_batch(queries, corpus, 2).map(drop));
    push("top_k_subset", s.top_k_subset(q, corpus, &[1], 1).map(drop));
    let mut out = vec![0.0f32; queries.len() * n];
    push(
        "score_into all",
        s.score_into(queries, corpus, Docs::All, &mut out),
    );
    let mut out = vec![0.0f32; queries.len() * 2];
    push(
        "score_into range",
        s.score_into(queries, corpus, Docs::Range(1..3), &mut out),
    );
    push(
        "score_into list",
        s.score_into(queries, corpus, Docs::List(&[2, 2]), &mut out),
    );
    v
}

#[test]
fn query_dimension_must_match_the_corpus() {
    let corpus = corpus();
    let good = [0.1f32; 8];
    let bad = [0.1f32; 6];
    let queries = [
        Matrix::new(&good[..], 4).unwrap(),
        Matrix::new(&bad[..], 3).unwrap(),
    ];
    for s in all_scorers() {
        for (call, e) in every_call(&*s, &queries, 1, &corpus) {
            let label = format!("{} {call}", s.name());
            assert!(
                matches!(
                    e,
                    Error::DimMismatch {
                        expected: 4,
                        got: 3,
                        ..
                    }
                ),
                "{label}: {e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains("d = 3") && msg.contains("d = 4"),
                "{label}: {msg}"
            );
            if call.contains("batch") || call.starts_with("score_into") {
                assert!(msg.contains("query 1"), "{label}: {msg}");
            }
        }
    }
}

#[test]
fn empty_queries_are_rejected() {
    let corpus = corpus();
    let good = [0.1f32; 4];
    let empty: [f32; 0] = [];
    let queries = [
        Matrix::new(&good[..], 4).unwrap(),
        Matrix::new(&good[..], 4).unwrap(),
        Matrix::new(&empty[..], 4).unwrap(),
    ];
    assert_eq!(
        queries[2].rows(),
        0,
        "Matrix allows 0 rows; scorers reject them"
    );
    for s in all_scorers() {
        for (call, e) in every_call(&*s, &queries, 2, &corpus) {
            let label = format!("{} {call}", s.name());
            let want = if call.contains("batch") || call.starts_with("score_into") {
                2
            } else {
                0
            };
            match e {
                Error::EmptyQuery { index } => assert_eq!(index, want, "{label}"),
                other => panic!("{label}: {other:?}"),
            }
            assert!(
                e.to_string().contains(&format!("query {want} is empty")),
                "{label}: {e}"
            );
        }
    }
}

#[test]
fn no_queries_at_all() {
    let corpus = corpus();
    for s in all_scorers() {
        let name = s.name();
        for (call, r) in [
            ("score_batch", s.score_batch(&[], &corpus).map(drop)),
            ("top_k_batch", s.top_k_batch(&[], &corpus, 3).map(drop)),
            ("score_into", s.score_into(&[], &corpus, Docs::All, &mut [])),
            (
                "score_into list",
                s.score_into(&[], &corpus, Docs::List(&[]), &mut []),
            ),
        ] {
            match r {
                Err(e @ Error::Argument(_)) => {
                    assert!(e.to_string().contains("no queries"), "{name} {call}: {e}")
                }
                other => panic!("{name} {call}: {other:?}"),
            }
        }
    }
}

#[test]
fn non_finite_query_values_name_the_query_row_and_column() {
    let corpus = corpus();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let good = OwnedElements::from_f32(&[0.1f32; 12], dtype);
            let mut v = [0.1f32; 12];
            v[2 * 4 + 3] = bad; // row 2, column 3
            let poisoned = OwnedElements::from_f32(&v, dtype);
            let queries = [
                Matrix::new(good.as_elements(), 4).unwrap(),
                Matrix::new(poisoned.as_elements(), 4).unwrap(),
            ];
            for s in all_scorers() {
                for (call, e) in every_call(&*s, &queries, 1, &corpus) {
                    let label = format!("{} {dtype} {bad} {call}", s.name());
                    match &e {
                        Error::NonFinite {
                            what,
                            row: 2,
                            col: 3,
                            value,
                        } => {
                            assert!(
                                value.is_nan() == bad.is_nan() && (bad.is_nan() || *value == bad),
                                "{label}: value {value}"
                            );
                            let want = if call.contains("batch") || call.starts_with("score_into") {
                                "query 1"
                            } else {
                                "query 0"
                            };
                            assert_eq!(what, want, "{label}");
                        }
                        other => panic!("{label}: {other:?}"),
                    }
                    assert!(e.to_string().contains("row 2, column 3"), "{label}: {e}");
                }
            }
        }
    }
    // A value that overflows f16 becomes infinite there: reported, not scored.
    let q = OwnedElements::from_f32(&[1.0, 1e6, 0.0, 0.0], DType::F16);
    let q = Matrix::new(q.as_elements(), 4).unwrap();
    for s in all_scorers() {
        assert!(
            matches!(
                s.score(q, &corpus),
                Err(Error::NonFinite { row: 0, col: 1, .. })
            ),
            "{}",
            s.name()
        );
    }
}

#[test]
fn document_indices_out_of_range() {
    let corpus = corpus(); // N = 3
    let qv = [0.1f32; 4];
    let q = Matrix::new(&qv[..], 4).unwrap();
    for s in all_scorers() {
        let name = s.name();
        let expect = |call: &str, r: Result<(), Error>, index: usize| match r {
            Err(Error::DocIndex { index: i, len: 3 }) if i == index => {}
            other => panic!("{name} {call}: expected DocIndex {index}, got {other:?}"),
        };
        expect(
            "score_subset",
            s.score_subset(q, &corpus, &[0, 3, 1]).map(drop),
            3,
        );
        expect(
            "score_subset huge",
            s.score_subset(q, &corpus, &[usize::MAX]).map(drop),
            usize::MAX,
        );
        expect(
            "top_k_subset",
            s.top_k_subset(q, &corpus, &[2, 7], 1).map(drop),
            7,
        );
        let mut out = vec![0.0f32; 2];
        expect(
            "score_into list",
            s.score_into(&[q], &corpus, Docs::List(&[1, 4]), &mut out),
            4,
        );
        expect(
            "score_into range past the end",
            s.score_into(&[q], &corpus, Docs::Range(2..4), &mut out),
            4,
        );
        let mut out = vec![0.0f32; 1];
        expect(
            "score_into range after the end",
            s.score_into(&[q], &corpus, Docs::Range(5..6), &mut out),
            6,
        );
        let e = s
            .score_subset(q, &corpus, &[3])
            .expect_err("out of range")
            .to_string();
        assert!(
            e.contains("index 3") && e.contains("3 documents"),
            "{name}: {e}"
        );
        // The edges that are fine: an empty list, an empty range at the end, the last doc.
        assert!(s.score_subset(q, &corpus, &[]).unwrap().is_empty());
        s.score_into(&[q], &corpus, Docs::Range(3..3), &mut [])
            .unwrap();
        assert_eq!(s.score_subset(q, &corpus, &[2]).unwrap().len(), 1);
    }
}

#[test]
fn a_reversed_range_is_not_reported_as_an_index_out_of_range() {
    // `Docs::Range(2..1)` is an error, but documents 2 and 1 both exist: the message must not
    // say "document index 2 out of range: the corpus has 3 documents".
    let corpus = corpus();
    let qv = [0.1f32; 4];
    let q = Matrix::new(&qv[..], 4).unwrap();
    for s in all_scorers() {
        #[allow(clippy::reversed_empty_ranges)]
        let e = s
            .score_into(&[q], &corpus, Docs::Range(2..1), &mut [])
            .expect_err("a reversed range is an error");
        assert!(
            !matches!(e, Error::DocIndex { index, len } if index < len),
            "{}: misleading error for a reversed range: {e}",
            s.name()
        );
    }
}

#[test]
fn k_must_be_at_least_one() {
    let corpus = corpus();
    let qv = [0.1f32; 4];
    let q = Matrix::new(&qv[..], 4).unwrap();
    for s in all_scorers() {
        let name = s.name();
        for (call, r) in [
            ("top_k", s.top_k(q, &corpus, 0).map(drop)),
            ("top_k_batch", s.top_k_batch(&[q, q], &corpus, 0).map(drop)),
            (
                "top_k_subset",
                s.top_k_subset(q, &corpus, &[0, 1], 0).map(drop),
            ),
            (
                "top_k_subset empty",
                s.top_k_subset(q, &corpus, &[], 0).map(drop),
            ),
        ] {
            match r {
                Err(e @ Error::Argument(_)) => {
                    assert!(
                        e.to_string().contains("k must be at least 1"),
                        "{name} {call}: {e}"
                    )
                }
                other => panic!("{name} {call}: {other:?}"),
            }
        }
        // k ≥ 1 on the same input works, and k beyond N gives all N.
        assert_eq!(s.top_k(q, &corpus, 1).unwrap().len(), 1, "{name}");
        assert_eq!(s.top_k(q, &corpus, 4).unwrap().len(), 3, "{name}");
    }
}

#[test]
fn output_of_the_wrong_length() {
    let corpus = corpus();
    let qv = [0.1f32; 8];
    let q = Matrix::new(&qv[..], 4).unwrap();
    for s in all_scorers() {
        let name = s.name();
        for (queries, docs, len, want) in [
            (1usize, Docs::All, 2usize, 3usize),
            (1, Docs::All, 4, 3),
            (2, Docs::All, 3, 6),
            (2, Docs::All, 0, 6),
            (1, Docs::Range(0..2), 3, 2),
            (2, Docs::Range(1..2), 1, 2),
            (1, Docs::List(&[0, 0, 0]), 2, 3),
            (3, Docs::List(&[2]), 1, 3),
            (1, Docs::List(&[]), 1, 0),
        ] {
            let qs = vec![q; queries];
            let mut out = vec![0.0f32; len];
            match s.score_into(&qs, &corpus, docs.clone(), &mut out) {
                Err(e @ Error::Argument(_)) => assert!(
                    e.to_string()
                        .contains(&format!("output has {len} elements, expected {want}")),
                    "{name} {docs:?}: {e}"
                ),
                other => panic!("{name} {queries} queries {docs:?} out {len}: {other:?}"),
            }
        }
    }
}

#[test]
fn the_scorer_still_works_after_errors() {
    let corpus = corpus();
    let good = [1.0f32, 0.0, 0.0, 0.0];
    let nan = [f32::NAN; 4];
    for s in all_scorers() {
        let q = Matrix::new(&good[..], 4).unwrap();
        let before = s.score(q, &corpus).unwrap();
        assert!(s.score(Matrix::new(&nan[..], 4).unwrap(), &corpus).is_err());
        assert!(s.top_k(q, &corpus, 0).is_err());
        assert!(s.score_subset(q, &corpus, &[9]).is_err());
        assert_eq!(s.score(q, &corpus).unwrap(), before, "{}", s.name());
        assert_eq!(before, vec![0.5, 0.5, 0.5], "{}", s.name());
    }
}

#[test]
fn matrix_shapes() {
    let v = [0.0f32; 6];
    for (dim, what) in [
        (0, "at least 1"),
        (4, "not a whole number of rows"),
        (7, "6 elements"),
    ] {
        match Matrix::new(&v[..], dim) {
            Err(e @ Error::Shape(_)) => assert!(e.to_string().contains(what), "d={dim}: {e}"),
            other => panic!("d={dim}: {other:?}"),
        }
    }
    for dtype in [DType::F16, DType::BF16] {
        let o = OwnedElements::from_f32(&[1.0; 10], dtype);
        assert!(matches!(
            Matrix::new(o.as_elements(), 0),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            Matrix::new(o.as_elements(), 3),
            Err(Error::Shape(_))
        ));
        assert_eq!(Matrix::new(o.as_elements(), 5).unwrap().rows(), 2);
    }
    assert_eq!(Matrix::new(&v[..], 3).unwrap().rows(), 2);
    assert_eq!(Matrix::new(&v[..], 6).unwrap().rows(), 1);
    let empty: [f32; 0] = [];
    assert_eq!(Matrix::new(&empty[..], 4).unwrap().rows(), 0);
    assert!(matches!(Matrix::new(&empty[..], 0), Err(Error::Shape(_))));
}

#[test]
fn names_that_do_not_parse() {
    assert!(matches!("f64".parse::<DType>(), Err(Error::DType { .. })));
    assert_eq!("BF16".parse::<DType>().unwrap(), DType::BF16);
    let e = "sse9".parse::<Isa>().unwrap_err().to_string();
    assert!(e.contains("sse9") && e.contains("avx512"), "{e}");
    for bad in ["cuda:x", "cuda:", "gpu0", ""] {
        assert!(
            matches!(bad.parse::<Device>(), Err(Error::Argument(_))),
            "{bad:?}"
        );
    }
    assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
    // A flavour this CPU lacks is an error, not a crash later.
    for isa in [Isa::Avx512, Isa::Avx2] {
        if !isa.is_supported() {
            assert!(matches!(
                CpuScorer::with_isa(isa),
                Err(Error::DeviceUnavailable(_))
            ));
        }
    }
}

#[test]
fn an_impossible_allocation_is_an_error_not_a_panic() {
    // `alloc_scores` promises failure "as an error rather than aborting".
    for len in [usize::MAX / 2, usize::MAX / 4 + 1, 1 << 61] {
        let r = catch_unwind(AssertUnwindSafe(|| alloc_scores(len)))
            .unwrap_or_else(|_| panic!("alloc_scores({len}) panicked"));
        match r {
            Err(e @ Error::OutOfMemory(_)) => assert!(e.to_string().contains("scores"), "{e}"),
            other => panic!("alloc_scores({len}): {:?}", other.map(|v| v.len())),
        }
    }
}
