//! Ties and top-k order of every CPU scorer (and the float64 reference scorer): exact ties rank
//! by the lower document index, signed zeros tie, `top_k` with k = usize::MAX returns every
//! document, and `top_k_batch` scores the corpus in blocks that cover it once and merge in
//! order, against a full sort.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::cpu_scorers::every_scorer;
use common::*;
use rand::Rng;
use rand::rngs::StdRng;
use tilemaxsim::reference::maxsim_f64;
use tilemaxsim::{Corpus, CpuScorer, DType, Docs, Matrix, OwnedElements, Scorer};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Small integers: every product and sum is exact in f32, so ties are exact and the reference
/// ranking is the ranking every scorer must produce, scores included.
fn int_values(r: &mut StdRng, len: usize, lo: i32, hi: i32) -> Vec<f32> {
    (0..len).map(|_| r.random_range(lo..=hi) as f32).collect()
}

/// Reference scores of `query` against every document, with the full-sort top-k.
fn reference_top_k(
    query: Matrix<'_>,
    corpus: &Corpus,
    docs: &[usize],
    k: usize,
) -> Vec<(usize, f64)> {
    spec_top_k(
        docs.iter().map(|&j| (j, maxsim_f64(query, corpus.doc(j)))),
        k,
    )
}

#[test]
fn exact_ties_rank_by_lower_index() {
    let mut r = rng(5);
    let dim = 5;
    let a = int_values(&mut r, 3 * dim, -4, 4);
    let b = int_values(&mut r, 2 * dim, -4, 4);
    let c = int_values(&mut r, 4 * dim, -4, 4);
    // `a` with its token rows in another order: a different document with the same score.
    let a_perm: Vec<f32> = [2usize, 0, 1]
        .iter()
        .flat_map(|&t| a[t * dim..(t + 1) * dim].iter().copied())
        .collect();
    let single = int_values(&mut r, dim, -4, 4);
    let order: [&Vec<f32>; 11] = [&b, &a, &c, &a, &a_perm, &b, &single, &a, &c, &single, &a];
    let data: Vec<f32> = order.iter().flat_map(|v| v.iter().copied()).collect();
    let lens: Vec<usize> = order.iter().map(|v| v.len() / dim).collect();
    let n = lens.len();
    for dtype in DTYPES {
        // Integers up to 4 are exact in every dtype.
        let corpus =
            Corpus::from_lengths(OwnedElements::from_f32(&data, dtype), dim, &lens).unwrap();
        let qv = [
            int_values(&mut r, 3 * dim, -3, 3),
            int_values(&mut r, dim, -3, 3),
        ];
        let qo: Vec<OwnedElements> = qv
            .iter()
            .map(|v| OwnedElements::from_f32(v, dtype))
            .collect();
        let qs = matrices(&qo, dim);
        let all: Vec<usize> = (0..n).collect();
        let subsets: [&[usize]; 5] = [
            &[10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
            &[7, 3, 1, 10, 4, 3, 7],
            &[9],
            &[6, 9, 6],
            &[],
        ];
        for (name, s) in every_scorer() {
            for k in [1, 2, 3, 5, n - 1, n, n + 1, 100] {
                let label = format!("{name} {dtype} k={k}");
                let batch = s.top_k_batch(&[qs[0], qs[1], qs[0]], &corpus, k).unwrap();
                assert_eq!(batch.len(), 3);
                for (qi, q) in [qs[0], qs[1], qs[0]].into_iter().enumerate() {
                    let want = reference_top_k(q, &corpus, &all, k);
                    assert_eq!(want.len(), k.min(n));
                    assert_eq!(
                        hit_pairs(&s.top_k(q, &corpus, k).unwrap()),
                        want,
                        "{label} top_k q{qi}"
                    );
                    assert_eq!(hit_pairs(&batch[qi]), want, "{label} top_k_batch q{qi}");
                    for sub in subsets {
                        assert_eq!(
                            hit_pairs(&s.top_k_subset(q, &corpus, sub, k).unwrap()),
                            reference_top_k(q, &corpus, sub, k),
                            "{label} top_k_subset {sub:?} q{qi}"
                        );
                    }
                }
            }
            // Copies and token permutations score bit-identically.
            let scores = s.score(qs[0], &corpus).unwrap();
            for (x, y) in [(1, 3), (1, 4), (1, 7), (1, 10), (0, 5), (2, 8), (6, 9)] {
                assert_eq!(
                    scores[x].to_bits(),
                    scores[y].to_bits(),
                    "{name} {dtype} docs {x}, {y}"
                );
            }
        }
    }
}

#[test]
fn top_k_with_k_usize_max_returns_every_document() {
    // "k beyond N returns all N": k = usize::MAX is the natural way to ask for everything.
    let corpus = Corpus::from_lengths(vec![1.0f32, 3.0, 2.0, 3.0], 1, &[1, 1, 1, 1]).unwrap();
    let q = [1.0f32];
    let q = Matrix::new(&q[..], 1).unwrap();
    let want = vec![(1, 3.0), (3, 3.0), (2, 2.0), (0, 1.0)];
    for (name, s) in every_scorer() {
        let got = catch_unwind(AssertUnwindSafe(|| s.top_k(q, &corpus, usize::MAX)));
        let got = got.unwrap_or_else(|_| panic!("{name}: top_k(k = usize::MAX) panicked"));
        assert_eq!(hit_pairs(&got.unwrap()), want, "{name} top_k");
        let got = catch_unwind(AssertUnwindSafe(|| {
            s.top_k_subset(q, &corpus, &[3, 2, 1, 0], usize::MAX)
        }))
        .unwrap_or_else(|_| panic!("{name}: top_k_subset(k = usize::MAX) panicked"));
        assert_eq!(hit_pairs(&got.unwrap()), want, "{name} top_k_subset");
    }
}

#[test]
fn signed_zero_scores_tie() {
    // Document 0's only similarity is a negative product too small for f32 (-1e-60): its score
    // rounds to -0.0 on paths that keep the sign (the f64 reference, FMA kernels). Document 1's
    // is exactly +0.0. The scores are equal (-0.0 == +0.0), so the tie goes to document 0,
    // whatever the flavour.
    let corpus = Corpus::from_lengths(vec![-1e-30f32, 0.0], 1, &[1, 1]).unwrap();
    let q = [1e-30f32];
    let q = Matrix::new(&q[..], 1).unwrap();
    let mut wrong = Vec::new();
    for (name, s) in every_scorer() {
        let scores = s.score(q, &corpus).unwrap();
        assert!(scores.iter().all(|&x| x == 0.0), "{name}: {scores:?}");
        for k in [1, 2] {
            let docs: Vec<usize> = s
                .top_k(q, &corpus, k)
                .unwrap()
                .iter()
                .map(|h| h.doc)
                .collect();
            if docs != [0, 1][..k] {
                wrong.push(format!(
                    "{name} top_k(k={k}) = {docs:?} for scores {scores:?}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "ties between -0.0 and +0.0 broken by sign:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn top_k_batch_over_several_blocks_matches_a_full_sort() {
    // A top-k pass scores 2^24 / Q documents at a time: 4100 queries → blocks of 4092
    // documents, so 9000 documents take three. Integer data: exact scores, many ties, some
    // across block boundaries.
    let mut r = rng(13);
    let dim = 2;
    let n = 9000;
    let lens: Vec<usize> = (0..n).map(|j| 1 + j % 3).collect();
    let total: usize = lens.iter().sum();
    let corpus =
        Corpus::from_lengths(int_values(&mut r, total * dim, -20, 20), dim, &lens).unwrap();
    // Eight distinct queries, repeated to 4100.
    let distinct: Vec<Vec<f32>> = (0..8)
        .map(|i| int_values(&mut r, (1 + i % 3) * dim, -3, 3))
        .collect();
    let queries: Vec<Matrix<'_>> = (0..4100)
        .map(|i| Matrix::new(&distinct[i % 8][..], dim).unwrap())
        .collect();
    let all: Vec<usize> = (0..n).collect();
    // One scorer: the blocking is the trait's (shared by every backend), and the flavours'
    // scores are checked by the property test. 4100 × 9000 pairs take a few seconds.
    let s = CpuScorer::new();
    let k = 50;
    let got = s.top_k_batch(&queries, &corpus, k).unwrap();
    assert_eq!(got.len(), queries.len());
    let want: Vec<Vec<(usize, f64)>> = distinct
        .iter()
        .map(|q| reference_top_k(Matrix::new(&q[..], dim).unwrap(), &corpus, &all, k))
        .collect();
    for (qi, hits) in got.iter().enumerate() {
        assert_eq!(hit_pairs(hits), want[qi % 8], "k={k} query {qi}");
    }
}

/// A scorer with made-up integer scores (cheap, full of ties) that records the selections
/// `top_k_batch` asks it for: the blocking and merging of the trait's `top_k_batch`, tested
/// at sizes the real scorers would take long over.
struct Recording {
    calls: std::sync::Mutex<Vec<(std::ops::Range<usize>, usize)>>,
}

fn made_up_score(q: usize, j: usize) -> f32 {
    ((q % 5) * 7 + j * 13 % 23) as f32 - 11.0
}

impl Scorer for Recording {
    fn name(&self) -> String {
        "recording".into()
    }
    fn supports(&self, codec: tilemaxsim::CodecKind) -> bool {
        codec == tilemaxsim::CodecKind::Exact
    }
    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn tilemaxsim::AnyCorpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> tilemaxsim::Result<()> {
        self.check(queries, corpus, &docs, out.len())?;
        let Docs::Range(range) = &docs else {
            panic!("top_k_batch should score ranges, got {docs:?}")
        };
        self.calls.lock().unwrap().push((range.clone(), out.len()));
        let n = docs.count(corpus);
        for (q, row) in out.chunks_mut(n.max(1)).enumerate().take(queries.len()) {
            for (i, s) in row.iter_mut().enumerate() {
                *s = made_up_score(q, docs.index(i));
            }
        }
        Ok(())
    }
}

#[test]
fn top_k_batch_blocks_cover_the_corpus_once_and_merge_in_order() {
    let one = [0.0f32];
    let corpus = Corpus::from_lengths(vec![0.0f32; 9000], 1, &[1; 9000]).unwrap();
    for (nq, k) in [
        (4100usize, 1usize),
        (4100, 37),
        (4100, 100),
        (9000, 3),
        (1, 9000),
        (2, 5000),
    ] {
        let queries = vec![Matrix::new(&one[..], 1).unwrap(); nq];
        let s = Recording {
            calls: Default::default(),
        };
        let got = s.top_k_batch(&queries, &corpus, k).unwrap();
        let calls = s.calls.into_inner().unwrap();
        // Consecutive blocks covering 0..N, each within the memory bound (or k documents).
        let mut next = 0;
        for (range, len) in &calls {
            assert_eq!(range.start, next, "nq={nq} k={k}: {calls:?}");
            assert!(!range.is_empty());
            assert_eq!(*len, nq * range.len());
            assert!(
                *len <= (1 << 24) || range.len() <= k,
                "nq={nq} k={k}: block of {len} scores"
            );
            next = range.end;
        }
        assert_eq!(next, 9000, "nq={nq} k={k}");
        assert!(
            calls.len() >= nq * 9000 / (1 << 24),
            "nq={nq}: {} blocks",
            calls.len()
        );
        assert_eq!(got.len(), nq);
        let want: Vec<Vec<(usize, f64)>> = (0..5)
            .map(|q| spec_top_k((0..9000).map(|j| (j, f64::from(made_up_score(q, j)))), k))
            .collect();
        for (q, hits) in got.iter().enumerate() {
            assert_eq!(hit_pairs(hits), want[q % 5], "nq={nq} k={k} query {q}");
        }
    }
}
