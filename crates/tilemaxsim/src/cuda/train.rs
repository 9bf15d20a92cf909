//! Training on tensors the engine borrows (kernels/train.cu): the forward pass, which writes
//! each query token's best document token (int32) beside the score (every query against every
//! document through a ring of document rows in shared memory), and the backward passes,
//! which route the scores' gradient through those tokens (dQ by gathers, dD accumulated per
//! document in shared memory). f16/bf16, queries and documents of one dtype, d a multiple of 8
//! up to 128, rows contiguous and 16-byte aligned; [`train_supported`] says whether a shape
//! qualifies. Used by [`CudaScorer::train_forward`](super::CudaScorer::train_forward) and
//! [`CudaScorer::train_backward`](super::CudaScorer::train_backward).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use super::functions::kernel_in;
use super::raw::{RawDocs, RawLayout, doc_rows};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// Warps a block (TRAIN_WARPS in kernels/train.cu).
const WARPS: u32 = 8;
/// Shared memory for one block of `maxsim_train_dd`'s f32 row accumulators.
const DD_SMEM_BYTES: usize = 96 << 10;
/// Document rows of `maxsim_train_fwd`'s ring at group 0 (kernels/train.cu: TRAIN_RING_ROWS,
/// room for its TRAIN_STAGES stages of TRAIN_TILE rows).
const FWD_RING_ROWS: usize = 192;

/// Dynamic shared bytes of a `maxsim_train_fwd` block scoring every query against every
/// document at `kch` 32-wide chunks of d: its ring, rows `(kch | 1) × 32` halves apart
/// (kernels/train.cu: TrainPitch).
fn fwd_smem(kch: usize) -> usize {
    FWD_RING_ROWS * (kch | 1) * 32 * 2
}

/// Padded queries `[num, len, dim]` in device memory: query a's row i at element
/// `a × batch_stride + i × row_stride`, its `dim` elements contiguous.
#[derive(Clone, Copy, Debug)]
pub struct TrainQueries {
    pub tokens: u64,
    pub dtype: DType,
    pub dim: usize,
    pub num: usize,
    pub len: usize,
    pub batch_stride: usize,
    pub row_stride: usize,
}

/// One training call's inputs: every query against every document (`group` 0: scores
/// `[num, docs]`), or document b against query b / group only (scores `[docs]`, query a's
/// documents `a × group ..`: pairs for 1, the distillation layout `[A, K, Ld, d]` for K).
#[derive(Clone, Copy, Debug)]
pub struct TrainArgs {
    pub queries: TrainQueries,
    pub docs: RawDocs,
    pub group: usize,
}

impl TrainArgs {
    /// Scores (and argmax rows of `queries.len` int32 each) the call has.
    pub fn pairs(&self) -> usize {
        if self.group == 0 {
            self.queries.num * self.docs.len()
        } else {
            self.docs.len()
        }
    }
}

fn i32_of(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n)
        .map_err(|_| Error::Argument(format!("{what}: {n} is past the kernels' i32 range")))
}

/// Why the training kernels cannot take these tensors (`None`: they can).
pub fn train_supported(args: &TrainArgs) -> Option<String> {
    let (q, d) = (&args.queries, &args.docs);
    if q.dtype != d.dtype {
        return Some(format!("queries are {}, documents {}", q.dtype, d.dtype));
    }
    if q.dtype == DType::F32 {
        return Some("f32 tensors (the training kernels take f16 and bf16)".into());
    }
    if q.dim != d.dim || q.dim == 0 || q.dim % 8 != 0 || q.dim > 128 {
        return Some(format!(
            "d = {} (the training kernels take multiples of 8 up to 128)",
            q.dim
        ));
    }
    let aligned = |ptr: u64, strides: &[usize]| {
        ptr.is_multiple_of(16) && strides.iter().all(|s| s.is_multiple_of(8))
    };
    let doc_strides = match d.layout {
        RawLayout::Packed { .. } => vec![d.row_stride],
        RawLayout::Padded { batch_stride, .. } => vec![d.row_stride, batch_stride],
    };
    if !aligned(q.tokens, &[q.row_stride, q.batch_stride]) || !aligned(d.tokens, &doc_strides) {
        return Some("rows not 16-byte aligned".into());
    }
    None
}

