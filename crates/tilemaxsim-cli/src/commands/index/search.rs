//! `tilemaxsim index search`: the top-k of every query over an index directory, as a TREC run
//! file: IVF (the default), `--exhaustive`, or within given documents (`--subset`,
//! `--subset-run`), reranked exactly by the index's exact tokens or `--rerank EXACT`, with
//! `search`'s summary of throughput and latency.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use tilemaxsim::index::{Index, IndexSearch};
use tilemaxsim::{Device, Rerank, Residency, SearchOptions};

use super::subset::Subset;
use crate::commands::search::{RunArgs, Summary, search_and_write};
use crate::load;

#[derive(clap::Args, Debug)]
pub struct IndexSearchArgs {
    /// The index directory (`tilemaxsim index build`).
    #[arg(long)]
    index: PathBuf,
    #[command(flatten)]
    run: RunArgs,
    /// IVF probes per query token. [default: the index's]
    #[arg(long, conflicts_with = "exhaustive")]
    nprobe: Option<usize>,
    /// Candidates rescored on their codes. [default: the index's]
    #[arg(long, conflicts_with = "exhaustive")]
    ndocs: Option<usize>,
    /// Score every document on its codes instead of probing the IVF (on the GPU when there is one).
    #[arg(long)]
    exhaustive: bool,
    /// Rerank exactly against this corpus (the same documents) instead of the index's exact tokens.
    #[arg(long)]
    rerank: Option<PathBuf>,
    /// Candidates of the exact stage (0: none). [default: the index's]
    #[arg(long)]
    rerank_k: Option<usize>,
    #[arg(long, default_value = "auto")]
    device: Device,
    /// GPUs to split the index's documents over: `all` or a list like `0,1` (implies a GPU
    /// device). Each holds its part and runs every stage on it; the hits are merged.
    #[arg(long)]
    devices: Option<String>,
    /// How each GPU holds its codes: auto (resident when they fit, else streamed), resident,
    /// or stream (only each token's centroid id on the GPU; each batch's candidates uploaded
    /// to be rescored; with --exhaustive, every code in chunks).
    #[arg(long, default_value = "auto")]
    residency: Residency,
    /// Search every query only within these documents: a file of document ids (as the run files
    /// write them), one a line. Each listed document is scored on its codes, then the best
    /// --rerank-k exactly by the index's exact tokens.
    #[arg(long, conflicts_with_all = ["exhaustive", "nprobe", "ndocs", "devices", "rerank", "subset_run"])]
    subset: Option<PathBuf>,
    /// Search each query only within its own documents in this TREC run (`qid Q0 docid rank
    /// score tag`; e.g. a first-stage run to rerank). A query the run does not name gets no hits.
    #[arg(long, conflicts_with_all = ["exhaustive", "nprobe", "ndocs", "devices", "rerank"])]
    subset_run: Option<PathBuf>,
    #[command(flatten)]
    check: load::CheckArgs,
}

pub fn run(a: IndexSearchArgs) -> Result<()> {
    a.run.check()?;
    let started = Instant::now();
    let index = Index::open(&a.index).context("cannot open the index")?;
    let exact = match &a.rerank {
        Some(p) => Some(load::corpus(p, None, a.check).context("the --rerank corpus")?),
        None => None,
    };
    let devices = match &a.devices {
        Some(list) => crate::args::parse_devices(list)?,
        None => Vec::new(),
    };
    let device = match (a.device, devices.first()) {
        (Device::Cuda(n), _) => Device::Cuda(n),
        (_, Some(&first)) => Device::Cuda(first),
        (d, None) => d,
    };
    let options = SearchOptions {
        rerank: exact.as_ref().map(|exact| Rerank {
            exact,
            candidates: a.rerank_k.unwrap_or(index.defaults().rerank_k),
        }),
        devices,
        residency: a.residency,
        ..Default::default()
    };
    let how = IndexSearch {
        exhaustive: a.exhaustive,
        nprobe: a.nprobe,
        ndocs: a.ndocs,
        rerank_k: a.rerank_k,
    };
    let doc_id = |j: usize| index.doc_id(j);
    let live = index.len() - index.deleted();
    let subset = match (&a.subset, &a.subset_run) {
        (Some(p), _) => Some(Subset::of_ids(p, &index)?),
        (None, Some(p)) => Some(Subset::of_run(p, &index)?),
        (None, None) => None,
    };
    if let Some(subset) = subset {
        let search = |qids: &[String], batch: &[tilemaxsim::Matrix<'_>], k| {
            index.search_within(batch, &subset.lists(qids), k, &how, device)
        };
        let summary = Summary {
            name: "the index's codes, within the given documents".into(),
            num_docs: live,
            prepare_s: started.elapsed().as_secs_f64(),
        };
        return search_and_write(&a.run, &search, &doc_id, &summary);
    }
    let (searcher, notice) = index.searcher(device, &how, &options)?;
    if let Some(n) = notice {
        eprintln!("notice: {n}");
    }
    let search = |_: &[String], batch: &[tilemaxsim::Matrix<'_>], k| searcher.search(batch, k);
    let summary = Summary {
        name: searcher.name(),
        num_docs: live,
        prepare_s: started.elapsed().as_secs_f64(),
    };
    search_and_write(&a.run, &search, &doc_id, &summary)
}
