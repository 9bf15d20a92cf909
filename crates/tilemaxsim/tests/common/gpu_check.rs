//! The GPU tests' shared checks: a scorer's scores of queries against a corpus, NaN-poisoned
//! first, against the float64 reference (`Expected`).
use super::Expected;
use tilemaxsim::cuda::CudaScorer;
use tilemaxsim::{Corpus, Docs, Matrix, OwnedElements, Scorer};

/// Random cases per test: `default`, or fewer from TILEMAXSIM_GPU_CASES (compute-sanitizer slows
/// kernels by 10-100x).
pub fn gpu_cases(default: usize) -> usize {
    std::env::var("TILEMAXSIM_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One query against every document of `corpus`: the scorer picks `want`, and its scores match
/// the float64 reference.
pub fn check_one_query(
    gpu: &CudaScorer,
    label: &str,
    q: &OwnedElements,
    corpus: &Corpus,
    want: tilemaxsim::cuda::Kernel,
) {
    let qm = Matrix::new(q.as_elements(), corpus.dim()).unwrap();
    let dq = gpu.upload_queries(&[qm], corpus.dim()).unwrap();
    let dc = gpu.upload(corpus).unwrap();
    assert_eq!(gpu.kernel_for(&dq, &dc), want, "{label}");
    let exp = Expected::new(&[qm], corpus);
    check(gpu, label, &[qm], corpus, Docs::All, &exp);
}

/// `gpu`'s scores of `queries` against `docs` of `corpus` through `score_into` with a
/// NaN-poisoned output, checked against `exp` (the float64 reference of every pair, computed
/// once per case for all the scorers checked on it).
pub fn check(
    gpu: &CudaScorer,
    label: &str,
    queries: &[Matrix<'_>],
    corpus: &Corpus,
    docs: Docs<'_>,
    exp: &Expected,
) {
    let n = docs.count(corpus);
    let mut out = vec![f32::NAN; queries.len() * n];
    gpu.score_into(queries, corpus, docs.clone(), &mut out)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let idx: Vec<usize> = (0..n).map(|i| docs.index(i)).collect();
    for qi in 0..queries.len() {
        exp.assert_close(label, qi, &idx, &out[qi * n..(qi + 1) * n]);
    }
}

/// `check` over every document, then over the candidate list `list`.
pub fn check_all_and_list(
    gpu: &CudaScorer,
    label: &str,
    queries: &[Matrix<'_>],
    corpus: &Corpus,
    list: &[usize],
    exp: &Expected,
) {
    check(gpu, label, queries, corpus, Docs::All, exp);
    let candidates = format!("{label} (candidates)");
    check(gpu, &candidates, queries, corpus, Docs::List(list), exp);
}