fn check(args: &TrainArgs) -> Result<()> {
    if let Some(why) = train_supported(args) {
        return Err(Error::Argument(format!("training kernels: {why}")));
    }
    let q = &args.queries;
    if q.num == 0 || q.len == 0 {
        return Err(Error::EmptyQuery { index: 0 });
    }
    if q.tokens == 0 || args.docs.tokens == 0 {
        return Err(Error::Argument("a null device pointer".into()));
    }
    if let RawLayout::Packed { offsets: 0, .. } = args.docs.layout {
        return Err(Error::Argument(
            "the document offsets are a null device pointer".into(),
        ));
    }
    if args.group > 0 && args.docs.len() != q.num * args.group {
        return Err(Error::Argument(format!(
            "{} documents for {} queries of {} each",
            args.docs.len(),
            q.num,
            args.group
        )));
    }
    i32_of(q.num * q.len, "query rows")?;
    i32_of(args.group, "group")?;
    Ok(())
}

fn chunks_of(len: usize) -> usize {
    len.div_ceil(32)
}

fn grid_x(n: usize) -> Result<u32> {
    u32::try_from(n.max(1)).map_err(|_| Error::Argument(format!("a grid of {n} blocks")))
}

/// Enqueue the forward pass: `out` (f32, [`TrainArgs::pairs`] contiguous) gets the scores and
/// `argmax` (int32, `pairs × queries.len`, or 0: not kept) each query token's document token
/// (-1 for a document of no tokens, which scores -inf). Queries of more than 32 tokens add
/// their 32-row chunks into `out`, which must then hold zeros.
///
/// # Safety
/// Every pointer must be live device memory of this context holding what `args` says, until
/// the work enqueued on `stream` has run.
pub(super) unsafe fn forward(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    args: &TrainArgs,
    out: u64,
    argmax: u64,
) -> Result<()> {
    check(args)?;
    if out == 0 {
        return Err(Error::Argument(
            "the output is a null device pointer".into(),
        ));
    }
    let q = &args.queries;
    let (docs, num_docs) = (doc_rows(&args.docs), i32_of(args.docs.len(), "documents")?);
    if num_docs == 0 {
        return Ok(());
    }
    let kch = q.dim.div_ceil(32);
    let f = kernel_in(&gpu.kernels.train_fwd, (q.dtype, kch), "training forward")?;
    let tasks = if args.group == 0 {
        q.num
    } else {
        args.docs.len()
    } * chunks_of(q.len);
    let task_blocks = tasks.div_ceil(WARPS as usize);
    // Every query against every document: a block's warps take TRAIN_WARPS query chunks and walk
    // `per_block` documents, so that about four blocks an SM run.
    let (grid, per_block) = if args.group == 0 {
        let want = (gpu.info.multiprocessors.max(1) as usize * 4)
            .div_ceil(task_blocks)
            .max(1);
        let per_block = args.docs.len().div_ceil(want).clamp(1, 64);
        (
            (
                grid_x(args.docs.len().div_ceil(per_block))?,
                grid_x(task_blocks)?,
            ),
            per_block,
        )
    } else {
        ((grid_x(task_blocks)?, 1), 1)
    };
    // Every query against every document reads the block's documents through a ring in
    // shared memory; the other layouts, a document a warp, do not.
    let smem = if args.group == 0 { fwd_smem(kch) } else { 0 };
    // Raises the function's dynamic shared memory allowance where needed.
    gpu.blocks_per_sm(f, WARPS * 32, smem)?;
    let cfg = LaunchConfig {
        grid_dim: (grid.0, grid.1, 1),
        block_dim: (WARPS * 32, 1, 1),
        shared_mem_bytes: smem as u32,
    };
    let (q_batch, q_row) = (q.batch_stride as i64, q.row_stride as i64);
    let (num_q, lq, dim) = (q.num as i32, q.len as i32, q.dim as i32);
    let (group, per_block) = (args.group as i32, per_block as i32);
    let mut b = stream.launch_builder(f);
    b.arg(&q.tokens)
        .arg(&q_batch)
        .arg(&q_row)
        .arg(&num_q)
        .arg(&lq)
        .arg(&docs)
        .arg(&num_docs)
        .arg(&dim)
        .arg(&group)
        .arg(&per_block)
        .arg(&out)
        .arg(&argmax);
    // SAFETY: the kernel's signature is (u16*, i64, i64, int, int, DocRows, int, int, int, int,
    // float*, int*), pushed in order; the memory is the caller's (this function's contract).
    unsafe { b.launch(cfg) }.map_err(drv("training forward launch"))?;
    Ok(())
}

