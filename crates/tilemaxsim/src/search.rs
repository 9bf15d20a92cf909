//! Top-k search over a corpus prepared once. [`Searcher`] is what a search engine calls;
//! [`ScorerSearch`] runs it on any [`Scorer`] (the CPU engine, the reference), and with the
//! `cuda` feature `cuda::GpuIndex` keeps the corpus on one or more GPUs (resident or streamed).
//! [`searcher_for`] picks one for a [`Device`].

use crate::codec::CompressedCorpus;
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::Scorer;
use crate::topk::{Hit, top_k_of};
use crate::{Device, ReferenceScorer, cpu_scorer};

/// The `k` best documents of a fixed corpus for each query, best first, ties to the lower
/// document index.
pub trait Searcher: Send + Sync {
    fn name(&self) -> String;
    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>>;
}

/// Search with a [`Scorer`] over a corpus in host memory.
pub struct ScorerSearch<'c> {
    pub scorer: Box<dyn Scorer>,
    pub corpus: &'c Corpus,
}

impl Searcher for ScorerSearch<'_> {
    fn name(&self) -> String {
        self.scorer.name()
    }
    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        self.scorer.top_k_batch(queries, self.corpus, k)
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

/// GPU search settings (ignored on the CPU).
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// GPUs to shard the corpus over; empty: the one the [`Device`] names (GPU 0 for `Auto`).
    pub devices: Vec<usize>,
    pub residency: Residency,
    /// Token bytes per streamed chunk (a document larger than this is a chunk of its own).
    pub chunk_bytes: usize,
    /// Streamed shards: page-lock the corpus's memory where it lies (an in-memory corpus, or a
    /// memory map the host can hold) so chunks are copied to the GPU straight from it. When
    /// that is off or fails (a map larger than RAM), chunks are staged through pinned buffers
    /// by the host cores, which can be slower than the copy engine.
    pub pin_corpus: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            devices: Vec::new(),
            residency: Residency::Auto,
            chunk_bytes: 256 << 20,
            pin_corpus: true,
        }
    }
}

/// A searcher for `device` over `corpus`, plus a notice when `Auto` fell back to the CPU.
pub fn searcher_for<'c>(
    device: Device,
    corpus: &'c Corpus,
    options: &SearchOptions,
) -> Result<(Box<dyn Searcher + 'c>, Option<String>)> {
    let host = |scorer: Box<dyn Scorer>| -> Box<dyn Searcher + 'c> {
        Box::new(ScorerSearch { scorer, corpus })
    };
    match device {
        Device::Cpu => Ok((host(Box::new(cpu_scorer()?)), None)),
        Device::Reference => Ok((host(Box::new(ReferenceScorer)), None)),
        Device::Cuda(n) => Ok((gpu_searcher(corpus, n, options)?, None)),
        Device::Auto => match gpu_searcher(corpus, 0, options) {
            Ok(s) => Ok((s, None)),
            Err(e @ Error::DeviceUnavailable(_)) => Ok((
                host(Box::new(cpu_scorer()?)),
                Some(format!("no usable GPU ({e}); searching on the CPU")),
            )),
            Err(e) => Err(e),
        },
    }
}

#[cfg(feature = "cuda")]
fn gpu_searcher<'c>(
    corpus: &'c Corpus,
    ordinal: usize,
    options: &SearchOptions,
) -> Result<Box<dyn Searcher + 'c>> {
    let mut o = options.clone();
    if o.devices.is_empty() {
        o.devices = vec![ordinal];
    }
    Ok(Box::new(crate::cuda::GpuIndex::new(corpus, &o)?))
}

#[cfg(not(feature = "cuda"))]
fn gpu_searcher<'c>(
    _corpus: &'c Corpus,
    ordinal: usize,
    _options: &SearchOptions,
) -> Result<Box<dyn Searcher + 'c>> {
    Err(Error::DeviceUnavailable(format!(
        "cuda:{ordinal}: this build has no CUDA engine (feature `cuda` off)"
    )))
}

/// Search over a compressed corpus, optionally in two stages: the compressed top-`k'` of each
/// query rescored exactly against the same documents of an exact corpus, keeping the best `k`.
pub struct CompressedSearch<'c> {
    scorer: Box<dyn Scorer>,
    corpus: &'c CompressedCorpus,
    rerank: Option<Rerank<'c>>,
}

/// The exact second stage of a [`CompressedSearch`].
pub struct Rerank<'c> {
    /// The same documents, in the same order, uncompressed.
    pub exact: &'c Corpus,
    /// Candidates per query taken from the compressed stage (`k'`).
    pub candidates: usize,
    /// The scorer of the exact stage (any device).
    pub scorer: Box<dyn Scorer>,
}

impl<'c> CompressedSearch<'c> {
    /// Search `corpus` with `scorer`, reranked by `rerank` when given (checked to hold the same
    /// number of documents with the same d, and `k' ≥ 1`).
    pub fn new(
        scorer: Box<dyn Scorer>,
        corpus: &'c CompressedCorpus,
        rerank: Option<Rerank<'c>>,
    ) -> Result<Self> {
        if let Some(r) = &rerank {
            if r.exact.len() != corpus.len() || r.exact.dim() != corpus.dim() {
                return Err(Error::Argument(format!(
                    "the rerank corpus has {} documents of d = {}, the compressed one {} of d = {}; \
                     they must be the same documents",
                    r.exact.len(),
                    r.exact.dim(),
                    corpus.len(),
                    corpus.dim()
                )));
            }
            if r.candidates == 0 {
                return Err(Error::Argument(
                    "rerank candidates k' must be at least 1".into(),
                ));
            }
        }
        Ok(CompressedSearch {
            scorer,
            corpus,
            rerank,
        })
    }
}

impl Searcher for CompressedSearch<'_> {
    fn name(&self) -> String {
        match &self.rerank {
            Some(r) => format!(
                "{} on {} codes, top-{} reranked exactly by {}",
                self.scorer.name(),
                self.corpus.codec().name(),
                r.candidates,
                r.scorer.name()
            ),
            None => format!(
                "{} on {} codes",
                self.scorer.name(),
                self.corpus.codec().name()
            ),
        }
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        let Some(r) = &self.rerank else {
            return self.scorer.top_k_batch_compressed(queries, self.corpus, k);
        };
        let first =
            self.scorer
                .top_k_batch_compressed(queries, self.corpus, r.candidates.max(k))?;
        queries
            .iter()
            .zip(first)
            .map(|(q, hits)| {
                let docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
                let scores = r.scorer.score_subset(*q, r.exact, &docs)?;
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

/// The scorer for compressed corpora on `device`, plus a notice when it is not the device
/// asked for. Compressed corpora are scored on the CPU (decode + SIMD kernel) or by the
/// reference; the fused GPU kernels are not built yet, so `cuda` is an error and `auto` the CPU.
pub fn compressed_scorer_for(device: Device) -> Result<(Box<dyn Scorer>, Option<String>)> {
    match device {
        Device::Cpu => Ok((Box::new(cpu_scorer()?), None)),
        Device::Reference => Ok((Box::new(ReferenceScorer), None)),
        Device::Cuda(n) => Err(Error::DeviceUnavailable(format!(
            "cuda:{n}: compressed corpora have no GPU scorer yet; use --device cpu"
        ))),
        Device::Auto => {
            let notice = (crate::gpu_count() > 0).then(|| {
                "compressed corpora are scored on the CPU (no GPU kernel yet)".to_string()
            });
            Ok((Box::new(cpu_scorer()?), notice))
        }
    }
}
