//! The CPU engine: one micro-kernel (`kernel.rs`) instantiated per SIMD flavour, chosen at run
//! time by CPU feature detection (`x86.rs`: AVX-512, AVX2+FMA+F16C; `portable.rs`: anything),
//! and spread over documents with rayon. Each document is read from memory once for all the
//! queries of a cache-sized query block.

mod compressed;
mod kernel;
mod portable;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::time::Instant;

use rayon::prelude::*;

use crate::codec::CodecKind;
use crate::corpus::{AnyCorpus, Corpus, CorpusKind};
use crate::error::{Error, Result};
use crate::matrix::{Elements, Matrix};
use crate::scorer::{Docs, Scorer, alloc_scores, check_queries};
use kernel::{PreparedQuery, Scratch};

/// A SIMD flavour of the CPU kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// AVX-512 F/BW/VL (+ FMA, F16C): 16 lanes, a 32-query-token × 12-document-token tile.
    Avx512,
    /// AVX2 + FMA + F16C: 8 lanes, a 16 × 6 tile.
    Avx2,
    /// Portable Rust the compiler vectorizes (SSE2, NEON, …): 8 lanes, a 16 × 4 tile.
    Portable,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Portable => "portable",
        }
    }

    /// Whether this CPU can run the flavour.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && Isa::Avx2.is_supported()
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The best flavour this CPU supports.
    pub fn detect() -> Isa {
        [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .find(|i| i.is_supported())
            .unwrap_or(Isa::Portable)
    }

    /// Every flavour this CPU supports, best first.
    pub fn available() -> Vec<Isa> {
        [Isa::Avx512, Isa::Avx2, Isa::Portable]
            .into_iter()
            .filter(|i| i.is_supported())
            .collect()
    }

    fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 | Isa::Portable => 8,
        }
    }

    /// The kernel entry for this flavour. Only called on a supported flavour.
    fn kernel(self) -> DocKernel {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::score_doc_avx512,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::score_doc_avx2,
            _ => portable::score_doc_portable,
        }
    }
}

impl std::str::FromStr for Isa {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "avx512" => Ok(Isa::Avx512),
            "avx2" => Ok(Isa::Avx2),
            "portable" => Ok(Isa::Portable),
            other => Err(Error::Argument(format!(
                "unknown CPU kernel {other:?}: expected avx512, avx2 or portable"
            ))),
        }
    }
}

/// Environment variable that pins the CPU kernel flavour (`avx512`, `avx2`, `portable`) for
/// scorers made by [`crate::scorer_for`]: for testing the fallbacks on a machine that has more.
pub const KERNEL_ENV: &str = "TILEMAXSIM_CPU_KERNEL";

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// CPU features that matter to us, as detected (for `tilemaxsim info`).
pub fn cpu_features() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        vec![
            ("sse4.2", has!("sse4.2")),
            ("avx2", has!("avx2")),
            ("fma", has!("fma")),
            ("f16c", has!("f16c")),
            ("avx512f", has!("avx512f")),
            ("avx512bw", has!("avx512bw")),
            ("avx512vl", has!("avx512vl")),
            ("avx512bf16", has!("avx512bf16")),
            ("avx512fp16", has!("avx512fp16")),
        ]
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        vec![
            ("neon", has!("neon")),
            ("fp16", has!("fp16")),
            ("bf16", has!("bf16")),
        ]
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Vec::new()
    }
}

