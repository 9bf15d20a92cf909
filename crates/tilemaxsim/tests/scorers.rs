//! Every CPU scorer against the float64 reference.
//!
//! Scorers: each flavour of `Isa::available()`, and `CpuScorer::new()` on pools of 1 and 3
//! threads (deterministic tests add the reference scorer itself). Property tests draw
//! d ∈ {1, 3, 64, 96, 127, 128, 768, 1024}, Nq from 1 to 1100 (mostly small), documents of
//! 1 to 2048 tokens (1-token and 2048-token documents on purpose), f32/f16/bf16 for corpus and
//! queries independently, and check every entry point: `score_into` (outputs NaN-poisoned
//! first, so an unwritten score fails) over `Docs::All`, `Docs::Range`, `Docs::List` (repeats,
//! any order), `score`, `score_batch`, `score_subset`, and `top_k`, `top_k_batch`,
//! `top_k_subset` against a full sort. Deterministic tests cover exact ties, huge and tiny
//! magnitudes, all-negative similarities, a query equal to a document, the largest shapes, and
//! `top_k_batch` over several blocks.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use common::*;
use proptest::prelude::*;
use rand::Rng;
use rand::rngs::StdRng;
use tilemaxsim::reference::maxsim_f64;
use tilemaxsim::{
    Corpus, CpuScorer, DType, Docs, Isa, Matrix, OwnedElements, ReferenceScorer, Scorer,
};

const DIMS: [usize; 8] = [1, 3, 64, 96, 127, 128, 768, 1024];
const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// Cap on Σ Nq × T × d per property case, so the reference (and five scorers) stay fast.
const WORK: usize = 48 << 20;

/// The CPU scorers under test, made once (each `threads(n)` starts a pool).
fn cpu_scorers() -> &'static [(String, CpuScorer)] {
    static SCORERS: OnceLock<Vec<(String, CpuScorer)>> = OnceLock::new();
    SCORERS.get_or_init(|| {
        let mut v: Vec<(String, CpuScorer)> = Isa::available()
            .into_iter()
            .map(|i| (format!("cpu-{i}"), CpuScorer::with_isa(i).unwrap()))
            .collect();
        assert!(v.iter().any(|(_, s)| s.isa() == Isa::Portable));
        v.push((
            "cpu-default-1-thread".into(),
            CpuScorer::new().threads(1).unwrap(),
        ));
        v.push((
            "cpu-default-3-threads".into(),
            CpuScorer::new().threads(3).unwrap(),
        ));
        v
    })
}

/// The CPU scorers plus the float64 reference scorer.
fn every_scorer() -> Vec<(&'static str, &'static dyn Scorer)> {
    static REFERENCE: ReferenceScorer = ReferenceScorer;
    let mut v: Vec<(&'static str, &'static dyn Scorer)> = cpu_scorers()
        .iter()
        .map(|(n, s)| (n.as_str(), s as &dyn Scorer))
        .collect();
    v.push(("reference", &REFERENCE));
    v
}

/// Corpus scores of one scorer, `Q × N`, through `score_into` with a poisoned output.
fn score_all(s: &dyn Scorer, queries: &[Matrix<'_>], corpus: &Corpus) -> Vec<f32> {
    let mut out = poisoned(queries.len() * corpus.len());
    s.score_into(queries, corpus, Docs::All, &mut out).unwrap();
    out
}

fn assert_bits_eq(label: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{label}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits(),
            "{label}: element {i} is {g}, expected {w} bit for bit"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Case {
    dim: usize,
    corpus_dtype: DType,
    query_dtype: DType,
    lengths: Vec<usize>,
    nqs: Vec<usize>,
    /// Raw picks, reduced modulo the corpus size in the test.
    range: (usize, usize),
    list: Vec<usize>,
    k: usize,
    seed: u64,
}

fn doc_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => Just(1usize),
        6 => 2..32usize,
        3 => 32..300usize,
        2 => 300..2048usize,
        1 => Just(2048usize),
    ]
}

