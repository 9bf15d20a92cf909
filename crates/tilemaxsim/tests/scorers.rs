//! Every CPU scorer against the float64 reference.
//!
//! Scorers: each flavour of `Isa::available()`, and `CpuScorer::new()` on pools of 1 and 3
//! threads (deterministic tests add the reference scorer itself). Property tests draw
//! d ∈ {1, 3, 64, 96, 127, 128, 768, 1024}, Nq from 1 to 1100 (mostly small), documents of
//! 1 to 2048 tokens (1-token and 2048-token documents on purpose), f32/f16/bf16 for corpus and
//! queries independently, and check every entry point: `score_into` (outputs NaN-poisoned
//! first, so an unwritten score fails) over `Docs::All`, `Docs::Range`, `Docs::List` (repeats,
//! any order), `score`, `score_batch`, `score_subset`, and `top_k`, `top_k_batch`,
//! `top_k_subset` against a full sort. Deterministic tests cover huge and tiny magnitudes,
//! all-negative similarities, a query equal to a document and the largest shapes; ties and
//! top-k order are in tests/top_k.rs.

mod common;

use common::cpu_scorers::{cpu_scorers, every_scorer};
use common::*;
use proptest::prelude::*;
use rand::Rng;
use rand::rngs::StdRng;
use tilemaxsim::{Corpus, DType, Docs, Isa, Matrix, OwnedElements, Scorer};

const DIMS: [usize; 8] = [1, 3, 64, 96, 127, 128, 768, 1024];
const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// Cap on Σ Nq × T × d per property case, so the reference (and five scorers) stay fast.
const WORK: usize = 48 << 20;

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
