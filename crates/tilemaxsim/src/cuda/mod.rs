//! The CUDA engine: the same [`Scorer`] trait over device memory. Kernels are `.cu` files in
//! `kernels/`, compiled by NVRTC at first use and cached on disk (`compile.rs`). The driver and
//! NVRTC are loaded at run time, so one binary runs on machines with no CUDA at all: there,
//! [`devices`] is empty and asking for a GPU is a clear error.
//!
//! Three levels of use: [`CudaScorer`] as a [`Scorer`] on host data (uploads per call); a
//! [`DeviceCorpus`] uploaded once and scored many times; and [`CudaScorer::score_raw`] on device
//! memory the caller owns (raw pointers and a stream, as PyTorch hands them over), in the
//! device's primary context.

mod compile;
mod index;
mod raw;

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, CudaViewMut,
    DevicePtr, DeviceRepr, DriverError, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};

pub use compile::{arch_name, compile_uncached, nvrtc_available, nvrtc_version, source};
pub use index::GpuIndex;
pub use raw::{RawArgs, RawDocs, RawLayout, RawQueries};

use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::{DType, Matrix};
use crate::scorer::{Docs, Scorer};
use crate::topk::{Hit, rank_order};

/// Threads per block of `maxsim_tiled` (kernels/maxsim.cu: THREADS).
const TILED_THREADS: u32 = 256;
/// Largest grid y dimension: queries per launch.
const MAX_QUERIES_PER_LAUNCH: usize = 65_535;
/// Threads per block and scores per segment of the top-k kernels (kernels/topk.cu).
const TOPK_THREADS: u32 = 1024;
const TOPK_SEGMENT: usize = 8192;

fn drv(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        if format!("{e:?}").contains("OUT_OF_MEMORY") {
            Error::OutOfMemory(format!("GPU: {what}"))
        } else {
            Error::DeviceUnavailable(format!("CUDA error in {what}: {e:?}"))
        }
    }
}

/// Whether the CUDA driver library can be loaded on this machine.
pub fn driver_available() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// One GPU as the driver describes it.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    pub multiprocessors: i32,
    /// Shared memory one block may opt in to (bytes).
    pub smem_per_block: usize,
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (sm_{}{}, {} SMs, {:.1} GiB)",
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64
        )
    }
}

fn info(ctx: &CudaContext) -> Result<GpuInfo> {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    };
    Ok(GpuInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(drv("device name"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(drv("compute capability"))?,
        total_memory: ctx.total_mem().map_err(drv("memory size"))?,
        multiprocessors: ctx
            .attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(drv("SM count"))?,
        smem_per_block: ctx
            .attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(drv("shared memory size"))? as usize,
    })
}

/// The GPUs this machine has (empty when there is no CUDA driver or no device).
pub fn devices() -> Result<Vec<GpuInfo>> {
    if !driver_available() {
        return Ok(Vec::new());
    }
    let n = match CudaContext::device_count() {
        Ok(n) => n as usize,
        Err(_) => return Ok(Vec::new()), // e.g. a driver without a device
    };
    (0..n)
        .map(|i| info(&*CudaContext::new(i).map_err(drv("context"))?))
        .collect()
}

/// Why GPU `ordinal` cannot be used, or `Ok` when it can.
pub fn check_available(ordinal: usize) -> Result<()> {
    if !driver_available() {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal}: no CUDA driver (libcuda) on this machine"
        )));
    }
    let n = CudaContext::device_count().map_err(drv("device count"))? as usize;
    if ordinal >= n {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal}: this machine has {n} CUDA device(s)"
        )));
    }
    if !nvrtc_available() {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal}: libnvrtc not found (needed to compile the kernels)"
        )));
    }
    Ok(())
}

/// A device buffer the engine owns (freed on drop) or borrows (device memory of the caller's,
/// `score_raw`: left alone on drop).
struct Mem<T> {
    slice: std::mem::ManuallyDrop<CudaSlice<T>>,
    owned: bool,
}

impl<T> Mem<T> {
    fn owned(slice: CudaSlice<T>) -> Self {
        Mem {
            slice: std::mem::ManuallyDrop::new(slice),
            owned: true,
        }
    }
    /// `len` elements at `ptr`, not freed on drop.
    ///
    /// # Safety
    /// `ptr` must hold `len` elements of `T` in `stream`'s context for as long as the `Mem` lives.
    unsafe fn borrowed(stream: &Arc<CudaStream>, ptr: u64, len: usize) -> Self {
        // SAFETY: forwarded to the caller; event tracking is off, so nothing else is attached.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
        Mem {
            slice: std::mem::ManuallyDrop::new(slice),
            owned: false,
        }
    }
}

impl<T> std::ops::Deref for Mem<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> std::ops::DerefMut for Mem<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl<T> Drop for Mem<T> {
    fn drop(&mut self) {
        // SAFETY: `slice` is taken once, here, and not used after.
        let slice = unsafe { std::mem::ManuallyDrop::take(&mut self.slice) };
        if self.owned {
            drop(slice);
        } else {
            slice.leak();
        }
    }
}

/// A corpus in GPU memory: the packed tokens (as stored: f32, f16 or bf16) and the offsets.
pub struct DeviceCorpus {
    tokens: Mem<u8>,
    offsets: Mem<i64>,
    dtype: DType,
    dim: usize,
    len: usize,
    bytes: usize,
    /// f32 tokens all in the split's range (`split_rows_ok`): `maxsim_ring` can score them
    /// exactly as f16 high and low parts.
    split_ok: bool,
    /// What the kernel choice needs of its documents' lengths.
    lengths: DocLengths,
}

impl DeviceCorpus {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Bytes of token embeddings on the device.
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }
}

/// Queries in GPU memory: f32 tokens (widened exactly from any input dtype) and offsets, plus,
/// when every query can take the tensor-core path, their raw 16-bit tokens in 32-row blocks.
pub struct DeviceQueries {
    tokens: CudaSlice<f32>,
    offsets: Mem<i64>,
    len: usize,
    dim: usize,
    mma: Option<DeviceBlocks>,
    /// Where `offsets` and the blocks' `rows` and `start` are views into one upload
    /// (`score_raw`'s queries): that upload.
    _meta: Option<CudaSlice<u8>>,
}

/// Queries as blocks of 32 rows for the tensor-core kernels (see `QueryBlocks`), on the device.
struct DeviceBlocks {
    dtype: DType,
    tokens: CudaSlice<u16>,
    rows: Mem<i32>,
    start: Mem<i32>,
    blocks: usize,
}

/// Queries as blocks of 32 rows of 16-bit tokens, `[blocks][32][d]`: query `q` takes blocks
/// `start[q] .. start[q + 1]` (ceil(Nq / 32) of them, rows past its end zero), block `b` has
/// `rows[b]` real rows. With every Nq ≤ 32, block q is query q (the layout `maxsim_mma` reads).
/// f32 queries (for `maxsim_ring` only, Nq ≤ 32) take `[blocks][2][32][d]`: the f16 high parts,
/// then the low parts scaled by 2^11 (`split_f32`).
struct QueryBlocks {
    dtype: DType,
    tokens: Vec<u16>,
    rows: Vec<i32>,
    start: Vec<i32>,
}

/// Query rows per block of the tensor-core kernels (two m16 tiles).
const QBLOCK: usize = 32;
/// Embedding dimensions `maxsim_mma`, `maxsim_bulk` and `maxsim_gemm` are instantiated for.
const MMA_DIMS: [usize; 4] = [32, 64, 96, 128];
/// Wide embeddings (dimension-tiled by 128 in `maxsim_ring`, split in quarters among the warps
/// of `maxsim_bulk`): d = 256, 384, …, 1024.
const WIDE_DIMS: [usize; 7] = [256, 384, 512, 640, 768, 896, 1024];
fn wide_dim(dim: usize) -> bool {
    WIDE_DIMS.contains(&dim)
}
/// The dimensions `maxsim_ring` takes, and the d of the instantiation that serves them (it walks
/// d in steps of min(d, 128)).
fn ring_instance(dim: usize) -> Option<usize> {
    if MMA_DIMS.contains(&dim) {
        Some(dim)
    } else if wide_dim(dim) {
        Some(128)
    } else {
        None
    }
}
/// The rows `maxsim_ring` splits into f16 high and low parts: the largest magnitude of a row
/// must stay below f16's overflow (65504, with room for rounding) and, unless the row is all
/// zeros, above SPLIT_MIN. The low part is exact to 2^-36 in absolute terms (f16's subnormal
/// spacing over the 2^11 scale), which is f32's precision only for rows of that scale or more;
/// other rows go to the CUDA-core kernel.
const SPLIT_MAX: f32 = 32768.0;
const SPLIT_MIN: f32 = 1.0 / 4096.0;
/// Scale of the low part of a split f32 (SPLIT_SCALE in kernels/maxsim.cu).
const SPLIT_SCALE: f32 = 2048.0;

/// `maxsim_ring`'s block for d (f32: split, two copies of the query): (warps, dynamic shared
/// bytes), as many warps as `smem_per_block` holds up to `shape.ring_warps`; `None` if not one
/// fits. A stage is `shape.ring_tiles` 8-token tiles (f32: one) of min(d, 128) dimensions,
/// plus (f32) its 8-byte mbarrier with `shape.ring_bulk`.
fn ring_layout(
    dim: usize,
    f32: bool,
    smem_per_block: usize,
    shape: KernelShape,
) -> Option<(u32, usize)> {
    let query = if f32 { 2 } else { 1 } * QBLOCK * dim * 2;
    let stage_bytes_per_dim = if f32 { 8 * 4 } else { shape.ring_tiles * 8 * 2 };
    let barrier = if shape.ring_bulk && f32 { 8 } else { 0 };
    let per_warp = shape.ring_stages * (ring_instance(dim)? * stage_bytes_per_dim + barrier);
    let warps = (smem_per_block.checked_sub(query)? / per_warp).min(shape.ring_warps);
    (warps > 0).then_some((warps as u32, query + warps * per_warp))
}

/// Whether every row of `dim` f32 values is in the split's range (`SPLIT_MIN`, `SPLIT_MAX`).
fn split_rows_ok(values: &[f32], dim: usize) -> bool {
    use rayon::prelude::*;
    values.par_chunks(dim.max(1)).all(|row| {
        let m = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        // (`<=` is false for NaN, which `max` would skip.)
        row.iter().all(|x| x.abs() <= SPLIT_MAX) && (m == 0.0 || m >= SPLIT_MIN)
    })
}

/// What the kernel choice needs of a corpus's document lengths: counts from its offsets in
/// one pass (or, for device memory the engine only borrows, from its shape: `mean`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DocLengths {
    docs: usize,
    tokens: usize,
    /// Tokens with every document padded to whole `WG_BN`-token tiles.
    padded: usize,
}

impl DocLengths {
    fn of(offsets: &[usize]) -> Self {
        let (mut tokens, mut padded) = (0usize, 0usize);
        for len in offsets.windows(2).map(|w| w[1] - w[0]) {
            tokens += len;
            padded += len.div_ceil(WG_BN) * WG_BN;
        }
        let docs = offsets.len().saturating_sub(1);
        DocLengths {
            docs,
            tokens,
            padded,
        }
    }

