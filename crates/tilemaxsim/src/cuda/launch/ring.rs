//! `maxsim_ring` (kernels/ring.cu): one warp per (query, document) with the document streamed
//! through a ring of stages: exact f32 (split into f16 parts) and wide d before sm_90.

use cudarc::driver::PushKernelArg;

use super::{Launch, PairArgs, Target, same_dtype_blocks};
use crate::cuda::context::GpuContext;
use crate::cuda::device::drv;
use crate::cuda::functions::kernel_in;
use crate::cuda::memory::{DeviceCorpus, DeviceQueries};
use crate::cuda::plan::{KernelShape, ring_instance, ring_layout};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// The ring family, with the stage counts of the program (`KernelShape`).
pub(in crate::cuda) struct Ring {
    pub(in crate::cuda) shape: KernelShape,
}

impl Launch for Ring {
    unsafe fn launch(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let f32 = corpus.dtype == DType::F32;
        let (Some(inst), Some((warps, smem))) = (
            ring_instance(corpus.width),
            ring_layout(corpus.width, f32, gpu.info.smem_per_block, self.shape),
        ) else {
            return Err(Error::Argument(format!(
                "no ring kernel for {} d = {} on this device",
                corpus.dtype, corpus.width
            )));
        };
        let func = kernel_in(&gpu.kernels.ring, (corpus.dtype, inst), "ring")?;
        let qb = same_dtype_blocks(queries, corpus)?;
        if qb.blocks != queries.len || (f32 && !corpus.split_ok) {
            return Err(Error::Argument(
                "the ring kernel takes queries of ≤ 32 tokens of the corpus dtype (f32: in the split's range)"
                    .into(),
            ));
        }
        let threads = warps * 32;
        let tasks = t.n.div_ceil(warps as usize) as u64 * queries.len as u64;
        let cfg = gpu.persistent_grid(func, threads, smem, tasks)?;
        let args = PairArgs::new(&qb.tokens, queries, corpus, t);
        let dim = corpus.width as i32;
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&dim);
        // SAFETY: the arguments match `maxsim_ring_*` in kernels/ring.cu: `qpad` holds
        // 32 × d halves per query (two such for f32; every query one block, checked above), the
        // offsets cover every query and document, `doc_index` is null or `n` indices <
        // corpus.len (the caller's contract), `out` holds Q × n floats, `smem` bytes of dynamic
        // shared memory for the query and `warps` rings (`ring_layout`); d_tokens is 16-byte
        // aligned (checked by the kernel choice; rows are 2d or 4d bytes, d % 32 = 0).
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_ring launch"))?;
        Ok(())
    }
}