fn query_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        12 => 1..=32usize,
        3 => 33..=300usize,
        1 => 301..=1100usize,
        1 => Just(1100usize),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        (0..DIMS.len(), 0..3usize, 0..3usize),
        prop::collection::vec(doc_len(), 1..10),
        prop::collection::vec(query_len(), 1..5),
        any::<bool>(),
        (any::<usize>(), any::<usize>()),
        prop::collection::vec(any::<usize>(), 0..24),
        any::<usize>(),
        any::<u64>(),
    )
        .prop_map(
            |((d, cd, qd), mut lengths, mut nqs, keep_docs, range, list, k, seed)| {
                let dim = DIMS[d];
                // Bound the work: halve the longest document (or the longest query) until it
                // fits. Which goes first alternates, so both long documents with large d and
                // large Nq survive in some cases.
                let halve = |v: &mut Vec<usize>| match v.iter_mut().max() {
                    Some(x) if *x > 1 => {
                        *x /= 2;
                        true
                    }
                    _ => false,
                };
                while nqs.iter().sum::<usize>() * lengths.iter().sum::<usize>() * dim > WORK {
                    let (first, second) = if keep_docs {
                        (&mut nqs, &mut lengths)
                    } else {
                        (&mut lengths, &mut nqs)
                    };
                    if !(halve(first) || halve(second)) {
                        break;
                    }
                }
                Case {
                    dim,
                    corpus_dtype: DTYPES[cd],
                    query_dtype: DTYPES[qd],
                    lengths,
                    nqs,
                    range,
                    list,
                    k,
                    seed,
                }
            },
        )
}

