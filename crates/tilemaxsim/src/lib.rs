//! # tilemaxsim
//!
//! Exact MaxSim scoring for late-interaction retrieval (ColBERT, ColPali):
//!
//! `score(Q, D) = Σ_{i < Nq} max_{j < Nd} ⟨q_i, d_j⟩`, accumulated in f32.
//!
//! Names used throughout, with the paper's symbols: a *query* is an `Nq × d` matrix of query
//! token embeddings; a *document* is `Nd × d`; a *corpus* holds `B` (here `N`) documents packed
//! into one `T × d` token matrix with `N + 1` offsets, never padded. Tile sizes follow the paper:
//! `BQ` query tokens × `BN` document tokens per tile.
//!
//! ```
//! use tilemaxsim::{Corpus, Matrix, Scorer, CpuScorer};
//!
//! // Two documents of 2 and 1 tokens, d = 2.
//! let corpus = Corpus::from_lengths(vec![1.0f32, 0.0, 0.0, 1.0, 0.5, 0.25], 2, &[2, 1])?;
//! let query_data = [1.0f32, 0.0, 0.0, 1.0];
//! let query = Matrix::new(&query_data[..], 2)?;
//! let scorer = CpuScorer::new();
//! let scores = scorer.score(query, &corpus)?;
//! assert_eq!(scores, vec![2.0, 0.75]); // doc 1: max 0.5 for q_0, 0.25 for q_1
//! let best = scorer.top_k(query, &corpus, 1)?;
//! assert_eq!(best[0].doc, 0);
//! # Ok::<(), tilemaxsim::Error>(())
//! ```
//!
//! Where things live: [`matrix`] (element types, borrowed matrices), [`corpus`] (the packed
//! corpus, its file format, imports), [`scorer`] (the [`Scorer`] trait every backend
//! implements), [`reference`] (the float64 oracle), [`cpu`] (the SIMD CPU engine), `cuda`
//! (the GPU engine: NVRTC-compiled kernels behind the same trait, and `cuda::GpuIndex`: sharded,
//! resident or streamed GPU search), [`search`] (the [`Searcher`] trait: top-k over a corpus
//! prepared once), [`topk`] (deterministic top-k).

pub mod codec;
pub mod corpus;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
pub mod eval;
pub mod index;
pub mod matrix;
pub mod reference;
pub mod scorer;
pub mod search;
pub mod topk;

pub use codec::{Codec, CodecKind, CodecSpec, CompressedCorpus};
pub use corpus::{AnyCorpus, Corpus, CorpusKind};
pub use cpu::{CpuScorer, Isa};
pub use error::{Error, Result};
pub use matrix::{DType, Elements, Matrix, OwnedElements};
pub use reference::ReferenceScorer;
pub use scorer::{Docs, Scorer};
pub use search::{Rerank, Residency, SearchOptions, Searcher, searcher_for};
pub use topk::Hit;

/// Where to score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The best available device: a GPU when one is usable, else the CPU.
    Auto,
    /// The SIMD CPU engine.
    Cpu,
    /// The float64 reference (slow; for checking).
    Reference,
    /// CUDA GPU number N.
    Cuda(usize),
}

