//! `tilemaxsim search`: the top-k documents of every query, written as a TREC run file
//! (`qid Q0 docid rank score tag`), with throughput and per-query latency at the end. A
//! compressed corpus is searched on its codes, optionally reranked exactly (`--rerank`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tilemaxsim::{CompressedCorpus, Rerank, Searcher};

use crate::corpus_args::CorpusArgs;
use crate::load;

#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Query file (same format as a corpus: one "document" per query).
    #[arg(long)]
    queries: PathBuf,
    /// Documents per query in the run (every document when the corpus has fewer).
    #[arg(long, short = 'k', default_value_t = 10)]
    top_k: usize,
    /// The TREC run file to write (stdout when absent).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The run's tag (last column).
    #[arg(long, default_value = "tilemaxsim")]
    tag: String,
    /// Queries scored together per pass over the corpus.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    #[arg(long)]
    query_ids: Option<PathBuf>,
    #[command(flatten)]
    corpus: CorpusArgs,
    /// With a compressed --corpus: rescore its top --rerank-k documents exactly against this
    /// exact corpus (the same documents, in the same order), keeping the best -k.
    #[arg(long)]
    rerank: Option<PathBuf>,
    /// Candidates per query taken from the compressed stage for --rerank (k'; at least -k).
    /// [default: the depth recorded in the compressed file, else 100]
    #[arg(long)]
    rerank_k: Option<usize>,
}

pub fn run(a: SearchArgs) -> Result<()> {
    if a.top_k == 0 || a.batch == 0 {
        bail!("--top-k and --batch must be at least 1");
    }
    if a.tag.is_empty() || a.tag.chars().any(char::is_whitespace) {
        bail!("--tag must be one word");
    }
    if a.rerank_k == Some(0) {
        bail!("--rerank-k must be at least 1");
    }
    if a.rerank_k.is_some() && a.rerank.is_none() {
        bail!("--rerank-k needs --rerank EXACT (the exact corpus of the second stage)");
    }
    let (device, options) = a.corpus.search_setup()?;
    if tilemaxsim::codec::is_compressed_file(&a.corpus.corpus) {
        return run_compressed(&a, device);
    }
    if a.rerank.is_some() {
        bail!("--rerank needs a compressed --corpus (made by `tilemaxsim corpus compress`)");
    }

    let corpus = a.corpus.open()?;
    let prepared = Instant::now();
    let (searcher, notice) = tilemaxsim::searcher_for(device, &corpus, &options)?;
    for n in notice
        .into_iter()
        .chain(a.corpus.cpu_notice(&searcher.name()))
    {
        eprintln!("notice: {n}");
    }
    let prepare_s = prepared.elapsed().as_secs_f64();
    search_and_write(
        &a,
        searcher.as_ref(),
        &|j| load::id(&corpus, j),
        corpus.len(),
        prepare_s,
    )
}

/// Search a compressed corpus (on the CPU until the GPU kernels exist), reranked when asked.
fn run_compressed(a: &SearchArgs, device: tilemaxsim::Device) -> Result<()> {
    let prepared = Instant::now();
    let mut corpus =
        CompressedCorpus::open(&a.corpus.corpus).context("cannot open the compressed corpus")?;
    if let Some(p) = &a.corpus.doc_ids {
        corpus = corpus
            .with_doc_ids(tilemaxsim::corpus::import::read_ids(p)?)
            .with_context(|| format!("ids from {}", p.display()))?;
    }
    let (scorer, notice) = tilemaxsim::compressed_scorer_for(device)?;
    if let Some(n) = notice {
        eprintln!("notice: {n}");
    }
    let exact = match &a.rerank {
        Some(p) => Some(load::corpus(p, None, a.corpus.check).context("the --rerank corpus")?),
        None => None,
    };
    let rerank = match &exact {
        Some(e) => {
            let (s, n) = tilemaxsim::scorer_for(device)?;
            if let Some(n) = n {
                eprintln!("notice: {n}");
            }
            Some(Rerank {
                exact: e,
                candidates: rerank_depth(a.rerank_k, corpus.rerank_k(), a.top_k),
                scorer: s,
            })
        }
        None => None,
    };
    let searcher = tilemaxsim::CompressedSearch::new(scorer, &corpus, rerank)?;
    if let Some(n) = a.corpus.cpu_notice(&searcher.name()) {
        eprintln!("notice: {n}");
    }
    let prepare_s = prepared.elapsed().as_secs_f64();
    let id = |j: usize| {
        corpus
            .doc_ids()
            .map_or_else(|| j.to_string(), |ids| ids[j].clone())
    };
    search_and_write(a, &searcher, &id, corpus.len(), prepare_s)
}

/// k' of a two-stage search: `--rerank-k`, else the file's, else 100; raised to `k` with a
/// notice when below it (the exact stage cannot return more documents than it is given).
fn rerank_depth(given: Option<usize>, recorded: Option<usize>, k: usize) -> usize {
    let depth = given.or(recorded).unwrap_or(100);
    if depth < k {
        eprintln!("notice: --rerank-k {depth} is below -k {k}; reranking the top {k} instead");
    }
    depth.max(k)
}

/// Run every query through `searcher` in batches and write the run file and the summary.
fn search_and_write(
    a: &SearchArgs,
    searcher: &dyn Searcher,
    doc_id: &dyn Fn(usize) -> String,
    num_docs: usize,
    prepare_s: f64,
) -> Result<()> {
    let qfile = load::query_file(&a.queries, a.query_ids.as_ref())?;
    let queries = load::queries(&qfile);

    let bar = crate::progress::bar(queries.len() as u64, "queries", false);
    let started = Instant::now();
    let mut results = Vec::with_capacity(queries.len());
    let mut batch_latency = Vec::new();
    for batch in queries.chunks(a.batch) {
        let t = Instant::now();
        results.extend(searcher.search(batch, a.top_k)?);
        // Every query of a batch waits for the whole batch.
        let took = t.elapsed().as_secs_f64();
        batch_latency.extend(std::iter::repeat_n(took, batch.len()));
        bar.inc(batch.len() as u64);
    }
    let total = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    let mut w: Box<dyn Write> = match &a.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    for (q, hits) in results.iter().enumerate() {
        let qid = load::id(&qfile, q);
        for (rank, h) in hits.iter().enumerate() {
            writeln!(
                w,
                "{qid} Q0 {} {} {:.6} {}",
                doc_id(h.doc),
                rank + 1,
                h.score,
                a.tag
            )?;
        }
    }
    w.flush()?;

    batch_latency.sort_by(f64::total_cmp);
    let pct = |p: f64| batch_latency[((batch_latency.len() - 1) as f64 * p).round() as usize] * 1e3;
    eprintln!(
        "{} queries × {} documents in {:.3} s on {} (corpus ready in {:.2} s): {:.1} queries/s, {} docs/s; latency per query (batches of ≤{}): p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        queries.len(),
        num_docs,
        total,
        searcher.name(),
        prepare_s,
        queries.len() as f64 / total,
        crate::progress::si((queries.len() * num_docs) as f64 / total),
        a.batch,
        pct(0.5),
        pct(0.9),
        pct(0.99)
    );
    Ok(())
}