    /// `docs` documents of `tokens` tokens in all, lengths unknown: as if each had the mean.
    fn mean(docs: usize, tokens: usize) -> Self {
        let mean = tokens.checked_div(docs).unwrap_or(0);
        DocLengths {
            docs,
            tokens,
            padded: docs * mean.div_ceil(WG_BN) * WG_BN,
        }
    }

    /// Cut into `WG_BN`-token tiles, the documents pad at most 40% of their tokens:
    /// `maxsim_wgmma` (which multiplies whole tiles) then beats `maxsim_gemm` (which skips
    /// empty 8-token columns). U[32,256] pads 39%: 401 against 386 TFLOP/s on the H100
    /// (bench/results/race_ws.log); on whole tiles wgmma is 1.34x gemm, so the two meet near 45%.
    fn fills_tiles(&self) -> bool {
        self.tokens > 0 && self.padded * 10 <= self.tokens * 14
    }

    /// `maxsim_bulk`'s runs of documents per block (`bulk_group`'s most), 1 to 4.
    /// - d ≤ 128: about four 128-token tiles (BULK_TILE, = WG_BN) per block. On U[32,256]
    ///   (1.56 tiles a document) two documents a block measured 85.97 / 85.97 M docs/s on the
    ///   H100 against 85.60 with three and 85.07 / 85.08 with four (bench/results/
    ///   bulk_grid.log, small_b.log).
    /// - Wide d: about four 128 × 128-element tiles' worth of the document's bytes per block:
    ///   two 128-token documents at d = 256 (48.61 M docs/s against 47.50 with one), one at
    ///   d = 768 (15.70 against 15.58 with two; B = 100K 16.01 against 15.95), d = 1024 (11.99
    ///   against 11.92) and U[32,256] at d = 768 (13.94 against 13.79), H100,
    ///   bench/results/profile_peer.log.
    fn bulk_run(&self, dim: usize) -> u64 {
        let (work, unit) = if wide_dim(dim) {
            (self.tokens * dim, WG_BN * 128)
        } else {
            (self.padded, WG_BN)
        };
        (4 * unit * self.docs)
            .checked_div(work)
            .map_or(4, |r| r.clamp(1, 4) as u64)
    }
}

/// Whether tokens `tokens` of the corpus are f32 rows the split takes (`split_rows_ok`).
fn split_ok(corpus: &Corpus, tokens: std::ops::Range<usize>) -> bool {
    let dim = corpus.dim();
    match corpus.tokens().elements() {
        crate::matrix::Elements::F32(v) => {
            split_rows_ok(&v[tokens.start * dim..tokens.end * dim], dim)
        }
        _ => false,
    }
}

/// An f32 as its f16 high part and its f16 low part scaled by 2^11 (as bits), the split
/// `maxsim_ring` applies to f32 documents in the kernel.
fn split_f32(x: f32) -> (u16, u16) {
    let hi = half::f16::from_f32(x);
    let lo = half::f16::from_f32((x - hi.to_f32()) * SPLIT_SCALE);
    (hi.to_bits(), lo.to_bits())
}
/// Threads per block of the tensor-core kernels (kernels/maxsim.cu: MMA_THREADS, BULK_THREADS:
/// four warps; GEMM_THREADS: eight; maxsim_ring: `ring_layout`; kernels/wgmma.cu: WG_THREADS,
/// two consumer warpgroups, and a producer warp more).
const MMA_THREADS: u32 = 128;
const BULK_THREADS: u32 = 128;
const GEMM_THREADS: u32 = 256;
const WG_THREADS: u32 = 256;
/// `maxsim_wgmma`: query blocks per block (WG_QBLOCKS), tokens per tile (WG_BN), the d it is
/// instantiated for (128-byte swizzle atoms of 64 dimensions).
const WG_QBLOCKS: usize = 8;
const WG_BN: usize = 128;
const WG_DIMS: [usize; 2] = [64, 128];
/// Whether the engine picks `maxsim_bulk` over `maxsim_mma` where both apply (sm_90+).
const BULK_BY_DEFAULT: bool = true;
/// Whether the engine picks `maxsim_bulk` over `maxsim_ring` at wide d (f16/bf16, sm_90+).
const WIDE_BULK_BY_DEFAULT: bool = true;
/// Document tokens per tile of `maxsim_gemm` (GEMM_BN).
const GEMM_BN: usize = 128;
/// Bytes of a `TileMeta` (kernels/maxsim.cu), one per stage of `maxsim_gemm` and `maxsim_wgmma`.
const TILE_META: usize = 16;
/// From this many queries in one launch the engine scores them with `maxsim_gemm` (one read of
/// each document tile for eight query blocks) rather than one warp per (query, document).
const GEMM_MIN_QUERIES: usize = 8;

/// The 32-row blocks of queries of `lens` tokens (`QueryBlocks`): each block's real rows, and
/// each query's first block (Q + 1 entries, the last the number of blocks); `None` past i32.
fn block_layout(lens: impl Iterator<Item = usize>) -> Option<(Vec<i32>, Vec<i32>)> {
    let mut start = vec![0i32];
    let mut rows = Vec::new();
    for len in lens {
        rows.extend((0..len.div_ceil(QBLOCK)).map(|b| (len - b * QBLOCK).min(QBLOCK) as i32));
        start.push(i32::try_from(rows.len()).ok()?);
    }
    Some((rows, start))
}

/// The queries' 16-bit tokens in 32-row blocks, when the tensor-core kernels can take them
/// exactly: all f16 or all bf16 (so the products are exact) and d instantiated.
fn query_blocks(queries: &[Matrix<'_>], dim: usize) -> Option<QueryBlocks> {
    use crate::matrix::Elements;
    let dtype = queries.first()?.dtype();
    ring_instance(dim)?;
    // f32: only for maxsim_ring (one block per query), and only in the range the split holds.
    let f32 = dtype == DType::F32;
    let copies = if f32 { 2 } else { 1 };
    if queries
        .iter()
        .any(|q| q.dtype() != dtype || (f32 && q.rows() > QBLOCK))
    {
        return None;
    }
    let (rows, start) = block_layout(queries.iter().map(|q| q.rows()))?;
    let mut tokens = vec![0u16; rows.len() * copies * QBLOCK * dim];
    for (q, &first) in queries.iter().zip(&start) {
        let block = &mut tokens[first as usize * copies * QBLOCK * dim..];
        let out = &mut block[..q.rows() * dim];
        match q.elements() {
            Elements::F16(v) => out.iter_mut().zip(v).for_each(|(o, x)| *o = x.to_bits()),
            Elements::BF16(v) => out.iter_mut().zip(v).for_each(|(o, x)| *o = x.to_bits()),
            Elements::F32(v) => {
                if !split_rows_ok(v, dim) {
                    return None;
                }
                let (hi, lo) = block.split_at_mut(QBLOCK * dim);
                for ((h, l), &x) in hi.iter_mut().zip(lo.iter_mut()).zip(v) {
                    (*h, *l) = split_f32(x);
                }
            }
        }
    }
    Some(QueryBlocks {
        dtype,
        tokens,
        rows,
        start,
    })
}

/// Which kernel scores a launch: the production pair (chosen per shape) and the paper's
/// ablation family (chosen by name, for `bench --kernel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Tensor cores (the paper's V2-MQ on mma.sync), f16/bf16, Nq ≤ 32, d ∈ {32, 64, 96, 128}:
    /// one warp per (query, document), memory-bound.
    Mma,
    /// Tensor cores for many query rows (a batch of queries, or long queries): a document tile
    /// in shared memory feeds eight 32-row query blocks; f16/bf16, any Nq, d as `Mma`.
    Gemm,
    /// `Gemm`'s work on Hopper's warpgroup MMA (`wgmma`, sm_90a: H100, H200), d ∈ {64, 128};
    /// chosen on documents that mostly fill their 128-token tiles (`choose_kernel`).
    Wgmma,
    /// One warp per (query, document) with the query in shared memory and the document streamed
    /// through a per-warp cp.async ring, Nq ≤ 32: wide embeddings (d a multiple of 128 up to
    /// 1024, dimension-tiled) in f16/bf16, and f32 exactly (f16 high and low parts, three
    /// tensor-core products); d ∈ {32, 64, 96, 128} as well.
    Ring,
    /// A grid of blocks, each scoring a run of consecutive (query, document) pairs from tiles
    /// the copy engine brings into shared memory (`cp.async.bulk`), Nq ≤ 32, f16/bf16: the
    /// warps split a tile's tokens at d ∈ {32, 64, 96, 128}, its d at d = 256..1024. sm_90+.
    Bulk,
    /// Query tile × document tile through shared memory on CUDA cores: every shape and dtype,
    /// exact for f32.
    Tiled,
    /// The paper's V1: one thread per query token, the document streamed from memory per token.
    V1,
    /// The paper's V2: document tiles staged in shared memory, one thread per query token.
    V2,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Mma => "maxsim_mma",
            Kernel::Bulk => "maxsim_bulk",
            Kernel::Gemm => "maxsim_gemm",
            Kernel::Wgmma => "maxsim_wgmma",
            Kernel::Ring => "maxsim_ring",
            Kernel::Tiled => "maxsim_tiled",
            Kernel::V1 => "maxsim_v1",
            Kernel::V2 => "maxsim_v2",
        }
    }

    fn threads(self) -> u32 {
        match self {
            Kernel::Tiled => TILED_THREADS,
            Kernel::Mma => MMA_THREADS,
            Kernel::Bulk => BULK_THREADS,
            Kernel::Gemm => GEMM_THREADS,
            Kernel::Wgmma => WG_THREADS + 32,
            // launch_ring sizes its block from the shared memory it needs.
            Kernel::Ring => (KernelShape::DEFAULT.ring_warps * 32) as u32,
            Kernel::V1 | Kernel::V2 => 128,
        }
    }
}

impl std::str::FromStr for Kernel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim_start_matches("maxsim_") {
            "mma" | "v2mq" | "v2-mq" => Ok(Kernel::Mma),
            "bulk" | "tma" => Ok(Kernel::Bulk),
            "gemm" | "batch" => Ok(Kernel::Gemm),
            "wgmma" => Ok(Kernel::Wgmma),
            "ring" | "wide" | "split" => Ok(Kernel::Ring),
            "tiled" => Ok(Kernel::Tiled),
            "v1" => Ok(Kernel::V1),
            "v2" => Ok(Kernel::V2),
            other => Err(Error::Argument(format!(
                "unknown GPU kernel {other:?}: expected mma, bulk, gemm, wgmma, ring, tiled, v1 or v2"
            ))),
        }
    }
}

impl DeviceQueries {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

struct Kernels {
    /// (kernel, dtype) → function, for the kernels with the f32-query signature.
    general: Vec<((Kernel, DType), CudaFunction)>,
    read_ceiling: CudaFunction,
    topk_segments: CudaFunction,
    topk_merge: CudaFunction,
    /// (dtype, d) → the tensor-core kernel and its resident blocks per SM.
    mma: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, d) → the bulk-copy tensor-core kernel, d ≤ 128 and wide (empty below sm_90).
    bulk: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, d) → the many-query tensor-core kernel.
    gemm: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, d) → its warpgroup-MMA twin (empty but on sm_90a).
    wgmma: Vec<((DType, usize), CudaFunction)>,
    sum_qblocks: CudaFunction,
    /// dtype → the query gather of `score_raw`; `iota_offsets` (its dense batches' offsets).
    pack_queries: Vec<(DType, CudaFunction)>,
    iota_offsets: CudaFunction,
    /// (dtype, d of the instantiation: `ring_instance`) → the ring kernel.
    ring: Vec<((DType, usize), CudaFunction)>,
}

