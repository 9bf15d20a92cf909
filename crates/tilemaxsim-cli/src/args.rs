//! The corpus and device options every command that searches a corpus file takes (`search`,
//! `serve`): the file (exact or compressed), its ids, the value check, an exact second stage,
//! the device or GPUs, and how GPUs hold it.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tilemaxsim::{AnyCorpus, CodecKind, Corpus, Device, Rerank, Residency, SearchOptions};

use crate::load;

#[derive(clap::Args, Debug, Clone)]
pub struct CorpusArgs {
    /// Corpus file: exact, or compressed (`tilemaxsim corpus compress`, or a PLAID import).
    /// Required (`serve` takes `--index` instead).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// One document id per line, replacing the ids stored in the corpus file.
    #[arg(long)]
    pub doc_ids: Option<PathBuf>,
    #[command(flatten)]
    pub check: load::CheckArgs,
    /// With a compressed --corpus: rescore its top --rerank-k documents exactly against this
    /// exact corpus (the same documents, in the same order), keeping the best k.
    #[arg(long)]
    pub rerank: Option<PathBuf>,
    /// Candidates per query taken from the compressed stage for --rerank (k'; at least k).
    /// With `serve --index`: those of the index's exact stage (0: none). [default: the depth
    /// recorded in the compressed file or index, else 100]
    #[arg(long)]
    pub rerank_k: Option<usize>,
    #[arg(long, default_value = "auto")]
    pub device: Device,
    /// GPUs to shard the corpus over: `all` or a list like `0,1` (implies a GPU device).
    #[arg(long)]
    pub devices: Option<String>,
    /// How each GPU holds its shard: auto (resident when it fits, else streamed), resident,
    /// or stream (from host memory, in chunks). [default: auto]
    #[arg(long)]
    pub residency: Option<Residency>,
    /// MiB of GPU memory a streamed chunk's tokens may take (two are in flight). [default: 256]
    #[arg(long)]
    pub chunk_mb: Option<usize>,
}

/// The files these options name, opened: the corpus, and the exact corpus of the second stage.
pub struct Opened {
    pub corpus: Box<dyn AnyCorpus>,
    pub rerank: Option<Corpus>,
}

impl CorpusArgs {
    /// Open the corpus file (either format) with its ids, values checked unless
    /// `--no-check-finite`, and the `--rerank` corpus.
    pub fn open(&self) -> Result<Opened> {
        if self.rerank_k == Some(0) {
            bail!("--rerank-k must be at least 1");
        }
        if self.rerank_k.is_some() && self.rerank.is_none() {
            bail!("--rerank-k needs --rerank EXACT (the exact corpus of the second stage)");
        }
        let Some(path) = &self.corpus else {
            bail!("--corpus FILE is required");
        };
        let corpus = load::any(path, self.doc_ids.as_ref(), self.check)?;
        let rerank = match &self.rerank {
            None => None,
            Some(_) if corpus.codec_kind() == CodecKind::Exact => {
                bail!("--rerank needs a compressed --corpus (made by `tilemaxsim corpus compress`)")
            }
            Some(p) => Some(load::corpus(p, None, self.check).context("the --rerank corpus")?),
        };
        Ok(Opened { corpus, rerank })
    }

    /// The device and search options these flags name (checked, GPUs listed), without the
    /// second stage ([`CorpusArgs::with_rerank`] adds it once the files are open).
    pub fn search_setup(&self) -> Result<(Device, SearchOptions<'static>)> {
        if self.chunk_mb == Some(0) {
            bail!("--chunk-mb must be at least 1");
        }
        let mut device = self.device;
        let mut options = SearchOptions {
            residency: self.residency.unwrap_or_default(),
            chunk_bytes: self.chunk_mb.unwrap_or(DEFAULT_CHUNK_MB) << 20,
            ..Default::default()
        };
        if let Some(list) = &self.devices {
            options.devices = parse_devices(list)?;
            if !matches!(device, Device::Cuda(_)) {
                device = Device::Cuda(options.devices[0]);
            }
        }
        Ok((device, options))
    }

    /// `options` with the exact second stage of `opened`, when there is one: k' from
    /// `--rerank-k`, else the compressed file's recorded depth, else 100. With `k` (the run's
    /// top-k), a k' below it is raised to it with a notice.
    pub fn with_rerank<'c>(
        &self,
        mut options: SearchOptions<'c>,
        opened: &'c Opened,
        k: Option<usize>,
    ) -> SearchOptions<'c> {
        if let Some(exact) = &opened.rerank {
            let recorded = match opened.corpus.kind() {
                tilemaxsim::CorpusKind::Compressed(c) => c.rerank_k(),
                tilemaxsim::CorpusKind::Exact(_) => None,
            };
            let mut candidates = self.rerank_k.or(recorded).unwrap_or(DEFAULT_RERANK_K);
            if let Some(k) = k.filter(|&k| candidates < k) {
                eprintln!(
                    "notice: --rerank-k {candidates} is below -k {k}; reranking the top {k} instead"
                );
                candidates = k;
            }
            options.rerank = Some(Rerank { exact, candidates });
        }
        options
    }
}

/// k' when neither `--rerank-k` nor the file gives one.
const DEFAULT_RERANK_K: usize = 100;

/// MiB of tokens per streamed chunk when `--chunk-mb` is not given.
const DEFAULT_CHUNK_MB: usize = 256;

impl CorpusArgs {
    /// A notice when GPU-only flags were given but the search runs on `engine` (a searcher's
    /// name) on the CPU, where they have no effect.
    pub fn cpu_notice(&self, engine: &str) -> Option<String> {
        let given: Vec<&str> = [
            ("--residency", self.residency.is_some()),
            ("--chunk-mb", self.chunk_mb.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect();
        (!given.is_empty() && !engine.starts_with("cuda")).then(|| {
            format!(
                "{} only apply to GPU search; on the CPU ({engine}) they have no effect",
                given.join(" and ")
            )
        })
    }
}

/// `all` (every visible GPU) or a comma-separated list of ordinals.
pub fn parse_devices(s: &str) -> Result<Vec<usize>> {
    if s == "all" {
        let n = tilemaxsim::gpu_count();
        if n == 0 {
            bail!("--devices all: no usable GPU");
        }
        return Ok((0..n).collect());
    }
    s.split(',')
        .map(|d| {
            d.trim()
                .parse()
                .with_context(|| format!("--devices: {d:?} is not a GPU number"))
        })
        .collect()
}
