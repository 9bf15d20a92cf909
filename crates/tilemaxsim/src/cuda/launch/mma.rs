//! `maxsim_mma` (kernels/mma.cu): one warp per (query of ≤ 32 tokens, document), tensor cores,
//! a persistent grid with a task counter where warps have many tasks.

use cudarc::driver::PushKernelArg;

use super::{Launch, PairArgs, Target, same_dtype_blocks};
use crate::cuda::context::GpuContext;
use crate::cuda::device::drv;
use crate::cuda::functions::kernel_in;
use crate::cuda::memory::{DeviceCorpus, DeviceQueries};
use crate::cuda::plan::MMA_THREADS;
use crate::error::Result;

pub(in crate::cuda) struct Mma;

impl Launch for Mma {
    unsafe fn launch(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let func = kernel_in(
            &gpu.kernels.mma,
            (corpus.dtype, corpus.width),
            "tensor-core",
        )?;
        let qpad = same_dtype_blocks(queries, corpus)?;
        let args = PairArgs::new(&qpad.tokens, queries, corpus, t);
        // A persistent grid: exactly what is resident at once, each warp striding over tasks.
        let tasks = (queries.len * t.n) as u64;
        let cfg = gpu.persistent_grid(func, MMA_THREADS, 0, tasks.div_ceil(4))?;
        let (_counter, tc) = gpu.task_counter(tasks, &cfg, t.stream)?;
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&tc);
        // SAFETY: the arguments match `maxsim_mma_*` in kernels/mma.cu: `qpad` holds
        // 32 × d halves per query, the offsets cover every query and document, `doc_index` is
        // null or `n` indices < corpus.len (the caller's contract), `out` holds Q × n floats.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_mma launch"))?;
        Ok(())
    }
}
