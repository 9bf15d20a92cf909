//! `tilemaxsim index build`: compress a corpus with the residual codec (on a GPU when there is
//! one), build its IVF and write the index directory, with a progress bar per stage and each
//! stage's time and the files' sizes at the end.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser;
use tilemaxsim::codec::{Buckets, ResidualOptions, plaid::import_plaid};
use tilemaxsim::index::{BuildOptions, Defaults, Probe, Source, build};
use tilemaxsim::{AnyCorpus, CorpusKind, Device};

use crate::load;

#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// The corpus: exact (compressed by the build), or residual codes (`corpus compress
    /// --codec residual`), taken as they are.
    #[arg(long, required_unless_present = "plaid", conflicts_with = "plaid")]
    corpus: Option<PathBuf>,
    /// A PLAID index directory (fast-plaid or colbert-ai): its codes taken as they are.
    #[arg(long)]
    plaid: Option<PathBuf>,
    /// One document id per line, replacing the ids stored in the corpus (the run files of
    /// `index search` name documents by them).
    #[arg(long)]
    doc_ids: Option<PathBuf>,
    /// The index directory to create (new, or an empty directory).
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// Residual bits per dimension (1, 2 or 4), for an exact --corpus.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::PossibleValuesParser::new(["1", "2", "4"]).map(|s| s.parse::<u32>().unwrap_or(2)))]
    nbits: u32,
    /// Coarse centroids K (default PLAID's 2^floor(log2(16·sqrt(T)))).
    #[arg(long)]
    centroids: Option<usize>,
    /// k-means iterations (4, as colbert-ai and fast-plaid).
    #[arg(long, default_value_t = 4)]
    kmeans_iters: usize,
    /// How the residual bucket cutoffs and weights are fitted to the held-out residuals.
    /// lloyd-max: the least squared error; quantiles: colbert-ai's and fast-plaid's.
    #[arg(long, default_value = "lloyd-max")]
    buckets: Buckets,
    /// Seed of the k-means sampling and seeding (the same seed gives the same index).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where to compress: auto (a GPU when one is usable), cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: Device,
    /// With compressed codes or --plaid: the exact corpus (the same documents) to keep in the
    /// index for reranking.
    #[arg(long)]
    exact: Option<PathBuf>,
    /// Do not keep the exact tokens (an exact --corpus is kept by default, for reranking).
    #[arg(long)]
    no_exact: bool,
    /// IVF probes per query token recorded as the index's default.
    #[arg(long)]
    nprobe: Option<usize>,
    /// Candidates rescored on their codes, recorded as the default.
    #[arg(long)]
    ndocs: Option<usize>,
    /// Candidates of the exact second stage, recorded as the default.
    #[arg(long)]
    rerank_k: Option<usize>,
    #[command(flatten)]
    check: load::CheckArgs,
}

pub fn run(a: BuildArgs) -> Result<()> {
    if a.no_exact && a.exact.is_some() {
        bail!("--exact and --no-exact contradict each other");
    }
    let base = Defaults::default();
    let options = BuildOptions {
        residual: ResidualOptions {
            nbits: a.nbits,
            centroids: a.centroids,
            kmeans_iters: a.kmeans_iters,
            buckets: a.buckets,
            ..Default::default()
        },
        seed: a.seed,
        device: a.device,
        keep_exact: !a.no_exact,
        defaults: Defaults {
            probe: Probe {
                nprobe: a.nprobe.unwrap_or(base.probe.nprobe),
                ndocs: a.ndocs.unwrap_or(base.probe.ndocs),
            },
            rerank_k: a.rerank_k.unwrap_or(base.rerank_k),
        },
    };
    let source: Box<dyn AnyCorpus> = match (&a.corpus, &a.plaid) {
        (Some(p), _) => load::any(p, a.doc_ids.as_ref(), a.check)?,
        (None, Some(dir)) => {
            let c = import_plaid(dir).with_context(|| format!("--plaid {}", dir.display()))?;
            match &a.doc_ids {
                Some(ids) => Box::new(c.with_doc_ids(tilemaxsim::corpus::import::read_ids(ids)?)?),
                None => Box::new(c),
            }
        }
        (None, None) => bail!("give --corpus or --plaid"),
    };
    let exact = match &a.exact {
        Some(p) => Some(load::corpus(p, None, a.check).context("the --exact corpus")?),
        None => None,
    };
    let source = match source.kind() {
        CorpusKind::Exact(c) => {
            if exact.is_some() {
                bail!("--exact is for compressed codes; an exact --corpus is kept as it is");
            }
            eprintln!(
                "compressing {} tokens: residual nbits = {}, K = {}",
                c.num_tokens(),
                a.nbits,
                a.centroids
                    .unwrap_or_else(|| tilemaxsim::codec::plaid_num_centroids(c.num_tokens()))
            );
            Source::Exact(c)
        }
        CorpusKind::Compressed(c) => Source::Compressed(c),
    };
    let stages = crate::progress::Stages::default();
    let progress = |stage: &str, done: usize, total: usize| stages.update(stage, done, total);
    let started = Instant::now();
    let report = build(source, exact.as_ref(), &a.out, &options, &progress)?;
    stages.finish();
    let compressed = if report.compressed_on.is_empty() {
        "codes taken as they are".to_string()
    } else {
        format!(
            "compressed on {} in {:.2} s ({})",
            report.compressed_on,
            report.compress_s,
            stages.times(
                started,
                started + std::time::Duration::from_secs_f64(report.compress_s)
            )
        )
    };
    eprintln!(
        "index {}: {compressed}; IVF in {:.2} s, built while the files were written (and flushed to disk) in {:.2} s: codes {}B, IVF {}B, exact {}B",
        a.out.display(),
        report.ivf_s,
        report.write_s,
        crate::progress::si(report.codes_bytes as f64),
        crate::progress::si(report.ivf_bytes as f64),
        crate::progress::si(report.exact_bytes as f64),
    );
    Ok(())
}
