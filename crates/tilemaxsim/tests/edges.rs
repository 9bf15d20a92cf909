//! Deterministic edge cases for every scorer: exact ties and top-k order, huge and tiny
//! magnitudes, similarities that are all negative, blocked top-k over many queries.

mod common;

use common::*;
use tilemaxsim::reference::maxsim_f64;
use tilemaxsim::topk::{Hit, rank_order};
use tilemaxsim::{Corpus, CpuScorer, DType, Matrix, OwnedElements, Scorer};

/// Top-k from a full sort of reference scores.
fn expected_top_k(query: Matrix<'_>, corpus: &Corpus, docs: &[usize], k: usize) -> Vec<usize> {
    let mut hits: Vec<Hit> = docs
        .iter()
        .map(|&d| Hit {
            doc: d,
            score: maxsim_f64(query, corpus.doc(d)) as f32,
        })
        .collect();
    hits.sort_by(rank_order);
    hits.truncate(k);
    hits.iter().map(|h| h.doc).collect()
}

#[test]
fn identical_documents_tie_and_rank_by_lower_index() {
    let mut r = rng(5);
    let dim = 7;
    let a = random_values(&mut r, 3, dim, 1.0);
    let b = random_values(&mut r, 2, dim, 1.0);
    // Documents 0, 2, 3, 5 are copies of `a`; 1 and 4 of `b`.
    let order = [&a, &b, &a, &a, &b, &a];
    let data: Vec<f32> = order.iter().flat_map(|v| v.iter().copied()).collect();
    let lens: Vec<usize> = order.iter().map(|v| v.len() / dim).collect();
    let corpus = Corpus::from_lengths(data, dim, &lens).unwrap();
    let qv = random_values(&mut r, 4, dim, 1.0);
    let q = Matrix::new(&qv[..], dim).unwrap();
    let all: Vec<usize> = (0..6).collect();
    for s in all_scorers() {
        let scores = s.score(q, &corpus).unwrap();
        assert_eq!(
            scores[0],
            scores[2],
            "{}: copies score bit-identically",
            s.name()
        );
        for k in [1, 3, 6, 10] {
            let got: Vec<usize> = s
                .top_k(q, &corpus, k)
                .unwrap()
                .iter()
                .map(|h| h.doc)
                .collect();
            assert_eq!(
                got,
                expected_top_k(q, &corpus, &all, k),
                "{} k={k}",
                s.name()
            );
            let batch = s.top_k_batch(&[q, q], &corpus, k).unwrap();
            assert_eq!(batch[0].iter().map(|h| h.doc).collect::<Vec<_>>(), got);
            assert_eq!(batch[1].iter().map(|h| h.doc).collect::<Vec<_>>(), got);
        }
        let subset = [5, 1, 3, 4];
        let got: Vec<usize> = s
            .top_k_subset(q, &corpus, &subset, 3)
            .unwrap()
            .iter()
            .map(|h| h.doc)
            .collect();
        assert_eq!(
            got,
            expected_top_k(q, &corpus, &subset, 3),
            "{} subset",
            s.name()
        );
    }
}

#[test]
fn huge_tiny_and_negative_values() {
    for (label, scale, dim) in [
        ("huge", 1e15f32, 5usize),
        ("tiny", 1e-20f32, 33),
        ("unit", 1.0, 128),
    ] {
        let mut r = rng(9);
        for dtype in [DType::F32, DType::BF16] {
            // f16 cannot hold these magnitudes; bf16 has f32's exponent range.
            let corpus = random_corpus(&mut r, &[1, 2, 17, 64], dim, dtype, scale);
            let q = random_query(&mut r, 9, dim, dtype, scale);
            let qm = Matrix::new(q.as_elements(), dim).unwrap();
            for s in all_scorers() {
                let mut out = vec![f32::NAN; 4];
                s.score_into(&[qm], &corpus, tilemaxsim::Docs::All, &mut out)
                    .unwrap();
                assert_close(
                    &format!("{} {label} {dtype}", s.name()),
                    qm,
                    &corpus,
                    &[0, 1, 2, 3],
                    &out,
                );
            }
        }
    }
    // All similarities negative: the maximum is negative, not clamped at zero.
    let corpus = Corpus::from_lengths(vec![-1.0f32, -0.5, -2.0, -1.0], 2, &[2]).unwrap();
    let q = [1.0f32, 1.0];
    for s in all_scorers() {
        let got = s.score(Matrix::new(&q[..], 2).unwrap(), &corpus).unwrap();
        assert_eq!(got, vec![-1.5], "{}", s.name());
    }
}

#[test]
fn query_equal_to_document_scores_its_squared_norms() {
    let v = [3.0f32, 4.0, 0.0, 1.0];
    let corpus = Corpus::from_lengths(v.to_vec(), 2, &[2]).unwrap();
    for s in all_scorers() {
        // Row 0 = (3, 4): max(25, 4) = 25; row 1 = (0, 1): max(4, 1) = 4.
        assert_eq!(
            s.score(Matrix::new(&v[..], 2).unwrap(), &corpus).unwrap(),
            vec![29.0],
            "{}",
            s.name()
        );
    }
}

#[test]
fn top_k_over_many_blocks_matches_a_full_sort() {
    // 2^24 scores per block / 4100 queries = 4092 documents per block: 5000 documents take two.
    let mut r = rng(13);
    let dim = 1;
    let lens = vec![1usize; 5000];
    let corpus = random_corpus(&mut r, &lens, dim, DType::F32, 1.0);
    let qs: Vec<f32> = (0..4100)
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let queries: Vec<Matrix<'_>> = qs.chunks(1).map(|c| Matrix::new(c, 1).unwrap()).collect();
    let all: Vec<usize> = (0..5000).collect();
    let got = CpuScorer::new().top_k_batch(&queries, &corpus, 5).unwrap();
    assert_eq!(got.len(), 4100);
    let want_pos = expected_top_k(queries[0], &corpus, &all, 5);
    let want_neg = expected_top_k(queries[1], &corpus, &all, 5);
    for (i, hits) in got.iter().enumerate() {
        let docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
        assert_eq!(
            &docs,
            if i % 2 == 0 { &want_pos } else { &want_neg },
            "query {i}"
        );
    }
}

#[test]
fn mixed_dtypes_and_views() {
    let mut r = rng(17);
    let corpus = random_corpus(&mut r, &[3, 1, 8], 16, DType::F16, 1.0);
    let q = random_query(&mut r, 5, 16, DType::BF16, 1.0);
    let qm = Matrix::new(q.as_elements(), 16).unwrap();
    let got = CpuScorer::new().score(qm, &corpus).unwrap();
    assert_close("f16 corpus, bf16 query", qm, &corpus, &[0, 1, 2], &got);
    // A query that is a view of rows of a larger matrix.
    let big = OwnedElements::from_f32(&random_values(&mut r, 10, 16, 1.0), DType::F32);
    let view = Matrix::new(big.as_elements(), 16).unwrap().rows_range(2..7);
    let got = CpuScorer::new().score(view, &corpus).unwrap();
    assert_close("row view", view, &corpus, &[0, 1, 2], &got);
}
