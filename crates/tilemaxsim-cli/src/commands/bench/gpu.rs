//! `tilemaxsim bench --device cuda`: measures the GPU's streaming read ceiling first, then per
//! case the time per call with CUDA events (median after a warm-up, calls back to back as
//! `triton.testing.do_bench` times the peers; also the latency of an isolated call), from a
//! corpus resident on the device. Corpora smaller than four times L2 are replicated and rotated so each timed run reads
//! from memory, not from L2.

use anyhow::{Context, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use tilemaxsim::cuda::{
    CudaScorer, Kernel, RawArgs, RawDocs, RawLayout, RawQueries, ReadCeilings, median,
};
use tilemaxsim::{Corpus, Matrix, OwnedElements};

use super::cases::{BenchArgs, Case, case_name, cases};
use super::report::{CaseResult, CopyShape, Report};
use crate::synth;

/// Bytes the read-ceiling kernels stream: far past any L2, and long enough that a launch's
/// start and tail weigh little (H200, one run: 4667 GB/s over 2.1 GB, 4719 over 8 GiB, 4720
/// over 29 GB; over 2 GB the widest cases passed 100% of it). Halved until the device has room.
const CEILING_BYTES: usize = 8 << 30;
/// L2 of the largest part we target (H200: 60 MB); rotation keeps 4× that in flight.
const L2_BYTES: usize = 64 << 20;

pub fn run(gpu: &CudaScorer, args: &BenchArgs) -> Result<Report> {
    // The fastest of 16-byte loads and bulk copies: no kernel passes 100% of it.
    let ceilings = read_ceilings(gpu, args.reps.max(5))?;
    let read = ceilings.best();
    let cases = cases(args, true);
    let progress = crate::progress::bar(cases.len() as u64, "cases", args.json);
    let mut results = Vec::new();
    if args.codec.is_some() {
        for case in codec_cases(args) {
            results.push(codec_case(gpu, args, &case, read)?);
            progress.inc(1);
        }
    }
    for case in cases.iter().filter(|_| args.codec.is_none()) {
        let corpus = synth::corpus(case.docs, case.lengths, case.dim, case.dtype, args.seed)?;
        let copies = (4 * L2_BYTES)
            .div_ceil(corpus.size_bytes().max(1))
            .clamp(1, 64);
        let device: Vec<_> = (0..if args.raw { 0 } else { copies })
            .map(|_| gpu.upload(&corpus))
            .collect::<Result<_, _>>()?;
        let qdata: Vec<OwnedElements> = (0..case.queries)
            .map(|i| {
                OwnedElements::from_f32(
                    &synth::unit_rows(
                        args.nq,
                        case.dim,
                        args.seed.wrapping_add(1 + i as u64) << 32,
                    ),
                    args.query_dtype.unwrap_or(case.dtype),
                )
            })
            .collect();
        let queries: Vec<Matrix<'_>> = qdata
            .iter()
            .map(|q| Matrix::new(q.as_elements(), case.dim))
            .collect::<Result<_, _>>()?;
        let dq = gpu.upload_queries(&queries, case.dim)?;
        let mut out = gpu.alloc_scores(case.queries * corpus.len())?;
        let raw = match args.raw {
            true => Some(Raw::upload(gpu, &corpus, &queries, copies)?),
            false => None,
        };
        let mut kernel = match device.first() {
            Some(d) => gpu.kernel_for(&dq, d),
            None => Kernel::Tiled,
        };
        let out_ptr = out.device_ptr(gpu.stream()).0;
        let mut turn = 0;
        let mut call = || {
            turn = (turn + 1) % copies;
            match &raw {
                Some(r) => {
                    kernel = r.score(gpu, turn, out_ptr)?;
                    Ok(())
                }
                None => gpu.score_device(&dq, &device[turn], None, &mut out),
            }
        };
        let (times, latency) = time_calls(gpu, args.reps, &mut call)?;
        check_written(gpu, &out, case.queries * corpus.len())?;
        let name = format!(
            "{} [{}]",
            case_name(args, case),
            kernel.name().trim_start_matches("maxsim_")
        );
        let what = Measured {
            docs: corpus.len(),
            tokens: corpus.num_tokens(),
            bytes: corpus.size_bytes(),
            times,
            latency,
        };
        let mut result = case_result(args, case, name, case.dtype.to_string(), what, read);
        if args.ceiling_at_case {
            // The case's bytes, rounded down to whole copies by the ceiling kernels.
            let bytes = corpus.size_bytes();
            let at_case = gpu
                .measure_read_ceilings(bytes, args.reps.max(5))
                .context("read ceiling at the case's bytes")?;
            result.case_ceiling_gbps = Some(at_case.best());
        }
        results.push(result);
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(Report {
        device: format!(
            "{} {}",
            gpu.info().name,
            if gpu.kernels_from_cache() {
                "(kernels from cache)"
            } else {
                "(kernels compiled)"
            }
        ),
        kernel: if args.kernel.as_deref() == Some("tiled") {
            "maxsim_tiled only"
        } else {
            "auto"
        }
        .into(),
        threads: 0,
        ceiling_gflops: 0.0,
        ceiling_read_gbps: read,
        ceiling_read_loads_gbps: Some(ceilings.loads),
        ceiling_read_copies_gbps: ceilings.copies_best(),
        ceiling_read_copy_shapes: ceilings
            .copies
            .iter()
            .map(|c| CopyShape {
                kib: c.bytes >> 10,
                stages: c.stages,
                gbps: c.gbps,
            })
            .collect(),
        ceiling_bytes: ceilings.bytes,
        ceiling_name: "read".into(),
        results,
    })
}

/// The read ceilings over [`CEILING_BYTES`], halved while the device has no room for them.
fn read_ceilings(gpu: &CudaScorer, reps: usize) -> Result<ReadCeilings> {
    let mut bytes = CEILING_BYTES;
    loop {
        match gpu.measure_read_ceilings(bytes, reps) {
            Err(tilemaxsim::Error::OutOfMemory(_)) if bytes > 256 << 20 => bytes /= 2,
            r => return r.context("read ceiling"),
        }
    }
}

/// A case's corpus copies and queries as device memory the engine does not own, scored through
/// `score_raw` on the scorer's stream (`bench --raw`): packed `[T, d]` documents with i64
/// offsets, the queries packed `[Tq, d]` with their spans on the host.
struct Raw {
    docs: Vec<(CudaSlice<u8>, CudaSlice<i64>)>,
    queries: CudaSlice<u8>,
    spans: Vec<(usize, usize)>,
    corpus_len: usize,
    rows: usize,
    dim: usize,
    dtype: tilemaxsim::DType,
    qdtype: tilemaxsim::DType,
    /// f32 documents in the tensor cores' split range, checked here on the host.
    split_ok: bool,
}

impl Raw {
    fn upload(
        gpu: &CudaScorer,
        corpus: &Corpus,
        queries: &[Matrix<'_>],
        copies: usize,
    ) -> Result<Self> {
        let s = gpu.stream();
        let offsets: Vec<i64> = corpus.offsets().iter().map(|&o| o as i64).collect();
        let bytes = corpus.tokens().elements().as_bytes();
        let docs = (0..copies)
            .map(|_| Ok((s.clone_htod(bytes)?, s.clone_htod(&offsets)?)))
            .collect::<Result<_, cudarc::driver::DriverError>>()
            .context("raw corpus upload")?;
        let mut qbytes = Vec::new();
        let mut spans = Vec::new();
        let mut rows = 0;
        for q in queries {
            spans.push((rows * corpus.dim(), q.rows()));
            rows += q.rows();
            qbytes.extend_from_slice(q.elements().as_bytes());
        }
        Ok(Raw {
            docs,
            queries: s.clone_htod(&qbytes).context("raw query upload")?,
            spans,
            corpus_len: corpus.len(),
            rows: corpus.num_tokens(),
            dim: corpus.dim(),
            dtype: corpus.dtype(),
            qdtype: queries.first().map_or(corpus.dtype(), |q| q.dtype()),
            split_ok: match corpus.tokens().elements() {
                tilemaxsim::Elements::F32(v) => tilemaxsim::cuda::split_rows_ok(v, corpus.dim()),
                _ => false,
            },
        })
    }

    fn score(&self, gpu: &CudaScorer, turn: usize, out: u64) -> tilemaxsim::Result<Kernel> {
        let s = gpu.stream();
        let (tokens, offsets) = &self.docs[turn];
        let args = RawArgs {
            queries: RawQueries {
                tokens: self.queries.device_ptr(s).0,
                dtype: self.qdtype,
                dim: self.dim,
                row_stride: self.dim,
                spans: &self.spans,
            },
            docs: RawDocs {
                tokens: tokens.device_ptr(s).0,
                dtype: self.dtype,
                dim: self.dim,
                row_stride: self.dim,
                layout: RawLayout::Packed {
                    offsets: offsets.device_ptr(s).0,
                    docs: self.corpus_len,
                    rows: self.rows,
                },
                split_ok: self.split_ok,
            },
            candidates: None,
            out,
        };
        // SAFETY: the buffers are live allocations of the sizes `args` describes (uploaded by
        // `upload`), `out` holds Q × N floats (alloc_scores), all on the scorer's stream.
        unsafe { gpu.score_raw(None, args) }
    }
}

/// The cases of `--codec`: the one the flags describe, or for the standard suite one query and
/// 32 queries on 128-token documents.
fn codec_cases(args: &BenchArgs) -> Vec<Case> {
    let one = |queries| Case {
        dtype: tilemaxsim::DType::F16,
        lengths: args.doc_len.unwrap_or(synth::Lengths::Fixed(128)),
        queries,
        dim: args.dim,
        docs: args.docs.unwrap_or(100_000),
    };
    if args.dtype.is_none() && args.doc_len.is_none() && args.queries == 1 {
        vec![one(1), one(32)]
    } else {
        vec![one(args.queries)]
    }
}

/// One `--codec` case: random codes of the case's shape resident on the device (rotated
/// copies where they would fit in L2), f16 queries, timed like the exact cases; GB/s counts
/// the bytes of codes and per-token words read once.
fn codec_case(gpu: &CudaScorer, args: &BenchArgs, case: &Case, read: f64) -> Result<CaseResult> {
    use crate::commands::corpus::compress::CodecName;
    let spec = match args.codec {
        Some(CodecName::Residual) => synth::SynthCodec::Residual {
            nbits: args.nbits,
            centroids: args.centroids,
        },
        Some(CodecName::Pq) => synth::SynthCodec::Pq { m: args.m },
        Some(CodecName::Int8) => synth::SynthCodec::Int8,
        Some(CodecName::Fp8) | None => synth::SynthCodec::Fp8,
    };
    let corpus = synth::codes(case.docs, case.lengths, case.dim, spec, args.seed)?;
    let copies = (4 * L2_BYTES)
        .div_ceil(corpus.size_bytes().max(1))
        .clamp(1, 64);
    let device: Vec<_> = (0..copies)
        .map(|_| gpu.upload_codes(&corpus, 0..corpus.len()))
        .collect::<Result<_, _>>()?;
    let qdata: Vec<Vec<f32>> = (0..case.queries)
        .map(|i| {
            synth::unit_rows(
                args.nq,
                case.dim,
                args.seed.wrapping_add(1 + i as u64) << 32,
            )
        })
        .collect();
    let queries: Vec<Matrix<'_>> = qdata
        .iter()
        .map(|q| Matrix::new(&q[..], case.dim))
        .collect::<Result<_, _>>()?;
    let dq = gpu.upload_codec_queries(&queries, &device[0])?;
    let mut out = gpu.alloc_scores(case.queries * corpus.len())?;
    let mut turn = 0;
    let mut call = || {
        turn = (turn + 1) % copies;
        gpu.score_codes_device(&dq, &device[turn], None, &mut out)
    };
    let (times, latency) = time_calls(gpu, args.reps, &mut call)?;
    check_written(gpu, &out, case.queries * corpus.len())?;
    let lut = matches!(corpus.codec(), tilemaxsim::codec::Codec::Pq(_))
        && args
            .kernel
            .as_deref()
            .is_some_and(|k| matches!(k.parse(), Ok(Kernel::Lut)));
    let how = match (device[0].fused(), lut) {
        (true, true) => "lookup table",
        (true, false) => "fused",
        (false, _) => "decoded at upload",
    };
    let name = format!(
        "{} Nq={} d={} Nd={} B={} Q={} [{how}]",
        corpus
            .codec()
            .describe()
            .split(" (")
            .next()
            .unwrap_or("codes"),
        args.nq,
        case.dim,
        case.lengths,
        crate::progress::si(case.docs as f64).replace(' ', ""),
        case.queries
    );
    let what = Measured {
        docs: corpus.len(),
        tokens: corpus.num_tokens(),
        bytes: corpus.size_bytes(),
        times,
        latency,
    };
    Ok(case_result(
        args,
        case,
        name,
        corpus.codec().name().into(),
        what,
        read,
    ))
}

/// Per-call times of `call` (CUDA events, calls back to back) and the median latency of an
/// isolated call.
fn time_calls(
    gpu: &CudaScorer,
    reps: usize,
    call: &mut dyn FnMut() -> tilemaxsim::Result<()>,
) -> Result<(Vec<f64>, f64)> {
    let times = gpu.time_ms(reps, &mut *call)?;
    let latency = median(&gpu.time_ms_isolated(reps.min(10), &mut *call)?);
    Ok((times, latency))
}

/// Check the scores of the last run are all written and finite.
fn check_written(gpu: &CudaScorer, out: &CudaSlice<f32>, len: usize) -> Result<()> {
    let mut host = vec![f32::NAN; len];
    gpu.download(out, &mut host)?;
    if let Some(i) = host.iter().position(|s| !s.is_finite()) {
        anyhow::bail!("score {i} was not written (or is not finite)");
    }
    Ok(())
}

/// What a case measured: its corpus's documents, tokens and bytes read per call, the times.
struct Measured {
    docs: usize,
    tokens: usize,
    bytes: usize,
    times: Vec<f64>,
    latency: f64,
}

/// A case's row: medians and the rates they mean (GB/s of the corpus's bytes, % of the read
/// ceiling `read`).
fn case_result(
    args: &BenchArgs,
    case: &Case,
    name: String,
    dtype: String,
    m: Measured,
    read: f64,
) -> CaseResult {
    let ms = median(&m.times);
    let secs = ms / 1e3;
    let flops = 2.0 * (args.nq * case.dim * m.tokens * case.queries) as f64;
    let gbps = m.bytes as f64 / secs / 1e9;
    CaseResult {
        name,
        dtype,
        nq: args.nq,
        dim: case.dim,
        docs: m.docs,
        queries: case.queries,
        doc_len: case.lengths.to_string(),
        tokens: m.tokens,
        ms,
        ms_min: m.times.iter().copied().fold(f64::INFINITY, f64::min),
        docs_per_s: (case.queries * m.docs) as f64 / secs,
        gb_per_s: gbps,
        gflop_per_s: flops / secs / 1e9,
        pct_ceiling: 100.0 * gbps / read,
        latency_ms: Some(m.latency),
        case_ceiling_gbps: None,
    }
}
