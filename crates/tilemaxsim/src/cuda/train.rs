//! Training on tensors the engine borrows (kernels/train.cu): the forward pass, which writes each
//! query token's best document token (int32) beside the score (every query against every document
//! through a ring of document rows in shared memory), and the backward passes, which route the
//! scores' gradient through those tokens (dQ by gathers, dD accumulated per document in shared
//! memory). f16/bf16/f32, queries and documents of one dtype, d a multiple of 8 up to 128, rows
//! contiguous and 16-byte aligned; f32 documents checked by the caller to lie in the split range
//! (`RawDocs::split_ok`: the forward multiplies f16 parts of both sides on the tensor cores, as the
//! f32 scoring kernels do, after splitting the documents once a call into a temporary buffer);
//! [`train_supported`] says whether a shape qualifies. Used by
//! [`CudaScorer::train_forward`](super::CudaScorer::train_forward) and
//! [`CudaScorer::train_backward`](super::CudaScorer::train_backward).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use super::functions::kernel_in;
use super::launch::DocRows;
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
/// Rows a stage of that ring (kernels/train.cu: TRAIN_TILE).
const FWD_TILE: usize = 64;
/// Shared bytes a block may opt into, as kernels/train.cu's TRAIN_SMEM_BUDGET takes them by
/// architecture: 99 KB on sm_86, sm_89 and sm_120+, else 163 KB (sm_80's and sm_87's; sm_90+
/// allow more).
fn fwd_smem_budget(compute_capability: (i32, i32)) -> usize {
    match compute_capability {
        (8, 6) | (8, 9) => 101_376,
        (major, _) if major >= 12 => 101_376,
        _ => 166_912,
    }
}