/// What `blocks_per_sm` has asked the driver: per (kernel handle, threads, dynamic shared
/// bytes) the resident blocks per SM; per kernel handle the dynamic shared memory it is allowed.
#[derive(Default)]
struct Occupancy {
    per_sm: Vec<((usize, u32, usize), u32)>,
    allowed: Vec<(usize, usize)>,
}

/// The GPU scorer on one device.
pub struct CudaScorer {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    kernels: Kernels,
    info: GpuInfo,
    cache_hit: bool,
    /// The tensor-core kernel's task counter (zeroed before each launch, on the stream).
    task_counter: std::sync::Mutex<CudaSlice<u64>>,
    /// The candidates between the two top-k kernels, reused (and grown) across calls.
    topk_scratch: std::sync::Mutex<TopKBuffers>,
    /// Resident blocks per SM and dynamic shared memory allowed, per kernel: `blocks_per_sm`.
    occupancy: std::sync::Mutex<Occupancy>,
    shape: KernelShape,
    force: Option<Kernel>,
    /// `maxsim_bulk`'s (stages, tasks per block) when fixed (`bulk_shape`, TILEMAXSIM_BULK).
    bulk: Option<(usize, usize)>,
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
        let f = |name: &str| module.load_function(name).map_err(drv("kernel lookup"));
        let mut mma = Vec::new();
        for dtype in [DType::F16, DType::BF16] {
            for dim in MMA_DIMS {
                mma.push(((dtype, dim), f(&format!("maxsim_mma_{dtype}_d{dim}"))?));
            }
        }
        let mut bulk = Vec::new();
        if major >= 9 {
            for dtype in [DType::F16, DType::BF16] {
                for dim in MMA_DIMS.into_iter().chain(WIDE_DIMS) {
                    bulk.push(((dtype, dim), f(&format!("maxsim_bulk_{dtype}_d{dim}"))?));
                }
            }
        }
        let mut gemm = Vec::new();
        for dtype in [DType::F16, DType::BF16] {
            for dim in MMA_DIMS {
                gemm.push(((dtype, dim), f(&format!("maxsim_gemm_{dtype}_d{dim}"))?));
            }
        }
        let mut wgmma = Vec::new();
        if arch_name(major, minor) == "sm_90a" {
            for dtype in [DType::F16, DType::BF16] {
                for dim in WG_DIMS {
                    wgmma.push(((dtype, dim), f(&format!("maxsim_wgmma_{dtype}_d{dim}"))?));
                }
            }
        }
        let shape = KernelShape::parse(std::env::var("TILEMAXSIM_KERNEL_DEFINES").ok().as_deref())?;
        let kernels = Kernels {
            general: [Kernel::Tiled, Kernel::V1, Kernel::V2]
                .into_iter()
                .flat_map(|k| [DType::F32, DType::F16, DType::BF16].map(|d| (k, d)))
                .map(|(k, d)| Ok(((k, d), f(&format!("{}_{d}", k.name()))?)))
                .collect::<Result<_>>()?,
            read_ceiling: f("read_ceiling")?,
            topk_segments: f("topk_segments")?,
            topk_merge: f("topk_merge")?,
            mma,
            bulk,
            gemm,
            wgmma,
            sum_qblocks: f("sum_qblocks")?,
            pack_queries: [DType::F32, DType::F16, DType::BF16]
                .into_iter()
                .map(|d| Ok((d, f(&format!("pack_queries_{d}"))?)))
                .collect::<Result<_>>()?,
            iota_offsets: f("iota_offsets")?,
            ring: [DType::F16, DType::BF16, DType::F32]
                .into_iter()
                .flat_map(|t| MMA_DIMS.map(|d| (t, d)))
                .map(|(t, d)| Ok(((t, d), f(&format!("maxsim_ring_{t}_d{d}"))?)))
                .collect::<Result<_>>()?,
        };
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
        Docs::Range(docs.clone()).check(corpus)?;
        let offsets = corpus.offsets();
        let row = corpus.dim() * corpus.dtype().size();
        let (first, last) = (offsets[docs.start], offsets[docs.end]);
        let bytes = &corpus.tokens().elements().as_bytes()[first * row..last * row];
        let split_ok = split_ok(corpus, first..last);
        let lengths = DocLengths::of(&offsets[docs.start..=docs.end]);
        let rel: Vec<i64> = offsets[docs.start..=docs.end]
            .iter()
            .map(|&o| (o - first) as i64)
            .collect();
        Ok(DeviceCorpus {
            tokens: Mem::owned(
                self.stream
                    .clone_htod(bytes)
                    .map_err(drv("corpus upload"))?,
            ),
            offsets: Mem::owned(self.stream.clone_htod(&rel).map_err(drv("corpus upload"))?),
            dtype: corpus.dtype(),
            dim: corpus.dim(),
            len: docs.len(),
            bytes: bytes.len(),
            split_ok,
            lengths,
        })
    }

    /// Copy queries to the GPU (as f32). Checks them like every scorer does.
    pub fn upload_queries(&self, queries: &[Matrix<'_>], dim: usize) -> Result<DeviceQueries> {
        let mut tokens = Vec::new();
        let mut offsets = vec![0i64];
        for (i, q) in queries.iter().enumerate() {
            if q.rows() == 0 {
                return Err(Error::EmptyQuery { index: i });
            }
            if q.dim() != dim {
                return Err(Error::DimMismatch {
                    what: format!("query {i}"),
                    expected: dim,
                    got: q.dim(),
                });
            }
            q.check_finite(&format!("query {i}"), 0)?;
            tokens.extend(q.to_f32_vec());
            offsets.push((tokens.len() / dim) as i64);
        }
        let mma = match query_blocks(queries, dim) {
            Some(b) => Some(DeviceBlocks {
                dtype: b.dtype,
                blocks: b.rows.len(),
                tokens: self
                    .stream
                    .clone_htod(&b.tokens)
                    .map_err(drv("query upload"))?,
                rows: Mem::owned(
                    self.stream
                        .clone_htod(&b.rows)
                        .map_err(drv("query upload"))?,
                ),
                start: Mem::owned(
                    self.stream
                        .clone_htod(&b.start)
                        .map_err(drv("query upload"))?,
                ),
            }),
            None => None,
        };
        Ok(DeviceQueries {
            mma,
            _meta: None,
            tokens: self
                .stream
                .clone_htod(&tokens)
                .map_err(drv("query upload"))?,
            offsets: Mem::owned(
                self.stream
                    .clone_htod(&offsets)
                    .map_err(drv("query upload"))?,
            ),
            len: queries.len(),
            dim,
        })
    }

    /// Allocate `len` f32 on the device (for scores).
    pub fn alloc_scores(&self, len: usize) -> Result<CudaSlice<f32>> {
        // SAFETY: every element is written by a scoring launch before it is read.
        unsafe { self.stream.alloc::<f32>(len.max(1)) }.map_err(drv("score buffer"))
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
        let n = docs.map_or(corpus.len, |d| d.len());
        if out.len() < queries.len * n {
            return Err(Error::Argument(format!(
                "score buffer holds {} floats, needs {}",
                out.len(),
                queries.len * n
            )));
        }
        // Event tracking is off (one stream, ordered by us), so the pointers' guards hold nothing.
        let target = Target {
            stream: &self.stream,
            doc_index: docs.map_or(0, |d| d.device_ptr(&self.stream).0),
            n,
            out: out.device_ptr(&self.stream).0,
        };
        // SAFETY: the candidate list holds `n` indices (checked < corpus.len by the callers
        // that build it) and `out` room for Q × n floats (checked above), on this scorer's stream.
        unsafe { self.enqueue(queries, corpus, target) }
    }

    /// Enqueue the kernel `kernel_for` picks, on `t.stream`.
    ///
    /// # Safety
    /// `t.doc_index` is 0 or `t.n` indices < corpus.len, `t.out` holds Q × `t.n` floats, all
    /// usable on `t.stream`, as are the queries' and the corpus's buffers.
    unsafe fn enqueue(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        queries_dim_ok(queries.dim, corpus.dim)?;
        let kernel = self.kernel_for(queries, corpus);
        if t.n == 0 || queries.len == 0 {
            return Ok(());
        }
        if matches!(
            kernel,
            Kernel::Mma | Kernel::Bulk | Kernel::Gemm | Kernel::Wgmma | Kernel::Ring
        ) {
            // The tensor-core kernels take counts as i32 (query blocks ≥ queries).
            launch_size_ok(t.n, queries.mma.as_ref().map_or(queries.len, |b| b.blocks))?;
        }
        match kernel {
            Kernel::Mma => self.launch_mma(queries, corpus, t),
            Kernel::Bulk => self.launch_bulk(queries, corpus, t),
            Kernel::Gemm | Kernel::Wgmma => self.launch_gemm(kernel, queries, corpus, t),
            Kernel::Ring => self.launch_ring(queries, corpus, t),
            Kernel::Tiled | Kernel::V1 | Kernel::V2 => {
                let args = GeneralArgs {
                    q_tokens: queries.tokens.device_ptr(t.stream).0,
                    q_offsets: queries.offsets.device_ptr(t.stream).0,
                    num_queries: queries.len,
                    docs: DocRows::packed(
                        corpus.tokens.device_ptr(t.stream).0,
                        corpus.offsets.device_ptr(t.stream).0,
                        corpus.dim,
                    ),
                    dim: corpus.dim,
                    dtype: corpus.dtype,
                };
                // SAFETY: the pointers are live device allocations of the sizes the kernel
                // reads (queries.len + 1 offsets, corpus.len + 1 offsets, the target's
                // candidates and outputs per this function's contract).
                unsafe { self.launch_general(kernel, t, args) }
            }
        }
    }

    /// Allow `func` `smem` bytes of dynamic shared memory and return how many of its blocks of
    /// `threads` are resident per SM (at least 1). Asked of the driver once per (kernel,
    /// threads, shared bytes), then remembered: two driver calls per launch are a few µs.
    fn blocks_per_sm(&self, func: &CudaFunction, threads: u32, smem: usize) -> Result<u32> {
        let f = func.cu_function() as usize;
        // A poisoned lock only means another launch panicked; the tables stay valid.
        let mut known = self.occupancy.lock().unwrap_or_else(|e| e.into_inner());
        // The allowance is the function's own attribute, one for all its launches (48 KB until
        // raised): raised to the largest size asked for, never lowered, so a smaller launch
        // after a larger one still fits.
        let allowed = known
            .allowed
            .iter()
            .find(|(k, _)| *k == f)
            .map_or(48 << 10, |a| a.1);
        if allowed < smem {
            func.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .map_err(drv("kernel shared memory"))?;
            known.allowed.retain(|(k, _)| *k != f);
            known.allowed.push((f, smem));
        }
        let key = (f, threads, smem);
        if let Some(&(_, per_sm)) = known.per_sm.iter().find(|(k, _)| *k == key) {
            return Ok(per_sm);
        }
        let per_sm = func
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem, None)
            .map_err(drv("occupancy"))?
            .max(1);
        known.per_sm.push((key, per_sm));
        Ok(per_sm)
    }

    /// A persistent grid of `func`: as many blocks of `threads` threads and `smem` dynamic
    /// shared bytes as are resident at once, at most `work` blocks.
    fn persistent_grid(
        &self,
        func: &CudaFunction,
        threads: u32,
        smem: usize,
        work: u64,
    ) -> Result<LaunchConfig> {
        let per_sm = self.blocks_per_sm(func, threads, smem)?;
        let blocks = (self.info.multiprocessors.max(1) as u64 * per_sm as u64)
            .min(work)
            .max(1) as u32;
        Ok(LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem as u32,
        })
    }

    /// The leading arguments of the one-warp-per-(query, document) kernels.
    fn pair_args(
        &self,
        qpad: &CudaSlice<u16>,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> PairArgs {
        PairArgs {
            qpad: qpad.device_ptr(t.stream).0,
            q_offsets: queries.offsets.device_ptr(t.stream).0,
            num_queries: queries.len as i32,
            d_tokens: corpus.tokens.device_ptr(t.stream).0,
            d_offsets: corpus.offsets.device_ptr(t.stream).0,
            doc_index: t.doc_index,
            num_docs: t.n as i32,
            out: t.out,
        }
    }

    /// The task counter of `maxsim_mma` launched as `cfg`, zeroed on the stream, when each
    /// warp has many of the `tasks` (dynamic scheduling pays on uneven documents and tails;
    /// with few tasks per warp the reset and the claims cost more than they save); else a null
    /// pointer (a static schedule: each warp strides over the tasks). On the scorer's stream
    /// the scorer's counter, locked until the launch is enqueued (so no other launch zeroes or
    /// takes it in between); on a caller's stream (`score_raw`) a counter of the launch's own,
    /// freed in stream order after it.
    fn task_counter(
        &self,
        tasks: u64,
        cfg: &LaunchConfig,
        stream: &Arc<CudaStream>,
    ) -> Result<(TaskCounter<'_>, u64)> {
        let resident_warps = cfg.grid_dim.0 as u64 * (cfg.block_dim.0 as u64 / 32);
        if tasks <= 16 * resident_warps {
            return Ok((TaskCounter::None, 0));
        }
        if !Arc::ptr_eq(stream, &self.stream) {
            let own = stream.alloc_zeros::<u64>(1).map_err(drv("task counter"))?;
            let ptr = own.device_ptr(stream).0;
            return Ok((TaskCounter::Own(own), ptr));
        }
        // A poisoned lock only means another launch panicked; the counter is re-zeroed anyway.
        let mut counter = self.task_counter.lock().unwrap_or_else(|e| e.into_inner());
        self.stream
            .memset_zeros(&mut *counter)
            .map_err(drv("task counter"))?;
        let ptr = counter.device_ptr(&self.stream).0;
        Ok((TaskCounter::Shared(counter), ptr))
    }

    fn launch_mma(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let func = kernel_in(&self.kernels.mma, (corpus.dtype, corpus.dim), "tensor-core")?;
        let qpad = same_dtype_blocks(queries, corpus)?;
        let args = self.pair_args(&qpad.tokens, queries, corpus, t);
        // A persistent grid: exactly what is resident at once, each warp striding over tasks.
        let tasks = (queries.len * t.n) as u64;
        let cfg = self.persistent_grid(func, MMA_THREADS, 0, tasks.div_ceil(4))?;
        let (_counter, tc) = self.task_counter(tasks, &cfg, t.stream)?;
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&tc);
        // SAFETY: the arguments match `maxsim_mma_*` in kernels/maxsim.cu: `qpad` holds
        // 32 × d halves per query, the offsets cover every query and document, `doc_index` is
        // null or `n` indices < corpus.len (the caller's contract), `out` holds Q × n floats.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_mma launch"))?;
        Ok(())
    }

    fn launch_bulk(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let func = kernel_in(&self.kernels.bulk, (corpus.dtype, corpus.dim), "bulk-copy")?;
        let qpad = same_dtype_blocks(queries, corpus)?;
        let tasks = (queries.len * t.n) as u64;
        let forced = self.bulk;
        let stages = forced.map_or(BULK_STAGES, |f| f.0);
        let smem = bulk_smem(stages, corpus.dim);
        let per_sm = self.blocks_per_sm(func, BULK_THREADS, smem)?;
        let resident = self.info.multiprocessors.max(1) as u64 * per_sm as u64;
        let run = corpus.lengths.bulk_run(corpus.dim);
        let group = forced.map_or_else(|| bulk_group(tasks, resident, run), |f| f.1 as u64);
        let blocks = tasks.div_ceil(group);
        if blocks > i32::MAX as u64 {
            return Err(Error::Argument(format!(
                "{tasks} (query, document) pairs per launch is over the limit"
            )));
        }
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (BULK_THREADS, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let args = self.pair_args(&qpad.tokens, queries, corpus, t);
        let (st, gr) = (stages as i32, group as i32);
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&st).arg(&gr);
        // SAFETY: the arguments match `maxsim_bulk_*` in kernels/maxsim.cu: as for
        // `maxsim_mma`, plus `d_tokens` 16-byte aligned (checked by kernel_for) and `smem` bytes
        // of dynamic shared memory for `stages` tiles, their barriers and the row maxima
        // (`bulk_smem`, allowed by blocks_per_sm); the grid covers every task in runs of `group`.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_bulk launch"))?;
        Ok(())
    }

    fn launch_ring(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let f32 = corpus.dtype == DType::F32;
        let (Some(inst), Some((warps, smem))) = (
            ring_instance(corpus.dim),
            ring_layout(corpus.dim, f32, self.info.smem_per_block, self.shape),
        ) else {
            return Err(Error::Argument(format!(
                "no ring kernel for {} d = {} on this device",
                corpus.dtype, corpus.dim
            )));
        };
        let func = kernel_in(&self.kernels.ring, (corpus.dtype, inst), "ring")?;
        let qb = same_dtype_blocks(queries, corpus)?;
        if qb.blocks != queries.len || (f32 && !corpus.split_ok) {
            return Err(Error::Argument(
                "the ring kernel takes queries of ≤ 32 tokens of the corpus dtype (f32: in the split's range)"
                    .into(),
            ));
        }
        let threads = warps * 32;
        let tasks = t.n.div_ceil(warps as usize) as u64 * queries.len as u64;
        let cfg = self.persistent_grid(func, threads, smem, tasks)?;
        let args = self.pair_args(&qb.tokens, queries, corpus, t);
        let dim = corpus.dim as i32;
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&dim);
        // SAFETY: the arguments match `maxsim_ring_*` in kernels/maxsim.cu: `qpad` holds
        // 32 × d halves per query (two such for f32; every query one block, checked above), the
        // offsets cover every query and document, `doc_index` is null or `n` indices <
        // corpus.len (the caller's contract), `out` holds Q × n floats, `smem` bytes of dynamic
        // shared memory for the query and `warps` rings (`ring_layout`); d_tokens is 16-byte
        // aligned (checked by kernel_for; rows are 2d or 4d bytes, d % 32 = 0).
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_ring launch"))?;
        Ok(())
    }

    /// `maxsim_gemm` or `maxsim_wgmma` (the same arguments, grid and output).
    fn launch_gemm(
        &self,
        kernel: Kernel,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let key = (corpus.dtype, corpus.dim);
        let (func, threads, qblocks_per_block, smem) = if kernel == Kernel::Wgmma {
            // The ring, 1024-byte aligned inside the allocation, then a TileMeta and two
            // mbarriers per stage; the consumer warpgroups and the producer warp.
            let smem = self.shape.wg_stages * (WG_BN * corpus.dim * 2 + TILE_META + 16) + 1024;
            let func = kernel_in(&self.kernels.wgmma, key, "warpgroup-MMA")?;
            (func, kernel.threads(), WG_QBLOCKS, smem)
        } else {
            let smem = self.shape.gemm_stages * (GEMM_BN * corpus.dim * 2 + TILE_META);
            let func = kernel_in(&self.kernels.gemm, key, "many-query")?;
            (func, GEMM_THREADS, (GEMM_THREADS / 32) as usize, smem)
        };
        let qb = same_dtype_blocks(queries, corpus)?;
        let n = t.n;
        // A persistent grid; a multiple of the query tiles where it holds them all, so each
        // block keeps its tile (loaded once) and the tiles of one document run side by side.
        let qtiles = qb.blocks.div_ceil(qblocks_per_block) as u64;
        let mut cfg = self.persistent_grid(func, threads, smem, qtiles * n as u64)?;
        if cfg.grid_dim.0 as u64 >= qtiles {
            cfg.grid_dim.0 -= (cfg.grid_dim.0 as u64 % qtiles) as u32;
        }
        // Queries of one block each are final in the kernel's output; longer ones are summed
        // from per-block partial scores.
        let single = qb.blocks == queries.len;
        let partial = if single {
            None
        } else {
            // SAFETY: the many-query kernel writes every one of blocks × n partial scores.
            Some(unsafe { t.stream.alloc::<f32>(qb.blocks * n) }.map_err(drv("score buffer"))?)
        };
        let s = t.stream;
        let qp = qb.tokens.device_ptr(s).0;
        let rows = qb.rows.device_ptr(s).0;
        let dt = corpus.tokens.device_ptr(s).0;
        let dof = corpus.offsets.device_ptr(s).0;
        let (nb, nd) = (qb.blocks as i32, n as i32);
        let o = partial.as_ref().map_or(t.out, |p| p.device_ptr(s).0);
        let mut b = s.launch_builder(func);
        b.arg(&qp)
            .arg(&rows)
            .arg(&nb)
            .arg(&dt)
            .arg(&dof)
            .arg(&t.doc_index)
            .arg(&nd)
            .arg(&o);
        // SAFETY: the arguments match `maxsim_gemm_*` in kernels/maxsim.cu and
        // `maxsim_wgmma_*` in kernels/wgmma.cu: `qp` holds blocks × 32 × d halves and
        // `rows` one count per block, the offsets cover every document, `doc_index` is null or
        // `n` indices < corpus.len (the caller's contract), `o` holds blocks × n floats, `smem`
        // bytes of dynamic shared memory for the ring and its TileMetas (and wgmma's
        // alignment); the tokens are 16-byte aligned for wgmma (`wgmma_available`).
        unsafe { b.launch(cfg) }.map_err(drv("many-query kernel launch"))?;
        if let Some(p) = &partial {
            let pp = p.device_ptr(s).0;
            let st = qb.start.device_ptr(s).0;
            let nq = queries.len as i32;
            let total = (queries.len * n) as u64;
            let cfg = LaunchConfig {
                grid_dim: (total.div_ceil(256).min(65535 * 16) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = s.launch_builder(&self.kernels.sum_qblocks);
            b.arg(&pp).arg(&st).arg(&nq).arg(&nd).arg(&t.out);
            // SAFETY: `sum_qblocks` reads blocks × n partial scores and Q + 1 block starts,
            // writes Q × n floats into `out` (the caller's contract).
            unsafe { b.launch(cfg) }.map_err(drv("sum_qblocks launch"))?;
        }
        Ok(())
    }

    /// Launch one of the kernels with the general signature (`Tiled`, `V1`, `V2`): f32 queries,
    /// documents as `DocRows`.
    ///
    /// # Safety
    /// The pointers of `a` and of `t` must be live device memory of the sizes they describe,
    /// usable on `t.stream`; every query has at least one token.
    unsafe fn launch_general(&self, kernel: Kernel, t: Target<'_>, a: GeneralArgs) -> Result<()> {
        if t.n == 0 || a.num_queries == 0 {
            return Ok(());
        }
        if t.n > i32::MAX as usize || a.dim > i32::MAX as usize {
            return Err(Error::Argument(format!(
                "{} documents per launch is over the limit",
                t.n
            )));
        }
        let Some((_, func)) = self
            .kernels
            .general
            .iter()
            .find(|(k, _)| *k == (kernel, a.dtype))
        else {
            return Err(Error::Argument(format!(
                "{} has no variant for the general signature",
                kernel.name()
            )));
        };
        let (num_docs, dim) = (t.n as i32, a.dim as i32);
        let mut start = 0;
        while start < a.num_queries {
            let count = (a.num_queries - start).min(MAX_QUERIES_PER_LAUNCH);
            let q_offsets = a.q_offsets + (start * 8) as u64;
            let out = t.out + (start * t.n * 4) as u64;
            let cfg = LaunchConfig {
                grid_dim: (t.n as u32, count as u32, 1),
                block_dim: (kernel.threads(), 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = t.stream.launch_builder(func);
            b.arg(&a.q_tokens)
                .arg(&q_offsets)
                .arg(&a.docs)
                .arg(&t.doc_index)
                .arg(&num_docs)
                .arg(&dim)
                .arg(&out);
            // SAFETY: the argument list matches `maxsim_tiled_*` / `maxsim_v1_*` /
            // `maxsim_v2_*` in kernels/maxsim.cu (DocRows by value, its #[repr(C)] twin); the
            // pointers are valid per this function's contract.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim launch"))?;
            start += count;
        }
        Ok(())
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
        let k = k.min(n);
        if rows == 0 || k == 0 {
            return Ok(vec![Vec::new(); rows]);
        }
        // SAFETY: top_k_enqueue writes all rows × k entries.
        let mut index =
            unsafe { self.stream.alloc::<i32>(rows * k) }.map_err(drv("top-k buffer"))?;
        let mut best =
            unsafe { self.stream.alloc::<f32>(rows * k) }.map_err(drv("top-k buffer"))?;
        self.top_k_enqueue(
            scores,
            rows,
            n,
            k,
            &mut index.slice_mut(..),
            &mut best.slice_mut(..),
        )?;
        let index = self
            .stream
            .clone_dtoh(&index)
            .map_err(drv("top-k download"))?;
        let best = self
            .stream
            .clone_dtoh(&best)
            .map_err(drv("top-k download"))?;
        self.synchronize()?;
        Ok(hits_from(&index, &best, k, first_doc))
    }

    /// Enqueue the top-k selection of each of the `rows` rows of `n` scores: `rows × k` (index,
    /// score) pairs, unsorted within a row, into `index` and `best`. Needs `1 <= k <= n`.
    /// Asynchronous. Rows longer than one segment are split over many blocks (`topk_segments`)
    /// and their candidates merged (`topk_merge`) through a scratch buffer kept by the scorer.
    pub fn top_k_enqueue(
        &self,
        scores: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        k: usize,
        index: &mut CudaViewMut<'_, i32>,
        best: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let segments = n.div_ceil(TOPK_SEGMENT);
        if k == 0
            || k > n
            || scores.len() < rows * n
            || index.len() < rows * k
            || best.len() < rows * k
            || n > i32::MAX as usize
            || rows > i32::MAX as usize
            || segments > 65_535
        {
            return Err(Error::Argument(format!(
                "top-{k} over {rows} × {n} scores does not fit the buffers or the launch"
            )));
        }
        let launch = |rows: usize, segments: usize| LaunchConfig {
            grid_dim: (rows as u32, segments as u32, 1),
            block_dim: (TOPK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n32, k32) = (n as i32, k as i32);
        if segments == 1 {
            let mut b = self.stream.launch_builder(&self.kernels.topk_segments);
            b.arg(scores)
                .arg(&n32)
                .arg(&n32)
                .arg(&k32)
                .arg(index)
                .arg(best);
            // SAFETY: matches `topk_segments` (kernels/topk.cu) with one segment of n <=
            // TOPK_SEGMENT scores per row: reads rows × n, writes rows × min(k, n) = rows × k.
            return unsafe { b.launch(launch(rows, 1)) }
                .map(|_| ())
                .map_err(drv("topk_segments launch"));
        }
        let kk = k.min(TOPK_SEGMENT);
        let m = segments * kk;
        let mut scratch = self.topk_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let TopKBuffers {
            index: ci,
            score: cs,
        } = &mut *scratch;
        let ci = grow(&self.stream, ci, rows * m)?;
        let cs = grow(&self.stream, cs, rows * m)?;
        let (seg32, m32) = (TOPK_SEGMENT as i32, m as i32);
        let mut b = self.stream.launch_builder(&self.kernels.topk_segments);
        b.arg(scores)
            .arg(&n32)
            .arg(&seg32)
            .arg(&k32)
            .arg(&mut *ci)
            .arg(&mut *cs);
        // SAFETY: matches `topk_segments`: rows × segments blocks, each writing min(k, SEGMENT)
        // candidates, rows × m in all, which the scratch holds.
        unsafe { b.launch(launch(rows, segments)) }.map_err(drv("topk_segments launch"))?;
        let mut b = self.stream.launch_builder(&self.kernels.topk_merge);
        b.arg(&*ci)
            .arg(&*cs)
            .arg(&m32)
            .arg(&k32)
            .arg(index)
            .arg(best);
        // SAFETY: matches `topk_merge`: reads rows × m candidates, at least k real per row
        // (k <= n), writes rows × k.
        unsafe { b.launch(launch(rows, 1)) }
            .map(|_| ())
            .map_err(drv("topk_merge launch"))
    }

    /// The device's streaming read ceiling in GB/s: a 16-byte-load kernel over `bytes` bytes
    /// (use several times the L2 size), median of `reps` timed runs after a warm-up.
    pub fn measure_read_ceiling(&self, bytes: usize, reps: usize) -> Result<f64> {
        let n16 = bytes / 16;
        let buf = self
            .stream
            .alloc_zeros::<u8>(n16 * 16)
            .map_err(drv("ceiling buffer"))?;
        let sink = self
            .stream
            .alloc_zeros::<u32>(1)
            .map_err(drv("ceiling buffer"))?;
        let (p, _g) = buf.device_ptr(&self.stream);
        let (s, _g2) = sink.device_ptr(&self.stream);
        let n = n16 as i64;
        let blocks = (self.info.multiprocessors.max(1) as u32) * 32;
        let times = self.time_ms(reps, || {
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = self.stream.launch_builder(&self.kernels.read_ceiling);
            b.arg(&p).arg(&n).arg(&s);
            // SAFETY: `p` holds n16 16-byte vectors, `s` one u32.
            unsafe { b.launch(cfg) }
                .map(|_| ())
                .map_err(drv("read ceiling"))
        })?;
        Ok((n16 * 16) as f64 / median(&times) / 1e6)
    }

    /// The host→device copy rate in GB/s from page-locked memory: `bytes` copied `reps` times
    /// after a warm-up, timed with CUDA events, median.
    pub fn measure_h2d(&self, bytes: usize, reps: usize) -> Result<f64> {
        // SAFETY: the copied bytes are never interpreted.
        let host =
            unsafe { self.ctx.alloc_pinned::<u8>(bytes.max(1)) }.map_err(drv("pinned buffer"))?;
        let mut dev =
            unsafe { self.stream.alloc::<u8>(bytes.max(1)) }.map_err(drv("copy buffer"))?;
        let times = self.time_ms(reps, || {
            self.stream
                .memcpy_htod(&host, &mut dev)
                .map_err(drv("host to device copy"))
        })?;
        Ok(bytes as f64 / median(&times) / 1e6)
    }

    /// Time `work` (enqueued on the scorer's stream) with CUDA events, calls back to back:
    /// warm-up calls (`warm_up`), then `reps` calls, each between its own pair of events, with no
    /// host wait between them (the stream is drained once, at the end); milliseconds per call.
    /// This is how `triton.testing.do_bench` times the peers (bench/peers_gpu.py): a call's
    /// figure is the device's time for it in a stream of calls, its launch overlapped with the
    /// call before. Where the host cannot enqueue a call as fast as the device runs it, the
    /// events see the device waiting for the host, and the figure says so (launch-bound).
    pub fn time_ms(&self, reps: usize, mut work: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
        self.warm_up(&mut work)?;
        let events = self.event_pairs(reps)?;
        for (start, end) in &events {
            start.record(&self.stream).map_err(drv("event"))?;
            work()?;
            end.record(&self.stream).map_err(drv("event"))?;
        }
        self.synchronize()?;
        events
            .iter()
            .map(|(s, e)| Ok(s.elapsed_ms(e).map_err(drv("event"))? as f64))
            .collect()
    }

    /// Warm-up calls of `work` for at least 100 ms of wall time (and three calls), waiting for
    /// the device every fourth call so the queue stays short. With three warm-up calls, in
    /// `bench/gpu_check.sh`'s suite the case right after an f32 ring case ran 17% slow in its
    /// back-to-back figure while its isolated figure, taken next, was normal
    /// (bench/results/gpu_check.log, 2026-11-24 03:35; earlier suites had the same outlier);
    /// two suites with this warm-up had none (bench/results/suite_warmup.log), which does not
    /// prove the cause.
    fn warm_up(&self, work: &mut impl FnMut() -> Result<()>) -> Result<()> {
        let start = std::time::Instant::now();
        let mut calls = 0;
        while calls < 3 || start.elapsed() < std::time::Duration::from_millis(100) {
            work()?;
            calls += 1;
            if calls % 4 == 0 {
                self.synchronize()?;
            }
        }
        self.synchronize()
    }

    /// Time `work` as one isolated call: the host waits for each call before it enqueues the
    /// next, so each figure includes the launch's latency (the host's call, the driver, the
    /// device picking it up). One warm-up, then `reps` calls; milliseconds per call.
    pub fn time_ms_isolated(
        &self,
        reps: usize,
        mut work: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        work()?;
        self.synchronize()?;
        let events = self.event_pairs(reps)?;
        let mut out = Vec::with_capacity(reps);
        for (start, end) in &events {
            start.record(&self.stream).map_err(drv("event"))?;
            work()?;
            end.record(&self.stream).map_err(drv("event"))?;
            end.synchronize().map_err(drv("event"))?;
            out.push(start.elapsed_ms(end).map_err(drv("event"))? as f64);
        }
        Ok(out)
    }

    /// `n` pairs of timing events, made before the timed calls so making them costs no call.
    fn event_pairs(&self, n: usize) -> Result<Vec<(CudaEvent, CudaEvent)>> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        (0..n)
            .map(|_| {
                Ok((
                    self.ctx.new_event(flags).map_err(drv("event"))?,
                    self.ctx.new_event(flags).map_err(drv("event"))?,
                ))
            })
            .collect()
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv("synchronize"))
    }

    /// Copy scores back to the host.
    pub fn download(&self, scores: &CudaSlice<f32>, out: &mut [f32]) -> Result<()> {
        let view = scores.slice(0..out.len());
        self.stream
            .memcpy_dtoh(&view, out)
            .map_err(drv("score download"))?;
        self.synchronize()
    }
}

/// Where a launch runs and what it writes: the stream, the candidate list (0: documents
/// `0..n`), `n`, and the Q × n scores (device pointers as `u64`).
#[derive(Clone, Copy)]
struct Target<'a> {
    stream: &'a Arc<CudaStream>,
    doc_index: u64,
    n: usize,
    out: u64,
}

/// `maxsim_mma`'s task counter for one launch (`CudaScorer::task_counter`), held, not read:
/// the scorer's locked until the launch is enqueued, a launch's own until freed after it.
#[allow(dead_code)]
enum TaskCounter<'a> {
    None,
    Shared(std::sync::MutexGuard<'a, CudaSlice<u64>>),
    Own(CudaSlice<u64>),
}

/// The general kernels' documents (kernels/maxsim.cu: DocRows, passed by value): packed by
/// `offsets`, or a padded batch (`offsets` 0) of `max_len` rows per document, `batch_stride`
/// elements apart, `lengths` rows each (0: all `max_len`); rows `row_stride` elements apart.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DocRows {
    tokens: u64,
    offsets: u64,
    lengths: u64,
    row_stride: i64,
    batch_stride: i64,
    max_len: i64,
}

