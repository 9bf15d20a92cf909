//! [`CudaScorer`]: the GPU engine on one device, reduced to choosing and sequencing. It holds a
//! [`GpuContext`] and the settings of its kernel choice; it picks a kernel family for each shape
//! (`plan.rs` decides, the settings fix or force it), and sequences the steps of a call: uploads
//! (`memory.rs`), the launch (`launch/`), top-k (`topk.rs`), downloads. It also takes device
//! memory it does not own (`score_raw`, prepared by `raw.rs`), times work (`timing.rs`), and is
//! the [`Scorer`] of corpora on the host (upload, score, download per call: `scorer/host.rs`).
//! Its entries for compressed corpora are in `scorer/compressed.rs`; the switches that fix its
//! choices for experiments and tests, and their environment variables, in `scorer/switches.rs`.

mod compressed;
mod host;
mod switches;

use switches::{env_choice, pack_env};

use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};

use super::codec_kernels::{
    CodecKernel, codec_kernel, codec_tag, fused_kernel, quad_kernel_of, quad_or, whole_blocks,
};
use super::codes::{CodecQueries, CodecTables, DeviceCodes};
use super::compile::arch_name;
use super::context::GpuContext;
use super::device::{GpuInfo, drv};
use super::launch::codec::{self as codec_launch, PACK_MAX};
use super::launch::{Bulk, Gemm, General, GeneralArgs, Launch, Mma, Ring, Target, add_planes};
use super::memory::{self, DeviceCorpus, DeviceQueries};
use super::pitch::{pad_corpus, queries_at};
use super::plan::{
    BULK_GROUP_RANGE, BULK_STAGES_RANGE, Kernel, KernelShape, LaunchShape, MMA_DIMS, QBLOCK,
    SPAN_ANY_MAX_DIM, bulk_dim, bulk_shape_env, choose_kernel, launch_size_ok, queries_dim_ok,
    ring_layout, stored_dim, wide_any_bound,
};
use super::raw::{self, RawArgs};
use super::raw_residual::{self, RawResidual};
use super::timing::{self, ReadCeilings};
use super::topk::{self, TopKScratch};
use super::train::{self, TrainArgs};
use crate::codec::{CodecKind, CompressedCorpus};
use crate::corpus::{AnyCorpus, Corpus, CorpusKind};
use crate::error::{Error, Result};
use crate::matrix::{DType, Matrix};
use crate::scorer::{Docs, Scorer};
use crate::topk::Hit;

/// The GPU scorer on one device.
pub struct CudaScorer {
    gpu: GpuContext,
    /// The candidates between the two top-k kernels, reused (and grown) across calls.
    topk_scratch: Mutex<TopKScratch>,
    /// `score_raw`'s uploads that repeat across calls of one shape.
    raw_cache: raw::RawCache,
    shape: KernelShape,
    force: Option<Kernel>,
    /// `maxsim_bulk`'s (stages, tasks per block) when fixed (`bulk_shape`, TILEMAXSIM_BULK).
    bulk: Option<(usize, usize)>,
    /// The batched codec kernels' documents a run when fixed (`pack_documents`, TILEMAXSIM_PACK;
    /// 0: none).
    pack: Option<usize>,
    /// Whether the whole-document bulk launches take a grid of the blocks that fit at once,
    /// each walking its runs strided by the grid, rather than a block a run, when fixed
    /// (TILEMAXSIM_BULK_GRID=resident/runs); `None`: the engine's choice.
    bulk_resident: Option<bool>,
    /// Whether `maxsim_bulk` launches over every document cut tiles across documents
    /// (`maxsim_span`) when fixed (`bulk_spans`, TILEMAXSIM_SPAN=0/1); `None`: `DocLengths::spans_pay`.
    span: Option<bool>,
    /// Whether calls over every document of a residual upload take the
    /// four-documents-a-warpgroup kernel (`codec_quad`, TILEMAXSIM_QUAD=0/1; `None`: not,
    /// `codec_kernels::quad_or`).
    quad: Option<bool>,
    /// Whether launches over every document at small d stream the documents through
    /// registers (`maxsim_stream`) when fixed (`bulk_stream`, TILEMAXSIM_STREAM=0/1); `None`:
    /// the engine's choice.
    stream: Option<bool>,
    /// `maxsim_bulk_rows`'s tile tokens at d past 128 up to `BULK_ROWS_MAX_DIM` when fixed
    /// (TILEMAXSIM_ROWS=32/64; 0: never, the kernels that split d or cut spanning tiles);
    /// `None`: `bulk_rows_tile`.
    rows: Option<usize>,
    /// Waves of one-task blocks at the end of a whole-document bulk grid when fixed
    /// (TILEMAXSIM_TAIL=N); `None`: `BULK_TAIL_WAVES`.
    tail: Option<u64>,
    /// Warps a `maxsim_stream` block when fixed (TILEMAXSIM_STREAM_WARPS=1/2/4); `None`:
    /// `STREAM_WARPS`.
    stream_warps: Option<u32>,
    /// Whether uploads split f32 corpora once into f16 planes (`maxsim_bulk_planes`) where
    /// they can (`f32_planes`, TILEMAXSIM_F32_PLANES=0 turns it off).
    f32_planes: bool,
    /// Whether uploads pad a corpus's rows where `plan::stored_dim` says (`pad_rows`,
    /// TILEMAXSIM_PAD=0 turns it off).
    pad: bool,
}

