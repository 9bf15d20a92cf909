//! Top-k search over a corpus prepared once, of any codec. [`Searcher`] is what a search
//! engine calls; [`searcher_for`] picks one for a [`Device`] and a corpus: a [`Scorer`] over
//! the corpus in host memory (the CPU engine, the reference, any codec), or with the `cuda`
//! feature `cuda::GpuIndex`, which keeps an exact corpus on one or more GPUs (resident or
//! streamed). Two-stage search is an option of it ([`SearchOptions::rerank`]): the first
//! stage's top `k'` of each query rescored exactly, keeping the best `k`.

use std::sync::Arc;

use crate::codec::CodecKind;
use crate::corpus::{AnyCorpus, Corpus, CorpusKind};
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::Scorer;
use crate::topk::{Hit, top_k_of};
use crate::{Device, scorer_for};

/// The `k` best documents of a fixed corpus for each query, best first, ties to the lower
/// document index; every document when the corpus holds fewer than `k` (the rule of the CLI,
/// the server and Python too). `k = 0` is an error.
pub trait Searcher: Send + Sync {
    fn name(&self) -> String;
    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>>;
}

/// Search with a [`Scorer`] over a corpus in host memory (any codec the scorer supports).
struct ScorerSearch<'c> {
    scorer: Box<dyn Scorer>,
    corpus: &'c dyn AnyCorpus,
}

impl Searcher for ScorerSearch<'_> {
    fn name(&self) -> String {
        match self.corpus.codec_kind() {
            CodecKind::Exact => self.scorer.name(),
            codec => format!("{} on {codec} codes", self.scorer.name()),
        }
    }
    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        self.scorer.top_k_batch(queries, self.corpus, k)
    }
}

/// The exact second stage of a search ([`SearchOptions::rerank`]).
#[derive(Clone, Copy, Debug)]
pub struct Rerank<'c> {
    /// The same documents, in the same order, uncompressed.
    pub exact: &'c Corpus,
    /// Candidates per query taken from the first stage (`k'`; raised to `k` when below it).
    pub candidates: usize,
}

/// A first stage, then its top `k'` rescored exactly. The exact tokens may lie in segments (an
/// index's build and added documents), numbered one after the other.
struct Reranked<'c> {
    first: Box<dyn Searcher + 'c>,
    exact: Vec<&'c Corpus>,
    /// Each segment's first document number, then the number of documents in all.
    starts: Vec<usize>,
    candidates: usize,
    scorer: Arc<dyn Scorer>,
}

impl Reranked<'_> {
    /// The exact scores of `docs` (numbered across the segments) for `q`, in their order.
    fn score(&self, q: Matrix<'_>, docs: &[usize]) -> Result<Vec<f32>> {
        let all = self.starts.last().copied().unwrap_or(0);
        if let Some(j) = docs.iter().find(|&&j| j >= all) {
            return Err(Error::Argument(format!(
                "the first stage gave document {j}; the exact tokens hold {all}"
            )));
        }
        let mut scores = vec![0f32; docs.len()];
        for (exact, w) in self.exact.iter().zip(self.starts.windows(2)) {
            let (at, local): (Vec<usize>, Vec<usize>) = docs
                .iter()
                .enumerate()
                .filter(|&(_, &j)| (w[0]..w[1]).contains(&j))
                .map(|(i, &j)| (i, j - w[0]))
                .unzip();
            if local.is_empty() {
                continue;
            }
            let got = if self.scorer.scores_in_place() {
                self.scorer.score_subset(q, *exact, &local)?
            } else {
                // A device scorer gets only the candidates' rows, not the whole corpus.
                let rows: Vec<Matrix<'_>> = local.iter().map(|&j| exact.doc(j)).collect();
                self.scorer.score(q, &Corpus::from_docs(&rows)?)?
            };
            for (i, score) in at.into_iter().zip(got) {
                scores[i] = score;
            }
        }
        Ok(scores)
    }
}

impl Searcher for Reranked<'_> {
    fn name(&self) -> String {
        format!(
            "{}, top-{} reranked exactly by {}",
            self.first.name(),
            self.candidates,
            self.scorer.name()
        )
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        let first = self.first.search(queries, self.candidates.max(k))?;
        queries
            .iter()
            .zip(first)
            .map(|(q, hits)| {
                let docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
                let scores = self.score(*q, &docs)?;
                Ok(top_k_of(
                    scores
                        .iter()
                        .zip(&docs)
                        .map(|(&score, &doc)| Hit { doc, score }),
                    k,
                ))
            })
            .collect()
    }
}

/// How a GPU holds its shard of the corpus.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Residency {
    /// Resident when it fits in the GPU's free memory (with room for the scores), else streamed.
    #[default]
    Auto,
    /// Always uploaded; an error when it does not fit.
    Resident,
    /// Always streamed from host memory in chunks.
    Stream,
}

