//! `tilemaxsim corpus compress|decode` and the description of compressed files: encode an
//! exact corpus with a codec (with a progress bar), decode one back to an exact corpus.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser;
use indicatif::ProgressBar;
use tilemaxsim::codec::{
    Codec, CodecSpec, CompressedCorpus, PqOptions, ResidualOptions, compress, plaid_num_centroids,
};
use tilemaxsim::corpus::FiniteCheck;
use tilemaxsim::{DType, OwnedElements};

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
    /// Seed of the k-means sampling and k-means++ (the same seed gives the same file).
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
    /// The compressed corpus file to write.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

pub fn compress_cmd(a: CompressArgs) -> Result<()> {
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
    // One bar, re-labelled per stage (k-means iterations, then tokens encoded).
    let bar: Mutex<Option<(String, ProgressBar)>> = Mutex::new(None);
    let progress = |stage: &str, done: usize, total: usize| {
        let Ok(mut b) = bar.lock() else { return };
        if b.as_ref().is_none_or(|(s, _)| s != stage) {
            if let Some((_, old)) = b.take() {
                old.finish_and_clear();
            }
            *b = Some((
                stage.to_string(),
                crate::progress::bar(total as u64, stage, false),
            ));
        }
        if let Some((_, pb)) = b.as_ref() {
            pb.set_position(done as u64);
        }
    };
    let started = std::time::Instant::now();
    let c = compress(&corpus, &spec, a.seed, &progress)?;
    let c = match a.rerank_k {
        Some(k) => c.with_rerank_k(k)?,
        None => c,
    };
    if let Ok(mut b) = bar.lock()
        && let Some((_, pb)) = b.take()
    {
        pb.finish_and_clear();
    }
    c.save(&a.out)?;
    eprintln!("compressed in {:.1} s", started.elapsed().as_secs_f64());
    describe(&a.out, &c, Some(corpus.size_bytes()), false);
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// The compressed corpus.
    #[arg(long)]
    corpus: PathBuf,
    /// Element type of the exact corpus written (f32, f16, bf16).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    #[arg(long, short = 'o')]
    out: PathBuf,
}

pub fn decode_cmd(a: DecodeArgs) -> Result<()> {
    let c = CompressedCorpus::open(&a.corpus).context("cannot open the compressed corpus")?;
    let d = c.decode()?;
    let d = if a.dtype == DType::F32 {
        d
    } else {
        let v = d.tokens().to_f32_vec();
        let mut e = tilemaxsim::Corpus::new(
            OwnedElements::from_f32(&v, a.dtype),
            d.dim(),
            d.offsets().to_vec(),
        )?;
        if let Some(ids) = d.doc_ids() {
            e = e.with_doc_ids(ids.to_vec())?;
        }
        e
    };
    d.check_finite()?;
    d.save(&a.out)?;
    println!(
        "{}: {} documents, {} tokens decoded to {}",
        a.out.display(),
        d.len(),
        d.num_tokens(),
        a.dtype
    );
    Ok(())
}

/// Describe a compressed corpus file; `exact_bytes` is the size of the corpus it came from,
/// `scanned` whether its values were just scanned (`corpus info --check-finite`).
pub fn describe(path: &Path, c: &CompressedCorpus, exact_bytes: Option<usize>, scanned: bool) {
    let min = (0..c.len()).map(|j| c.doc_len(j)).min().unwrap_or(0);
    println!("{}", path.display());
    println!("  codec      {}", c.codec().describe());
    crate::corpus_cmd::print_shape(c.len(), c.num_tokens(), min, c.max_doc_len(), c.dim());
    let bpt = c.codec().bytes_per_token(c.dim());
    print!(
        "  size       {:.1} MB of codes, {bpt} bytes per token (f16: {})",
        c.size_bytes() as f64 / 1e6,
        2 * c.dim()
    );
    match exact_bytes {
        Some(b) => println!(
            ", {:.1}× smaller than the exact corpus",
            b as f64 / c.size_bytes() as f64
        ),
        None => println!(),
    }
    let params = match c.codec() {
        Codec::Residual(r) => {
            (r.centroids().len() * 2 + (r.bucket_cutoffs().len() + r.bucket_weights().len()) * 4)
                as f64
        }
        Codec::Pq(p) => (p.codebooks().len() * 4) as f64,
        _ => 0.0,
    };
    if params > 0.0 {
        println!("  codebooks  {:.2} MB", params / 1e6);
    }
    println!(
        "  ids        {}",
        if c.doc_ids().is_some() {
            "yes"
        } else {
            "no (0-based indices are used)"
        }
    );
    let values = match (c.codec(), c.finite_check()) {
        (Codec::Fp8, _) if scanned => "no NaN code (scanned now)",
        (Codec::Fp8, FiniteCheck::Scanned) => "no NaN code",
        (Codec::Fp8, FiniteCheck::Recorded) => "no NaN code when written (recorded in the file)",
        (Codec::Fp8, _) => "not checked (--check-finite)",
        // Ids, scales and codebooks are checked whenever a file is opened.
        _ => "every code decodes to finite values (checked on open)",
    };
    println!("  values     {values}");
    if let Some(k) = c.rerank_k() {
        println!("  rerank     top {k} by default (recorded at compression)");
    }
}

/// Import a PLAID index directory (fast-plaid or colbert-ai) without re-encoding.
pub fn import_plaid(dir: &Path, ids: Option<&PathBuf>, out: &Path) -> Result<()> {
    if !dir.is_dir() {
        bail!("--plaid {}: not a directory", dir.display());
    }
    let kind = tilemaxsim::codec::plaid::detect(dir)?;
    let spinner = crate::progress::spinner(&format!("reading the {kind:?} index"));
    let mut c = tilemaxsim::codec::plaid::import_plaid(dir)?;
    if let Some(ids) = ids {
        c = c
            .with_doc_ids(tilemaxsim::corpus::import::read_ids(ids)?)
            .with_context(|| format!("ids from {}", ids.display()))?;
    }
    spinner.set_message(format!("writing {}", out.display()));
    c.save(out)?;
    spinner.finish_and_clear();
    describe(out, &c, None, false);
    Ok(())
}
