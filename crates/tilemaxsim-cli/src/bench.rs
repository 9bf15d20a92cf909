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
    pub(crate) device: Device,
    /// Element type of the documents and queries; with neither --dtype nor --doc-len a
    /// standard suite of cases runs.
    #[arg(long)]
    pub(crate) dtype: Option<DType>,
    /// Document lengths: N (every document) or LO:HI (uniform).
    #[arg(long)]
    pub(crate) doc_len: Option<Lengths>,
    /// Query tokens Nq.
    #[arg(long, default_value_t = 32)]
    pub(crate) nq: usize,
    /// Embedding dimension d.
    #[arg(long, default_value_t = 128)]
    pub(crate) dim: usize,
    /// Documents in the corpus (N); default 10,000 on the CPU, 100,000 on a GPU.
    #[arg(long)]
    pub(crate) docs: Option<usize>,
    /// Queries scored together in one call (Q × N scores).
    #[arg(long, default_value_t = 1)]
    pub(crate) queries: usize,
    /// Timed repetitions (the median is reported), after one warm-up.
    #[arg(long, default_value_t = 5)]
    pub(crate) reps: usize,
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// CPU worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub(crate) threads: usize,
    /// Kernel: on the CPU avx512, avx2 or portable (default: the best this CPU has); on a GPU
    /// mma, bulk (sm_90+, d up to 1024), gemm (many queries), wgmma (gemm on sm_90a, for
    /// documents that fill 128-token tiles) or ring (f32, and d > 128 before sm_90; tensor
    /// cores), tiled, v1 or v2 (the paper's ablation family) (default: chosen per shape).
    #[arg(long)]
    pub(crate) kernel: Option<String>,
    /// GPU: score through the raw-pointer entry (`score_raw`: the corpus and queries as device
    /// memory the engine borrows, as the Python bindings hand PyTorch tensors over), per call
    /// gathering the queries on the device, instead of the engine's own buffers.
    #[arg(long)]
    pub(crate) raw: bool,
    /// Print JSON on stdout instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also draw the cases on a roofline picture into this PNG.
    #[arg(long, value_name = "PNG")]
    pub(crate) plot: Option<std::path::PathBuf>,
    /// The compute roof of the picture in GFLOP/s (default: the measured one, on the CPU; a GPU
    /// has none measured: give e.g. its tensor-core rate).
    #[arg(long, value_name = "GFLOPS")]
    pub(crate) compute_ceiling: Option<f64>,
}

#[derive(Serialize)]
pub(crate) struct CaseResult {
    pub name: String,
    pub dtype: String,
    pub nq: usize,
    pub dim: usize,
    pub docs: usize,
    pub queries: usize,
    pub doc_len: String,
    pub tokens: usize,
    pub ms: f64,
    pub ms_min: f64,
    pub docs_per_s: f64,
    pub gb_per_s: f64,
    pub gflop_per_s: f64,
    pub pct_ceiling: f64,
    /// GPU: the median time of one isolated call (the host waits for each before the next),
    /// launch latency included; `ms` is the time per call back to back.
    pub latency_ms: Option<f64>,
}

#[derive(Serialize)]
pub(crate) struct Report {
    pub device: String,
    pub kernel: String,
    pub threads: usize,
    pub ceiling_gflops: f64,
    pub ceiling_read_gbps: f64,
    /// What `pct_ceiling` is a percentage of: `f32 FMA` (CPU) or `read` (GPU bandwidth).
    pub ceiling_name: String,
    pub results: Vec<CaseResult>,
}

