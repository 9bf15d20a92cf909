//! `tilemaxsim bench-search`: end-to-end top-k search on seeded synthetic corpora, wall clock
//! from the queries on the host to the hits on the host (after a warm-up, median and p99):
//! single queries and batches against resident corpora; on a GPU also the streamed corpus
//! against the measured host→device copy rate, and, with several GPUs, the corpus sharded over
//! 1, 2, 4, … and all of them, exact and compressed, each checked to give one GPU's hits.
//! Large corpora repeat a block of 100,000 distinct documents (the work is the same; duplicate
//! documents only add ties, which the top-k breaks by index).

use std::time::Instant;

use anyhow::{Result, bail};
use serde::Serialize;
use tilemaxsim::codec::{CodecSpec, ResidualOptions};
use tilemaxsim::{
    AnyCorpus, CompressedCorpus, Corpus, DType, Device, Hit, Matrix, OwnedElements, Residency,
    SearchOptions,
};

use crate::synth::{self, Lengths};

#[derive(clap::Args, Debug)]
pub struct SearchBenchArgs {
    /// auto, cpu or cuda[:N].
    #[arg(long, default_value = "auto")]
    device: Device,
    /// Corpus sizes (documents); default 100000,500000 on a GPU, 10000 on the CPU.
    #[arg(long, value_delimiter = ',')]
    docs: Vec<usize>,
    /// Query batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    batches: Vec<usize>,
    /// Documents per query returned.
    #[arg(long, short = 'k', default_value_t = 10)]
    top_k: usize,
    #[arg(long, default_value_t = 32)]
    nq: usize,
    #[arg(long, default_value_t = 128)]
    doc_len: usize,
    #[arg(long, default_value_t = 128)]
    dim: usize,
    #[arg(long, default_value = "f16")]
    dtype: DType,
    /// Timed searches per case (after one warm-up).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// GPU cases: the streamed corpus (documents; 0 skips).
    #[arg(long, default_value_t = 500_000)]
    stream_docs: usize,
    /// GPU cases: the corpus sharded over 1, 2, 4, … and every GPU when there are several
    /// (0 skips).
    #[arg(long, default_value_t = 1_000_000)]
    multi_docs: usize,
    /// How the sharded corpus is stored: exact (the --dtype tokens), residual (nbits 2),
    /// int8, fp8; codes are compressed on GPU 0 from the distinct block, then repeated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "exact,residual"
    )]
    multi_codecs: Vec<Stored>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// How the sharded corpus is stored.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    Exact,
    Residual,
    Int8,
    Fp8,
}

#[derive(Serialize)]
struct Row {
    name: String,
    searcher: String,
    docs: usize,
    batch: usize,
    ms_p50: f64,
    ms_p99: f64,
    queries_per_s: f64,
    docs_per_s: f64,
    gb_per_s: f64,
    /// Sharded rows: whether the first batch's hits equal one GPU's (the same documents and
    /// scores, ties broken by index as on one GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    same_hits_as_one_gpu: Option<bool>,
}

#[derive(Serialize)]
struct SearchReport {
    device: String,
    /// Host→device copy rate from page-locked memory (GPU runs), GB/s.
    h2d_gbps: Option<f64>,
    /// Seconds to build each streamed searcher (page-locking the corpus, when pinned in place).
    setup: Vec<(String, f64)>,
    rows: Vec<Row>,
}

/// Distinct documents generated; larger corpora repeat them.
const BLOCK_DOCS: usize = 100_000;

fn corpus(a: &SearchBenchArgs, docs: usize) -> Result<Corpus> {
    let block = synth::corpus(
        docs.min(BLOCK_DOCS),
        Lengths::Fixed(a.doc_len),
        a.dim,
        a.dtype,
        a.seed,
    )?;
    if docs <= BLOCK_DOCS {
        return Ok(block);
    }
    let src = block.tokens().elements();
    let total = docs * a.doc_len * a.dim;
    let elements = match OwnedElements::from_elements(src) {
        OwnedElements::F32(v) => OwnedElements::F32(cycle(&v, total)),
        OwnedElements::F16(v) => OwnedElements::F16(cycle(&v, total)),
        OwnedElements::BF16(v) => OwnedElements::BF16(cycle(&v, total)),
    };
    Ok(Corpus::from_lengths(
        elements,
        a.dim,
        &vec![a.doc_len; docs],
    )?)
}

