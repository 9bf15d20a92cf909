//! `tilemaxsim bench`: seeded synthetic data on the chosen device; measures the device's own
//! ceilings first (CPU: f32 FMA peak and memory read bandwidth), then per case the median time
//! and what it means: docs/s, GB/s of documents read, GFLOP/s and % of the FMA ceiling.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use tilemaxsim::cpu::{CpuCeilings, measure_ceilings};
use tilemaxsim::{CpuScorer, Device, Isa, Matrix, Scorer};

use crate::synth;

mod cases;
mod gpu;
mod report;
mod roofline;
pub mod search;

pub use cases::BenchArgs;
use cases::{Case, case_name, cases};
use report::{CaseResult, Report};

pub fn run(args: BenchArgs) -> Result<()> {
    if args.nq == 0 || args.dim == 0 || args.docs == Some(0) || args.queries == 0 || args.reps == 0
    {
        bail!("--nq, --dim, --docs, --queries and --reps must all be at least 1");
    }
    if let Some(path) = &args.plot {
        roofline::check(path, args.compute_ceiling)?;
    }
    let forced = match (&args.kernel, args.device) {
        (Some(k), Device::Cuda(_) | Device::Auto) if k.parse::<Isa>().is_err() => {
            Some(k.parse::<tilemaxsim::cuda::Kernel>()?)
        }
        _ => None,
    };
    if args.codec.is_some() && matches!(args.device, Device::Cpu) {
        bail!(
            "--codec is timed on a GPU (--device cuda); on the CPU, bench/codec_quality.py times every codec on Cranfield"
        );
    }
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
        Some(g) => gpu::run(g, &args)?,
        None => run_cpu(&args)?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    if let Some(path) = &args.plot {
        roofline::plot(&report, path, args.compute_ceiling)?;
        eprintln!("roofline picture: {}", path.display());
    }
    Ok(())
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
        ceiling_read_loads_gbps: None,
        ceiling_read_copies_gbps: None,
        ceiling_read_copy_shapes: Vec::new(),
        ceiling_bytes: 0,
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
        case_ceiling_gbps: None,
    })
}

fn print_table(report: &Report) {
    println!(
        "device: {} (kernel {}); measured ceilings: {}",
        report.device,
        report.kernel,
        if report.ceiling_name == "read" {
            let parts = match (
                report.ceiling_read_loads_gbps,
                report.ceiling_read_copies_gbps,
            ) {
                (Some(l), Some(c)) => format!(" (16-byte loads {l:.0}, bulk copies {c:.0})"),
                _ => String::new(),
            };
            format!("read {:.0} GB/s{parts}", report.ceiling_read_gbps)
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
        if let Some(c) = r.case_ceiling_gbps {
            println!(
                "{:<44} read ceiling at this case's bytes: {c:.0} GB/s ({:.1}% of it)",
                "",
                100.0 * r.gb_per_s / c
            );
        }
    }
    println!("docs/s counts query-document pairs; GB/s counts document bytes read once per call.");
    if gpu {
        println!(
            "ms: per call, calls back to back (as do_bench times the peers); alone ms: one call \
             waited for before the next, launch latency included."
        );
    }
}
