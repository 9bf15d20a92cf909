//! Search within given documents (`Index::search_within`, fast-plaid's and PyLate's `subset`):
//! on an index with added and deleted documents, each query's list (repeats, deleted and
//! added documents, one document, none, every one) ranks as its live documents scored one by
//! one on their codes, then with the exact stage (over every candidate, and over fewer than
//! the list holds, raised to k as every exact stage is); a number past the index, a list count that is not the query count and
//! k = 0 are errors that change nothing.

mod common;

use common::index::*;
use common::*;
use tilemaxsim::index::{Index, IndexSearch};
use tilemaxsim::topk::top_k_of;
use tilemaxsim::{CpuScorer, DType, Device, Hit, Matrix, Scorer};

/// Query `q`'s top `k` among `list` (document numbers) by `scores` (one per live document,
/// in `live`'s order).
fn expected(scores: &[f32], live: &[usize], list: &[usize], k: usize) -> Vec<Hit> {
    let hits = live
        .iter()
        .zip(scores)
        .filter(|(j, _)| list.contains(j))
        .map(|(&doc, &score)| Hit { doc, score });
    top_k_of(hits, k)
}

fn within(
    index: &Index,
    qs: &[Matrix<'_>],
    lists: &[Vec<usize>],
    k: usize,
    rerank_k: usize,
) -> Vec<Vec<Hit>> {
    let how = IndexSearch {
        rerank_k: Some(rerank_k),
        ..Default::default()
    };
    index
        .search_within(qs, lists, k, &how, Device::Cpu)
        .unwrap()
}

#[test]
fn each_query_ranks_its_own_live_documents() {
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        build_index(&path, 50, seed);
        let mut index = Index::open(&path).unwrap();
        let added = unit_corpus(500 + seed, &[1, 9, 30, 4, 17], DIM, DType::F16);
        assert_eq!(index.add(&added).unwrap(), 50..55);
        index.delete(&[3, 7, 52]).unwrap();
        let (codes, exact, live) = survivors(&index);
        let mut r = rng(900 + seed);
        let owned = queries(&mut r, &[1, 7, 32, 5, 12]);
        let qs = views(&owned);
        let lists: Vec<Vec<usize>> = vec![
            vec![0, 3, 3, 51, 52, 53, 12, 12, 40], // repeats, deleted and added documents
            vec![54],                              // one document
            vec![],                                // none
            (0..index.len()).rev().collect(),      // every one, in reverse
            vec![7, 3],                            // deleted only
        ];
        let scorer = CpuScorer::new();
        for k in [1, 3, 60] {
            // On the codes: the listed live documents, scored one by one.
            let got = within(&index, &qs, &lists, k, 0);
            for (i, q) in qs.iter().enumerate() {
                let on_codes = scorer.score(*q, &codes).unwrap();
                assert_eq!(
                    got[i],
                    expected(&on_codes, &live, &lists[i], k),
                    "seed {seed}, k {k}, query {i}: codes"
                );
            }
            // The exact stage over every candidate: the listed live documents' exact top k.
            let got = within(&index, &qs, &lists, k, 1000);
            for (i, q) in qs.iter().enumerate() {
                let on_exact = scorer.score(*q, &exact).unwrap();
                assert_eq!(
                    got[i],
                    expected(&on_exact, &live, &lists[i], k),
                    "seed {seed}, k {k}, query {i}: exact"
                );
            }
            // Over the best 2 on the codes only (raised to k where k is more): those, in their
            // exact order.
            let got = within(&index, &qs, &lists, k, 2);
            for (i, q) in qs.iter().enumerate() {
                let first: Vec<usize> = expected(
                    &scorer.score(*q, &codes).unwrap(),
                    &live,
                    &lists[i],
                    k.max(2),
                )
                .iter()
                .map(|h| h.doc)
                .collect();
                let on_exact = scorer.score(*q, &exact).unwrap();
                assert_eq!(
                    got[i],
                    expected(&on_exact, &live, &first, k),
                    "seed {seed}, k {k}, query {i}: 2 reranked"
                );
            }
        }
    }
}

#[test]
fn bad_lists_are_errors_that_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 20, 5);
    let index = Index::open(&path).unwrap();
    let owned = queries(&mut rng(6), &[4, 4]);
    let qs = views(&owned);
    let how = IndexSearch::default();
    let err = |lists: &[Vec<usize>], k| {
        index
            .search_within(&qs, lists, k, &how, Device::Cpu)
            .unwrap_err()
            .to_string()
    };
    assert!(err(&[vec![0], vec![20]], 5).contains("document 20 does not exist"));
    assert!(err(&[vec![0]], 5).contains("2 queries for 1 lists"));
    assert!(err(&[vec![0], vec![1]], 0).contains("k must be at least 1"));
    // A query of another width.
    let wide = random_query(&mut rng(7), 3, DIM + 1, DType::F32, 1.0);
    let wq = [Matrix::new(wide.as_elements(), DIM + 1).unwrap()];
    assert!(
        index
            .search_within(&wq, &[vec![0]], 5, &how, Device::Cpu)
            .is_err()
    );
    // Nothing changed: a good search still answers.
    let ok = index
        .search_within(&qs, &[vec![0, 1], vec![2]], 5, &how, Device::Cpu)
        .unwrap();
    assert_eq!((ok[0].len(), ok[1].len()), (2, 1));
}
