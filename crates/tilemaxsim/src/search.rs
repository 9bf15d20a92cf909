//! Top-k search over a corpus prepared once. [`Searcher`] is what a search engine calls;
//! [`ScorerSearch`] runs it on any [`Scorer`] (the CPU engine, the reference), and with the
//! `cuda` feature `cuda::GpuIndex` keeps the corpus on one or more GPUs (resident or streamed).
//! [`searcher_for`] picks one for a [`Device`].

use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::Scorer;
use crate::topk::Hit;
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