impl std::str::FromStr for Residency {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Residency::Auto),
            "resident" => Ok(Residency::Resident),
            "stream" => Ok(Residency::Stream),
            _ => Err(Error::Argument(format!(
                "unknown residency {s:?}: expected auto, resident or stream"
            ))),
        }
    }
}

/// Search settings: the GPUs and how they hold the corpus (ignored on the CPU), and an
/// optional exact second stage.
#[derive(Clone, Debug)]
pub struct SearchOptions<'c> {
    /// GPUs to shard the corpus over; empty: the one the [`Device`] names (GPU 0 for `Auto`).
    pub devices: Vec<usize>,
    pub residency: Residency,
    /// Device bytes a streamed chunk's tokens may take (a document larger than this is a chunk
    /// of its own). Where the GPU stores rows padded past d, a token counts its padded row and
    /// the row at d it is copied in as; two chunks are in flight at once.
    pub chunk_bytes: usize,
    /// Streamed shards: page-lock the corpus's memory where it lies (an in-memory corpus, or a
    /// memory map the host can hold) so chunks are copied to the GPU straight from it. When
    /// that is off or fails (a map larger than RAM), chunks are staged through pinned buffers
    /// by the host cores, which can be slower than the copy engine.
    pub pin_corpus: bool,
    /// Rescore each query's top `k'` exactly against this corpus (the same documents: checked).
    pub rerank: Option<Rerank<'c>>,
}

impl Default for SearchOptions<'_> {
    fn default() -> Self {
        SearchOptions {
            devices: Vec::new(),
            residency: Residency::Auto,
            chunk_bytes: 256 << 20,
            pin_corpus: true,
            rerank: None,
        }
    }
}

/// A searcher for `device` over `corpus` (any codec), plus a notice when it is not on the
/// device asked for (`Auto` without a usable GPU, or a codec the GPU does not score yet). An
/// explicit GPU that cannot score the corpus's codec is an error. The rerank stage, when
/// asked for, scores on the same device.
pub fn searcher_for<'c>(
    device: Device,
    corpus: &'c dyn AnyCorpus,
    options: &SearchOptions<'c>,
) -> Result<(Box<dyn Searcher + 'c>, Option<String>)> {
    let codec = corpus.codec_kind();
    let (first, notice): (Box<dyn Searcher + 'c>, _) = match (device, corpus.kind()) {
        (Device::Cuda(n), kind) => (gpu_searcher(kind, n, options)?, None),
        (Device::Auto, kind) => match gpu_searcher(kind, 0, options) {
            Ok(s) => (s, None),
            Err(e @ Error::DeviceUnavailable(_)) => {
                let scorer = scorer_for(Device::Cpu, codec)?.0;
                let note = format!("no usable GPU ({e}); searching on the CPU");
                (Box::new(ScorerSearch { scorer, corpus }), Some(note))
            }
            Err(e) => return Err(e),
        },
        _ => {
            let (scorer, note) = scorer_for(device, codec)?;
            (Box::new(ScorerSearch { scorer, corpus }), note)
        }
    };
    let (searcher, second) = reranked(first, corpus, options.rerank, device)?;
    Ok((searcher, notice.or(second)))
}

/// Each segment's first document number when segments of these lengths are numbered one after
/// the other, then the number of documents in all.
pub(crate) fn segment_starts(lengths: impl Iterator<Item = usize>) -> Vec<usize> {
    std::iter::once(0)
        .chain(lengths.scan(0, |end, n| {
            *end += n;
            Some(*end)
        }))
        .collect()
}

/// An error unless `exact` holds as many documents as `corpus`, of its d (a rerank stage's
/// tokens must be the searched documents').
pub(crate) fn same_documents(exact: &Corpus, corpus: &dyn AnyCorpus) -> Result<()> {
    if exact.len() != corpus.len() || exact.dim() != corpus.dim() {
        return Err(Error::Argument(format!(
            "the rerank corpus has {} documents of d = {}, the searched one {} of d = {}; \
             they must be the same documents",
            exact.len(),
            exact.dim(),
            corpus.len(),
            corpus.dim()
        )));
    }
    Ok(())
}

