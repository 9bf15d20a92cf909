//! `tilemaxsim score`: every query against every document (or a candidate list); writes the
//! `Q × N` scores as `.npy` or as `qid docid score` lines. The corpus may be exact or compressed
//! (scored on its codes); the scorer is the device's for its codec (`tilemaxsim::scorer_for`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tilemaxsim::{AnyCorpus, Device, Docs};

use crate::load;

#[derive(clap::Args, Debug)]
pub struct ScoreArgs {
    /// Query file (same format as a corpus: one "document" per query).
    #[arg(long)]
    queries: PathBuf,
    /// Corpus file (`tilemaxsim corpus import` makes one).
    #[arg(long)]
    corpus: PathBuf,
    /// Output: `.npy` for a float32 [Q, N] matrix, anything else (or stdout) for
    /// `qid<TAB>docid<TAB>score` lines.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Score only these documents: one id (or 0-based index when the corpus has no ids) per line.
    #[arg(long)]
    candidates: Option<PathBuf>,
    #[arg(long)]
    query_ids: Option<PathBuf>,
    #[arg(long)]
    doc_ids: Option<PathBuf>,
    #[command(flatten)]
    check: load::CheckArgs,
    #[arg(long, default_value = "auto")]
    device: Device,
}

pub fn run(a: ScoreArgs) -> Result<()> {
    let corpus = load::any(&a.corpus, a.doc_ids.as_ref(), a.check)?;
    let (scorer, notice) = tilemaxsim::scorer_for(a.device, corpus.codec_kind())?;
    if let Some(n) = notice {
        eprintln!("notice: {n}");
    }
    let qfile = load::query_file(&a.queries, a.query_ids.as_ref())?;
    let queries = load::queries(&qfile);
    let candidates: Option<Vec<usize>> = match &a.candidates {
        None => None,
        Some(p) => Some(resolve_candidates(
            corpus.as_ref(),
            &tilemaxsim::corpus::import::read_ids(p)?,
        )?),
    };
    let n = candidates.as_ref().map_or(corpus.len(), Vec::len);
    let mut scores = tilemaxsim::scorer::alloc_scores(queries.len() * n)?;

    // Score in column blocks so a progress bar can follow long runs.
    let block = (1usize << 22) / queries.len().max(1);
    let block = block.clamp(1, n.max(1));
    let bar = crate::progress::bar(n as u64, "documents", false);
    let mut part = tilemaxsim::scorer::alloc_scores(queries.len() * block)?;
    let mut start = 0;
    while start < n {
        let end = (start + block).min(n);
        let docs = match &candidates {
            Some(c) => Docs::List(&c[start..end]),
            None => Docs::Range(start..end),
        };
        let out = &mut part[..queries.len() * (end - start)];
        scorer.score_into(&queries, corpus.as_ref(), docs, out)?;
        for (q, row) in out.chunks_exact(end - start).enumerate() {
            scores[q * n + start..q * n + end].copy_from_slice(row);
        }
        bar.inc((end - start) as u64);
        start = end;
    }
    bar.finish_and_clear();

    let doc_id = |i: usize| {
        let j = candidates.as_ref().map_or(i, |c| c[i]);
        corpus
            .doc_ids()
            .map_or_else(|| j.to_string(), |ids| ids[j].clone())
    };
    match &a.out {
        Some(p) if p.extension().is_some_and(|e| e == "npy") => {
            let file = std::fs::File::create(p)
                .with_context(|| format!("cannot create {}", p.display()))?;
            use npyz::WriterBuilder;
            let mut w = npyz::WriteOptions::<f32>::new()
                .default_dtype()
                .shape(&[queries.len() as u64, n as u64])
                .writer(std::io::BufWriter::new(file))
                .begin_nd()?;
            w.extend(scores.iter().copied())?;
            w.finish()?;
        }
        Some(p) => {
            let file = std::fs::File::create(p)
                .with_context(|| format!("cannot create {}", p.display()))?;
            write_lines(std::io::BufWriter::new(file), &qfile, n, &scores, doc_id)?;
        }
        None => write_lines(std::io::stdout().lock(), &qfile, n, &scores, doc_id)?,
    }
    Ok(())
}

fn write_lines(
    mut w: impl Write,
    qfile: &tilemaxsim::Corpus,
    n: usize,
    scores: &[f32],
    doc_id: impl Fn(usize) -> String,
) -> Result<()> {
    for (q, row) in scores.chunks_exact(n.max(1)).enumerate() {
        let qid = load::id(qfile, q);
        for (i, s) in row.iter().enumerate() {
            writeln!(w, "{qid}\t{}\t{s}", doc_id(i))?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Candidate ids (or indices, for a corpus without ids) to corpus indices.
fn resolve_candidates(corpus: &dyn AnyCorpus, ids: &[String]) -> Result<Vec<usize>> {
    let lookup: Option<std::collections::HashMap<&str, usize>> = corpus
        .doc_ids()
        .map(|v| v.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect());
    ids.iter()
        .map(|id| match &lookup {
            Some(m) => m.get(id.as_str()).copied().with_context(|| format!("candidate {id:?} is not a document id of the corpus")),
            None => match id.parse::<usize>() {
                Ok(i) if i < corpus.len() => Ok(i),
                _ => bail!("candidate {id:?} is not a document index (the corpus has {} documents and no ids)", corpus.len()),
            },
        })
        .collect()
}
