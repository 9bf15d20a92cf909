//! `tilemaxsim corpus compress`: encode an exact corpus with a codec, on the CPU or a GPU, with a
//! progress bar (and its ETA) per training and encoding stage.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::builder::TypedValueParser;
use tilemaxsim::Device;
use tilemaxsim::codec::{Buckets, CodecSpec, PqOptions, ResidualOptions, plaid_num_centroids};

use super::show;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodecName {
    /// ColBERTv2/PLAID: centroid id + nbits-per-dimension residual buckets.
    Residual,
    /// Product quantization: M one-byte codes (K = 256 per sub-space).
    Pq,
    /// int8 with a symmetric scale per token.
    Int8,
    /// fp8 e4m3 with a scale per token.
    Fp8,
}

#[derive(clap::Args, Debug)]
pub struct CompressArgs {
    /// The exact corpus to compress.
    #[arg(long)]
    corpus: PathBuf,
    #[arg(long, value_enum)]
    codec: CodecName,
    /// Residual: bits per dimension (1, 2 or 4).
    #[arg(long, default_value_t = 2, value_parser = clap::builder::PossibleValuesParser::new(["1", "2", "4"]).map(|s| s.parse::<u32>().unwrap_or(2)))]
    nbits: u32,
    /// Residual: coarse centroids K (default PLAID's 2^floor(log2(16·sqrt(T)))).
    #[arg(long)]
    centroids: Option<usize>,
    /// PQ: sub-spaces M (8, 16, 32 or 64; must divide d).
    #[arg(long, default_value_t = 16, value_parser = clap::builder::PossibleValuesParser::new(["8", "16", "32", "64"]).map(|s| s.parse::<usize>().unwrap_or(16)))]
    m: usize,
    /// k-means iterations (default: 4 for residual as colbert-ai/fast-plaid, 10 for PQ).
    #[arg(long)]
    kmeans_iters: Option<usize>,
    /// Residual: how the bucket cutoffs and weights are fitted to the held-out residuals.
    /// lloyd-max: the least squared error; quantiles: colbert-ai's and fast-plaid's.
    #[arg(long, default_value = "lloyd-max")]
    buckets: Buckets,
    /// Seed of the k-means sampling and seeding (the same seed gives the same file).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Scale every token to unit L2 norm before encoding (the residual codec needs unit-norm
    /// tokens, as ColBERT's encoders output them).
    #[arg(long)]
    normalize: bool,
    /// Record this rerank depth k' in the file: searches that rerank it exactly (`search
    /// --rerank`, `Corpus.load(..., rerank=)`) take its top k' unless told otherwise.
    #[arg(long)]
    rerank_k: Option<usize>,
    /// Where to train and encode: auto (a GPU when one is usable), cpu, cuda or cuda:N. The
    /// same seed gives the same file on the same device; a GPU's k-means rounds points to f16,
    /// so its codes can differ from the CPU's.
    #[arg(long, default_value = "auto")]
    device: Device,
    /// The compressed corpus file to write.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

pub fn run(a: CompressArgs) -> Result<()> {
    let corpus = crate::load::corpus(
        &a.corpus,
        None,
        crate::load::CheckArgs {
            no_check_finite: false,
        },
    )?;
    if a.rerank_k == Some(0) {
        bail!("--rerank-k must be at least 1");
    }
    let corpus = if a.normalize {
        corpus.normalized()?
    } else {
        corpus
    };
    let spec = match a.codec {
        CodecName::Residual => CodecSpec::Residual(ResidualOptions {
            nbits: a.nbits,
            centroids: a.centroids,
            kmeans_iters: a.kmeans_iters.unwrap_or(4),
            buckets: a.buckets,
            ..Default::default()
        }),
        CodecName::Pq => CodecSpec::Pq(PqOptions {
            m: a.m,
            kmeans_iters: a.kmeans_iters.unwrap_or(10),
            ..Default::default()
        }),
        CodecName::Int8 => CodecSpec::Int8,
        CodecName::Fp8 => CodecSpec::Fp8,
    };
    if a.codec == CodecName::Residual {
        let k = a
            .centroids
            .unwrap_or_else(|| plaid_num_centroids(corpus.num_tokens()));
        eprintln!("residual codec: nbits = {}, K = {k} centroids", a.nbits);
    }
    // One bar, re-labelled per stage (k-means iterations, then tokens encoded); each stage's
    // wall time is reported at the end.
    let stages = crate::progress::Stages::default();
    let progress = |stage: &str, done: usize, total: usize| stages.update(stage, done, total);
    let started = Instant::now();
    let (c, ran_on) = tilemaxsim::compress_on(a.device, &corpus, &spec, a.seed, &progress)?;
    let finished = Instant::now();
    let c = match a.rerank_k {
        Some(k) => c.with_rerank_k(k)?,
        None => c,
    };
    stages.finish();
    c.save(&a.out)?;
    eprintln!(
        "compressed on {ran_on} in {:.2} s ({}), saved in {:.2} s",
        (finished - started).as_secs_f64(),
        stages.times(started, finished),
        finished.elapsed().as_secs_f64()
    );
    let extra = show::Extra {
        exact_bytes: Some(corpus.size_bytes()),
        ..Default::default()
    };
    show::corpus(&a.out, &c, &extra);
    Ok(())
}
