//! Every CPU flavour against the float64 reference on random shapes: the d values that matter
//! (1, odd, 64 … 1024), Nq from 1 to 1100, documents from 1 to 2048 tokens, every dtype for
//! corpus and query independently, all documents, ranges and candidate lists. Outputs are
//! poisoned with NaN before each call, so an unwritten score fails.

mod common;

use common::*;
use proptest::prelude::*;
use tilemaxsim::{CpuScorer, DType, Docs, Isa, Matrix, OwnedElements, Scorer};

const DIMS: [usize; 8] = [1, 3, 64, 96, 127, 128, 768, 1024];
const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// Cap on Q × Nq × T × d per case so the reference stays fast.
const WORK: usize = 40_000_000;

fn scorers() -> Vec<(String, CpuScorer)> {
    let mut v: Vec<(String, CpuScorer)> = Isa::available()
        .into_iter()
        .map(|i| (i.to_string(), CpuScorer::with_isa(i).unwrap()))
        .collect();
    v.push(("1 thread".into(), CpuScorer::new().threads(1).unwrap()));
    v.push(("3 threads".into(), CpuScorer::new().threads(3).unwrap()));
    v
}

#[derive(Debug, Clone)]
struct Case {
    dim: usize,
    corpus_dtype: DType,
    query_dtype: DType,
    lengths: Vec<usize>,
    nqs: Vec<usize>,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..DIMS.len(),
        0..3usize,
        0..3usize,
        prop::collection::vec(
            prop_oneof![4 => 1..40usize, 2 => 40..300usize, 1 => 1..2049usize],
            1..12,
        ),
        prop::collection::vec(prop_oneof![6 => 1..40usize, 1 => 40..1101usize], 1..4),
        any::<u64>(),
    )
        .prop_map(|(d, cd, qd, mut lengths, mut nqs, seed)| {
            let dim = DIMS[d];
            // Keep the reference's work bounded: shrink lengths, then queries, as d grows.
            while nqs.iter().sum::<usize>() * lengths.iter().sum::<usize>() * dim > WORK {
                if let Some(l) = lengths.iter_mut().max().filter(|l| **l > 1) {
                    *l = (*l / 2).max(1);
                } else if let Some(q) = nqs.iter_mut().max().filter(|q| **q > 1) {
                    *q = (*q / 2).max(1);
                } else {
                    break;
                }
            }
            Case {
                dim,
                corpus_dtype: DTYPES[cd],
                query_dtype: DTYPES[qd],
                lengths,
                nqs,
                seed,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn cpu_matches_reference(c in case()) {
        let mut r = rng(c.seed);
        let corpus = random_corpus(&mut r, &c.lengths, c.dim, c.corpus_dtype, 1.0);
        let qs: Vec<OwnedElements> = c.nqs.iter().map(|&nq| random_query(&mut r, nq, c.dim, c.query_dtype, 1.0)).collect();
        let queries: Vec<Matrix<'_>> = qs.iter().map(|q| Matrix::new(q.as_elements(), c.dim).unwrap()).collect();
        let n = corpus.len();
        let list: Vec<usize> = (0..n + 3).map(|i| (i * 7 + c.seed as usize) % n).rev().collect();
        let selections: [(&str, Docs<'_>); 3] =
            [("all", Docs::All), ("range", Docs::Range(n / 3..n)), ("list", Docs::List(&list))];
        for (name, scorer) in scorers() {
            for (sel_name, docs) in &selections {
                let count = docs.count(&corpus);
                let mut out = vec![f32::NAN; queries.len() * count];
                scorer.score_into(&queries, &corpus, docs.clone(), &mut out).unwrap();
                let idx: Vec<usize> = (0..count).map(|i| docs.index(i)).collect();
                for (qi, q) in queries.iter().enumerate() {
                    assert_close(&format!("{name} {sel_name} q{qi} {c:?}"), *q, &corpus, &idx, &out[qi * count..(qi + 1) * count]);
                }
            }
        }
    }
}