// SAFETY: #[repr(C)] plain data, laid out as `DocRows` in kernels/maxsim.cu (three 8-byte
// pointers, three i64).
unsafe impl DeviceRepr for DocRows {}

impl DocRows {
    /// The rows a `RawDocs` describes, as they lie.
    fn of_raw(docs: &RawDocs) -> Self {
        let (offsets, lengths, batch_stride, max_len) = match docs.layout {
            RawLayout::Packed { offsets, .. } => (offsets, 0, 0, 0),
            RawLayout::Padded {
                max_len,
                batch_stride,
                lengths,
                ..
            } => (0, lengths, batch_stride as i64, max_len as i64),
        };
        DocRows {
            tokens: docs.tokens,
            offsets,
            lengths,
            row_stride: docs.row_stride as i64,
            batch_stride,
            max_len,
        }
    }

    fn packed(tokens: u64, offsets: u64, dim: usize) -> Self {
        DocRows {
            tokens,
            offsets,
            lengths: 0,
            row_stride: dim as i64,
            batch_stride: 0,
            max_len: 0,
        }
    }
}

/// Arguments of a general-kernel launch besides its `Target` (device pointers as `u64`):
/// contiguous f32 query rows with `num_queries + 1` i64 offsets, and the documents.
#[derive(Clone, Copy, Debug)]
struct GeneralArgs {
    q_tokens: u64,
    q_offsets: u64,
    num_queries: usize,
    docs: DocRows,
    dim: usize,
    dtype: DType,
}