/// Enqueue the backward pass for the scores' gradient `grad` (f32, laid out as `forward`'s
/// `out`) and `forward`'s `argmax`: `dq` (`[num, len, dim]` contiguous, of the queries' dtype;
/// 0: not wanted) and `dd` (the documents' rows, contiguous: `[docs, max_len, dim]` padded,
/// every row written; `[rows, dim]` packed, only the documents' rows written; 0: not wanted).
///
/// # Safety
/// As [`forward`]; `argmax` must hold what `forward` wrote for the same `args`.
pub(super) unsafe fn backward(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    args: &TrainArgs,
    argmax: u64,
    grad: u64,
    dq: u64,
    dd: u64,
) -> Result<()> {
    check(args)?;
    if argmax == 0 || grad == 0 {
        return Err(Error::Argument(
            "argmax or grad is a null device pointer".into(),
        ));
    }
    let q = &args.queries;
    let (docs, num_docs) = (doc_rows(&args.docs), i32_of(args.docs.len(), "documents")?);
    let (num_q, lq, dim, group) = (q.num as i32, q.len as i32, q.dim as i32, args.group as i32);
    let table = &gpu.kernels.train_bwd;
    let (f_dq, f_dd) = table
        .iter()
        .find(|(t, _, _)| *t == q.dtype)
        .map(|(_, a, b)| (a, b))
        .ok_or_else(|| Error::Argument(format!("no training kernels for {}", q.dtype)))?;
    if dq != 0 {
        let cfg = LaunchConfig {
            grid_dim: (grid_x((q.num * q.len).div_ceil(WARPS as usize))?, 1, 1),
            block_dim: (WARPS * 32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(f_dq);
        b.arg(&docs)
            .arg(&num_docs)
            .arg(&dim)
            .arg(&group)
            .arg(&num_q)
            .arg(&lq)
            .arg(&argmax)
            .arg(&grad)
            .arg(&dq);
        // SAFETY: (DocRows, int, int, int, int, int, int*, float*, u16*), in order; the caller's
        // memory (this function's contract).
        unsafe { b.launch(cfg) }.map_err(drv("training dQ launch"))?;
    }
    if dd != 0 && num_docs > 0 {
        let rows_smem = DD_SMEM_BYTES / (4 * q.dim);
        let smem = rows_smem * q.dim * 4;
        // Raises the function's dynamic shared memory allowance where needed.
        gpu.blocks_per_sm(f_dd, WARPS * 32, smem)?;
        let cfg = LaunchConfig {
            grid_dim: (grid_x(args.docs.len())?, 1, 1),
            block_dim: (WARPS * 32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let (q_batch, q_row, rows_smem) =
            (q.batch_stride as i64, q.row_stride as i64, rows_smem as i32);
        let mut b = stream.launch_builder(f_dd);
        b.arg(&q.tokens)
            .arg(&q_batch)
            .arg(&q_row)
            .arg(&num_q)
            .arg(&lq)
            .arg(&docs)
            .arg(&num_docs)
            .arg(&dim)
            .arg(&group)
            .arg(&argmax)
            .arg(&grad)
            .arg(&dd)
            .arg(&rows_smem);
        // SAFETY: (u16*, i64, i64, int, int, DocRows, int, int, int, int*, float*, u16*, int),
        // in order; the caller's memory (this function's contract).
        unsafe { b.launch(cfg) }.map_err(drv("training dD launch"))?;
    }
    Ok(())
}