impl CudaScorer {
    /// Open GPU `ordinal` (its primary context) and load the kernels (compiled, or from the cache).
    pub fn new(ordinal: usize) -> Result<Self> {
        let gpu = GpuContext::open(ordinal)?;
        let shape = KernelShape::parse(std::env::var("TILEMAXSIM_KERNEL_DEFINES").ok().as_deref())?;
        Ok(CudaScorer {
            gpu,
            topk_scratch: Mutex::new(TopKScratch::default()),
            raw_cache: raw::RawCache::default(),
            shape,
            force: None,
            bulk: bulk_shape_env(),
            pack: pack_env()?,
            bulk_resident: env_choice(
                "TILEMAXSIM_BULK_GRID",
                &[("resident", true), ("runs", false)],
            ),
            span: env_choice("TILEMAXSIM_SPAN", &[("0", false), ("1", true)]),
            stream: env_choice("TILEMAXSIM_STREAM", &[("0", false), ("1", true)]),
            quad: env_choice("TILEMAXSIM_QUAD", &[("0", false), ("1", true)]),
            f32_planes: std::env::var("TILEMAXSIM_F32_PLANES").as_deref() != Ok("0"),
            pad: std::env::var("TILEMAXSIM_PAD").as_deref() != Ok("0"),
            rows: env_choice("TILEMAXSIM_ROWS", &[("0", 0), ("32", 32), ("64", 64)]),
            tail: std::env::var("TILEMAXSIM_TAIL")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|&w| w <= 8),
            stream_warps: env_choice("TILEMAXSIM_STREAM_WARPS", &[("1", 1), ("2", 2), ("4", 4)]),
        })
    }

    /// The batched codec kernels' ring depth and documents a run, for a corpus where runs of
    /// documents `pays`.
    fn wg_shape(&self, pays: bool) -> codec_launch::WgShape {
        codec_launch::WgShape {
            stages: self.shape.wg_stages,
            pack: self.pack,
            pays,
        }
    }

    pub fn info(&self) -> &GpuInfo {
        &self.gpu.info
    }

    /// Whether the kernels came from the on-disk cache (no NVRTC compile at this start).
    pub fn kernels_from_cache(&self) -> bool {
        self.gpu.cache_hit
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.gpu.stream
    }

    /// The device's context, stream and kernels (for the GPU index's streams and buffers).
    pub(super) fn gpu(&self) -> &GpuContext {
        &self.gpu
    }

    pub fn synchronize(&self) -> Result<()> {
        self.gpu.synchronize()
    }

    // Choosing.

    /// The kernel `score_device` will use for these queries on this corpus.
    pub fn kernel_for(&self, queries: &DeviceQueries, corpus: &DeviceCorpus) -> Kernel {
        let f32 = corpus.dtype == DType::F32;
        let aligned = corpus.tokens.device_ptr(&self.gpu.stream).0 % 16 == 0;
        let kernels = &self.gpu.kernels;
        // f32 queries against a 16-bit corpus, split into parts by `maxsim_bulk_split`: every
        // query one block. Any finite f32 (the f16 split scales each query by a power of two
        // in the kernel; the bf16 split has f32's range), in host or device memory.
        let mixed = queries.dtype == DType::F32 && !f32;
        let mixed_ok = mixed && queries.longest <= QBLOCK;
        choose_kernel(
            self.force,
            LaunchShape {
                // Every tensor-core kernel reads 16-byte pieces of rows (d·2 bytes, d % 32 = 0):
                // a corpus at an unaligned address (device memory the engine borrows, a view
                // into a larger tensor) takes the general kernel.
                blocks: if mixed {
                    (aligned && mixed_ok).then_some(queries.len)
                } else {
                    queries
                        .mma
                        .as_ref()
                        .filter(|b| aligned && b.dtype == corpus.dtype && (!f32 || corpus.split_ok))
                        .map(|b| b.blocks)
                        // f32 queries `maxsim_bulk_split` takes from their f32 rows (scaled in
                        // the kernel) where the host did not pack them (out of the split's
                        // range, or device memory), against f32 tokens in the range. Only that
                        // kernel: `maxsim_ring` (forced) needs the packed blocks.
                        .or_else(|| {
                            (f32 && aligned
                                && matches!(self.force, None | Some(Kernel::Bulk))
                                && corpus.split_ok
                                && queries.dtype == DType::F32
                                && queries.longest <= QBLOCK
                                && !kernels.bulk_split.is_empty()
                                && MMA_DIMS.contains(&corpus.width))
                            .then_some(queries.len)
                        })
                },
                queries: queries.len,
                dim: corpus.width,
                f32,
                mixed,
                bulk_available: !kernels.bulk.is_empty() && aligned,
                wgmma_available: !kernels.wgmma.is_empty() && aligned,
                fills_tiles: corpus.lengths.fills_tiles(),
                ring_available: aligned
                    && ring_layout(corpus.width, f32, self.gpu.info.smem_per_block, self.shape)
                        .is_some(),
            },
        )
    }

    /// The kernel `enqueue` runs: `kernel_for`'s choice, but with a candidate list at a d
    /// only `maxsim_span_any` takes (≤ 256, neither a `maxsim_bulk` nor a `maxsim_bulk_any` d;
    /// it scores every document) the general kernel.
    fn kernel_to_run(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        candidates: bool,
    ) -> Kernel {
        match self.kernel_for(queries, corpus) {
            Kernel::Bulk
                if corpus.width <= SPAN_ANY_MAX_DIM
                    && !bulk_dim(corpus.width)
                    && wide_any_bound(corpus.width).is_none()
                    && candidates =>
            {
                Kernel::Tiled
            }
            k => k,
        }
    }

    /// The launch family of `kernel`, with this scorer's settings.
    fn family(&self, kernel: Kernel) -> Box<dyn Launch> {
        match kernel {
            Kernel::Mma => Box::new(Mma),
            Kernel::Bulk => Box::new(Bulk {
                stages_group: self.bulk,
                span: self.span,
                window: self.shape.span_wlog,
                resident: self.bulk_resident,
                stream: self.stream,
                rows: self.rows,
                tail: self.tail,
                stream_warps: self.stream_warps,
            }),
            Kernel::Gemm | Kernel::Wgmma => Box::new(Gemm {
                wgmma: kernel == Kernel::Wgmma,
                shape: self.shape,
            }),
            Kernel::Ring => Box::new(Ring { shape: self.shape }),
            Kernel::Tiled | Kernel::V1 | Kernel::V2 => Box::new(General { kernel }),
            // `choose_kernel` never picks it for exact corpora (a PQ corpus's kernel only).
            Kernel::Lut => Box::new(General {
                kernel: Kernel::Tiled,
            }),
        }
    }

    /// Enqueue the kernel `kernel_to_run` picks, on `t.stream`; returns it.
    ///
    /// # Safety
    /// `t.doc_index` is 0 or `t.n` indices < corpus.len, `t.out` holds Q × `t.n` floats, all
    /// usable on `t.stream`, as are the queries' and the corpus's buffers.
    unsafe fn enqueue(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<Kernel> {
        queries_dim_ok(queries.dim, corpus.dim)?;
        // A padded corpus reads its queries re-pitched to its rows' width.
        let padded;
        let queries = if queries.dim == corpus.width {
            queries
        } else {
            padded = queries_at(&self.gpu, queries, corpus.width)?;
            &padded
        };
        let kernel = self.kernel_to_run(queries, corpus, t.doc_index != 0);
        if t.n == 0 || queries.len == 0 {
            return Ok(kernel);
        }
        if kernel.tensor_core() {
            // The tensor-core kernels take counts as i32 (query blocks ≥ queries).
            launch_size_ok(t.n, queries.mma.as_ref().map_or(queries.len, |b| b.blocks))?;
        }
        // SAFETY: forwarded to the caller.
        unsafe { self.family(kernel).launch(&self.gpu, queries, corpus, t) }?;
        Ok(kernel)
    }

    // Sequencing.

    /// Copy a corpus to the GPU.
    pub fn upload(&self, corpus: &Corpus) -> Result<DeviceCorpus> {
        self.upload_range(corpus, 0..corpus.len())
    }

    /// Copy documents `docs` of a corpus to the GPU (as a corpus of `docs.len()` documents).
    pub fn upload_range(
        &self,
        corpus: &Corpus,
        docs: std::ops::Range<usize>,
    ) -> Result<DeviceCorpus> {
        let mut device = DeviceCorpus::upload(&self.gpu.stream, corpus, docs)?;
        let width = self.stored_width(device.dtype, device.dim, device.split_ok);
        pad_corpus(&self.gpu, &mut device, width)?;
        if self.f32_planes {
            add_planes(&self.gpu, &mut device)?;
        }
        Ok(device)
    }

    /// The width an upload stores rows of `dtype` at `dim` at: `plan::stored_dim`'s where
    /// padding is on and the device has the bulk-copy kernels the padded widths are for, else
    /// `dim` (`split_ok`: f32 values all in the split's range).
    pub(super) fn stored_width(&self, dtype: DType, dim: usize, split_ok: bool) -> usize {
        if self.pad && !self.gpu.kernels.bulk.is_empty() {
            stored_dim(dim, dtype == DType::F32, split_ok)
        } else {
            dim
        }
    }

    /// Copy queries to the GPU (as f32). Checks them like every scorer does.
    pub fn upload_queries(&self, queries: &[Matrix<'_>], dim: usize) -> Result<DeviceQueries> {
        DeviceQueries::upload(&self.gpu.stream, queries, dim)
    }

    /// Allocate `len` f32 on the device (for scores).
    pub fn alloc_scores(&self, len: usize) -> Result<CudaSlice<f32>> {
        memory::alloc_scores(&self.gpu.stream, len)
    }

    /// Copy scores back to the host.
    pub fn download(&self, scores: &CudaSlice<f32>, out: &mut [f32]) -> Result<()> {
        memory::download(&self.gpu.stream, scores, out)
    }

    /// Enqueue scoring on the scorer's stream: `out[q * n + i]` for the `n` documents `docs`
    /// (`None`: all). Asynchronous; `out` must hold `queries.len() * n` floats.
    pub fn score_device(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        docs: Option<&CudaSlice<i64>>,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let stream = &self.gpu.stream;
        let list = docs.map(|d| (d.device_ptr(stream).0, d.len()));
        let target = (out.device_ptr(stream).0, out.len());
        self.score_device_at(queries, corpus, list, target)
    }

    /// [`Self::score_device`] on parts of larger buffers: the candidate list `docs` and the
    /// output `out` (`queries.len() × docs.len()` floats).
    pub fn score_device_views(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        docs: &CudaView<'_, i64>,
        out: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let stream = &self.gpu.stream;
        let list = Some((docs.device_ptr(stream).0, docs.len()));
        let target = (out.device_ptr(stream).0, out.len());
        self.score_device_at(queries, corpus, list, target)
    }

    /// The exact kernels' launch for a candidate list `(address, length)` (`None`: every
    /// document) into `out` `(address, floats)`.
    fn score_device_at(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        docs: Option<(u64, usize)>,
        out: (u64, usize),
    ) -> Result<()> {
        let n = docs.map_or(corpus.len, |d| d.1);
        if out.1 < queries.len * n {
            return Err(Error::Argument(format!(
                "score buffer holds {} floats, needs {}",
                out.1,
                queries.len * n
            )));
        }
        // Event tracking is off (one stream, ordered by us), so the pointers' guards hold nothing.
        let target = Target {
            stream: &self.gpu.stream,
            doc_index: docs.map_or(0, |d| d.0),
            n,
            out: out.0,
        };
        // SAFETY: the candidate list holds `n` indices (checked < corpus.len by the callers
        // that build it) and `out` room for Q × n floats (checked above), on this scorer's stream.
        unsafe { self.enqueue(queries, corpus, target) }.map(|_| ())
    }

    /// The caller's stream (`None`: the scorer's own).
    ///
    /// # Safety
    /// A given stream must belong to this context and outlive the work enqueued on it.
    unsafe fn caller_stream(&self, stream: Option<CUstream>) -> Arc<CudaStream> {
        match stream {
            // SAFETY: this function's contract.
            Some(s) => unsafe { self.gpu.ctx.wrap_borrowed_stream(s) },
            None => self.gpu.stream.clone(),
        }
    }

    /// Score device memory the caller owns, on the caller's stream (`None`: the scorer's own,
    /// a non-blocking stream: the caller orders its writes of the inputs before it, and its
    /// reads of `out` after it, e.g. by [`CudaScorer::synchronize`]-ing), without waiting for
    /// it; returns the kernel it enqueued. Shapes are checked here (dims,
    /// empty queries, null pointers, sizes); values are not (NaN and Inf propagate into the
    /// scores), nor is memory the host cannot see (offsets, lengths, candidate indices).
    ///
    /// # Safety
    /// Every pointer must be live device memory of this device's primary context, holding what
    /// `args` describes: the query spans' rows, the documents' rows, their offsets or lengths,
    /// the candidate indices (each below `docs.len()`), and room for `Q × n` f32 at `out`,
    /// until the work enqueued on `stream` has run. Every document has at least one row.
    /// `stream` must belong to this context.
    pub unsafe fn score_raw(&self, stream: Option<CUstream>, args: RawArgs<'_>) -> Result<Kernel> {
        let RawArgs {
            queries: q,
            docs,
            candidates,
            out,
        } = args;
        raw::check(&q, &docs, candidates, out)?;
        // SAFETY: forwarded (this function's contract).
        let stream = &unsafe { self.caller_stream(stream) };
        let n = candidates.map_or(docs.len(), |c| c.1);
        let target = Target {
            stream,
            doc_index: candidates.map_or(0, |c| c.0),
            n,
            out,
        };
        if q.spans.is_empty() || n == 0 {
            return Ok(Kernel::Tiled);
        }
        let corpus = raw::borrow_corpus(&self.gpu, &self.raw_cache, stream, &docs)?;
        if let Some(corpus) = &corpus {
            // Queries already in the blocks' layout are read where they lie (no gather, no
            // buffers: a call's host time is mostly launches), by a kernel that reads blocks.
            // SAFETY: the query spans lie in the caller's memory (this function's contract).
            let in_place = unsafe {
                raw::queries_in_place(&self.gpu, &self.raw_cache, stream, &q, docs.dtype)
            }?;
            if let Some(queries) = in_place
                && self
                    .kernel_to_run(&queries, corpus, target.doc_index != 0)
                    .tensor_core()
            {
                // SAFETY: as below.
                return unsafe { self.enqueue(&queries, corpus, target) };
            }
        }
        // SAFETY: the query spans lie in the caller's memory (this function's contract).
        let queries =
            unsafe { raw::gather_queries(&self.gpu, &self.raw_cache, stream, &q, docs.dtype) }?;
        if let Some(corpus) = &corpus {
            // SAFETY: the corpus borrows the caller's rows and offsets, the target its
            // candidates and output (this function's contract); all on `stream`.
            return unsafe { self.enqueue(&queries, corpus, target) };
        }
        let kernel = match self.force {
            Some(k @ (Kernel::V1 | Kernel::V2)) => k,
            _ => Kernel::Tiled,
        };
        let args = GeneralArgs {
            q_tokens: queries.f32_rows(stream)?,
            q_offsets: queries.offsets.device_ptr(stream).0,
            num_queries: queries.len,
            docs: raw::doc_rows(&docs),
            dim: docs.dim,
            dtype: docs.dtype,
        };
        // SAFETY: the gathered queries are ours, the rest the caller's (this function's
        // contract), all on `stream`.
        unsafe { General { kernel }.launch_args(&self.gpu, target, args) }?;
        Ok(kernel)
    }

    /// Score queries against a PLAID residual corpus the caller owns ([`RawResidual`]), on the
    /// caller's stream (`None`: the scorer's), without waiting: `out[q · docs + i]` = Σ over
    /// query q's rows of the largest ⟨row, normalize(centroid[id] + weights[buckets])⟩ over
    /// document i's tokens. Shapes are checked here; values are not (NaN and Inf propagate
    /// into the scores), nor is memory the host cannot see (ids, offsets).
    ///
    /// # Safety
    /// Every pointer must be live device memory of this device's primary context holding what
    /// `args` describes, until the work enqueued on `stream` has run; `stream` must belong to
    /// this context.
    pub unsafe fn score_residual_raw(
        &self,
        stream: Option<CUstream>,
        args: RawResidual<'_>,
    ) -> Result<()> {
        // SAFETY: forwarded (this function's contract).
        let stream = &unsafe { self.caller_stream(stream) };
        // SAFETY (each arm): this function's contract, each step enqueued after the one before.
        let batched_ok = !self.gpu.kernels.codec_wg.is_empty();
        // (The tensors' lengths are on the device: each document in tiles of its own unless
        // runs are asked for.)
        let stages = self.wg_shape(false);
        match raw_residual::kernel(&args, batched_ok, self.force)? {
            Some(k @ CodecKernel::Batched(_)) => unsafe {
                raw_residual::score_fused(&self.gpu, stream, &args, &k, None, stages)
            },
            Some(k) => {
                let prepared = unsafe { raw_residual::prepare(&self.gpu, stream, &args) }?;
                unsafe {
                    raw_residual::score_fused(&self.gpu, stream, &args, &k, Some(&prepared), stages)
                }
            }
            None => {
                let prepared = unsafe { raw_residual::prepare(&self.gpu, stream, &args) }?;
                let (_decoded, exact) =
                    unsafe { raw_residual::decode(&self.gpu, stream, &prepared, &args) }?;
                // The decoded rows are freed in stream order, after the scoring.
                unsafe { self.score_raw(Some(stream.cu_stream()), exact) }.map(|_| ())
            }
        }
    }

    /// Enqueue a training forward pass on the caller's tensors (kernels/train.cu): the scores
    /// into `out` and, unless `argmax` is 0, each query token's best document token (int32, for
    /// [`train_backward`](Self::train_backward)). See `train::forward` for the layouts.
    ///
    /// # Safety
    /// Every pointer must be live device memory of this device's primary context holding what
    /// `args` describes, until the work enqueued on `stream` has run; `stream` must belong to
    /// this context.
    pub unsafe fn train_forward(
        &self,
        stream: Option<CUstream>,
        args: &TrainArgs,
        out: u64,
        argmax: u64,
    ) -> Result<()> {
        // SAFETY: forwarded (this function's contract).
        let stream = &unsafe { self.caller_stream(stream) };
        unsafe { train::forward(&self.gpu, stream, args, out, argmax) }
    }

    /// Enqueue the training backward pass: the gradients of the queries (`dq`) and documents
    /// (`dd`) from the scores' gradient `grad` and the forward pass's `argmax`. See
    /// `train::backward` for the layouts.
    ///
    /// # Safety
    /// As [`train_forward`](Self::train_forward); `argmax` must hold what it wrote for `args`.
    pub unsafe fn train_backward(
        &self,
        stream: Option<CUstream>,
        args: &TrainArgs,
        argmax: u64,
        grad: u64,
        dq: u64,
        dd: u64,
    ) -> Result<()> {
        // SAFETY: forwarded (this function's contract).
        let stream = &unsafe { self.caller_stream(stream) };
        unsafe { train::backward(&self.gpu, stream, args, argmax, grad, dq, dd) }
    }

    /// The `k` best of each of the `rows` rows of `n` scores in `scores` (row-major), selected on
    /// the device (kernels/topk.cu) and returned best first, ties to the lower index. Document
    /// indices are offset by `first_doc`. Synchronizes the stream.
    pub fn top_k_device(
        &self,
        scores: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        k: usize,
        first_doc: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        topk::select(&self.gpu, &self.topk_scratch, scores, rows, n, k, first_doc)
    }

    /// Enqueue the top-k selection of each of the `rows` rows of `n` scores: `rows × k` (index,
    /// score) pairs, unsorted within a row, into `index` and `best`. Needs `1 <= k <= n`.
    /// Asynchronous.
    pub fn top_k_enqueue(
        &self,
        scores: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        k: usize,
        index: &mut CudaViewMut<'_, i32>,
        best: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        topk::enqueue(
            &self.gpu,
            &self.topk_scratch,
            scores,
            rows,
            n,
            k,
            index,
            best,
        )
    }

    // Timing.

    /// The device's streaming read ceiling in GB/s over `bytes` bytes (use several times the L2
    /// size), median of `reps` timed runs after a warm-up: the faster of 16-byte loads and
    /// (sm_90+) bulk copies (`timing::read_ceiling`).
    pub fn measure_read_ceiling(&self, bytes: usize, reps: usize) -> Result<f64> {
        timing::read_ceiling(&self.gpu, bytes, reps)
    }

    /// Every read-ceiling kernel's rate over one buffer of `bytes`: 16-byte loads, and bulk
    /// copies at each of `timing::COPY_SHAPES` (none before sm_90).
    pub fn measure_read_ceilings(&self, bytes: usize, reps: usize) -> Result<ReadCeilings> {
        timing::read_ceilings(&self.gpu, bytes, reps)
    }

    /// The host→device copy rate in GB/s from page-locked memory (`timing::h2d`).
    pub fn measure_h2d(&self, bytes: usize, reps: usize) -> Result<f64> {
        timing::h2d(&self.gpu, bytes, reps)
    }

    /// Time `work` (enqueued on the scorer's stream) with CUDA events, calls back to back
    /// (`timing::time_ms`); milliseconds per call.
    pub fn time_ms(&self, reps: usize, work: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
        timing::time_ms(&self.gpu, reps, work)
    }

    /// Time `work` as one isolated call, the host waiting for each (`timing::time_ms_isolated`).
    pub fn time_ms_isolated(
        &self,
        reps: usize,
        work: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        timing::time_ms_isolated(&self.gpu, reps, work)
    }
}

// CUDA handles are used from one thread at a time through the stream; cudarc's types are
// Send + Sync, so the scorer is too.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CudaScorer>();
};