/// `(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out)`: the leading
/// arguments of `maxsim_mma_*`, `maxsim_bulk_*` and `maxsim_ring_*` (kernels/maxsim.cu).
struct PairArgs {
    qpad: CUdeviceptr,
    q_offsets: CUdeviceptr,
    num_queries: i32,
    d_tokens: CUdeviceptr,
    d_offsets: CUdeviceptr,
    doc_index: CUdeviceptr,
    num_docs: i32,
    out: CUdeviceptr,
}

impl PairArgs {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(&self.qpad)
            .arg(&self.q_offsets)
            .arg(&self.num_queries)
            .arg(&self.d_tokens)
            .arg(&self.d_offsets)
            .arg(&self.doc_index)
            .arg(&self.num_docs)
            .arg(&self.out);
    }
}

/// The function for `key` in one of the per-(dtype, d) kernel tables (`what`: for the error).
fn kernel_in<'a>(
    table: &'a [((DType, usize), CudaFunction)],
    key: (DType, usize),
    what: &str,
) -> Result<&'a CudaFunction> {
    table
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, f)| f)
        .ok_or_else(|| Error::Argument(format!("no {what} kernel for {} d = {}", key.0, key.1)))
}

/// The queries' 32-row blocks, which the tensor-core kernels need in the corpus's dtype.
fn same_dtype_blocks<'a>(
    queries: &'a DeviceQueries,
    corpus: &DeviceCorpus,
) -> Result<&'a DeviceBlocks> {
    match &queries.mma {
        Some(b) if b.dtype == corpus.dtype => Ok(b),
        _ => Err(Error::Argument(format!(
            "queries were not packed for the tensor-core kernels on a {} corpus",
            corpus.dtype
        ))),
    }
}

