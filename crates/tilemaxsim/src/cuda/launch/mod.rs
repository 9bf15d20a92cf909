//! Launches, one small type per kernel family (`mma.rs`, `bulk.rs` with `maxsim_span`,
//! `gemm.rs` with `maxsim_wgmma`, `ring.rs`, `general.rs` for the CUDA-core kernels), each
//! implementing [`Launch`]: arguments as structs mirroring the kernels' signatures, grids sized
//! from the device's occupancy. What to launch is the scorer's choice; where the work goes and
//! what it writes is a [`Target`].

mod bulk;
pub(super) mod codec;
mod gemm;
mod general;
mod mma;
mod ring;

pub(super) use bulk::{Bulk, add_planes};
pub(super) use gemm::Gemm;
pub(super) use general::{DocRows, General, GeneralArgs};
pub(super) use mma::Mma;
pub(super) use ring::Ring;

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use super::memory::{DeviceBlocks, DeviceCorpus, DeviceQueries};
use crate::error::{Error, Result};

/// A grid-stride launch of `threads`-thread blocks over `n` items, at most 8 blocks per SM.
pub(in crate::cuda) fn stride_grid(gpu: &GpuContext, n: u64, threads: u32) -> LaunchConfig {
    let cap = gpu.info.multiprocessors.max(1) as u64 * 8;
    LaunchConfig {
        grid_dim: (n.div_ceil(threads as u64).clamp(1, cap) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Where a launch runs and what it writes: the stream, the candidate list (0: documents
/// `0..n`), `n`, and the Q × n scores (device pointers as `u64`).
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    pub(super) stream: &'a Arc<CudaStream>,
    pub(super) doc_index: u64,
    pub(super) n: usize,
    pub(super) out: u64,
}

/// One kernel family: enqueue its kernel for `queries` against `corpus` into `t`.
pub(super) trait Launch {
    /// # Safety
    /// `t.doc_index` is 0 or `t.n` indices < corpus.len, `t.out` holds Q × `t.n` floats, all
    /// usable on `t.stream`, as are the queries' and the corpus's buffers.
    unsafe fn launch(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()>;
}

/// `(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out)`: the leading
/// arguments of `maxsim_mma_*`, `maxsim_bulk_*` and `maxsim_ring_*` (kernels/mma.cu, bulk.cu, ring.cu).
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
    /// The leading arguments of the one-warp-per-(query, document) kernels.
    fn new(
        qpad: &CudaSlice<u16>,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Self {
        Self::at(qpad.device_ptr(t.stream).0, queries, corpus, t)
    }

    /// The same with the queries at `q` (`maxsim_bulk_split`: their f32 rows).
    fn at(q: CUdeviceptr, queries: &DeviceQueries, corpus: &DeviceCorpus, t: Target<'_>) -> Self {
        PairArgs {
            qpad: q,
            q_offsets: queries.offsets.device_ptr(t.stream).0,
            num_queries: queries.len as i32,
            d_tokens: corpus.tokens.device_ptr(t.stream).0,
            d_offsets: corpus.offsets.device_ptr(t.stream).0,
            doc_index: t.doc_index,
            num_docs: t.n as i32,
            out: t.out,
        }
    }

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

/// `tasks` (query, document) pairs in blocks of `group`, as a grid size the kernels take (i32).
fn grid_of(tasks: u64, blocks: u64) -> Result<u32> {
    if blocks > i32::MAX as u64 {
        return Err(Error::Argument(format!(
            "{tasks} (query, document) pairs per launch is over the limit"
        )));
    }
    Ok(blocks as u32)
}

/// Sum the per-block partial scores (`blocks × t.n` at `partial`) of `queries` queries into
/// `t.out` (`sum_qblocks`, kernels/utility.cu); `start`: each query's first block (Q + 1).
fn sum_qblocks(
    gpu: &GpuContext,
    t: Target<'_>,
    partial: u64,
    start: u64,
    queries: usize,
) -> Result<()> {
    let (nq, nd) = (queries as i32, t.n as i32);
    let total = (queries * t.n) as u64;
    let cfg = LaunchConfig {
        grid_dim: (total.div_ceil(256).min(65535 * 16) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = t.stream.launch_builder(&gpu.kernels.sum_qblocks);
    b.arg(&partial).arg(&start).arg(&nq).arg(&nd).arg(&t.out);
    // SAFETY: `sum_qblocks` reads blocks × n partial scores and Q + 1 block starts, writes
    // Q × n floats into `out` (the callers' contract).
    unsafe { b.launch(cfg) }.map_err(drv("sum_qblocks launch"))?;
    Ok(())
}