/// Dynamic shared bytes of a `maxsim_train_fwd` block scoring every query against every
/// document at `chunks` 32-half chunks a ring row (d's 32-wide chunks; twice as many for f32,
/// whose rows are f16 planes): its ring, rows `(chunks | 1) × 32` halves apart
/// (kernels/train.cu: TrainPitch), FWD_RING_ROWS of them, or as many whole stages as fit
/// `budget` (TrainRing: on 99 KB GPUs the f32 forward at d > 96 runs two stages, not three).
fn fwd_smem(chunks: usize, budget: usize) -> usize {
    let row = (chunks | 1) * 32 * 2;
    let stage = FWD_TILE * row;
    (FWD_RING_ROWS * row).min(budget / stage * stage)
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
    if q.dtype == DType::F32 && !d.split_ok {
        return Some(
            "f32 documents not checked to lie in the split range (|x| ≤ 32768, each row all \
             zeros or with a largest |x| ≥ 2^-12)"
                .into(),
        );
    }
    if q.dim != d.dim || q.dim == 0 || q.dim % 8 != 0 || q.dim > 128 {
        return Some(format!(
            "d = {} (the training kernels take multiples of 8 up to 128)",
            q.dim
        ));
    }
    let unit = 16 / q.dtype.size(); // elements in 16 bytes
    let aligned = |ptr: u64, strides: &[usize]| {
        ptr.is_multiple_of(16) && strides.iter().all(|s| s.is_multiple_of(unit))
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
    let num_docs = i32_of(args.docs.len(), "documents")?;
    if num_docs == 0 {
        return Ok(());
    }
    let kch = q.dim.div_ceil(32);
    // f32: the documents split into planes first (freed in stream order once the forward ran).
    let (docs, _planes) = if q.dtype == DType::F32 {
        let (rows, planes) = split_planes(gpu, stream, args, kch)?;
        (rows, Some(planes))
    } else {
        (doc_rows(&args.docs), None)
    };
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
    let chunks = if q.dtype == DType::F32 { 2 * kch } else { kch };
    let smem = if args.group == 0 {
        fwd_smem(chunks, fwd_smem_budget(gpu.info.compute_capability))
    } else {
        0
    };
    if smem > gpu.info.smem_per_block {
        return Err(Error::Argument(format!(
            "the training forward needs {smem} bytes of shared memory a block; this GPU allows {}",
            gpu.info.smem_per_block
        )));
    }
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
    // SAFETY: the kernel's signature is (u16* or float*, i64, i64, int, int, DocRows, int, int,
    // int, int, float*, int*), pushed in order; the memory is the caller's (this function's
    // contract) or the planes, alive until after the launch and freed in stream order.
    unsafe { b.launch(cfg) }.map_err(drv("training forward launch"))?;
    Ok(())
}

/// f32 documents as the f32 forward's f16 planes (`maxsim_train_split`): a buffer holding each
/// document row as 64 × `kch` halves (each 32-dimension chunk's high parts, then its low parts
/// scaled by 2^11), laid out as the documents are (packed rows by the same offsets, or the
/// padded batch's rows, padding included), and the `DocRows` that reads it.
fn split_planes(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    args: &TrainArgs,
    kch: usize,
) -> Result<(DocRows, CudaSlice<u16>)> {
    let src = doc_rows(&args.docs);
    let width = 64 * kch;
    let (rows, batch_stride) = match args.docs.layout {
        RawLayout::Packed { rows, .. } => (rows, 0),
        RawLayout::Padded { docs, max_len, .. } => (docs * max_len, max_len * width),
    };
    let n = rows
        .checked_mul(width)
        .ok_or_else(|| Error::Argument(format!("{rows} document rows to split")))?;
    // SAFETY: the split writes every row a document has; the forward reads no other row.
    let planes = unsafe { stream.alloc::<u16>(n.max(1)) }.map_err(drv("f32 training planes"))?;
    let rows_of = DocRows {
        tokens: {
            let (ptr, _sync) = planes.device_ptr(stream);
            ptr
        },
        row_stride: width as i64,
        batch_stride: batch_stride as i64,
        ..src
    };
    let cfg = LaunchConfig {
        grid_dim: (grid_x(args.docs.len())?, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let (num_docs, dim, kch_i) = (
        i32_of(args.docs.len(), "documents")?,
        args.queries.dim as i32,
        kch as i32,
    );
    let mut b = stream.launch_builder(&gpu.kernels.train_split);
    b.arg(&src)
        .arg(&num_docs)
        .arg(&dim)
        .arg(&kch_i)
        .arg(&rows_of)
        .arg(&planes);
    // SAFETY: (DocRows, int, int, int, DocRows, u16*), in order; the documents are the caller's
    // (`forward`'s contract), the planes hold `rows × width` halves.
    unsafe { b.launch(cfg) }.map_err(drv("f32 training split launch"))?;
    Ok((rows_of, planes))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The forward's ring fits each architecture's opt-in shared memory in whole stages, at
    /// least two, at every d up to 128 in either dtype family; three stages where they fit
    /// (kernels/train.cu: TrainRing, TRAIN_SMEM_BUDGET).
    #[test]
    fn the_forward_ring_fits_every_gpu_in_whole_stages() {
        for cc in [(8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (12, 0)] {
            let budget = fwd_smem_budget(cc);
            for chunks in 1..=8 {
                let bytes = fwd_smem(chunks, budget);
                let stage = FWD_TILE * (chunks | 1) * 32 * 2;
                assert!(bytes <= budget, "{cc:?}, {chunks} chunks: {bytes} bytes");
                assert_eq!(bytes % stage, 0, "{cc:?}, {chunks} chunks: a part stage");
                assert!(
                    bytes / stage >= 2,
                    "{cc:?}, {chunks} chunks: fewer than two stages"
                );
            }
        }
        let (h200, rtx) = (fwd_smem_budget((9, 0)), fwd_smem_budget((8, 9)));
        for (chunks, budget, stages, what) in [
            (4, rtx, 3, "16-bit at d = 128"),
            (6, rtx, 3, "f32 at d = 96"),
            (8, rtx, 2, "f32 at d = 128 on 99 KB"),
            (8, h200, 3, "f32 at d = 128 on sm_90"),
        ] {
            let stage = FWD_TILE * (chunks | 1) * 32 * 2;
            assert_eq!(fwd_smem(chunks, budget), stages * stage, "{what}");
        }
    }
}