/// What the kernel choice depends on.
#[derive(Clone, Copy, Debug)]
struct LaunchShape {
    /// The queries' 32-row blocks when they can take the tensor cores (the corpus's dtype, d
    /// instantiated; f32 only with every query and document in the split's range), else `None`.
    blocks: Option<usize>,
    queries: usize,
    dim: usize,
    /// The corpus is f32 (only `maxsim_ring` takes it on the tensor cores).
    f32: bool,
    /// `maxsim_bulk` is loaded (sm_90+) and the corpus tokens are 16-byte aligned.
    bulk_available: bool,
    /// `maxsim_wgmma` is loaded (sm_90a) and the corpus tokens are 16-byte aligned.
    wgmma_available: bool,
    /// The corpus's documents mostly fill their 128-token tiles (`DocLengths`).
    fills_tiles: bool,
    /// `maxsim_ring`'s block fits the device's shared memory and the tokens are 16-byte aligned.
    ring_available: bool,
}

/// The engine's kernel per shape (`force`: `CudaScorer::force_kernel`). One query of ≤ 32
/// tokens at d ≤ 128: `Bulk` (sm_90) or `Mma`, memory-bound; from GEMM_MIN_QUERIES queries, or
/// any longer query: compute-bound, `Wgmma` (sm_90a) at d = 64 and 128 on documents that
/// mostly fill their 128-token tiles, else `Gemm`; d = 256..1024 (≤ 32 tokens per query):
/// `Bulk` (sm_90), else `Ring`; f32 (≤ 32 tokens per query, in the split's range): `Ring`;
/// everything else: `Tiled`. A forced kernel that does not apply falls back to the
/// nearest that does.
fn choose_kernel(force: Option<Kernel>, s: LaunchShape) -> Kernel {
    let fallback = match force {
        Some(k @ (Kernel::V1 | Kernel::V2)) => k,
        _ => Kernel::Tiled,
    };
    let tensor = matches!(
        force,
        None | Some(Kernel::Mma | Kernel::Bulk | Kernel::Gemm | Kernel::Wgmma | Kernel::Ring)
    );
    let Some(blocks) = s.blocks.filter(|_| tensor) else {
        return fallback;
    };
    // Every query one block: the one-warp-per-pair kernels apply.
    let single = blocks == s.queries;
    let ring_ok = single && s.ring_available;
    let bulk_ok = single && s.bulk_available;
    if s.f32 || wide_dim(s.dim) {
        // Wide f16/bf16: `Bulk` (sm_90), unless `Ring` is asked for by name.
        let wide_bulk = !s.f32 && bulk_ok && WIDE_BULK_BY_DEFAULT;
        return match force {
            Some(Kernel::Ring) if ring_ok => Kernel::Ring,
            Some(Kernel::Bulk) if !s.f32 && bulk_ok => Kernel::Bulk,
            _ if wide_bulk => Kernel::Bulk,
            _ if ring_ok => Kernel::Ring,
            _ => fallback,
        };
    }
    if !MMA_DIMS.contains(&s.dim) {
        return fallback;
    }
    let wgmma_ok = s.wgmma_available && WG_DIMS.contains(&s.dim);
    match force {
        Some(Kernel::Wgmma) if wgmma_ok => Kernel::Wgmma,
        Some(Kernel::Ring) if ring_ok => Kernel::Ring,
        Some(Kernel::Bulk) if bulk_ok => Kernel::Bulk,
        Some(Kernel::Mma | Kernel::Bulk | Kernel::Ring) if single => Kernel::Mma,
        None if single && s.queries < GEMM_MIN_QUERIES => {
            if bulk_ok && BULK_BY_DEFAULT {
                Kernel::Bulk
            } else {
                Kernel::Mma
            }
        }
        // The H100 (bench/results/ws.log, wgmma_meta.log, race_ws.log), TFLOP/s against gemm:
        // ColPali's 1024-token documents 603-607 against 431-433, 32 queries x 128-token
        // documents 561-562 against 418, U[32,256] 401 against 386, bf16 d = 64 449 against 364.
        None if wgmma_ok && s.fills_tiles => Kernel::Wgmma,
        _ => Kernel::Gemm,
    }
}

/// Queries of `dim` against documents of `doc_dim`: a `DimMismatch` unless the same.
fn queries_dim_ok(dim: usize, doc_dim: usize) -> Result<()> {
    if dim != doc_dim {
        return Err(Error::DimMismatch {
            what: "queries".into(),
            expected: doc_dim,
            got: dim,
        });
    }
    Ok(())
}

/// The launch limits of the tensor-core kernels: `n` documents and `rows` queries (or query
/// blocks) as i32.
fn launch_size_ok(n: usize, rows: usize) -> Result<()> {
    if n > i32::MAX as usize || rows > i32::MAX as usize {
        return Err(Error::Argument(format!(
            "{n} documents or {rows} queries per launch is over the limit"
        )));
    }
    Ok(())
}

/// `maxsim_bulk`'s tiles in flight per block (each BULK_TILE tokens).
const BULK_STAGES: usize = 2;
const BULK_STAGES_RANGE: std::ops::RangeInclusive<usize> = 1..=6;
const BULK_GROUP_RANGE: std::ops::RangeInclusive<usize> = 1..=64;
/// Tokens per `maxsim_bulk` tile (kernels/maxsim.cu: BULK_TILE, 32 per warp).
const BULK_TILE: usize = 128;

/// Tokens per `maxsim_bulk` tile at wide d (kernels/maxsim.cu: BULK_WIDE_TOK), and floats per
/// column of a warp's partial tile there (BULK_WIDE_RS).
fn bulk_wide_tok(dim: usize) -> usize {
    if dim <= 512 { 32 } else { 16 }
}
const BULK_WIDE_RS: usize = 36;

/// Dynamic shared bytes of a `maxsim_bulk` block: its `stages` tiles of d-wide f16/bf16 rows,
/// one 8-byte mbarrier per stage, the row maxima of two documents (2 × 4 warps × 32 floats),
/// and at wide d two sets of the four warps' partial tiles.
fn bulk_smem(stages: usize, dim: usize) -> usize {
    let maxima = 2 * 4 * 32 * 4;
    if wide_dim(dim) {
        let tok = bulk_wide_tok(dim);
        stages * (tok * dim * 2 + 8) + 2 * 4 * tok * BULK_WIDE_RS * 4 + maxima
    } else {
        stages * (BULK_TILE * dim * 2 + 8) + maxima
    }
}