/// `docs` documents stored as `stored`: the exact corpus, or codes compressed on GPU 0 from
/// the distinct block and repeated as the exact corpus repeats it.
fn stored_corpus(a: &SearchBenchArgs, docs: usize, stored: Stored) -> Result<Box<dyn AnyCorpus>> {
    let spec = match stored {
        Stored::Exact => return Ok(Box::new(corpus(a, docs)?)),
        Stored::Residual => CodecSpec::Residual(ResidualOptions::default()),
        Stored::Int8 => CodecSpec::Int8,
        Stored::Fp8 => CodecSpec::Fp8,
    };
    let block = corpus(a, docs.min(BLOCK_DOCS))?;
    let (c, _) = tilemaxsim::compress_on(Device::Cuda(0), &block, &spec, a.seed, &|_, _, _| {})?;
    if docs <= BLOCK_DOCS {
        return Ok(Box::new(c));
    }
    let tokens = docs * a.doc_len;
    let codes = cycle(c.codes(), tokens * c.codec().row_bytes(a.dim));
    let aux = c.aux().map(|w| cycle(w, tokens));
    let offsets = (0..=docs).map(|j| j * a.doc_len).collect();
    Ok(Box::new(CompressedCorpus::new(
        c.codec().clone(),
        a.dim,
        offsets,
        codes,
        aux,
    )?))
}

fn cycle<T: Copy + Send + Sync>(v: &[T], total: usize) -> Vec<T> {
    use rayon::prelude::*;
    let mut out = vec![v[0]; total];
    out.par_chunks_mut(v.len()).for_each(|c| {
        let n = c.len();
        c.copy_from_slice(&v[..n]);
    });
    out
}

fn queries(a: &SearchBenchArgs, count: usize) -> Vec<OwnedElements> {
    (0..count)
        .map(|i| {
            OwnedElements::from_f32(
                &synth::unit_rows(a.nq, a.dim, a.seed.wrapping_add(1 + i as u64) << 32),
                a.dtype,
            )
        })
        .collect()
}

/// Time `reps` searches of `batch` queries (rotating through 4 distinct batches).
fn time_search(
    a: &SearchBenchArgs,
    name: &str,
    searcher: &dyn tilemaxsim::Searcher,
    corpus: &dyn AnyCorpus,
    batch: usize,
) -> Result<(Row, Vec<Vec<Hit>>)> {
    let owned = queries(a, 4 * batch);
    let mats: Vec<Matrix<'_>> = owned
        .iter()
        .map(|q| Matrix::new(q.as_elements(), a.dim))
        .collect::<Result<_, _>>()?;
    let batches: Vec<&[Matrix<'_>]> = mats.chunks(batch).collect();
    let first = searcher.search(batches[0], a.top_k)?;
    let mut ms = Vec::with_capacity(a.reps);
    for r in 0..a.reps {
        let t = Instant::now();
        let hits = searcher.search(batches[r % batches.len()], a.top_k)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if hits.len() != batch || hits.iter().any(|h| h.len() != a.top_k.min(corpus.len())) {
            bail!("{name}: wrong number of hits");
        }
    }
    ms.sort_by(f64::total_cmp);
    let p50 = ms[ms.len() / 2];
    let p99 = ms[((ms.len() - 1) as f64 * 0.99).round() as usize];
    let bytes = corpus.num_tokens() * corpus.bytes_per_token();
    let row = Row {
        name: name.to_string(),
        searcher: searcher.name(),
        docs: corpus.len(),
        batch,
        ms_p50: p50,
        ms_p99: p99,
        queries_per_s: batch as f64 / p50 * 1e3,
        docs_per_s: (batch * corpus.len()) as f64 / p50 * 1e3,
        gb_per_s: bytes as f64 / p50 / 1e6,
        same_hits_as_one_gpu: None,
    };
    Ok((row, first))
}

/// GPU counts of the sharded cases: 1, 2, 4, … below `gpus`, and `gpus`.
fn gpu_counts(gpus: usize) -> Vec<usize> {
    let mut n: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2))
        .take_while(|&n| n < gpus)
        .collect();
    n.push(gpus);
    n
}