impl std::str::FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Device::Auto),
            "cpu" => Ok(Device::Cpu),
            "reference" | "ref" => Ok(Device::Reference),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    Error::Argument(format!(
                        "unknown device {s:?}: expected auto, cpu, reference, cuda or cuda:N"
                    ))
                }),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Auto => f.write_str("auto"),
            Device::Cpu => f.write_str("cpu"),
            Device::Reference => f.write_str("reference"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A scorer for `device` that scores corpora stored with `codec`, plus a notice when it is not
/// the device asked for (for the CLI to show): `Auto` takes a GPU when one is usable and
/// [supports](Scorer::supports) the codec, else the CPU. An explicit GPU that does not support
/// the codec is an error naming the codec.
pub fn scorer_for(device: Device, codec: CodecKind) -> Result<(Box<dyn Scorer>, Option<String>)> {
    match device {
        Device::Cpu => Ok((Box::new(cpu_scorer()?), None)),
        Device::Reference => Ok((Box::new(ReferenceScorer), None)),
        Device::Cuda(n) => {
            let gpu = gpu_scorer(n)?;
            if gpu.supports(codec) {
                Ok((gpu, None))
            } else {
                Err(Error::DeviceUnavailable(format!(
                    "{} has no kernels for {codec} corpora yet; use --device cpu (or auto)",
                    gpu.name()
                )))
            }
        }
        Device::Auto => match gpu_scorer(0) {
            Ok(s) if s.supports(codec) => Ok((s, None)),
            Ok(s) => Ok((
                Box::new(cpu_scorer()?),
                Some(format!(
                    "{} has no kernels for {codec} corpora yet; scoring on the CPU",
                    s.name()
                )),
            )),
            Err(e) => Ok((
                Box::new(cpu_scorer()?),
                Some(format!("no usable GPU ({e}); scoring on the CPU")),
            )),
        },
    }
}

/// Compress `corpus` with `spec` on `device` (seeded: the same corpus, spec, seed and device
/// give the same file), and the device it ran on (`cpu`, `cuda:N`). `Auto` takes GPU 0 when
/// one is usable, else the CPU; `Reference` is the CPU.
pub fn compress_on(
    device: Device,
    corpus: &Corpus,
    spec: &CodecSpec,
    seed: u64,
    progress: codec::Progress<'_>,
) -> Result<(CompressedCorpus, String)> {
    compress_into(device, corpus, spec, seed, progress, None)
}

/// [`compress_on`], the codes also handed to `sink` as they are made, by a compression that
/// makes them in runs (the residual codec on a GPU; see [`codec::CodesSink`]).
pub fn compress_into(
    device: Device,
    corpus: &Corpus,
    spec: &CodecSpec,
    seed: u64,
    progress: codec::Progress<'_>,
    sink: Option<&dyn codec::CodesSink>,
) -> Result<(CompressedCorpus, String)> {
    let gpu = match device {
        Device::Cpu | Device::Reference => None,
        Device::Cuda(n) => Some(n),
        Device::Auto => gpu_usable(0).then_some(0),
    };
    match gpu {
        Some(n) => {
            compress_gpu(n, corpus, spec, seed, progress, sink).map(|c| (c, format!("cuda:{n}")))
        }
        None => codec::compress(corpus, spec, seed, progress).map(|c| (c, "cpu".into())),
    }
}

#[cfg(feature = "cuda")]
fn gpu_usable(ordinal: usize) -> bool {
    cuda::check_available(ordinal).is_ok()
}

#[cfg(not(feature = "cuda"))]
fn gpu_usable(_ordinal: usize) -> bool {
    false
}

#[cfg(feature = "cuda")]
fn compress_gpu(
    ordinal: usize,
    corpus: &Corpus,
    spec: &CodecSpec,
    seed: u64,
    progress: codec::Progress<'_>,
    sink: Option<&dyn codec::CodesSink>,
) -> Result<CompressedCorpus> {
    let chunk = cuda::CHUNK_BYTES;
    cuda::compress_in_chunks(ordinal, corpus, spec, seed, chunk, progress, sink)
}

#[cfg(not(feature = "cuda"))]
fn compress_gpu(
    ordinal: usize,
    _corpus: &Corpus,
    _spec: &CodecSpec,
    _seed: u64,
    _progress: codec::Progress<'_>,
    _sink: Option<&dyn codec::CodesSink>,
) -> Result<CompressedCorpus> {
    Err(Error::DeviceUnavailable(format!(
        "cuda:{ordinal}: this build has no CUDA engine (feature `cuda` off)"
    )))
}

/// How many GPUs the engine can use here (0 without the driver or the `cuda` feature).
pub fn gpu_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        cuda::devices().map_or(0, |d| d.len())
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

#[cfg(feature = "cuda")]
fn gpu_scorer(ordinal: usize) -> Result<Box<dyn Scorer>> {
    Ok(Box::new(cuda::CudaScorer::new(ordinal)?))
}

#[cfg(not(feature = "cuda"))]
fn gpu_scorer(ordinal: usize) -> Result<Box<dyn Scorer>> {
    Err(Error::DeviceUnavailable(format!(
        "cuda:{ordinal}: this build has no CUDA engine (feature `cuda` off)"
    )))
}

/// The CPU scorer: the best flavour, or the one named by `TILEMAXSIM_CPU_KERNEL`.
pub(crate) fn cpu_scorer() -> Result<CpuScorer> {
    match std::env::var(cpu::KERNEL_ENV) {
        Ok(name) if !name.is_empty() => CpuScorer::with_isa(name.parse()?),
        _ => Ok(CpuScorer::new()),
    }
}