type DocKernel = unsafe fn(&[PreparedQuery], Elements<'_>, &[u8], usize, &mut Scratch, &mut [f32]);

/// Packed queries of one block are kept under this size so they stay in L2 while a document
/// tile is scored against all of them.
const QUERY_BLOCK_BYTES: usize = 256 * 1024;

/// The multi-threaded SIMD CPU scorer.
pub struct CpuScorer {
    isa: Isa,
    pool: Option<rayon::ThreadPool>,
}

impl Default for CpuScorer {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuScorer {
    /// The best flavour for this CPU, on rayon's global thread pool.
    pub fn new() -> Self {
        CpuScorer {
            isa: Isa::detect(),
            pool: None,
        }
    }

    /// A specific flavour; an error when this CPU lacks it.
    pub fn with_isa(isa: Isa) -> Result<Self> {
        if !isa.is_supported() {
            return Err(Error::DeviceUnavailable(format!(
                "this CPU does not support the {isa} kernel"
            )));
        }
        Ok(CpuScorer { isa, pool: None })
    }

    /// Use a pool of `threads` threads of its own (0: rayon's global pool).
    pub fn threads(mut self, threads: usize) -> Result<Self> {
        self.pool = if threads == 0 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .map_err(|e| Error::Argument(format!("cannot start {threads} threads: {e}")))?,
            )
        };
        Ok(self)
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
    }

    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    fn run(
        &self,
        queries: &[Matrix<'_>],
        corpus: &Corpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        let offsets = corpus.offsets();
        let rows = |i: usize| {
            let j = docs.index(i);
            offsets[j]..offsets[j + 1]
        };
        self.run_rows(queries, corpus.tokens(), docs.count(corpus), rows, out)
    }

    /// Scores of `queries` against documents given as row ranges of `tokens`, memory the scorer
    /// borrows (a caller's tensor, say) instead of a [`Corpus`]: `out[q × n + i]` for query `q`
    /// and document `i` (rows `docs[i]`). Each range must be non-empty and inside `tokens`,
    /// whose values should be finite (a NaN or infinity gives an unspecified score here; a
    /// [`Corpus`] and [`Scorer::score_into`] give NaN).
    pub fn score_rows(
        &self,
        queries: &[Matrix<'_>],
        tokens: Matrix<'_>,
        docs: &[std::ops::Range<usize>],
        out: &mut [f32],
    ) -> Result<()> {
        check_queries(queries, tokens.dim())?;
        if let Some((i, r)) = docs
            .iter()
            .enumerate()
            .find(|(_, r)| r.start >= r.end || r.end > tokens.rows())
        {
            return Err(Error::Argument(format!(
                "document {i}: rows {}..{} are empty or outside the {} rows given",
                r.start,
                r.end,
                tokens.rows()
            )));
        }
        if out.len() != queries.len() * docs.len() {
            return Err(Error::Argument(format!(
                "output holds {} scores, {} queries × {} documents need {}",
                out.len(),
                queries.len(),
                docs.len(),
                queries.len() * docs.len()
            )));
        }
        self.run_rows(queries, tokens, docs.len(), |i| docs[i].clone(), out)
    }

    /// The scoring loop: `n` documents, document `i` rows `doc_range(i)` of `tokens` (checked
    /// by the callers: non-empty, in range; the queries have `tokens`' d).
    fn run_rows(
        &self,
        queries: &[Matrix<'_>],
        tokens: Matrix<'_>,
        n: usize,
        doc_range: impl Fn(usize) -> std::ops::Range<usize> + Sync,
        out: &mut [f32],
    ) -> Result<()> {
        let nq = queries.len();
        if n == 0 {
            return Ok(());
        }
        let lanes = self.isa.lanes();
        let kernel = self.isa.kernel();
        let dim = tokens.dim();
        let prepared: Vec<PreparedQuery> = queries
            .iter()
            .map(|q| PreparedQuery::new(*q, lanes))
            .collect();
        let blocks = query_blocks(&prepared);
        let chunk = (n / (self.num_threads() * 16)).clamp(1, 64);
        let doc_rows = |i: usize| tokens.rows_range(doc_range(i));

        // Scores are produced document-major (`[doc][query]`, so each task owns a contiguous
        // piece); with one query that is already the output layout.
        let mut doc_major = if nq == 1 {
            Vec::new()
        } else {
            alloc_scores(n * nq)?
        };
        let target: &mut [f32] = if nq == 1 { out } else { &mut doc_major };
        self.install(|| {
            target.par_chunks_mut(chunk * nq).enumerate().for_each_init(
                Scratch::default,
                |scratch, (c, part)| {
                    let first = c * chunk;
                    for block in &blocks {
                        let rows = part.len() / nq;
                        for (t, row) in part.chunks_exact_mut(nq).enumerate() {
                            let doc = doc_rows(first + t).elements();
                            let next = if t + 1 < rows {
                                doc_rows(first + t + 1).elements().as_bytes()
                            } else {
                                &[]
                            };
                            // SAFETY: `kernel` belongs to a flavour this CPU supports (checked when
                            // the scorer was made); the document has ≥ 1 whole row (corpus
                            // invariant); every query was prepared for this flavour's lanes and has
                            // the corpus's d (checked by `Scorer::check`).
                            unsafe {
                                kernel(
                                    &prepared[block.clone()],
                                    doc,
                                    next,
                                    dim,
                                    scratch,
                                    &mut row[block.clone()],
                                )
                            };
                        }
                    }
                },
            );
        });
        if nq > 1 {
            to_query_major(&doc_major, nq, n, out);
        }
        Ok(())
    }
}

/// Scores kept document-major (`[n][nq]`, each worker's documents contiguous) into `out`,
/// query-major (`[nq][n]`).
pub(super) fn to_query_major(doc_major: &[f32], nq: usize, n: usize, out: &mut [f32]) {
    for (q, row) in out.chunks_exact_mut(n).enumerate() {
        for (i, s) in row.iter_mut().enumerate() {
            *s = doc_major[i * nq + q];
        }
    }
}

/// Split prepared queries into consecutive blocks of at most `QUERY_BLOCK_BYTES` (at least one
/// query each).
fn query_blocks(prepared: &[PreparedQuery]) -> Vec<std::ops::Range<usize>> {
    let mut blocks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, q) in prepared.iter().enumerate() {
        if i > start && bytes + q.bytes() > QUERY_BLOCK_BYTES {
            blocks.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += q.bytes();
    }
    blocks.push(start..prepared.len());
    blocks
}

impl Scorer for CpuScorer {
    fn name(&self) -> String {
        format!("cpu-{}", self.isa)
    }

    /// Every codec: compressed documents are decoded into the SIMD kernel (`compressed.rs`).
    fn supports(&self, _codec: CodecKind) -> bool {
        true
    }

    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn AnyCorpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        self.check(queries, corpus, &docs, out.len())?;
        match corpus.kind() {
            CorpusKind::Exact(c) => self.run(queries, c, docs, out),
            CorpusKind::Compressed(c) => self.run_compressed(queries, c, docs, out),
        }
    }
}

/// Measured ceilings of this CPU, for reports.
#[derive(Clone, Copy, Debug)]
pub struct CpuCeilings {
    /// f32 FMA throughput of the best flavour on all threads, GFLOP/s.
    pub fma_gflops: f64,
    /// Streaming read bandwidth from memory on all threads, GB/s.
    pub read_gbps: f64,
}

/// Measure the machine's f32 FMA peak (with its best SIMD flavour) and the memory read
/// bandwidth with `threads` threads (0: all). Takes about a second.
pub fn measure_ceilings(threads: usize) -> Result<CpuCeilings> {
    let isa = Isa::detect();
    let scorer = CpuScorer::with_isa(isa)?.threads(threads)?;
    let nt = scorer.num_threads();
    let fma = scorer.install(|| {
        let iters = 4_000_000usize;
        let per_call = (12 * isa.lanes() * 2 * iters) as f64;
        // One call on every thread at once (broadcast), so no thread runs two.
        let run = || {
            let t = Instant::now();
            let sink: f32 = rayon::broadcast(|ctx| peak_call(isa, iters, ctx.index() as f32))
                .into_iter()
                .sum();
            std::hint::black_box(sink);
            per_call * nt as f64 / t.elapsed().as_secs_f64() / 1e9
        };
        run();
        (0..5).map(|_| run()).fold(0.0, f64::max)
    });
    let read = scorer.install(|| {
        let len = 64 << 20; // 256 MB of f32: well past any cache
        let buf: Vec<f32> = (0..len).map(|i| (i % 7) as f32).collect();
        let run = || {
            let t = Instant::now();
            let s: f32 = buf
                .par_chunks(1 << 16)
                .map(|c| c.iter().fold(0.0f32, |a, &b| a.max(b)))
                .reduce(|| 0.0, f32::max);
            std::hint::black_box(s);
            (len * 4) as f64 / t.elapsed().as_secs_f64() / 1e9
        };
        run();
        (0..3).map(|_| run()).fold(0.0, f64::max)
    });
    Ok(CpuCeilings {
        fma_gflops: fma,
        read_gbps: read,
    })
}

fn peak_call(isa: Isa, iters: usize, x: f32) -> f32 {
    let seed = [1.0 + x * 1e-9; 16];
    match isa {
        // SAFETY: `measure_ceilings` made a scorer for `isa`, which checks support.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::fma_peak_avx512(iters, &seed) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::fma_peak_avx2(iters, &seed) },
        _ => portable::fma_peak_portable(iters, &seed),
    }
}