pub fn run(a: SearchBenchArgs) -> Result<()> {
    if a.top_k == 0 || a.reps == 0 || a.nq == 0 || a.dim == 0 || a.doc_len == 0 {
        bail!("--top-k, --reps, --nq, --dim and --doc-len must be at least 1");
    }
    if a.batches.contains(&0) || a.docs.contains(&0) {
        bail!("--batches and --docs must be at least 1");
    }
    let gpus = tilemaxsim::gpu_count();
    let on_gpu = match a.device {
        Device::Cuda(_) => true,
        Device::Auto => gpus > 0,
        _ => false,
    };
    if a.device == Device::Auto && !on_gpu {
        eprintln!("notice: no usable GPU; benchmarking search on the CPU");
    }
    let device = match a.device {
        Device::Auto if on_gpu => Device::Cuda(0),
        Device::Auto => Device::Cpu,
        d => d,
    };
    let ordinal = match device {
        Device::Cuda(n) => n,
        _ => 0,
    };
    let sizes = if a.docs.is_empty() {
        if on_gpu {
            vec![100_000, 500_000]
        } else {
            vec![10_000]
        }
    } else {
        a.docs.clone()
    };
    let mut report = SearchReport {
        device: device.to_string(),
        h2d_gbps: None,
        setup: Vec::new(),
        rows: Vec::new(),
    };
    let bar = if a.json {
        indicatif::ProgressBar::hidden()
    } else {
        crate::progress::spinner("searching")
    };
    let resident = SearchOptions {
        devices: vec![ordinal],
        residency: Residency::Resident,
        ..Default::default()
    };
    for &docs in &sizes {
        bar.set_message(format!("{docs} documents"));
        let c = corpus(&a, docs)?;
        let (s, _) = tilemaxsim::searcher_for(device, &c, &resident)?;
        for &batch in &a.batches {
            report
                .rows
                .push(time_search(&a, "resident", s.as_ref(), &c, batch)?.0);
        }
    }
    if on_gpu {
        let gpu = tilemaxsim::cuda::CudaScorer::new(ordinal)?;
        report.h2d_gbps = Some(gpu.measure_h2d(1 << 30, 10)?);
        drop(gpu);
        if a.stream_docs > 0 {
            bar.set_message("streamed corpus");
            let c = corpus(&a, a.stream_docs)?;
            // Both ways of feeding the copy engine: from the corpus page-locked in place, and
            // staged through pinned buffers by the host cores.
            for (name, pin_corpus) in [("streamed", true), ("staged", false)] {
                let options = SearchOptions {
                    devices: vec![ordinal],
                    residency: Residency::Stream,
                    pin_corpus,
                    ..Default::default()
                };
                let t = Instant::now();
                let (s, _) = tilemaxsim::searcher_for(device, &c, &options)?;
                report
                    .setup
                    .push((name.to_string(), t.elapsed().as_secs_f64()));
                for &batch in &a.batches {
                    report
                        .rows
                        .push(time_search(&a, name, s.as_ref(), &c, batch)?.0);
                }
            }
        }
        if a.multi_docs > 0 && gpus > 1 {
            for &stored in &a.multi_codecs {
                bar.set_message(format!("sharded corpus, {stored:?}"));
                let c = stored_corpus(&a, a.multi_docs, stored)?;
                let mut one: Vec<Vec<Vec<Hit>>> = Vec::new();
                for n in gpu_counts(gpus) {
                    let options = SearchOptions {
                        devices: (0..n).collect(),
                        residency: Residency::Resident,
                        ..Default::default()
                    };
                    let (s, _) = tilemaxsim::searcher_for(device, c.as_ref(), &options)?;
                    let name = format!("{n} GPU(s) {}", c.storage_name());
                    for (b, &batch) in a.batches.iter().enumerate() {
                        let (mut row, hits) =
                            time_search(&a, &name, s.as_ref(), c.as_ref(), batch)?;
                        if n == 1 {
                            one.push(hits);
                        } else {
                            row.same_hits_as_one_gpu = Some(one[b] == hits);
                        }
                        report.rows.push(row);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if let Some(h2d) = report.h2d_gbps {
        println!("host→device copy (pinned): {h2d:.1} GB/s");
        for (name, secs) in &report.setup {
            println!("{name} searcher ready in {secs:.2} s");
        }
        for r in report
            .rows
            .iter()
            .filter(|r| r.name == "streamed" || r.name == "staged")
        {
            println!(
                "{}, batch {}: {:.1} GB/s = {:.1}% of the copy rate",
                r.name,
                r.batch,
                r.gb_per_s,
                100.0 * r.gb_per_s / h2d
            );
        }
    }
    for r in report.rows.iter().filter(|r| r.name.contains("GPU(s)")) {
        let layout = r.name.split_once(' ').map_or("", |(_, rest)| rest);
        let one = report.rows.iter().find(|o| {
            o.name.starts_with("1 GPU(s)")
                && o.name.ends_with(layout)
                && o.batch == r.batch
                && o.docs == r.docs
        });
        if let Some(one) = one.filter(|o| o.name != r.name) {
            let same = match r.same_hits_as_one_gpu {
                Some(true) => "hits identical to one GPU's",
                _ => "HITS DIFFER from one GPU's",
            };
            println!(
                "{}, batch {}: {:.2}× one GPU; {same}",
                r.name,
                r.batch,
                one.ms_p50 / r.ms_p50
            );
        }
    }
    println!(
        "{:<24} {:>9} {:>6} {:>9} {:>9} {:>11} {:>11} {:>9}  searcher",
        "case", "docs", "batch", "p50 ms", "p99 ms", "queries/s", "docs/s", "GB/s"
    );
    for r in &report.rows {
        println!(
            "{:<24} {:>9} {:>6} {:>9.3} {:>9.3} {:>11.1} {:>11} {:>9.1}  {}",
            r.name,
            r.docs,
            r.batch,
            r.ms_p50,
            r.ms_p99,
            r.queries_per_s,
            crate::progress::si(r.docs_per_s),
            r.gb_per_s,
            r.searcher
        );
    }
    Ok(())
}
