//! The one scoring API every backend implements, over a corpus of any codec (`&dyn
//! AnyCorpus`: an exact corpus or a compressed one). A backend implements `supports` (which
//! codecs it scores) and `score_into` (scores of a batch of queries against a selection of
//! documents); scoring one query, a candidate subset and top-k are built on it here, once, so
//! every backend behaves the same at the edges.

use crate::codec::CodecKind;
use crate::corpus::AnyCorpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::topk::{Hit, merge_top_k, top_k_of};

/// Which documents of a corpus to score.
#[derive(Clone, Debug)]
pub enum Docs<'a> {
    /// Every document, in order.
    All,
    /// The documents `start..end`, in order.
    Range(std::ops::Range<usize>),
    /// A candidate list (as in re-ranking): any order, repeats allowed.
    List(&'a [usize]),
}

impl Docs<'_> {
    /// How many documents are selected, once checked against `corpus`.
    pub fn count(&self, corpus: &dyn AnyCorpus) -> usize {
        self.count_of(corpus.len())
    }

    /// How many documents are selected from a corpus of `len` documents.
    pub fn count_of(&self, len: usize) -> usize {
        match self {
            Docs::All => len,
            Docs::Range(r) => r.len(),
            Docs::List(l) => l.len(),
        }
    }

    /// The corpus index of the `i`-th selected document.
    #[inline]
    pub fn index(&self, i: usize) -> usize {
        match self {
            Docs::All => i,
            Docs::Range(r) => r.start + i,
            Docs::List(l) => l[i],
        }
    }

    pub(crate) fn check_len(&self, len: usize) -> Result<()> {
        match self {
            Docs::All => Ok(()),
            Docs::Range(r) if r.start > r.end => Err(Error::Argument(format!(
                "document range {}..{} is reversed",
                r.start, r.end
            ))),
            Docs::Range(r) if r.end <= len => Ok(()),
            Docs::Range(r) => Err(Error::DocIndex {
                index: r.end.max(r.start),
                len,
            }),
            Docs::List(l) => match l.iter().find(|&&j| j >= len) {
                Some(&index) => Err(Error::DocIndex { index, len }),
                None => Ok(()),
            },
        }
    }
}

/// Check queries against a corpus of `dim` columns: at least one query, each with at least
/// one token, that d, and finite values (queries are small, so this is always on).
pub fn check_queries(queries: &[Matrix<'_>], dim: usize) -> Result<()> {
    if queries.is_empty() {
        return Err(Error::Argument("no queries given".into()));
    }
    for (i, q) in queries.iter().enumerate() {
        if q.rows() == 0 {
            return Err(Error::EmptyQuery { index: i });
        }
        if q.dim() != dim {
            return Err(Error::DimMismatch {
                what: format!("query {i}"),
                expected: dim,
                got: q.dim(),
            });
        }
        q.check_finite(&format!("query {i}"), 0)?;
    }
    Ok(())
}

/// The `k` best of `n` documents for each of `nq` queries, scoring blocks of documents with
/// `score(range, out)` (`out[q * range.len() + i]`); memory stays bounded.
fn top_k_blocks(
    nq: usize,
    n: usize,
    k: usize,
    mut score: impl FnMut(std::ops::Range<usize>, &mut [f32]) -> Result<()>,
) -> Result<Vec<Vec<Hit>>> {
    if k == 0 {
        return Err(Error::Argument("k must be at least 1".into()));
    }
    let block = (TOP_K_BLOCK_SCORES / nq).max(k).clamp(1, n);
    let mut best: Vec<Vec<Hit>> = vec![Vec::new(); nq];
    let mut scores = alloc_scores(nq * block)?;
    let mut start = 0;
    while start < n {
        let end = (start + block).min(n);
        let out = &mut scores[..nq * (end - start)];
        score(start..end, out)?;
        for (q, hits) in best.iter_mut().enumerate() {
            let row = &out[q * (end - start)..(q + 1) * (end - start)];
            let block_hits = row.iter().enumerate().map(|(i, &s)| Hit {
                doc: start + i,
                score: s,
            });
            merge_top_k(hits, block_hits, k);
        }
        start = end;
    }
    Ok(best)
}

/// Allocate a result buffer, reporting failure as an error rather than aborting.
pub fn alloc_scores(len: usize) -> Result<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::OutOfMemory(format!(
            "{len} scores ({} MB)",
            len.saturating_mul(4) / 1_000_000
        ))
    })?;
    v.resize(len, 0.0);
    Ok(v)
}

