//! `tilemaxsim bench`: seeded synthetic data on the chosen device; measures the device's own
//! ceilings first (CPU: f32 FMA peak and memory read bandwidth), then per case the median time
//! and what it means: docs/s, GB/s of documents read, GFLOP/s and % of the FMA ceiling.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use tilemaxsim::cpu::{CpuCeilings, measure_ceilings};
use tilemaxsim::{CpuScorer, DType, Device, Isa, Matrix, Scorer};

use crate::synth::{self, Lengths};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// auto, cpu or cuda[:N] (auto: a GPU when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    device: Device,
    /// Element type of the documents and queries; with neither --dtype nor --doc-len a
    /// standard suite of cases runs.
    #[arg(long)]
    dtype: Option<DType>,
    /// Document lengths: N (every document) or LO:HI (uniform).
    #[arg(long)]
    doc_len: Option<Lengths>,
    /// Query tokens Nq.
    #[arg(long, default_value_t = 32)]
    nq: usize,
    /// Embedding dimension d.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Documents in the corpus (N).
    #[arg(long, default_value_t = 10_000)]
    docs: usize,
    /// Queries scored together in one call (Q × N scores).
    #[arg(long, default_value_t = 1)]
    queries: usize,
    /// Timed repetitions (the median is reported), after one warm-up.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// CPU worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// CPU kernel flavour: avx512, avx2 or portable (default: the best this CPU has).
    #[arg(long)]
    kernel: Option<String>,
    /// Print JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct CaseResult {
    name: String,
    dtype: String,
    nq: usize,
    dim: usize,
    docs: usize,
    queries: usize,
    doc_len: String,
    tokens: usize,
    ms: f64,
    ms_min: f64,
    docs_per_s: f64,
    gb_per_s: f64,
    gflop_per_s: f64,
    pct_ceiling: f64,
}

#[derive(Serialize)]
struct Report {
    device: String,
    kernel: String,
    threads: usize,
    ceiling_gflops: f64,
    ceiling_read_gbps: f64,
    results: Vec<CaseResult>,
}

struct Case {
    dtype: DType,
    lengths: Lengths,
    queries: usize,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.nq == 0 || args.dim == 0 || args.docs == 0 || args.queries == 0 || args.reps == 0 {
        bail!("--nq, --dim, --docs, --queries and --reps must all be at least 1");
    }
    let (_, notice) = tilemaxsim::scorer_for(args.device)?;
    if let Some(n) = notice {
        eprintln!("notice: {n}");
    }
    let isa = match &args.kernel {
        Some(k) => k.parse::<Isa>()?,
        None => match std::env::var(tilemaxsim::cpu::KERNEL_ENV) {
            Ok(k) if !k.is_empty() => k.parse::<Isa>()?,
            _ => Isa::detect(),
        },
    };
    let scorer = CpuScorer::with_isa(isa)?.threads(args.threads)?;
    let threads = scorer.num_threads();
    let ceilings: CpuCeilings = measure_ceilings(args.threads)?;
    if !args.json {
        println!(
            "device: cpu ({} threads, kernel {}); measured ceilings: f32 FMA {:.1} GFLOP/s, memory read {:.1} GB/s",
            threads,
            scorer.isa(),
            ceilings.fma_gflops,
            ceilings.read_gbps
        );
    }

    let cases: Vec<Case> = if args.dtype.is_none() && args.doc_len.is_none() {
        let fixed = Lengths::Fixed(128);
        let varlen = Lengths::Uniform(32, 256);
        vec![
            Case {
                dtype: DType::F32,
                lengths: fixed,
                queries: args.queries,
            },
            Case {
                dtype: DType::F16,
                lengths: fixed,
                queries: args.queries,
            },
            Case {
                dtype: DType::BF16,
                lengths: fixed,
                queries: args.queries,
            },
            Case {
                dtype: DType::F32,
                lengths: varlen,
                queries: args.queries,
            },
            Case {
                dtype: DType::F16,
                lengths: varlen,
                queries: args.queries,
            },
            Case {
                dtype: DType::F16,
                lengths: fixed,
                queries: 32,
            },
        ]
    } else {
        vec![Case {
            dtype: args.dtype.unwrap_or(DType::F32),
            lengths: args.doc_len.unwrap_or(Lengths::Fixed(128)),
            queries: args.queries,
        }]
    };

