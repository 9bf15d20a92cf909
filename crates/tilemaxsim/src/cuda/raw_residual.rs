//! A PLAID residual corpus in device memory the engine does not own (the tensors of
//! late-interaction-kernels' `plaid.maxsim_residual_varlen`, or of a fast-plaid / colbert-ai
//! index already on the GPU), scored in place by the fused kernels on the caller's stream:
//! `CudaScorer::score_residual_raw`. Per call, on the device: the pair table from the bucket
//! weights, every token's inverse reconstruction norm, the queries in 32-row blocks and their
//! centroid scores; then the fused kernel (or, at a d none is built for, the tokens decoded to
//! f32 rows and scored by the exact kernels). From `BATCHED_MIN_BLOCKS` query blocks on, the
//! batched kernel needs none of that: it computes the norms as it decodes. Nothing is copied to
//! the host and nothing waits.
//! The scorer sequences these steps.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::codec_kernels::{CodecKernel, codec_kernel};
use super::codes::{CodecQueries, CodesView};
use super::context::GpuContext;
use super::device::drv;
use super::launch::{Target, codec as codec_launch};
use super::memory::block_layout;
use super::plan::Kernel;
use super::raw::{RawArgs, RawDocs, RawLayout, RawQueries};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// A residual corpus and its queries in device memory the caller owns.
#[derive(Clone, Copy, Debug)]
pub struct RawResidual<'a> {
    /// f32 query rows (the caller normalizes them, as PLAID scores unit vectors).
    pub queries: RawQueries<'a>,
    /// Bits per dimension: 1, 2 or 4.
    pub nbits: u32,
    /// `[tokens][d · nbits / 8]` u8 bucket codes, the first dimension in a byte's high bits.
    pub residuals: u64,
    /// `tokens` u32 centroid ids, each below `num_centroids`.
    pub ids: u64,
    /// `docs + 1` i64 offsets, from 0 to `tokens`, increasing (no empty document).
    pub offsets: u64,
    pub docs: usize,
    pub tokens: usize,
    /// f16 `[num_centroids][d]`.
    pub centroids: u64,
    pub num_centroids: usize,
    /// f32 `[2^nbits]` bucket weights.
    pub bucket_weights: u64,
    /// f32 `[queries][docs]`.
    pub out: u64,
}

/// The corpus's addresses as the kernels read them (`table` and `inv_norm` not yet filled: 0).
fn view_of(a: &RawResidual<'_>) -> CodesView {
    CodesView {
        tag: 0,
        param: a.nbits as i32,
        num_centroids: a.num_centroids,
        dim: a.queries.dim,
        tokens: a.tokens,
        docs: a.docs,
        codes: a.residuals,
        aux: a.ids,
        offsets: a.offsets,
        order: 0,
        inv_norm: 0,
        centroids: a.centroids,
        table: 0,
        values: a.bucket_weights,
    }
}

/// The kernel for the call (`codec_kernels::codec_kernel`): the batched one needs 16-byte aligned
/// centroids and 4-byte aligned codes (its loads); `batched_ok`: it is loaded. Never the
/// bulk-copy kernel: its copies of the ids may read up to three words past the caller's tensor.
pub(super) fn kernel(
    a: &RawResidual<'_>,
    batched_ok: bool,
    force: Option<Kernel>,
) -> Result<Option<CodecKernel>> {
    check(a)?;
    let (rows, _) = query_blocks(&a.queries)?;
    let blocks = rows.len();
    let aligned = a.centroids.is_multiple_of(16) && a.residuals.is_multiple_of(4);
    let shape = (0, a.nbits as i32, a.queries.dim);
    Ok(codec_kernel(
        shape,
        blocks,
        batched_ok && aligned,
        (false, false),
        force,
    ))
}

/// A call's per-call device state: the corpus's addresses with our pair table and inverse
/// norms (enqueued by `prepare`; the buffers live as long as this does).
pub(super) struct Prepared {
    pub view: CodesView,
    _table: CudaSlice<u32>,
    _inv: CudaSlice<u32>,
}

