//! [`CudaScorer`]: one GPU's primary context, its stream and compiled kernels, the settings of its
//! kernel choice, and its [`Scorer`] impl (upload, score, download per call).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule, CudaSlice, CudaStream, DevicePtr};

use super::compile::{self, arch_name};
use super::device::{GpuInfo, check_available, drv, info};
use super::functions::Kernels;
use super::launch::Occupancy;
use super::memory::{DeviceCorpus, DeviceQueries};
use super::plan::*;
use super::topk::TopKBuffers;
use crate::codec::CodecKind;
use crate::corpus::{AnyCorpus, CorpusKind};
use crate::error::{Error, Result};
use crate::matrix::{DType, Matrix};
use crate::scorer::{Docs, Scorer};

/// The GPU scorer on one device.
pub struct CudaScorer {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) _module: Arc<CudaModule>,
    pub(super) kernels: Kernels,
    pub(super) info: GpuInfo,
    pub(super) cache_hit: bool,
    /// The tensor-core kernel's task counter (zeroed before each launch, on the stream).
    pub(super) task_counter: std::sync::Mutex<CudaSlice<u64>>,
    /// The candidates between the two top-k kernels, reused (and grown) across calls.
    pub(super) topk_scratch: std::sync::Mutex<TopKBuffers>,
    /// Resident blocks per SM and dynamic shared memory allowed, per kernel: `blocks_per_sm`.
    pub(super) occupancy: std::sync::Mutex<Occupancy>,
    pub(super) shape: KernelShape,
    pub(super) force: Option<Kernel>,
    /// `maxsim_bulk`'s (stages, tasks per block) when fixed (`bulk_shape`, TILEMAXSIM_BULK).
    pub(super) bulk: Option<(usize, usize)>,
    /// Whether `maxsim_bulk` launches over every document cut tiles across documents
    /// (`maxsim_span`) when fixed (`bulk_spans`, TILEMAXSIM_SPAN=0/1); `None`: `DocLengths::spans_pay`.
    pub(super) span: Option<bool>,
}