    let mut results = Vec::new();
    let progress = crate::progress::bar(cases.len() as u64, "cases", args.json);
    for case in &cases {
        let r = run_case(&scorer, &args, case, &ceilings)
            .with_context(|| format!("case {} {}", case.dtype, case.lengths))?;
        results.push(r);
        progress.inc(1);
    }
    progress.finish_and_clear();

    let report = Report {
        device: "cpu".into(),
        kernel: scorer.isa().to_string(),
        threads,
        ceiling_gflops: ceilings.fma_gflops,
        ceiling_read_gbps: ceilings.read_gbps,
        results,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn run_case(
    scorer: &CpuScorer,
    args: &BenchArgs,
    case: &Case,
    ceilings: &CpuCeilings,
) -> Result<CaseResult> {
    let corpus = synth::corpus(args.docs, case.lengths, args.dim, case.dtype, args.seed)?;
    let qdata: Vec<_> = (0..case.queries)
        .map(|i| {
            let v = synth::unit_rows(
                args.nq,
                args.dim,
                args.seed.wrapping_add(1 + i as u64) << 32,
            );
            tilemaxsim::OwnedElements::from_f32(&v, case.dtype)
        })
        .collect();
    let queries: Vec<Matrix<'_>> = qdata
        .iter()
        .map(|q| Matrix::new(q.as_elements(), args.dim))
        .collect::<Result<_, _>>()?;
    let mut out = vec![0.0f32; case.queries * corpus.len()];
    scorer.score_into(&queries, &corpus, tilemaxsim::Docs::All, &mut out)?; // warm-up
    let mut times = Vec::with_capacity(args.reps);
    for _ in 0..args.reps {
        out.fill(f32::NAN);
        let t = Instant::now();
        scorer.score_into(&queries, &corpus, tilemaxsim::Docs::All, &mut out)?;
        times.push(t.elapsed().as_secs_f64());
        if let Some(i) = out.iter().position(|s| !s.is_finite()) {
            bail!("score {i} was not written (or is not finite)");
        }
    }
    times.sort_by(f64::total_cmp);
    let secs = times[times.len() / 2];
    let tokens = corpus.num_tokens();
    let pairs = (case.queries * corpus.len()) as f64;
    let flops = 2.0 * (args.nq * args.dim * tokens * case.queries) as f64;
    let gflops = flops / secs / 1e9;
    Ok(CaseResult {
        name: format!(
            "{} Nq={} d={} Nd={} Q={}",
            case.dtype, args.nq, args.dim, case.lengths, case.queries
        ),
        dtype: case.dtype.to_string(),
        nq: args.nq,
        dim: args.dim,
        docs: corpus.len(),
        queries: case.queries,
        doc_len: case.lengths.to_string(),
        tokens,
        ms: secs * 1e3,
        ms_min: times[0] * 1e3,
        docs_per_s: pairs / secs,
        gb_per_s: corpus.size_bytes() as f64 / secs / 1e9,
        gflop_per_s: gflops,
        pct_ceiling: 100.0 * gflops / ceilings.fma_gflops,
    })
}

fn print_table(report: &Report) {
    println!(
        "{:<40} {:>10} {:>14} {:>8} {:>10} {:>9}",
        "case", "ms", "docs/s", "GB/s", "GFLOP/s", "% FMA"
    );
    for r in &report.results {
        println!(
            "{:<40} {:>10.3} {:>14} {:>8.2} {:>10.1} {:>8.1}%",
            r.name,
            r.ms,
            crate::progress::si(r.docs_per_s),
            r.gb_per_s,
            r.gflop_per_s,
            r.pct_ceiling
        );
    }
    println!("docs/s counts query-document pairs; GB/s counts document bytes read once per call.");
}
