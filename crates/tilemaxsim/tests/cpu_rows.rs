//! `CpuScorer::score_rows`: documents as row ranges of borrowed memory (how the Python bindings
//! score a caller's tensor without copying it), against the float64 reference, in every CPU
//! flavour: random shapes (odd d, 1-token and long documents, f32/f16/bf16), ranges out of order
//! and with gaps between them (padded layouts), poisoned outputs; and its errors.

mod common;

use common::*;
use rand::Rng;
use tilemaxsim::reference::maxsim_f64;
use tilemaxsim::{CpuScorer, DType, Isa, Matrix, OwnedElements};

#[test]
fn row_ranges_match_the_reference() {
    let mut r = rng(41);
    for case in 0..24 {
        let dim = [1usize, 7, 33, 64, 77, 128, 200][case % 7];
        let dtype = [DType::F32, DType::F16, DType::BF16][case % 3];
        let rows = r.random_range(1..700);
        let tokens = OwnedElements::from_f32(&random_values(&mut r, rows, dim, 1.0), dtype);
        let tokens = Matrix::new(tokens.as_elements(), dim).unwrap();
        // Documents anywhere in the rows: 1 token, the whole matrix, overlapping, in any order.
        let mut docs = vec![0..1, rows - 1..rows, 0..rows];
        for _ in 0..r.random_range(0..40) {
            let a = r.random_range(0..rows);
            docs.push(a..r.random_range(a + 1..=rows));
        }
        let nq = r.random_range(1..4);
        let qs: Vec<OwnedElements> = (0..nq)
            .map(|_| {
                let n = r.random_range(1..40);
                random_query(&mut r, n, dim, dtype, 1.0)
            })
            .collect();
        let queries = matrices(&qs, dim);
        for isa in Isa::available() {
            let scorer = CpuScorer::with_isa(isa).unwrap();
            let mut out = vec![f32::NAN; nq * docs.len()];
            scorer
                .score_rows(&queries, tokens, &docs, &mut out)
                .unwrap();
            for (q, row) in queries.iter().zip(out.chunks(docs.len())) {
                for (doc, &got) in docs.iter().zip(row) {
                    let d = tokens.rows_range(doc.clone());
                    let (want, tol) = (maxsim_f64(*q, d), tolerance(*q, d));
                    assert!(
                        got.is_finite() && (f64::from(got) - want).abs() <= tol,
                        "case {case} {isa} d={dim} {dtype:?} rows {doc:?}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn bad_ranges_and_shapes_are_errors() {
    let mut r = rng(42);
    let values = OwnedElements::from_f32(&random_values(&mut r, 10, 8, 1.0), DType::F32);
    let tokens = Matrix::new(values.as_elements(), 8).unwrap();
    let q = random_query(&mut r, 3, 8, DType::F32, 1.0);
    let queries = matrices(std::slice::from_ref(&q), 8);
    let scorer = CpuScorer::new();
    let mut one = [0f32; 1];
    let bad: [std::ops::Range<usize>; 3] = [3..3, 5..11, 10..12];
    for docs in &bad {
        let e = scorer.score_rows(&queries, tokens, std::slice::from_ref(docs), &mut one);
        assert!(e.is_err(), "rows {docs:?} accepted");
    }
    let (two, all) = (
        std::slice::from_ref(&(0..2)),
        std::slice::from_ref(&(0..10)),
    );
    let score = |q: &[Matrix<'_>], docs: &[std::ops::Range<usize>], out: &mut [f32]| {
        scorer.score_rows(q, tokens, docs, out)
    };
    assert!(score(&queries, two, &mut [0f32; 2]).is_err());
    let wide = random_query(&mut r, 3, 9, DType::F32, 1.0);
    let wide = matrices(std::slice::from_ref(&wide), 9);
    assert!(score(&wide, two, &mut one).is_err());
    assert!(score(&queries, all, &mut one).is_ok());
}
