//! The corpus and device options every command that searches a corpus file takes (`search`,
//! `serve`): the file, its ids, the value check, the device or GPUs, and how GPUs hold it.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tilemaxsim::{Corpus, Device, Residency, SearchOptions};

use crate::load;

#[derive(clap::Args, Debug, Clone)]
pub struct CorpusArgs {
    /// Corpus file.
    #[arg(long)]
    pub corpus: PathBuf,
    /// One document id per line, replacing the ids stored in the corpus file.
    #[arg(long)]
    pub doc_ids: Option<PathBuf>,
    #[command(flatten)]
    pub check: load::CheckArgs,
    #[arg(long, default_value = "auto")]
    pub device: Device,
    /// GPUs to shard the corpus over: `all` or a list like `0,1` (implies a GPU device).
    #[arg(long)]
    pub devices: Option<String>,
    /// How each GPU holds its shard: auto (resident when it fits, else streamed), resident,
    /// or stream (from host memory, in chunks). [default: auto]
    #[arg(long)]
    pub residency: Option<Residency>,
    /// MiB of tokens per streamed chunk. [default: 256]
    #[arg(long)]
    pub chunk_mb: Option<usize>,
}

impl CorpusArgs {
    /// Open the (exact) corpus file with its ids, values checked unless `--no-check-finite`.
    pub fn open(&self) -> Result<Corpus> {
        if tilemaxsim::codec::is_compressed_file(&self.corpus) {
            bail!(
                "{} is a compressed corpus; this command scores exact corpora (`tilemaxsim search` \
                 takes compressed ones, `tilemaxsim corpus decode` makes an exact one)",
                self.corpus.display()
            );
        }
        load::corpus(&self.corpus, self.doc_ids.as_ref(), self.check)
    }

    /// The device and search options these flags name (checked, GPUs listed).
    pub fn search_setup(&self) -> Result<(Device, SearchOptions)> {
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
}

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
fn parse_devices(s: &str) -> Result<Vec<usize>> {
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
