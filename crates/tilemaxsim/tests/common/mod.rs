//! Shared helpers for the integration tests: seeded random data and the tolerance that an f32
//! evaluation of MaxSim is held to against the float64 reference; and for the mutation fuzzers,
//! safetensors files taken apart and put back together around a rewritten header.
#![allow(dead_code)]

pub mod cpu_scorers;
#[cfg(feature = "cuda")]
pub mod gpu_check;
pub mod index;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tilemaxsim::reference::{maxsim_abs_f64, maxsim_f64};
use tilemaxsim::{Corpus, CpuScorer, DType, Isa, Matrix, OwnedElements, ReferenceScorer, Scorer};

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// `rows × dim` values uniform in [-scale, scale].
pub fn random_values(rng: &mut StdRng, rows: usize, dim: usize, scale: f32) -> Vec<f32> {
    (0..rows * dim)
        .map(|_| rng.random_range(-1.0f32..1.0) * scale)
        .collect()
}

pub fn random_corpus(
    rng: &mut StdRng,
    lengths: &[usize],
    dim: usize,
    dtype: DType,
    scale: f32,
) -> Corpus {
    let total: usize = lengths.iter().sum();
    let v = random_values(rng, total, dim, scale);
    Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), dim, lengths).expect("valid corpus")
}

pub fn random_query(
    rng: &mut StdRng,
    nq: usize,
    dim: usize,
    dtype: DType,
    scale: f32,
) -> OwnedElements {
    OwnedElements::from_f32(&random_values(rng, nq, dim, scale), dtype)
}

/// Views of owned query matrices of `dim` columns.
pub fn matrices(qs: &[OwnedElements], dim: usize) -> Vec<Matrix<'_>> {
    qs.iter()
        .map(|q| Matrix::new(q.as_elements(), dim).expect("whole rows"))
        .collect()
}

/// Bound on |f32 score − f64 score|: an f32 dot product of length d in any order (FMA or not)
/// errs by at most about d·u·Σ|q·d|, and summing Nq maxima adds Nq·u·Σ|max|; we allow twice
/// that, plus a floor for tiny magnitudes.
pub fn tolerance(query: Matrix<'_>, doc: Matrix<'_>) -> f64 {
    let u = f32::EPSILON as f64 / 2.0;
    let abs = maxsim_abs_f64(query, doc);
    // Below f32's normal range each operation errs by up to half the smallest subnormal
    // instead of a relative u: allow that per operation, too.
    let ops = (query.dim() + query.rows() + 2) as f64;
    let subnormal = ops * query.rows() as f64 * f64::from(f32::from_bits(1)) / 2.0;
    2.0 * (ops * u * abs + subnormal)
}

/// Assert `scores[i]` matches the reference for `docs[i]` of `corpus`.
pub fn assert_close(
    label: &str,
    query: Matrix<'_>,
    corpus: &Corpus,
    docs: &[usize],
    scores: &[f32],
) {
    assert_eq!(scores.len(), docs.len(), "{label}: wrong number of scores");
    for (i, (&j, &s)) in docs.iter().zip(scores).enumerate() {
        let doc = corpus.doc(j);
        let want = maxsim_f64(query, doc);
        let tol = tolerance(query, doc);
        assert!(
            s.is_finite() && (s as f64 - want).abs() <= tol,
            "{label}: score[{i}] (doc {j}, {} tokens) = {s}, reference {want}, tolerance {tol:e}",
            doc.rows()
        );
    }
}

/// Every CPU flavour this machine has, plus the float64 reference.
pub fn all_scorers() -> Vec<Box<dyn Scorer>> {
    let mut v: Vec<Box<dyn Scorer>> = Isa::available()
        .into_iter()
        .map(|i| Box::new(CpuScorer::with_isa(i).expect("available flavour")) as Box<dyn Scorer>)
        .collect();
    v.push(Box::new(ReferenceScorer));
    v
}

/// The float64 reference for every (query, document) pair of a corpus, computed once (on all
/// cores) so that many scorers and many call paths can be checked against it cheaply. Holds
/// the same numbers [`assert_close`] computes: [`maxsim_f64`] and [`tolerance`].
pub struct Expected {
    n: usize,
    /// `want[q * n + j]`, `tol[q * n + j]`: query `q`, document `j`.
    want: Vec<f64>,
    tol: Vec<f64>,
    doc_lens: Vec<usize>,
}

