//! `maxsim_gemm` (kernels/gemm.cu) and its warpgroup-MMA twin `maxsim_wgmma` (kernels/wgmma.cu):
//! many query rows at once, the same arguments, grid and output; queries longer than one block
//! are summed from per-block partial scores (`sum_qblocks`).

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{DevicePtr, PushKernelArg};

use super::{Launch, Target, same_dtype_blocks, sum_qblocks};
use crate::cuda::context::GpuContext;
use crate::cuda::device::drv;
use crate::cuda::functions::kernel_in;
use crate::cuda::memory::{DeviceCorpus, DeviceQueries};
use crate::cuda::plan::{GEMM_BN, GEMM_THREADS, Kernel, KernelShape, TILE_META, WG_BN, WG_QBLOCKS};
use crate::error::Result;

/// The many-query family: `wgmma` (sm_90a) or the portable `gemm`, with the program's stage
/// counts (`KernelShape`).
pub(in crate::cuda) struct Gemm {
    pub(in crate::cuda) wgmma: bool,
    pub(in crate::cuda) shape: KernelShape,
}

/// The arguments of `maxsim_gemm_*` (kernels/gemm.cu) and `maxsim_wgmma_*` (kernels/wgmma.cu):
/// the queries' 32-row blocks and each block's real rows, the documents, the candidates, and
/// the blocks × n partial scores (final scores where every query is one block).
struct GemmArgs {
    qpad: CUdeviceptr,
    qblock_rows: CUdeviceptr,
    num_qblocks: i32,
    d_tokens: CUdeviceptr,
    d_offsets: CUdeviceptr,
    doc_index: CUdeviceptr,
    num_docs: i32,
    out: CUdeviceptr,
}

impl GemmArgs {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(&self.qpad)
            .arg(&self.qblock_rows)
            .arg(&self.num_qblocks)
            .arg(&self.d_tokens)
            .arg(&self.d_offsets)
            .arg(&self.doc_index)
            .arg(&self.num_docs)
            .arg(&self.out);
    }
}

impl Launch for Gemm {
    unsafe fn launch(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let key = (corpus.dtype, corpus.width);
        let (func, threads, qblocks_per_block, smem) = if self.wgmma {
            // The ring, 1024-byte aligned inside the allocation, then a TileMeta and two
            // mbarriers per stage; the consumer warpgroups and the producer warp.
            let smem = self.shape.wg_stages * (WG_BN * corpus.width * 2 + TILE_META + 16) + 1024;
            let func = kernel_in(&gpu.kernels.wgmma, key, "warpgroup-MMA")?;
            (func, Kernel::Wgmma.threads(), WG_QBLOCKS, smem)
        } else {
            let smem = self.shape.gemm_stages * (GEMM_BN * corpus.width * 2 + TILE_META);
            let func = kernel_in(&gpu.kernels.gemm, key, "many-query")?;
            (func, GEMM_THREADS, (GEMM_THREADS / 32) as usize, smem)
        };
        let qb = same_dtype_blocks(queries, corpus)?;
        let n = t.n;
        // A persistent grid; a multiple of the query tiles where it holds them all, so each
        // block keeps its tile (loaded once) and the tiles of one document run side by side.
        let qtiles = qb.blocks.div_ceil(qblocks_per_block) as u64;
        let mut cfg = gpu.persistent_grid(func, threads, smem, qtiles * n as u64)?;
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
        let args = GemmArgs {
            qpad: qb.tokens.device_ptr(s).0,
            qblock_rows: qb.rows.device_ptr(s).0,
            num_qblocks: qb.blocks as i32,
            d_tokens: corpus.tokens.device_ptr(s).0,
            d_offsets: corpus.offsets.device_ptr(s).0,
            doc_index: t.doc_index,
            num_docs: n as i32,
            out: partial.as_ref().map_or(t.out, |p| p.device_ptr(s).0),
        };
        let mut b = s.launch_builder(func);
        args.push(&mut b);
        // SAFETY: the arguments match `maxsim_gemm_*` in kernels/gemm.cu and
        // `maxsim_wgmma_*` in kernels/wgmma.cu: `qp` holds blocks × 32 × d halves and
        // `rows` one count per block, the offsets cover every document, `doc_index` is null or
        // `n` indices < corpus.len (the caller's contract), `o` holds blocks × n floats, `smem`
        // bytes of dynamic shared memory for the ring and its TileMetas (and wgmma's
        // alignment); the tokens are 16-byte aligned for wgmma (`wgmma_available`).
        unsafe { b.launch(cfg) }.map_err(drv("many-query kernel launch"))?;
        if let Some(p) = &partial {
            let st = qb.start.device_ptr(s).0;
            sum_qblocks(gpu, t, p.device_ptr(s).0, st, queries.len)?;
        }
        Ok(())
    }
}