fn check_case(c: &Case) {
    let mut r = rng(c.seed);
    let corpus = random_corpus(&mut r, &c.lengths, c.dim, c.corpus_dtype, 1.0);
    let owned: Vec<OwnedElements> = c
        .nqs
        .iter()
        .map(|&nq| random_query(&mut r, nq, c.dim, c.query_dtype, 1.0))
        .collect();
    let queries = matrices(&owned, c.dim);
    let n = corpus.len();
    let nq = queries.len();
    let expected = Expected::new(&queries, &corpus);

    let list: Vec<usize> = c.list.iter().map(|&x| x % n).collect();
    let (a, b) = (c.range.0 % (n + 1), c.range.1 % (n + 1));
    let range = a.min(b)..a.max(b);
    let k = 1 + c.k % (n + 2); // 1 ..= N + 2
    let all_idx: Vec<usize> = (0..n).collect();
    let selections: [(&str, Docs<'_>); 3] = [
        ("all", Docs::All),
        ("range", Docs::Range(range.clone())),
        ("list", Docs::List(&list)),
    ];

    let mut by_isa: Vec<(Isa, &str, Vec<f32>)> = Vec::new();
    for (name, s) in cpu_scorers() {
        let label = format!("{name} {c:?}");
        // score_into over each selection, poisoned; every path must agree bit for bit with
        // the corpus-wide scores (the same arithmetic per pair, whatever the batching).
        let full = score_all(s, &queries, &corpus);
        for q in 0..nq {
            expected.assert_close(
                &format!("{label} all"),
                q,
                &all_idx,
                &full[q * n..(q + 1) * n],
            );
        }
        for (sel, docs) in &selections {
            let count = docs.count(&corpus);
            let idx: Vec<usize> = (0..count).map(|i| docs.index(i)).collect();
            let mut out = poisoned(nq * count);
            s.score_into(&queries, &corpus, docs.clone(), &mut out)
                .unwrap();
            for q in 0..nq {
                let row = &out[q * count..(q + 1) * count];
                expected.assert_close(&format!("{label} {sel}"), q, &idx, row);
                let same: Vec<f32> = idx.iter().map(|&j| full[q * n + j]).collect();
                assert_bits_eq(&format!("{label} {sel} q{q} vs all"), row, &same);
            }
        }
        assert_bits_eq(
            &format!("{label} score_batch"),
            &s.score_batch(&queries, &corpus).unwrap(),
            &full,
        );
        for (q, &query) in queries.iter().enumerate() {
            let row = &full[q * n..(q + 1) * n];
            assert_bits_eq(
                &format!("{label} score q{q}"),
                &s.score(query, &corpus).unwrap(),
                row,
            );
            let sub = s.score_subset(query, &corpus, &list).unwrap();
            expected.assert_close(&format!("{label} score_subset"), q, &list, &sub);
            let same: Vec<f32> = list.iter().map(|&j| row[j]).collect();
            assert_bits_eq(&format!("{label} score_subset q{q}"), &sub, &same);

            // Top-k against a full sort of this scorer's own scores.
            let own = |docs: &[usize]| -> Vec<(usize, f64)> {
                docs.iter().map(|&j| (j, f64::from(row[j]))).collect()
            };
            assert_eq!(
                hit_pairs(&s.top_k(query, &corpus, k).unwrap()),
                spec_top_k(own(&all_idx), k),
                "{label} top_k q{q} k={k}"
            );
            assert_eq!(
                hit_pairs(&s.top_k_subset(query, &corpus, &list, k).unwrap()),
                spec_top_k(own(&list), k),
                "{label} top_k_subset q{q} k={k}"
            );
        }
        let batch = s.top_k_batch(&queries, &corpus, k).unwrap();
        assert_eq!(batch.len(), nq, "{label}");
        for (q, hits) in batch.iter().enumerate() {
            let own = (0..n).map(|j| (j, f64::from(full[q * n + j])));
            assert_eq!(
                hit_pairs(hits),
                spec_top_k(own, k),
                "{label} top_k_batch q{q} k={k}"
            );
        }
        by_isa.push((s.isa(), name, full));
    }
    // The same flavour gives the same bits however many threads run it.
    for (isa, name, full) in &by_isa {
        for (isa2, name2, full2) in &by_isa {
            if isa == isa2 && name < name2 {
                assert_bits_eq(&format!("{name} vs {name2} {c:?}"), full, full2);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn cpu_scorers_match_the_reference(c in case()) {
        check_case(&c);
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic shapes
// ---------------------------------------------------------------------------------------------

/// Check every CPU scorer (poisoned `score_into`, all documents) against the reference.
fn check_all_scorers(label: &str, queries: &[Matrix<'_>], corpus: &Corpus) {
    let expected = Expected::new(queries, corpus);
    let n = corpus.len();
    let idx: Vec<usize> = (0..n).collect();
    for (name, s) in cpu_scorers() {
        let out = score_all(s, queries, corpus);
        for q in 0..queries.len() {
            expected.assert_close(
                &format!("{name} {label}"),
                q,
                &idx,
                &out[q * n..(q + 1) * n],
            );
        }
    }
}

#[test]
fn largest_shapes() {
    let mut r = rng(101);
    // (d, Nq of each query, document lengths)
    let shapes: [(usize, &[usize], &[usize]); 4] = [
        (1, &[1100, 1, 17], &[2048, 1, 2047, 3]),
        (128, &[1100], &[1, 2048, 7]),
        (1024, &[64, 1], &[2048, 1, 33]),
        (768, &[1100, 31], &[1, 2, 3, 130]),
    ];
    for (dim, nqs, lens) in shapes {
        for (cd, qd) in [(DType::F32, DType::BF16), (DType::F16, DType::F32)] {
            let corpus = random_corpus(&mut r, lens, dim, cd, 1.0);
            let owned: Vec<OwnedElements> = nqs
                .iter()
                .map(|&nq| random_query(&mut r, nq, dim, qd, 1.0))
                .collect();
            let queries = matrices(&owned, dim);
            check_all_scorers(&format!("d={dim} nqs={nqs:?} {cd}/{qd}"), &queries, &corpus);
        }
    }
}

#[test]
fn every_dtype_pair_and_ranges() {
    let mut r = rng(103);
    let dim = 96;
    let lens = [1, 5, 12, 13, 40, 1, 2];
    for cd in DTYPES {
        let corpus = random_corpus(&mut r, &lens, dim, cd, 1.0);
        for qd in DTYPES {
            let owned = [
                random_query(&mut r, 1, dim, qd, 1.0),
                random_query(&mut r, 33, dim, qd, 1.0),
            ];
            let queries = matrices(&owned, dim);
            let expected = Expected::new(&queries, &corpus);
            for (name, s) in every_scorer() {
                let label = format!("{name} {cd} corpus, {qd} query");
                for range in [0..7, 0..0, 7..7, 3..4, 6..7, 2..6] {
                    let idx: Vec<usize> = range.clone().collect();
                    let mut out = poisoned(2 * idx.len());
                    s.score_into(&queries, &corpus, Docs::Range(range.clone()), &mut out)
                        .unwrap();
                    for q in 0..2 {
                        let row = &out[q * idx.len()..(q + 1) * idx.len()];
                        expected.assert_close(&format!("{label} {range:?}"), q, &idx, row);
                    }
                }
                for list in [&[6usize, 0, 6, 6, 3, 0][..], &[], &[4], &[1, 1, 1, 1, 1]] {
                    let mut out = poisoned(2 * list.len());
                    s.score_into(&queries, &corpus, Docs::List(list), &mut out)
                        .unwrap();
                    for q in 0..2 {
                        let row = &out[q * list.len()..(q + 1) * list.len()];
                        expected.assert_close(&format!("{label} {list:?}"), q, list, row);
                    }
                }
            }
        }
    }
}

#[test]
fn query_views_into_a_larger_matrix() {
    // Queries that start at an odd row of a larger f16/bf16/f32 buffer (so their data is not
    // vector-aligned) score like copies.
    let mut r = rng(107);
    let dim = 127;
    for dtype in DTYPES {
        let corpus = random_corpus(&mut r, &[1, 9, 30], dim, dtype, 1.0);
        let big = random_query(&mut r, 40, dim, dtype, 1.0);
        let whole = Matrix::new(big.as_elements(), dim).unwrap();
        let views = [
            whole.rows_range(1..2),
            whole.rows_range(3..40),
            whole.rows_range(0..17),
        ];
        check_all_scorers(&format!("{dtype} views"), &views, &corpus);
    }
}

// ---------------------------------------------------------------------------------------------
// Ties and top-k order
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Magnitudes and signs
// ---------------------------------------------------------------------------------------------

#[test]
fn huge_magnitudes() {
    // Products up to ~1e36 and sums up to ~1e37: finite in f32 (max 3.4e38) but far from 1.
    let mut r = rng(9);
    for (scale, dim, nq) in [
        (1e15f32, 5usize, 9usize),
        (1e15, 64, 3),
        (1e18, 1, 7),
        (1e18, 3, 2),
    ] {
        for dtype in [DType::F32, DType::BF16] {
            // f16 cannot hold these; bf16 has f32's exponent range.
            let corpus = random_corpus(&mut r, &[1, 2, 17, 64], dim, dtype, scale);
            let q = random_query(&mut r, nq, dim, dtype, scale);
            let qm = Matrix::new(q.as_elements(), dim).unwrap();
            let expected = Expected::new(&[qm], &corpus);
            for (name, s) in every_scorer() {
                let label = format!("{name} scale {scale:e} d={dim} {dtype}");
                let mut out = poisoned(4);
                s.score_into(&[qm], &corpus, Docs::All, &mut out).unwrap();
                expected.assert_close(&label, 0, &[0, 1, 2, 3], &out);
                for (j, &x) in out.iter().enumerate() {
                    let want = expected.want(0, j);
                    assert!(
                        ((x as f64 - want) / want).abs() < 1e-4,
                        "{label} doc {j}: {x} vs {want}"
                    );
                }
            }
        }
    }
    // f16 near its own maximum (65504): products ~4e9, beyond f16 but fine in f32.
    let corpus = random_corpus(&mut r, &[1, 3, 20], 8, DType::F16, 60000.0);
    let q = random_query(&mut r, 5, 8, DType::F16, 60000.0);
    let qm = Matrix::new(q.as_elements(), 8).unwrap();
    check_all_scorers("f16 near max", &[qm], &corpus);
}

#[test]
fn tiny_magnitudes_and_subnormal_products() {
    let mut r = rng(11);
    // 1e-20 squared is 1e-40 (subnormal in f32); 1e-19 squared sits at the normal boundary;
    // 1e-23 squared underflows to zero in f32 entirely.
    for (scale, dim) in [(1e-20f32, 33usize), (1e-19, 64), (1e-23, 7), (1e-20, 1)] {
        for dtype in [DType::F32, DType::BF16] {
            let corpus = random_corpus(&mut r, &[1, 2, 17, 64], dim, dtype, scale);
            let q = random_query(&mut r, 9, dim, dtype, scale);
            let qm = Matrix::new(q.as_elements(), dim).unwrap();
            check_all_scorers(&format!("scale {scale:e} d={dim} {dtype}"), &[qm], &corpus);
            if scale >= 1e-20 && dim > 1 {
                // Not flushed to zero: the scores keep subnormal precision.
                for (name, s) in cpu_scorers() {
                    let out = s.score(qm, &corpus).unwrap();
                    assert!(
                        out.iter().all(|&x| x != 0.0),
                        "{name} {scale:e} {dtype}: {out:?}"
                    );
                }
            }
        }
    }
    // f16 subnormals (below 6.1e-5) in the data.
    let corpus = random_corpus(&mut r, &[1, 5, 13], 16, DType::F16, 1e-5);
    let q = random_query(&mut r, 4, 16, DType::F16, 1e-5);
    let qm = Matrix::new(q.as_elements(), 16).unwrap();
    check_all_scorers("f16 subnormals", &[qm], &corpus);
}

#[test]
fn negative_similarities_are_not_clamped_at_zero() {
    // Query components ≥ 0 and document components ≤ 0 (some of each strictly): every
    // similarity is negative, so every maximum and every score is negative.
    let mut r = rng(17);
    for dim in [1usize, 3, 64, 127, 768] {
        for dtype in DTYPES {
            let lens = [1usize, 5, 13, 40];
            let total: usize = lens.iter().sum();
            let cv: Vec<f32> = (0..total * dim)
                .map(|_| -r.random_range(0.01f32..1.0))
                .collect();
            let corpus =
                Corpus::from_lengths(OwnedElements::from_f32(&cv, dtype), dim, &lens).unwrap();
            for nq in [1usize, 3, 17, 33] {
                let qv: Vec<f32> = (0..nq * dim)
                    .map(|_| r.random_range(0.01f32..1.0))
                    .collect();
                let qo = OwnedElements::from_f32(&qv, dtype);
                let qm = Matrix::new(qo.as_elements(), dim).unwrap();
                let expected = Expected::new(&[qm], &corpus);
                for (name, s) in every_scorer() {
                    let label = format!("{name} d={dim} nq={nq} {dtype}");
                    let mut out = poisoned(lens.len());
                    s.score_into(&[qm], &corpus, Docs::All, &mut out).unwrap();
                    expected.assert_close(&label, 0, &[0, 1, 2, 3], &out);
                    assert!(out.iter().all(|&x| x < 0.0), "{label}: {out:?}");
                }
            }
        }
    }
    // Exact: the max over a document's tokens of negative similarities.
    let corpus =
        Corpus::from_lengths(vec![-1.0f32, -0.5, -2.0, -1.0, -4.0, -4.0], 2, &[2, 1]).unwrap();
    let q = [1.0f32, 1.0, 0.5, 0.0];
    for (name, s) in every_scorer() {
        let got = s.score(Matrix::new(&q[..], 2).unwrap(), &corpus).unwrap();
        // Doc 0: q0 → max(-1.5, -3) = -1.5, q1 → max(-0.5, -1) = -0.5. Doc 1: -8 and -2.
        assert_eq!(got, vec![-2.0, -10.0], "{name}");
    }
}

#[test]
fn a_query_identical_to_a_document_finds_it() {
    let mut r = rng(19);
    for dim in [3usize, 64, 128, 768] {
        for dtype in DTYPES {
            // Unit-norm rows: a token's best match is itself (similarity |q_i|² ≈ 1), so the
            // document equal to the query scores ≈ Nq and beats every random document.
            let nq = 6;
            let unit = |r: &mut StdRng, rows: usize| -> Vec<f32> {
                let mut v = random_values(r, rows, dim, 1.0);
                for row in v.chunks_mut(dim) {
                    let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                    row.iter_mut().for_each(|x| *x /= norm);
                }
                v
            };
            let q = unit(&mut r, nq);
            let docs: Vec<Vec<f32>> = (0..6)
                .map(|j| {
                    if j == 2 || j == 4 {
                        q.clone()
                    } else {
                        unit(&mut r, 1 + j * 3)
                    }
                })
                .collect();
            let data: Vec<f32> = docs.iter().flatten().copied().collect();
            let lens: Vec<usize> = docs.iter().map(|d| d.len() / dim).collect();
            let corpus =
                Corpus::from_lengths(OwnedElements::from_f32(&data, dtype), dim, &lens).unwrap();
            let qo = OwnedElements::from_f32(&q, dtype);
            let qm = Matrix::new(qo.as_elements(), dim).unwrap();
            let expected = Expected::new(&[qm], &corpus);
            // Σ_i |q_i|² in f64 of the rounded values.
            let self_score: f64 = qm
                .to_f32_vec()
                .iter()
                .map(|&x| f64::from(x) * f64::from(x))
                .sum();
            assert!((expected.want(0, 2) - self_score).abs() < 1e-9 * self_score);
            for (name, s) in every_scorer() {
                let label = format!("{name} d={dim} {dtype}");
                let scores = s.score(qm, &corpus).unwrap();
                expected.assert_close(&label, 0, &[0, 1, 2, 3, 4, 5], &scores);
                assert_eq!(scores[2].to_bits(), scores[4].to_bits(), "{label}");
                let top: Vec<usize> = s
                    .top_k(qm, &corpus, 3)
                    .unwrap()
                    .iter()
                    .map(|h| h.doc)
                    .collect();
                assert_eq!(
                    &top[..2],
                    &[2, 4],
                    "{label}: the copies first, lower index first"
                );
            }
        }
    }
}