impl CudaScorer {
    /// Open GPU `ordinal` (its primary context) and load the kernels (compiled, or from the cache).
    pub fn new(ordinal: usize) -> Result<Self> {
        check_available(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(drv("context"))?;
        // One stream, ordered by us: cudarc's per-buffer event tracking is not needed.
        // SAFETY: every buffer of this scorer is used on `stream` only.
        unsafe { ctx.disable_event_tracking() };
        let info = info(&ctx)?;
        let (major, minor) = info.compute_capability;
        if major < 8 {
            return Err(Error::DeviceUnavailable(format!(
                "cuda:{ordinal} is sm_{major}{minor}; tilemaxsim needs sm_80 or newer"
            )));
        }
        let (ptx, cache_hit) = compile::compile(arch_name(major, minor))?;
        let module = ctx.load_module(ptx).map_err(drv("loading the kernels"))?;
        let kernels = Kernels::load(&module, arch_name(major, minor))?;
        let shape = KernelShape::parse(std::env::var("TILEMAXSIM_KERNEL_DEFINES").ok().as_deref())?;
        let stream = ctx.default_stream();
        let task_counter =
            std::sync::Mutex::new(stream.alloc_zeros::<u64>(1).map_err(drv("task counter"))?);
        Ok(CudaScorer {
            ctx,
            stream,
            _module: module,
            kernels,
            info,
            cache_hit,
            task_counter,
            topk_scratch: std::sync::Mutex::new(TopKBuffers::default()),
            occupancy: std::sync::Mutex::new(Occupancy::default()),
            shape,
            force: None,
            bulk: bulk_shape_env(),
            span: match std::env::var("TILEMAXSIM_SPAN").as_deref() {
                Ok("0") => Some(false),
                Ok("1") => Some(true),
                _ => None,
            },
        })
    }

    /// Use this kernel for every launch it can take (`None`: choose per shape). A forced
    /// tensor-core kernel falls back to the nearest one that applies (`Mma` and `Bulk` take
    /// queries of ≤ 32 tokens, else `Gemm`; f32 or other d: `Tiled`).
    pub fn force_kernel(mut self, kernel: Option<Kernel>) -> Self {
        self.force = kernel;
        self
    }

    /// Fix `maxsim_bulk`'s tiles in flight per block (`BULK_STAGES_RANGE`) and consecutive
    /// tasks per block (`BULK_GROUP_RANGE`) instead of the engine's choice: for experiments and
    /// tests. Also read from `TILEMAXSIM_BULK=stages,group` when the scorer opens.
    pub fn bulk_shape(mut self, stages: usize, group: usize) -> Result<Self> {
        if !BULK_STAGES_RANGE.contains(&stages) || !BULK_GROUP_RANGE.contains(&group) {
            return Err(Error::Argument(format!(
                "maxsim_bulk shape ({stages}, {group}): stages must be in {BULK_STAGES_RANGE:?}, \
                 tasks per block in {BULK_GROUP_RANGE:?}"
            )));
        }
        self.bulk = Some((stages, group));
        Ok(self)
    }

    /// Fix whether `maxsim_bulk`, scoring every document of a packed corpus, cuts its tiles
    /// across documents (`maxsim_span`; `None`: where documents leave tiles partly empty, see
    /// `DocLengths::spans_pay`). For experiments and tests; also TILEMAXSIM_SPAN=0/1.
    pub fn bulk_spans(mut self, span: Option<bool>) -> Self {
        self.span = span;
        self
    }

    /// The kernel `score_device` will use for these queries on this corpus.
    pub fn kernel_for(&self, queries: &DeviceQueries, corpus: &DeviceCorpus) -> Kernel {
        let f32 = corpus.dtype == DType::F32;
        let aligned = corpus.tokens.device_ptr(&self.stream).0 % 16 == 0;
        choose_kernel(
            self.force,
            LaunchShape {
                // Every tensor-core kernel reads 16-byte pieces of rows (d·2 bytes, d % 32 = 0):
                // a corpus at an unaligned address (device memory the engine borrows, a view
                // into a larger tensor) takes the general kernel.
                blocks: queries
                    .mma
                    .as_ref()
                    .filter(|b| aligned && b.dtype == corpus.dtype && (!f32 || corpus.split_ok))
                    .map(|b| b.blocks),
                queries: queries.len,
                dim: corpus.dim,
                f32,
                bulk_available: !self.kernels.bulk.is_empty() && aligned,
                wgmma_available: !self.kernels.wgmma.is_empty() && aligned,
                fills_tiles: corpus.lengths.fills_tiles(),
                ring_available: aligned
                    && ring_layout(corpus.dim, f32, self.info.smem_per_block, self.shape).is_some(),
            },
        )
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Whether the kernels came from the on-disk cache (no NVRTC compile at this start).
    pub fn kernels_from_cache(&self) -> bool {
        self.cache_hit
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv("synchronize"))
    }
}

impl Scorer for CudaScorer {
    fn name(&self) -> String {
        format!(
            "cuda:{}-{}",
            self.info.ordinal,
            arch_name(
                self.info.compute_capability.0,
                self.info.compute_capability.1
            )
        )
    }

    /// Exact corpora (the fused compressed kernels are not built yet).
    fn supports(&self, codec: CodecKind) -> bool {
        codec == CodecKind::Exact
    }

    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn AnyCorpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        self.check(queries, corpus, &docs, out.len())?;
        let CorpusKind::Exact(corpus) = corpus.kind() else {
            unreachable!("check() admits only the codecs supports() names: exact");
        };
        let n = docs.count(corpus);
        if n == 0 {
            return Ok(());
        }
        let dc = self.upload(corpus)?;
        let dq = self.upload_queries(queries, corpus.dim())?;
        let index: Vec<i64> = (0..n).map(|i| docs.index(i) as i64).collect();
        let di = match docs {
            Docs::All => None,
            _ => Some(
                self.stream
                    .clone_htod(&index)
                    .map_err(drv("candidate upload"))?,
            ),
        };
        let mut scores = self.alloc_scores(out.len())?;
        // Poisoned with NaN (all bits set) first: a score the kernel fails to write cannot pass for a result
        // left in recycled memory by an earlier call (the tests rely on it; the cost is one
        // write of Q × N floats beside the corpus upload this path makes anyway).
        {
            let (p, _g) = scores.device_ptr(&self.stream);
            // SAFETY: `p` holds at least out.len() f32 on this scorer's stream.
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    p,
                    0xff,
                    out.len() * 4,
                    self.stream.cu_stream(),
                )
            }
            .map_err(drv("poisoning the score buffer"))?;
        }
        self.score_device(&dq, &dc, di.as_ref(), &mut scores)?;
        self.download(&scores, out)
    }
}

// CUDA handles are used from one thread at a time through the stream; cudarc's types are
// Send + Sync, so the scorer is too.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CudaScorer>();
};