impl Expected {
    pub fn new(queries: &[Matrix<'_>], corpus: &Corpus) -> Self {
        let n = corpus.len();
        let pairs: Vec<(usize, usize)> = (0..queries.len())
            .flat_map(|q| (0..n).map(move |j| (q, j)))
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        let chunk = pairs.len().div_ceil(threads).max(1);
        let results: Vec<(f64, f64)> = std::thread::scope(|s| {
            let handles: Vec<_> = pairs
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .map(|&(q, j)| {
                                let doc = corpus.doc(j);
                                (maxsim_f64(queries[q], doc), tolerance(queries[q], doc))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("reference thread"))
                .collect()
        });
        Expected {
            n,
            want: results.iter().map(|r| r.0).collect(),
            tol: results.iter().map(|r| r.1).collect(),
            doc_lens: (0..n).map(|j| corpus.doc_len(j)).collect(),
        }
    }

    /// The reference score of query `q` against document `j`.
    pub fn want(&self, q: usize, j: usize) -> f64 {
        self.want[q * self.n + j]
    }

    /// Assert `scores[i]` matches the reference for query `q` and document `docs[i]`, within
    /// the tolerance of [`assert_close`] (and finite, so a NaN-poisoned unwritten score fails).
    pub fn assert_close(&self, label: &str, q: usize, docs: &[usize], scores: &[f32]) {
        assert_eq!(scores.len(), docs.len(), "{label}: wrong number of scores");
        for (i, (&j, &s)) in docs.iter().zip(scores).enumerate() {
            let (want, tol) = (self.want[q * self.n + j], self.tol[q * self.n + j]);
            assert!(
                s.is_finite() && (s as f64 - want).abs() <= tol,
                "{label}: query {q} score[{i}] (doc {j}, {} tokens) = {s}, reference {want}, \
                 tolerance {tol:e}",
                self.doc_lens[j]
            );
        }
    }
}

/// `len` NaNs: an output buffer in which any element a scorer fails to write stays NaN.
pub fn poisoned(len: usize) -> Vec<f32> {
    vec![f32::NAN; len]
}

/// Top-k straight from the specification, independent of the library's `topk` module: a full
/// sort by score descending (IEEE comparison, so -0 and +0 tie), ties to the lower index.
pub fn spec_top_k(scored: impl IntoIterator<Item = (usize, f64)>, k: usize) -> Vec<(usize, f64)> {
    let mut v: Vec<(usize, f64)> = scored.into_iter().collect();
    v.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .expect("no NaN scores")
            .then(a.0.cmp(&b.0))
    });
    v.truncate(k);
    v
}

/// Hits as (doc, score) pairs, for comparing with [`spec_top_k`].
pub fn hit_pairs(hits: &[tilemaxsim::Hit]) -> Vec<(usize, f64)> {
    hits.iter().map(|h| (h.doc, f64::from(h.score))).collect()
}

/// Two corpora hold the same documents, bit for bit (dtype, d, offsets, ids, token bytes).
pub fn assert_same_corpus(label: &str, back: &Corpus, c: &Corpus) {
    assert_eq!(back.dtype(), c.dtype(), "{label}");
    assert_eq!(back.dim(), c.dim(), "{label}");
    assert_eq!(back.len(), c.len(), "{label}");
    assert_eq!(back.num_tokens(), c.num_tokens(), "{label}");
    assert_eq!(back.max_doc_len(), c.max_doc_len(), "{label}");
    assert_eq!(back.offsets(), c.offsets(), "{label}");
    assert_eq!(back.doc_ids(), c.doc_ids(), "{label}");
    assert!(
        back.tokens().elements().as_bytes() == c.tokens().elements().as_bytes(),
        "{label}: token bytes differ"
    );
    for j in 0..c.len() {
        assert!(
            back.doc(j).elements().as_bytes() == c.doc(j).elements().as_bytes(),
            "{label}: document {j} differs"
        );
    }
}

/// i64 values as little-endian bytes (a safetensors tensor's data).
pub fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Open without the value scan (for files that hold NaN or infinities on purpose).
pub fn open_unchecked(path: &std::path::Path) -> Corpus {
    tilemaxsim::corpus::OpenOptions::new()
        .check_finite(false)
        .open(path)
        .unwrap()
}

/// A safetensors file from a header (any JSON, valid or not) and the data after it.
pub fn raw_file(header: &Value, data: &[u8]) -> Vec<u8> {
    let mut h = serde_json::to_vec(header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut f = (h.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(&h);
    f.extend_from_slice(data);
    f
}

/// A file's header as JSON and its data, when it parses that far.
pub fn split(bytes: &[u8]) -> Option<(Value, Vec<u8>)> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    let header = serde_json::from_slice(bytes.get(8..8usize.checked_add(n)?)?).ok()?;
    Some((header, bytes[8 + n..].to_vec()))
}

/// Numbers that break assumptions: zero, one off, sizes that overflow when multiplied or
/// would drive an allocation, the largest of each width.
pub fn nasty_number(r: &mut StdRng, near: u64) -> Value {
    let choices: [Value; 14] = [
        json!(0),
        json!(near.saturating_sub(1)),
        json!(near.saturating_add(1)),
        json!(near.saturating_mul(2)),
        json!(1u64 << 31),
        json!(1u64 << 32),
        json!((1u64 << 32) + 1),
        json!(1u64 << 62),
        json!(u64::MAX / 2),
        json!(u64::MAX),
        json!(-1),
        json!(i64::MIN),
        json!(1.5),
        json!("7"),
    ];
    choices[r.random_range(0..choices.len())].clone()
}

/// A corpus of unit-norm random tokens (what ColBERT models produce), stored as `dtype`.
pub fn unit_corpus(seed: u64, lengths: &[usize], dim: usize, dtype: DType) -> Corpus {
    let mut r = rng(seed);
    let total: usize = lengths.iter().sum();
    let mut v = random_values(&mut r, total, dim, 1.0);
    for t in v.chunks_exact_mut(dim) {
        let n = t.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        t.iter_mut().for_each(|x| *x /= n);
    }
    Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), dim, lengths).unwrap()
}

/// The GPU scorer of device 0, or `None` with a notice where no GPU can be used (an error
/// instead when TILEMAXSIM_REQUIRE_GPU is set, as on the device).
#[cfg(feature = "cuda")]
pub fn gpu() -> Option<tilemaxsim::cuda::CudaScorer> {
    match tilemaxsim::cuda::CudaScorer::new(0) {
        Ok(s) => Some(s),
        Err(e) => {
            assert!(
                std::env::var_os("TILEMAXSIM_REQUIRE_GPU").is_none(),
                "TILEMAXSIM_REQUIRE_GPU is set but: {e}"
            );
            eprintln!("NOTICE: no usable GPU ({e}); GPU test skipped");
            None
        }
    }
}