/// `first` (a search of `corpus`) followed by the exact second stage `rerank` when there is one
/// (scored on `device`), plus a notice when that stage is not on the device asked for.
pub(crate) fn reranked<'c>(
    first: Box<dyn Searcher + 'c>,
    corpus: &dyn AnyCorpus,
    rerank: Option<Rerank<'c>>,
    device: Device,
) -> Result<(Box<dyn Searcher + 'c>, Option<String>)> {
    let Some(r) = rerank else {
        return Ok((first, None));
    };
    same_documents(r.exact, corpus)?;
    if r.candidates == 0 {
        return Err(Error::Argument(
            "rerank candidates k' must be at least 1".into(),
        ));
    }
    // On a GPU the exact corpus is uploaded once, where it fits; else (or without a GPU for
    // `Auto`) each call's candidates are gathered on the host.
    let ordinal = match device {
        Device::Cuda(n) => Some(n),
        Device::Auto => Some(0),
        Device::Cpu | Device::Reference => None,
    };
    if let Some(ordinal) = ordinal {
        match gpu_exact(r.exact, ordinal) {
            Ok(Some(stage)) => return Ok((stage.into_searcher(first, r.candidates)?, None)),
            Ok(None) | Err(Error::OutOfMemory(_)) => {}
            Err(Error::DeviceUnavailable(_)) if device == Device::Auto => {}
            Err(e) => return Err(e),
        }
    }
    reranked_on_host(first, vec![r.exact], r.candidates, device)
}

/// `first` (a search of documents whose exact tokens are the segments `exact`, numbered one
/// after the other) followed by the exact stage of its top `candidates` (at least 1), each
/// call's candidates scored from host memory by `device`'s scorer; plus that scorer's notice.
pub(crate) fn reranked_on_host<'c>(
    first: Box<dyn Searcher + 'c>,
    exact: Vec<&'c Corpus>,
    candidates: usize,
    device: Device,
) -> Result<(Box<dyn Searcher + 'c>, Option<String>)> {
    let (scorer, notice) = scorer_for(device, CodecKind::Exact)?;
    Ok((
        reranked_by(first, exact, candidates, Arc::from(scorer)),
        notice,
    ))
}

/// `first`'s best `candidates` a query rescored by `scorer` on the exact tokens of `exact`'s
/// segments (as [`reranked_on_host`], with a scorer the caller made, perhaps shared).
pub(crate) fn reranked_by<'c>(
    first: Box<dyn Searcher + 'c>,
    exact: Vec<&'c Corpus>,
    candidates: usize,
    scorer: Arc<dyn Scorer>,
) -> Box<dyn Searcher + 'c> {
    let starts = segment_starts(exact.iter().map(|e| e.len()));
    Box::new(Reranked {
        first,
        exact,
        starts,
        candidates,
        scorer,
    })
}

/// The exact corpus of a rerank stage uploaded to GPU `ordinal` (`None`: this build has no
/// CUDA engine).
#[cfg(feature = "cuda")]
fn gpu_exact(exact: &Corpus, ordinal: usize) -> Result<Option<GpuExactStage>> {
    crate::cuda::GpuExact::new(exact, ordinal).map(|g| Some(GpuExactStage(g)))
}

#[cfg(not(feature = "cuda"))]
fn gpu_exact(_exact: &Corpus, _ordinal: usize) -> Result<Option<GpuExactStage>> {
    Ok(None)
}

/// An exact corpus on a GPU, ready to follow a first stage.
struct GpuExactStage(#[cfg(feature = "cuda")] crate::cuda::GpuExact);

impl GpuExactStage {
    #[cfg(feature = "cuda")]
    fn into_searcher<'c>(
        self,
        first: Box<dyn Searcher + 'c>,
        candidates: usize,
    ) -> Result<Box<dyn Searcher + 'c>> {
        Ok(Box::new(self.0.rerank(first, candidates)?))
    }

    #[cfg(not(feature = "cuda"))]
    fn into_searcher<'c>(
        self,
        first: Box<dyn Searcher + 'c>,
        _candidates: usize,
    ) -> Result<Box<dyn Searcher + 'c>> {
        Ok(first)
    }
}

/// The GPU searcher of a corpus: `GpuIndex` (exact: resident, streamed, sharded) or
/// `GpuCodesIndex` (compressed: resident, streamed, sharded).
#[cfg(feature = "cuda")]
fn gpu_searcher<'c>(
    corpus: CorpusKind<'c>,
    ordinal: usize,
    options: &SearchOptions<'_>,
) -> Result<Box<dyn Searcher + 'c>> {
    let mut o = options.clone();
    if o.devices.is_empty() {
        o.devices = vec![ordinal];
    }
    Ok(match corpus {
        CorpusKind::Exact(c) => Box::new(crate::cuda::GpuIndex::new(c, &o)?),
        CorpusKind::Compressed(c) => Box::new(crate::cuda::GpuCodesIndex::new(c, &o)?),
    })
}

#[cfg(not(feature = "cuda"))]
fn gpu_searcher<'c>(
    _corpus: CorpusKind<'c>,
    ordinal: usize,
    _options: &SearchOptions<'_>,
) -> Result<Box<dyn Searcher + 'c>> {
    Err(Error::DeviceUnavailable(format!(
        "cuda:{ordinal}: this build has no CUDA engine (feature `cuda` off)"
    )))
}