/// Consecutive tasks per `maxsim_bulk` block, for `tasks` tasks, `resident` blocks at once and
/// runs of at most `run` (`DocLengths::bulk_run`): the query's fragments are loaded, and the
/// block set up, once per run (one task per block ran 67 M docs/s at B = 10K against 89 M with
/// four, bench/results/bulk_grid.log); shorter where that would leave resident slots empty (a
/// grid of one wave or less: every block's copies go out at once).
fn bulk_group(tasks: u64, resident: u64, run: u64) -> u64 {
    tasks.div_ceil(resident.max(1)).clamp(1, run.max(1))
}

/// `TILEMAXSIM_BULK=stages,group` (experiments): `maxsim_bulk`'s stages per block and tasks
/// per block, overriding BULK_STAGES and `bulk_group`.
fn bulk_shape_env() -> Option<(usize, usize)> {
    std::env::var("TILEMAXSIM_BULK")
        .ok()
        .and_then(|v| {
            let (s, g) = v.split_once(',')?;
            Some((s.trim().parse().ok()?, g.trim().parse().ok()?))
        })
        .filter(|(s, g)| BULK_STAGES_RANGE.contains(s) && BULK_GROUP_RANGE.contains(g))
}

/// The kernel constants the host sizes launches by (kernels/maxsim.cu defines the defaults).
/// An experiment overrides them through TILEMAXSIM_KERNEL_DEFINES (e.g.
/// `GEMM_STAGES=4,RING_WARPS=12`, which compile.rs passes to NVRTC as -D options); read once,
/// when the scorer opens, so the host and the compiled kernels agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KernelShape {
    /// Tiles in flight of `maxsim_gemm` (GEMM_STAGES).
    gemm_stages: usize,
    /// Tiles in flight of `maxsim_wgmma` (WG_STAGES).
    wg_stages: usize,
    /// Stages of `maxsim_ring`'s per-warp ring (RING_STAGES).
    ring_stages: usize,
    /// Most warps per block of `maxsim_ring` (RING_WARPS). 12 and 16 measured within noise of 8
    /// on the H100 (bench/results/ring.log).
    ring_warps: usize,
    /// 8-token tiles per f16/bf16 stage of `maxsim_ring` (RING_TILES).
    ring_tiles: usize,
    /// `maxsim_ring` fills its f32 stages with `cp.async.bulk` copies completing on one
    /// mbarrier per stage (RING_BULK=1, the default, sm_90+; 8 more bytes of shared memory per
    /// stage): 46.75 against 44.50 M docs/s at B = 100K on the H100; f16/bf16 keep per-lane
    /// copies, faster at d = 768 (bench/results/ring_bulk.log).
    ring_bulk: bool,
}

impl KernelShape {
    const DEFAULT: KernelShape = KernelShape {
        gemm_stages: 3,
        wg_stages: 4,
        ring_stages: 4,
        ring_warps: 8,
        ring_tiles: 2,
        ring_bulk: true,
    };

    /// The shape under `defines` (`NAME=VALUE,...`); a value out of the range the host can
    /// launch is an error, not a silent default (the kernels would be compiled with it).
    fn parse(defines: Option<&str>) -> Result<Self> {
        let mut k = Self::DEFAULT;
        let mut ring_bulk = usize::from(k.ring_bulk);
        for d in defines.unwrap_or("").split(',').map(str::trim) {
            // A bare name has no value: an error for the host's knobs (NVRTC would read it
            // as 1, the host as its default).
            let (name, value) = d.split_once('=').unwrap_or((d, ""));
            let (slot, range) = match name.trim() {
                "GEMM_STAGES" => (&mut k.gemm_stages, 2..=8),
                "WG_STAGES" => (&mut k.wg_stages, 2..=6),
                "RING_STAGES" => (&mut k.ring_stages, 2..=8),
                "RING_WARPS" => (&mut k.ring_warps, 1..=32),
                "RING_TILES" => (&mut k.ring_tiles, 1..=4),
                "RING_BULK" => (&mut ring_bulk, 0..=1),
                _ => continue,
            };
            *slot = value
                .trim()
                .parse()
                .ok()
                .filter(|v| range.contains(v))
                .ok_or_else(|| {
                    Error::Argument(format!(
                        "TILEMAXSIM_KERNEL_DEFINES: {d} is not in {}..={}",
                        range.start(),
                        range.end()
                    ))
                })?;
        }
        k.ring_bulk = ring_bulk == 1;
        Ok(k)
    }
}

/// Device (index, score) buffers of top-k results, grown as needed and reused.
#[derive(Default)]
pub(crate) struct TopKBuffers {
    pub index: Option<CudaSlice<i32>>,
    pub score: Option<CudaSlice<f32>>,
}

/// The hits of each row of `k` (index, score) pairs from the top-k kernels, best first, with
/// document indices offset by `first_doc`.
pub fn hits_from(index: &[i32], score: &[f32], k: usize, first_doc: usize) -> Vec<Vec<Hit>> {
    index
        .chunks(k.max(1))
        .zip(score.chunks(k.max(1)))
        .map(|(ix, sc)| {
            let mut hits: Vec<Hit> = ix
                .iter()
                .zip(sc)
                .map(|(&doc, &score)| Hit {
                    doc: first_doc + doc.max(0) as usize,
                    score,
                })
                .collect();
            hits.sort_unstable_by(rank_order);
            hits
        })
        .collect()
}

