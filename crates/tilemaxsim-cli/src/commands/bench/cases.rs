//! What `tilemaxsim bench` runs: its arguments, and the cases they describe (the standard suite,
//! or one case), with their names in the report.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use tilemaxsim::{DType, Device};

use crate::synth::Lengths;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// auto, cpu or cuda[:N] (auto: a GPU when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    pub(crate) device: Device,
    /// Element type of the documents and queries; with neither --dtype nor --doc-len a
    /// standard suite of cases runs.
    #[arg(long)]
    pub(crate) dtype: Option<DType>,
    /// Element type of the queries (GPU; default: the documents'): f32 queries against an f16
    /// or bf16 corpus, as a server's JSON clients send them.
    #[arg(long)]
    pub(crate) query_dtype: Option<DType>,
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
    /// mma, bulk (sm_90+, d up to 1024; f32 split on bulk-copy tiles at d ≤ 128), gemm (many
    /// queries), wgmma (gemm on sm_90a, for documents that fill 128-token tiles) or ring (f32 at
    /// wide d, and d > 128 before sm_90; tensor cores), tiled, v1 or v2 (the paper's ablation family), lut (pq corpora: the paper's
    /// lookup-table kernel, for the ablation) (default: chosen per shape).
    #[arg(long)]
    pub(crate) kernel: Option<String>,
    /// GPU: score through the raw-pointer entry (`score_raw`: the corpus and queries as device
    /// memory the engine borrows, as the Python bindings hand PyTorch tensors over), per call
    /// gathering the queries on the device, instead of the engine's own buffers.
    #[arg(long)]
    pub(crate) raw: bool,
    /// Score a compressed corpus of this codec instead of exact tokens (random codes of the
    /// case's shape; GPU only): residual (--nbits, --centroids), pq (--m), int8 or fp8.
    #[arg(long, value_enum)]
    pub(crate) codec: Option<crate::commands::corpus::compress::CodecName>,
    /// Residual: bits per dimension.
    #[arg(long, default_value_t = 2, value_parser = PossibleValuesParser::new(["1", "2", "4"]).map(|s| s.parse::<u32>().unwrap_or(2)))]
    pub(crate) nbits: u32,
    /// Residual: coarse centroids K (65,536, as LIK's published PLAID figure).
    #[arg(long, default_value_t = 65536)]
    pub(crate) centroids: usize,
    /// PQ: sub-quantizers M.
    #[arg(long, default_value_t = 16, value_parser = PossibleValuesParser::new(["8", "16", "32", "64"]).map(|s| s.parse::<usize>().unwrap_or(16)))]
    pub(crate) m: usize,
    /// GPU: also measure the bulk-copy read ceiling over each case's own corpus bytes (a
    /// read of that size pays the launch, the ramp and the drain a 2 GB read hides), reported
    /// as `case_ceiling_gbps` beside the 2 GB ceiling that `pct_ceiling` divides by.
    #[arg(long)]
    pub(crate) ceiling_at_case: bool,
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

pub(crate) struct Case {
    pub dtype: DType,
    pub lengths: Lengths,
    pub queries: usize,
    pub dim: usize,
    pub docs: usize,
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
