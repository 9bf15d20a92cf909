//! `tilemaxsim search`: the top-k documents of every query, written as a TREC run file
//! (`qid Q0 docid rank score tag`), with throughput and per-query latency at the end. The
//! corpus may be exact or compressed (searched on its codes, optionally reranked exactly with
//! `--rerank`): one path, `tilemaxsim::searcher_for`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tilemaxsim::{Hit, Matrix};

use crate::args::CorpusArgs;
use crate::load;

#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
}

/// The queries and the run file of a search (`search`, `index search`).
#[derive(clap::Args, Debug)]
pub struct RunArgs {
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
}

impl RunArgs {
    /// Check the flags that need no file.
    pub fn check(&self) -> Result<()> {
        if self.top_k == 0 || self.batch == 0 {
            bail!("--top-k and --batch must be at least 1");
        }
        if self.tag.is_empty() || self.tag.chars().any(char::is_whitespace) {
            bail!("--tag must be one word");
        }
        Ok(())
    }
}

pub fn run(a: SearchArgs) -> Result<()> {
    a.run.check()?;
    let (device, options) = a.corpus.search_setup()?;
    let opened = a.corpus.open()?;
    let prepared = Instant::now();
    let options = a.corpus.with_rerank(options, &opened, Some(a.run.top_k));
    let (searcher, notice) = tilemaxsim::searcher_for(device, opened.corpus.as_ref(), &options)?;
    for n in notice
        .into_iter()
        .chain(a.corpus.cpu_notice(&searcher.name()))
    {
        eprintln!("notice: {n}");
    }
    let prepare_s = prepared.elapsed().as_secs_f64();
    let corpus = opened.corpus.as_ref();
    let doc_id = |j: usize| load::id(corpus, j);
    let search = |_: &[String], batch: &[Matrix<'_>], k| searcher.search(batch, k);
    let summary = Summary {
        name: searcher.name(),
        num_docs: corpus.len(),
        prepare_s,
    };
    search_and_write(&a.run, &search, &doc_id, &summary)
}

/// What a search's closing line names: the searcher, the documents searched, and the seconds
/// taken before the first query.
pub(crate) struct Summary {
    pub name: String,
    pub num_docs: usize,
    pub prepare_s: f64,
}

/// A batch's hits: its queries' ids and matrices, and k.
pub(crate) type SearchFn<'a> =
    dyn Fn(&[String], &[Matrix<'_>], usize) -> tilemaxsim::Result<Vec<Vec<Hit>>> + 'a;

/// Run every query through `search` in batches and write the run file and the summary.
pub(crate) fn search_and_write(
    a: &RunArgs,
    search: &SearchFn<'_>,
    doc_id: &dyn Fn(usize) -> String,
    summary: &Summary,
) -> Result<()> {
    let qfile = load::query_file(&a.queries, a.query_ids.as_ref())?;
    let queries = load::queries(&qfile);
    let qids: Vec<String> = (0..queries.len()).map(|q| load::id(&qfile, q)).collect();

    let bar = crate::progress::bar(queries.len() as u64, "queries", false);
    let started = Instant::now();
    let mut results = Vec::with_capacity(queries.len());
    let mut batch_latency = Vec::new();
    for (batch, ids) in queries.chunks(a.batch).zip(qids.chunks(a.batch)) {
        let t = Instant::now();
        results.extend(search(ids, batch, a.top_k)?);
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
    for (qid, hits) in qids.iter().zip(&results) {
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
        summary.num_docs,
        total,
        summary.name,
        summary.prepare_s,
        queries.len() as f64 / total,
        crate::progress::si((queries.len() * summary.num_docs) as f64 / total),
        a.batch,
        pct(0.5),
        pct(0.9),
        pct(0.99)
    );
    Ok(())
}