/// A device buffer of at least `len` elements held in `slot`, reallocated (uninitialized) when
/// it is smaller.
pub(crate) fn grow<'a, T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    slot: &'a mut Option<CudaSlice<T>>,
    len: usize,
) -> Result<&'a mut CudaSlice<T>> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        // SAFETY: callers write every element they later read.
        *slot = Some(unsafe { stream.alloc::<T>(len.max(1)) }.map_err(drv("device buffer"))?);
    }
    slot.as_mut()
        .ok_or_else(|| Error::DeviceUnavailable("device buffer missing".into()))
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
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

    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        corpus: &Corpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        self.check(queries, corpus, &docs, out.len())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    fn shape(blocks: Option<usize>, queries: usize, dim: usize, bulk: bool) -> LaunchShape {
        LaunchShape {
            blocks,
            queries,
            dim,
            f32: false,
            bulk_available: bulk,
            wgmma_available: bulk,
            fills_tiles: false,
            ring_available: true,
        }
    }

    #[test]
    fn kernels_are_chosen_per_shape() {
        use Kernel::*;
        let auto = |s| choose_kernel(None, s);
        // One short query, d ≤ 128: memory-bound kernels (bulk where the device has it).
        assert_eq!(auto(shape(Some(1), 1, 128, true)), Bulk);
        assert_eq!(auto(shape(Some(1), 1, 128, false)), Mma);
        assert_eq!(auto(shape(Some(7), 7, 64, false)), Mma);
        // Many queries, or one long query: the many-row kernel.
        assert_eq!(auto(shape(Some(8), 8, 128, true)), Gemm);
        assert_eq!(auto(shape(Some(32), 1, 128, true)), Gemm);
        // Wide embeddings, queries of ≤ 32 tokens: bulk (its warps split d) on sm_90, else the
        // dimension-tiled ring kernel where its block fits the device's shared memory.
        assert_eq!(auto(shape(Some(3), 3, 768, true)), Bulk);
        assert_eq!(auto(shape(Some(1), 1, 256, true)), Bulk);
        assert_eq!(auto(shape(Some(40), 40, 1024, false)), Ring);
        assert_eq!(
            choose_kernel(Some(Ring), shape(Some(3), 3, 768, true)),
            Ring
        );
        assert_eq!(
            choose_kernel(Some(Bulk), shape(Some(3), 3, 768, false)),
            Ring
        );
        assert_eq!(auto(shape(Some(2), 1, 768, false)), Tiled);
        let no_room = LaunchShape {
            ring_available: false,
            ..shape(Some(1), 1, 768, false)
        };
        assert_eq!(auto(no_room), Tiled);
        // f32 on the tensor cores: the ring kernel's split, one block per query, in range.
        let f32 = |blocks, queries, dim| LaunchShape {
            f32: true,
            ..shape(blocks, queries, dim, true)
        };
        assert_eq!(auto(f32(Some(1), 1, 128)), Ring);
        assert_eq!(auto(f32(Some(9), 9, 32)), Ring);
        assert_eq!(auto(f32(Some(1), 1, 512)), Ring);
        assert_eq!(auto(f32(None, 1, 128)), Tiled);
        assert_eq!(choose_kernel(Some(Gemm), f32(Some(1), 1, 64)), Ring);
        assert_eq!(choose_kernel(Some(Tiled), f32(Some(1), 1, 64)), Tiled);
        let f32_no_room = LaunchShape {
            ring_available: false,
            ..f32(Some(1), 1, 128)
        };
        assert_eq!(auto(f32_no_room), Tiled);
        // Other dtypes / d: the general kernel.
        assert_eq!(auto(shape(None, 1, 128, true)), Tiled);
        assert_eq!(auto(shape(Some(1), 1, 200, true)), Tiled);
        assert_eq!(auto(shape(Some(1), 1, 1152, true)), Tiled);
        // Forced kernels, and their fallbacks where they do not apply.
        let forced = |k, s| choose_kernel(Some(k), s);
        assert_eq!(forced(Mma, shape(Some(1), 1, 128, true)), Mma);
        assert_eq!(forced(Mma, shape(Some(9), 9, 128, true)), Mma);
        assert_eq!(forced(Mma, shape(Some(2), 1, 128, true)), Gemm);
        assert_eq!(forced(Bulk, shape(Some(1), 1, 128, false)), Mma);
        assert_eq!(forced(Gemm, shape(Some(1), 1, 32, true)), Gemm);
        assert_eq!(forced(Gemm, shape(Some(1), 1, 768, true)), Bulk);
        assert_eq!(forced(Gemm, shape(Some(1), 1, 768, false)), Ring);
        assert_eq!(forced(Ring, shape(Some(1), 1, 128, true)), Ring);
        // Warpgroup MMA: by name on sm_90a at d = 64 and 128 (else Gemm); chosen there on
        // documents that mostly fill their 128-token tiles.
        assert_eq!(forced(Wgmma, shape(Some(40), 8, 128, true)), Wgmma);
        assert_eq!(forced(Wgmma, shape(Some(1), 1, 64, true)), Wgmma);
        assert_eq!(forced(Wgmma, shape(Some(40), 8, 96, true)), Gemm);
        assert_eq!(forced(Wgmma, shape(Some(40), 8, 128, false)), Gemm);
        assert_eq!(forced(Wgmma, shape(Some(1), 1, 768, false)), Ring);
        assert_eq!(auto(shape(Some(40), 8, 128, true)), Gemm);
        let filled = |blocks, queries, dim, sm90a| LaunchShape {
            fills_tiles: true,
            ..shape(blocks, queries, dim, sm90a)
        };
        assert_eq!(auto(filled(Some(32), 1, 128, true)), Wgmma);
        assert_eq!(auto(filled(Some(32), 32, 128, true)), Wgmma);
        assert_eq!(auto(filled(Some(40), 8, 64, true)), Wgmma);
        assert_eq!(auto(filled(Some(32), 1, 128, false)), Gemm);
        assert_eq!(auto(filled(Some(32), 1, 96, true)), Gemm);
        assert_eq!(auto(filled(Some(1), 1, 128, true)), Bulk);
        assert_eq!(forced(Gemm, filled(Some(32), 1, 128, true)), Gemm);
        assert_eq!(forced(Ring, shape(Some(2), 1, 128, true)), Gemm);
        assert_eq!(forced(Tiled, shape(Some(1), 1, 128, true)), Tiled);
        assert_eq!(forced(V1, shape(Some(1), 1, 128, true)), V1);
        assert_eq!(forced(V2, shape(None, 1, 128, true)), V2);
    }

    #[test]
    fn queries_pack_into_32_row_blocks() {
        let dim = 32;
        let lens = [1usize, 32, 33, 100];
        let data: Vec<Vec<f16>> = lens
            .iter()
            .enumerate()
            .map(|(q, &n)| {
                (0..n * dim)
                    .map(|i| f16::from_f32((q * 1000 + i) as f32 / 4096.0))
                    .collect()
            })
            .collect();
        let queries: Vec<Matrix<'_>> = data
            .iter()
            .map(|v| Matrix::new(&v[..], dim).unwrap())
            .collect();
        let b = query_blocks(&queries, dim).expect("f16 at d = 32 takes the tensor cores");
        assert_eq!(b.dtype, DType::F16);
        assert_eq!(b.rows, [1, 32, 32, 1, 32, 32, 32, 4]);
        assert_eq!(b.start, [0, 1, 2, 4, 8]);
        assert_eq!(b.tokens.len(), 8 * QBLOCK * dim);
        for (q, v) in data.iter().enumerate() {
            let first = b.start[q] as usize * QBLOCK * dim;
            let blocks = (b.start[q + 1] - b.start[q]) as usize;
            let region = &b.tokens[first..first + blocks * QBLOCK * dim];
            let bits: Vec<u16> = v.iter().map(|x| x.to_bits()).collect();
            assert_eq!(&region[..bits.len()], &bits[..], "query {q} rows in order");
            assert!(
                region[bits.len()..].iter().all(|&x| x == 0),
                "query {q} padding is zero"
            );
        }
        // Not on the tensor cores: mixed dtypes, a d no kernel is built for (f32 is packed for
        // maxsim_ring: f32_queries_split_into_high_and_low_halves).
        let f = vec![0.5f32; dim];
        assert!(query_blocks(&[queries[0], Matrix::new(&f[..], dim).unwrap()], dim).is_none());
        let odd = vec![f16::ONE; 200];
        assert!(query_blocks(&[Matrix::new(&odd[..], 200).unwrap()], 200).is_none());
        assert!(query_blocks(&[], dim).is_none());
    }

    #[test]
    fn f32_queries_split_into_high_and_low_halves() {
        let dim = 64;
        let v: Vec<f32> = (0..3 * dim)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 77.0)
            .collect();
        let q = Matrix::new(&v[..], dim).unwrap();
        let b = query_blocks(&[q], dim).expect("f32 at d = 64 takes the ring kernel");
        assert_eq!(
            (b.dtype, &b.rows[..], &b.start[..]),
            (DType::F32, &[3][..], &[0, 1][..])
        );
        assert_eq!(b.tokens.len(), 2 * QBLOCK * dim);
        for (i, &x) in v.iter().enumerate() {
            let hi = f16::from_bits(b.tokens[i]).to_f64();
            let lo = f16::from_bits(b.tokens[QBLOCK * dim + i]).to_f64() / SPLIT_SCALE as f64;
            // hi to 2^-12 of x, lo to 2^-11 of the rest: the pair to 2^-23 of x.
            assert!(
                (hi + lo - x as f64).abs() <= 2.4e-7 * (x.abs() as f64).max(1e-3),
                "{i}"
            );
        }
        assert!(b.tokens[3 * dim..QBLOCK * dim].iter().all(|&x| x == 0));
        // Out of the split's range, or longer than one block: not on the tensor cores.
        let big = vec![40000.0f32; dim];
        assert!(query_blocks(&[Matrix::new(&big[..], dim).unwrap()], dim).is_none());
        let long = vec![0.1f32; 33 * dim];
        assert!(query_blocks(&[Matrix::new(&long[..], dim).unwrap()], dim).is_none());
    }

    #[test]
    fn ring_blocks_fit_shared_memory() {
        const H100: usize = 227 * 1024;
        const RTX: usize = 99 * 1024;
        let k = KernelShape::DEFAULT;
        let wide = KernelShape {
            ring_warps: 12,
            ring_stages: 2,
            ..k
        };
        let lane_copies = KernelShape {
            ring_bulk: false,
            ..k
        };
        // An f32 stage of 4 KB and its 8-byte mbarrier (bulk copies, the default).
        const F32_STAGE: usize = 4096 + 8;
        let tiles = KernelShape { ring_tiles: 4, ..k };
        // (d, f32, shared memory per block, shape, (warps, bytes)).
        let cases = [
            // Up to eight warps' rings of 4 × 4 KB beside the query (f32: two copies of it).
            (128, false, H100, k, Some((8, 8192 + 8 * 16384))),
            (1024, false, H100, k, Some((8, 65536 + 8 * 16384))),
            (768, true, H100, k, Some((8, 98304 + 8 * 4 * F32_STAGE))),
            (1024, true, H100, k, Some((6, 131072 + 6 * 4 * F32_STAGE))),
            (1024, false, RTX, k, Some((2, 65536 + 2 * 16384))),
            (1024, true, RTX, k, None),
            // Stages of 32 bytes per dimension below d = 128.
            (32, true, H100, k, Some((8, 4096 + 8 * 4 * (1024 + 8)))),
            (160, false, H100, k, None),
            // The experiment knobs size the block too.
            (768, false, H100, wide, Some((12, 49152 + 12 * 8192))),
            // Per-lane copies need no mbarrier.
            (128, true, H100, lane_copies, Some((8, 16384 + 8 * 16384))),
            // Four tiles per f16 stage double it (8 KB); f32 stages stay one tile.
            (768, false, H100, tiles, Some((5, 49152 + 5 * 32768))),
            (128, true, H100, tiles, Some((8, 16384 + 8 * 4 * F32_STAGE))),
        ];
        for (dim, f32, smem, shape, want) in cases {
            assert_eq!(
                ring_layout(dim, f32, smem, shape),
                want,
                "d = {dim}, f32 {f32}, {smem} bytes, {shape:?}"
            );
        }
        assert_eq!(ring_instance(96), Some(96));
        assert_eq!(ring_instance(640), Some(128));
        assert_eq!(ring_instance(160), None);
    }

    #[test]
    fn filled_tiles_pad_at_most_two_fifths() {
        let fills = |o: &[usize]| DocLengths::of(o).fills_tiles();
        assert!(fills(&[0, 128, 256]));
        assert!(fills(&[0, 1024, 2048]));
        assert!(fills(&[0, 1024, 1124]));
        // 256 tile tokens hold 183 document tokens (39.9% more), not 182 or 130.
        assert!(fills(&[0, 183]));
        assert!(!fills(&[0, 182]));
        assert!(!fills(&[0, 130]));
        // 64 + 224 tokens in 384: 33% more.
        assert!(fills(&[0, 64, 288]));
        assert!(!fills(&[0, 32, 96]));
        assert!(!fills(&[0]));
        assert!(!fills(&[0, 0]));
    }

    #[test]
    fn bulk_runs_hold_about_four_tiles() {
        let run = |o: &[usize]| DocLengths::of(o).bulk_run(128);
        assert_eq!(run(&[0, 128, 256, 384]), 4, "one tile a document");
        assert_eq!(run(&[0, 5, 9]), 4, "short documents");
        assert_eq!(run(&[0, 256, 512]), 2, "two tiles a document");
        assert_eq!(run(&[0, 129, 160]), 2, "1.5 tiles a document");
        assert_eq!(run(&[0, 3000]), 1, "long documents");
        assert_eq!(run(&[0]), 4, "no documents");
        assert_eq!(run(&[0, 0, 0]), 4, "empty documents");
        // Wide d: about four 128 x 128 tiles' worth of bytes.
        let wide = |o: &[usize], d| DocLengths::of(o).bulk_run(d);
        assert_eq!(wide(&[0, 128, 256], 256), 2);
        assert_eq!(wide(&[0, 128, 256], 768), 1);
        assert_eq!(wide(&[0, 40, 80], 256), 4);
        // Lengths known only by their mean (borrowed device memory).
        assert_eq!(DocLengths::mean(3, 384).bulk_run(128), 4);
        assert_eq!(DocLengths::mean(2, 512).bulk_run(128), 2);
        assert!(DocLengths::mean(2, 256).fills_tiles());
        assert_eq!(DocLengths::mean(0, 0).bulk_run(128), 4);
        // Runs shrink where the grid would not fill the device's resident slots.
        assert_eq!(bulk_group(100_000, 396, 4), 4);
        assert_eq!(bulk_group(1000, 396, 4), 3);
        assert_eq!(bulk_group(1000, 396, 2), 2);
        assert_eq!(bulk_group(100, 396, 4), 1);
        assert_eq!(bulk_group(0, 0, 0), 1);
    }

    #[test]
    fn kernel_defines_are_checked_once() {
        assert_eq!(KernelShape::parse(None).unwrap(), KernelShape::DEFAULT);
        let k = KernelShape::parse(Some("RING_WARPS=12, GEMM_STAGES=4,MMA_TILES=8")).unwrap();
        assert_eq!((k.ring_warps, k.gemm_stages, k.ring_stages), (12, 4, 4));
        const { assert!(KernelShape::DEFAULT.ring_bulk) };
        let k = KernelShape::parse(Some("RING_TILES=4,RING_BULK=0")).unwrap();
        assert_eq!((k.ring_tiles, k.ring_bulk), (4, false));
        for bad in [
            "RING_STAGES=9",
            "RING_WARPS=0",
            "GEMM_STAGES=x",
            "RING_TILES=5",
            "RING_BULK=3",
            "RING_BULK",
        ] {
            let e = KernelShape::parse(Some(bad)).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn split_takes_rows_of_f32_scale_only() {
        assert!(
            split_rows_ok(&[0.5, 1e-9, 0.0, 0.0], 2),
            "a tiny value in a row of scale"
        );
        assert!(split_rows_ok(&[0.0, 0.0, 32768.0, 1.0], 2));
        assert!(
            !split_rows_ok(&[0.5, 0.5, 1e-5, -1e-5], 2),
            "a row of tiny values"
        );
        assert!(!split_rows_ok(&[40000.0, 0.0], 2), "past f16's range");
        assert!(!split_rows_ok(&[f32::NAN, 1.0], 2));
    }

    #[test]
    fn wide_dims_and_launch_limits() {
        assert!(wide_dim(256) && wide_dim(768) && wide_dim(1024));
        assert!(!wide_dim(128) && !wide_dim(200) && !wide_dim(1152));
        assert!(launch_size_ok(10, 10).is_ok());
        assert!(launch_size_ok(i32::MAX as usize + 1, 1).is_err());
    }
}