pub(crate) struct Case {
    pub dtype: DType,
    pub lengths: Lengths,
    pub queries: usize,
    pub dim: usize,
    pub docs: usize,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.nq == 0 || args.dim == 0 || args.docs == Some(0) || args.queries == 0 || args.reps == 0
    {
        bail!("--nq, --dim, --docs, --queries and --reps must all be at least 1");
    }
    if let Some(path) = &args.plot {
        crate::roofline::check(path, args.compute_ceiling)?;
    }
    let forced = match (&args.kernel, args.device) {
        (Some(k), Device::Cuda(_) | Device::Auto) if k.parse::<Isa>().is_err() => {
            Some(k.parse::<tilemaxsim::cuda::Kernel>()?)
        }
        _ => None,
    };
    let gpu = match args.device {
        Device::Cuda(n) => Some(tilemaxsim::cuda::CudaScorer::new(n)?.force_kernel(forced)),
        Device::Auto => match tilemaxsim::cuda::CudaScorer::new(0) {
            Ok(g) => Some(g.force_kernel(forced)),
            Err(e) => {
                eprintln!("notice: no usable GPU ({e}); benchmarking the CPU");
                None
            }
        },
        Device::Cpu => None,
        Device::Reference => bail!("the reference is not benchmarked; use --device cpu or cuda"),
    };
    let report = match &gpu {
        Some(g) => crate::bench_gpu::run(g, &args)?,
        None => run_cpu(&args)?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    if let Some(path) = &args.plot {
        crate::roofline::plot(&report, path, args.compute_ceiling)?;
        eprintln!("roofline picture: {}", path.display());
    }
    Ok(())
}

/// The cases to run: the standard suite, or the one case the flags describe.
pub(crate) fn cases(args: &BenchArgs, gpu: bool) -> Vec<Case> {
    let docs = args.docs.unwrap_or(if gpu { 100_000 } else { 10_000 });
    if args.dtype.is_none() && args.doc_len.is_none() {
        let fixed = Lengths::Fixed(128);
        let varlen = Lengths::Uniform(32, 256);
        let case = |dtype, lengths, queries, dim, docs| Case {
            dtype,
            lengths,
            queries,
            dim,
            docs,
        };
        let mut v = vec![
            case(DType::F32, fixed, args.queries, args.dim, docs),
            case(DType::F16, fixed, args.queries, args.dim, docs),
            case(DType::BF16, fixed, args.queries, args.dim, docs),
            case(DType::F32, varlen, args.queries, args.dim, docs),
            case(DType::F16, varlen, args.queries, args.dim, docs),
            case(DType::F16, fixed, 32, args.dim, docs),
        ];
        if gpu {
            v.push(case(DType::F16, fixed, args.queries, 768, docs / 10));
        }
        v
    } else {
        vec![Case {
            dtype: args.dtype.unwrap_or(DType::F32),
            lengths: args.doc_len.unwrap_or(Lengths::Fixed(128)),
            queries: args.queries,
            dim: args.dim,
            docs,
        }]
    }
}

fn run_cpu(args: &BenchArgs) -> Result<Report> {
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
    let cases = cases(args, false);
    let mut results = Vec::new();
    let progress = crate::progress::bar(cases.len() as u64, "cases", args.json);
    for case in &cases {
        let r = run_case(&scorer, args, case, &ceilings)
            .with_context(|| format!("case {} {}", case.dtype, case.lengths))?;
        results.push(r);
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(Report {
        device: format!("cpu ({threads} threads)"),
        kernel: scorer.isa().to_string(),
        threads,
        ceiling_gflops: ceilings.fma_gflops,
        ceiling_read_gbps: ceilings.read_gbps,
        ceiling_name: "f32 FMA".into(),
        results,
    })
}

fn run_case(
    scorer: &CpuScorer,
    args: &BenchArgs,
    case: &Case,
    ceilings: &CpuCeilings,
) -> Result<CaseResult> {
    let corpus = synth::corpus(case.docs, case.lengths, case.dim, case.dtype, args.seed)?;
    let qdata: Vec<_> = (0..case.queries)
        .map(|i| {
            let v = synth::unit_rows(
                args.nq,
                case.dim,
                args.seed.wrapping_add(1 + i as u64) << 32,
            );
            tilemaxsim::OwnedElements::from_f32(&v, case.dtype)
        })
        .collect();
    let queries: Vec<Matrix<'_>> = qdata
        .iter()
        .map(|q| Matrix::new(q.as_elements(), case.dim))
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
    let flops = 2.0 * (args.nq * case.dim * tokens * case.queries) as f64;
    let gflops = flops / secs / 1e9;
    Ok(CaseResult {
        name: case_name(args, case),
        dtype: case.dtype.to_string(),
        nq: args.nq,
        dim: case.dim,
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
        latency_ms: None,
    })
}

pub(crate) fn case_name(args: &BenchArgs, case: &Case) -> String {
    format!(
        "{} Nq={} d={} Nd={} B={} Q={}",
        case.dtype,
        args.nq,
        case.dim,
        case.lengths,
        crate::progress::si(case.docs as f64).replace(' ', ""),
        case.queries
    )
}

fn print_table(report: &Report) {
    println!(
        "device: {} (kernel {}); measured ceilings: {}",
        report.device,
        report.kernel,
        if report.ceiling_name == "read" {
            format!("read {:.0} GB/s", report.ceiling_read_gbps)
        } else {
            format!(
                "f32 FMA {:.1} GFLOP/s, memory read {:.1} GB/s",
                report.ceiling_gflops, report.ceiling_read_gbps
            )
        }
    );
    let pct = if report.ceiling_name == "read" {
        "% read"
    } else {
        "% FMA"
    };
    let gpu = report.results.iter().any(|r| r.latency_ms.is_some());
    println!(
        "{:<44} {:>10} {:>14} {:>8} {:>10} {:>9}{}",
        "case",
        "ms",
        "docs/s",
        "GB/s",
        "GFLOP/s",
        pct,
        if gpu { "   alone ms" } else { "" }
    );
    for r in &report.results {
        println!(
            "{:<44} {:>10.3} {:>14} {:>8.2} {:>10.1} {:>8.1}%{}",
            r.name,
            r.ms,
            crate::progress::si(r.docs_per_s),
            r.gb_per_s,
            r.gflop_per_s,
            r.pct_ceiling,
            r.latency_ms
                .map_or(String::new(), |l| format!(" {l:>10.3}"))
        );
    }
    println!("docs/s counts query-document pairs; GB/s counts document bytes read once per call.");
    if gpu {
        println!(
            "ms: per call, calls back to back (as do_bench times the peers); alone ms: one call \
             waited for before the next, launch latency included."
        );
    }
}