/// Check `a`, then enqueue on `stream` the pair table and every token's inverse norm.
///
/// # Safety
/// As `CudaScorer::score_residual_raw`.
pub(super) unsafe fn prepare(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    a: &RawResidual<'_>,
) -> Result<Prepared> {
    check(a)?;
    let nbits = a.nbits as i32;
    let table = alloc(stream, "residual table", 1 << (2 * a.nbits))?;
    let inv = alloc(stream, "inverse norms", a.tokens)?;
    let view = CodesView {
        inv_norm: inv.device_ptr(stream).0,
        table: table.device_ptr(stream).0,
        ..view_of(a)
    };
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(&gpu.kernels.residual_pair_table);
    b.arg(&view.values).arg(&nbits).arg(&view.table);
    // SAFETY: 2^nbits weights (the caller's), 4^nbits words of `table`.
    unsafe { b.launch(cfg) }.map_err(drv("residual_pair_table launch"))?;
    // SAFETY: the caller's tensors as `a` describes them; `inv` holds a float per token.
    unsafe { codec_launch::inv_norms(gpu, stream, &view, view.inv_norm) }?;
    Ok(Prepared {
        view,
        _table: table,
        _inv: inv,
    })
}

/// Where no fused kernel is built: the tokens decoded to f32 rows (the returned buffer) and the
/// exact call that scores them.
///
/// # Safety
/// As `prepare`, after it.
pub(super) unsafe fn decode<'a>(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    p: &Prepared,
    a: &RawResidual<'a>,
) -> Result<(CudaSlice<u32>, RawArgs<'a>)> {
    let dim = a.queries.dim;
    let decoded = alloc(stream, "decoded corpus", a.tokens * dim)?;
    let rows = decoded.device_ptr(stream).0;
    // SAFETY: as `prepare` (inverse norms enqueued first); `decoded` holds tokens × d floats.
    unsafe { codec_launch::decode_into(gpu, stream, &p.view, rows) }?;
    let exact = RawArgs {
        queries: a.queries,
        docs: RawDocs {
            tokens: rows,
            dtype: DType::F32,
            dim,
            row_stride: dim,
            layout: RawLayout::Packed {
                offsets: a.offsets,
                docs: a.docs,
                rows: a.tokens,
            },
            // Decoded tokens nobody checked: the exact CUDA-core kernel, as before.
            split_ok: false,
        },
        candidates: None,
        out: a.out,
    };
    Ok((decoded, exact))
}

/// Enqueue the fused kernel `kernel`: the queries in blocks, then the scores. The one-warp
/// kernel reads `p`, the pair table and norms of `prepare`, and the queries' centroid scores
/// made here; the batched one (`p`: `None`) needs none of them: it computes each token's norm
/// itself. `wg`: the batched kernel's ring depth and documents a run.
///
/// # Safety
/// As `CudaScorer::score_residual_raw` (after `prepare` where `p` is given).
pub(super) unsafe fn score_fused(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    a: &RawResidual<'_>,
    kernel: &CodecKernel,
    p: Option<&Prepared>,
    wg: codec_launch::WgShape,
) -> Result<()> {
    let blocks = pack_queries(gpu, stream, &a.queries)?;
    let view = p.map_or_else(|| view_of(a), |p| p.view);
    let cs = match p {
        // SAFETY: the caller's centroids (K × d halves).
        Some(p) => Some(unsafe { codec_launch::centroid_scores(gpu, stream, &blocks, &p.view) }?),
        None => None,
    };
    let target = Target {
        stream,
        doc_index: 0,
        n: a.docs,
        out: a.out,
    };
    // (`cs` lives to the end of the function: its free is ordered on `stream` after the kernel.)
    let table = cs.as_ref().map(|c| c.device_ptr(stream).0);
    // SAFETY: the caller's tensors (this function's contract; the batched kernel's alignment
    // checked by `kernel`), our table, norms, query blocks and centroid scores, all enqueued on
    // `stream` before the kernel.
    unsafe { codec_launch::fused(gpu, kernel, &blocks, &view, table, wg, target) }
}

fn alloc(stream: &Arc<CudaStream>, what: &'static str, n: usize) -> Result<CudaSlice<u32>> {
    // SAFETY: every element is written by the kernel that fills the buffer before any read.
    unsafe { stream.alloc::<u32>(n.max(1)) }.map_err(drv(what))
}