/// Largest number of scores a top-k pass holds at once (per batch, all queries together).
const TOP_K_BLOCK_SCORES: usize = 1 << 24;

/// MaxSim scoring: `score(Q, D) = Σ_i max_j ⟨q_i, d_j⟩`, accumulated in f32, over a corpus of
/// any codec the backend [`supports`](Scorer::supports).
pub trait Scorer: Send + Sync {
    /// A short name for reports (`cpu-avx512`, `reference-f64`, …).
    fn name(&self) -> String;

    /// Whether this backend scores corpora stored with `codec`. [`crate::scorer_for`] and
    /// [`crate::searcher_for`] ask it before they hand a backend a corpus.
    fn supports(&self, codec: CodecKind) -> bool;

    /// Whether the backend reads a corpus where it lies in host memory (the CPU engine, the
    /// reference), so scoring a candidate subset costs only those documents; a device backend
    /// copies the corpus it is given, so callers give it a gathered subset instead.
    fn scores_in_place(&self) -> bool {
        true
    }

    /// The backend's one job: `out[q * n + i] = score(queries[q], corpus doc docs.index(i))`,
    /// where `n = docs.count(corpus)`. Implementations call [`Scorer::check`] first.
    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn AnyCorpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()>;

    /// Validate the arguments of `score_into`: a codec this backend scores, the queries, the
    /// selection and the output's length.
    fn check(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn AnyCorpus,
        docs: &Docs<'_>,
        out_len: usize,
    ) -> Result<()> {
        let codec = corpus.codec_kind();
        if !self.supports(codec) {
            return Err(Error::DeviceUnavailable(format!(
                "{} does not score {codec} corpora (scorer_for picks a backend that does)",
                self.name()
            )));
        }
        check_queries(queries, corpus.dim())?;
        docs.check_len(corpus.len())?;
        let want = queries.len() * docs.count(corpus);
        if out_len != want {
            return Err(Error::Argument(format!(
                "output has {out_len} elements, expected {want}"
            )));
        }
        Ok(())
    }

    /// Scores of one query against every document: `N` scores.
    fn score(&self, query: Matrix<'_>, corpus: &dyn AnyCorpus) -> Result<Vec<f32>> {
        self.score_batch(&[query], corpus)
    }

    /// Scores of a batch of queries against every document: `Q × N`, row-major by query.
    fn score_batch(&self, queries: &[Matrix<'_>], corpus: &dyn AnyCorpus) -> Result<Vec<f32>> {
        let mut out = alloc_scores(queries.len().saturating_mul(corpus.len()))?;
        self.score_into(queries, corpus, Docs::All, &mut out)?;
        Ok(out)
    }

    /// Scores of one query against a candidate list of documents, in the list's order.
    fn score_subset(
        &self,
        query: Matrix<'_>,
        corpus: &dyn AnyCorpus,
        docs: &[usize],
    ) -> Result<Vec<f32>> {
        let mut out = alloc_scores(docs.len())?;
        self.score_into(&[query], corpus, Docs::List(docs), &mut out)?;
        Ok(out)
    }

    /// The `k` best documents for one query, best first; ties go to the lower doc index.
    fn top_k(&self, query: Matrix<'_>, corpus: &dyn AnyCorpus, k: usize) -> Result<Vec<Hit>> {
        Ok(self
            .top_k_batch(&[query], corpus, k)?
            .pop()
            .unwrap_or_default())
    }

    /// The `k` best documents among `docs` (re-ranking); hits carry corpus indices.
    fn top_k_subset(
        &self,
        query: Matrix<'_>,
        corpus: &dyn AnyCorpus,
        docs: &[usize],
        k: usize,
    ) -> Result<Vec<Hit>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        let scores = self.score_subset(query, corpus, docs)?;
        Ok(top_k_of(
            scores
                .iter()
                .zip(docs)
                .map(|(&s, &d)| Hit { doc: d, score: s }),
            k,
        ))
    }

    /// The `k` best documents for each query (every document when the corpus has fewer). The
    /// corpus is scored in blocks, so memory stays bounded however large `queries.len() × N`
    /// is.
    fn top_k_batch(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn AnyCorpus,
        k: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        check_queries(queries, corpus.dim())?;
        top_k_blocks(queries.len(), corpus.len(), k, |range, out| {
            self.score_into(queries, corpus, Docs::Range(range), out)
        })
    }
}