/// The checks the host can make of a raw residual call.
fn check(a: &RawResidual<'_>) -> Result<()> {
    let arg = |m: String| Err(Error::Argument(m));
    let q = &a.queries;
    if q.dtype != DType::F32 {
        return arg(format!(
            "residual queries are f32 rows here, not {}",
            q.dtype
        ));
    }
    if q.dim == 0 || q.dim > 4096 {
        return arg(format!("d = {}: expected 1 to 4096", q.dim));
    }
    if q.spans.is_empty() || q.spans.iter().any(|s| s.1 == 0) {
        return arg("every query needs at least one token".into());
    }
    if !matches!(a.nbits, 1 | 2 | 4) {
        return arg(format!("nbits = {}: expected 1, 2 or 4", a.nbits));
    }
    if !(q.dim * a.nbits as usize).is_multiple_of(8) {
        return arg(format!(
            "d = {} at nbits = {}: a token's bits do not fill whole bytes",
            q.dim, a.nbits
        ));
    }
    if a.docs == 0 || a.tokens < a.docs {
        return arg(format!(
            "{} documents of {} tokens: every document needs at least one token",
            a.docs, a.tokens
        ));
    }
    if a.num_centroids == 0 || a.num_centroids > u32::MAX as usize {
        return arg(format!("{} centroids", a.num_centroids));
    }
    let null = [
        ("queries", q.tokens),
        ("residuals", a.residuals),
        ("ids", a.ids),
        ("offsets", a.offsets),
        ("centroids", a.centroids),
        ("bucket weights", a.bucket_weights),
        ("out", a.out),
    ];
    if let Some((what, _)) = null.iter().find(|(_, p)| *p == 0) {
        return arg(format!("{what}: null device pointer"));
    }
    Ok(())
}

/// The 32-row block layout of the queries (`memory::block_layout`): each block's rows, each
/// query's first block.
fn query_blocks(q: &RawQueries<'_>) -> Result<(Vec<i32>, Vec<i32>)> {
    block_layout(q.spans.iter().map(|s| s.1)).ok_or_else(|| {
        Error::Argument("too many query tokens for one call (over 2^31 blocks)".into())
    })
}

/// The f32 query rows of `q` as the fused kernels take them (32-row blocks in f32 and f16),
/// built on the device (`codec_pack_queries`) from one small upload of the layout.
fn pack_queries(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    q: &RawQueries<'_>,
) -> Result<CodecQueries> {
    let dim = q.dim;
    let (rows, start) = query_blocks(q)?;
    let blocks = rows.len();
    let up = |what: &'static str| drv(what);
    let src: Vec<i64> = q.spans.iter().map(|s| s.0 as i64).collect();
    let lens: Vec<i32> = q.spans.iter().map(|s| s.1 as i32).collect();
    let src = stream.clone_htod(&src).map_err(up("query layout"))?;
    let lens = stream.clone_htod(&lens).map_err(up("query layout"))?;
    let rows_d = stream.clone_htod(&rows).map_err(up("query layout"))?;
    let start_d = stream.clone_htod(&start).map_err(up("query layout"))?;
    // SAFETY: `codec_pack_queries` writes every element of every block.
    let mut q32 = unsafe { stream.alloc::<f32>(blocks * 32 * dim) }.map_err(drv("query buffer"))?;
    let mut q16 = unsafe { stream.alloc::<u16>(blocks * 32 * dim) }.map_err(drv("query buffer"))?;
    let longest = q
        .spans
        .iter()
        .map(|s| s.1.div_ceil(32) * 32)
        .max()
        .unwrap_or(32);
    let cfg = LaunchConfig {
        grid_dim: (q.spans.len() as u32, longest.min(65_535) as u32, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let (row_stride, d) = (q.row_stride as i64, dim as i32);
    let mut b = stream.launch_builder(&gpu.kernels.codec_pack_queries);
    b.arg(&q.tokens)
        .arg(&src)
        .arg(&row_stride)
        .arg(&lens)
        .arg(&start_d)
        .arg(&d)
        .arg(&mut q32)
        .arg(&mut q16);
    // SAFETY: one source start and length per query, Q + 1 block starts; the blocks hold
    // blocks × 32 × d elements; the source rows are the caller's (score_residual_raw's contract).
    unsafe { b.launch(cfg) }.map_err(drv("codec_pack_queries launch"))?;
    Ok(CodecQueries {
        len: q.spans.len(),
        dim,
        blocks,
        f16: q16,
        f32: Some(q32),
        rows: rows_d,
        start: start_d,
        exact: None,
    })
}
