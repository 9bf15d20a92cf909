//! Launches: one function per kernel family, their arguments as structs mirroring the kernels'
//! signatures, grid sizing from the device's occupancy, and `enqueue`, which runs the plan's
//! choice ([`CudaScorer::score_device`] on the engine's buffers, `score_raw` on borrowed ones).

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
};

use super::device::drv;
use super::functions::kernel_in;
use super::memory::{DeviceBlocks, DeviceCorpus, DeviceQueries};
use super::plan::*;
use super::raw::{RawDocs, RawLayout};
use super::scorer::CudaScorer;
use crate::error::{Error, Result};
use crate::matrix::DType;

/// What `blocks_per_sm` has asked the driver: per (kernel handle, threads, dynamic shared
/// bytes) the resident blocks per SM; per kernel handle the dynamic shared memory it is allowed.
#[derive(Default)]
pub(super) struct Occupancy {
    pub(super) per_sm: Vec<((usize, u32, usize), u32)>,
    pub(super) allowed: Vec<(usize, usize)>,
}

impl CudaScorer {
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
    pub(super) unsafe fn enqueue(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        queries_dim_ok(queries.dim, corpus.dim)?;
        let kernel = self.kernel_to_run(queries, corpus, t.doc_index != 0);
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

    /// The kernel `enqueue` runs: `kernel_for`'s choice, but with a candidate list at a d
    /// only `maxsim_span_any` takes (≤ 128, no multiple of 32; it scores every document) the
    /// general kernel.
    pub(super) fn kernel_to_run(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        candidates: bool,
    ) -> Kernel {
        match self.kernel_for(queries, corpus) {
            Kernel::Bulk if !bulk_dim(corpus.dim) && candidates => Kernel::Tiled,
            k => k,
        }
    }

    /// Allow `func` `smem` bytes of dynamic shared memory and return how many of its blocks of
    /// `threads` are resident per SM (at least 1). Asked of the driver once per (kernel,
    /// threads, shared bytes), then remembered: two driver calls per launch are a few µs.
    pub(super) fn blocks_per_sm(
        &self,
        func: &CudaFunction,
        threads: u32,
        smem: usize,
    ) -> Result<u32> {
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
    pub(super) fn persistent_grid(
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
    pub(super) fn pair_args(
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
    pub(super) fn task_counter(
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

    pub(super) fn launch_mma(
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
        // SAFETY: the arguments match `maxsim_mma_*` in kernels/mma.cu: `qpad` holds
        // 32 × d halves per query, the offsets cover every query and document, `doc_index` is
        // null or `n` indices < corpus.len (the caller's contract), `out` holds Q × n floats.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_mma launch"))?;
        Ok(())
    }

    pub(super) fn launch_bulk(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let spans = t.doc_index == 0
            && !wide_dim(corpus.dim)
            && (!bulk_dim(corpus.dim) || self.span.unwrap_or_else(|| corpus.lengths.spans_pay()));
        if spans {
            return self.launch_span(queries, corpus, t);
        }
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
        // SAFETY: the arguments match `maxsim_bulk_*` in kernels/bulk.cu: as for
        // `maxsim_mma`, plus `d_tokens` 16-byte aligned (checked by kernel_for) and `smem` bytes
        // of dynamic shared memory for `stages` tiles, their barriers and the row maxima
        // (`bulk_smem`, allowed by blocks_per_sm); the grid covers every task in runs of `group`.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_bulk launch"))?;
        Ok(())
    }

    /// `maxsim_span`: `maxsim_bulk` over every document with tiles cut across documents (one
    /// query's run of consecutive documents per block).
    pub(super) fn launch_span(
        &self,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let dim = corpus.dim;
        let func = if bulk_dim(dim) {
            kernel_in(
                &self.kernels.span,
                (corpus.dtype, dim),
                "spanning bulk-copy",
            )?
        } else {
            let key = (corpus.dtype, dim.div_ceil(32), dim.is_multiple_of(8));
            let found = self.kernels.span_any.iter().find(|(k, _)| *k == key);
            &found
                .ok_or_else(|| {
                    Error::Argument(format!("no spanning kernel for {} d = {dim}", corpus.dtype))
                })?
                .1
        };
        let qpad = same_dtype_blocks(queries, corpus)?;
        let tasks = (queries.len * t.n) as u64;
        let stages = self.bulk.map_or(BULK_STAGES, |f| f.0);
        let smem = span_smem(stages, corpus.dim);
        let per_sm = self.blocks_per_sm(func, BULK_THREADS, smem)?;
        let resident = self.info.multiprocessors.max(1) as u64 * per_sm as u64;
        let group = self.bulk.map_or_else(
            || bulk_group(tasks, resident, corpus.lengths.span_run()),
            |f| f.1 as u64,
        );
        let blocks = (t.n as u64).div_ceil(group) * queries.len as u64;
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
        let a = self.pair_args(&qpad.tokens, queries, corpus, t);
        let (st, gr, d) = (stages as i32, group as i32, dim as i32);
        let mut b = t.stream.launch_builder(func);
        b.arg(&a.qpad)
            .arg(&a.q_offsets)
            .arg(&a.d_tokens)
            .arg(&a.d_offsets)
            .arg(&a.num_docs)
            .arg(&a.out)
            .arg(&st)
            .arg(&gr)
            .arg(&d);
        // SAFETY: the arguments match `maxsim_span_*` in kernels/span.cu: `qpad` holds 32 × d
        // halves per query, the offsets cover every query and the `n` = corpus.len documents
        // (no candidate list: checked above), `out` holds Q × n floats, `d_tokens` is 16-byte
        // aligned (kernel_for), and `smem` bytes hold `stages` tiles, their barriers and the
        // slots (`span_smem`, allowed by blocks_per_sm); the grid covers each query's runs.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_span launch"))?;
        Ok(())
    }

    pub(super) fn launch_ring(
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
        // SAFETY: the arguments match `maxsim_ring_*` in kernels/ring.cu: `qpad` holds
        // 32 × d halves per query (two such for f32; every query one block, checked above), the
        // offsets cover every query and document, `doc_index` is null or `n` indices <
        // corpus.len (the caller's contract), `out` holds Q × n floats, `smem` bytes of dynamic
        // shared memory for the query and `warps` rings (`ring_layout`); d_tokens is 16-byte
        // aligned (checked by kernel_for; rows are 2d or 4d bytes, d % 32 = 0).
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_ring launch"))?;
        Ok(())
    }

    /// `maxsim_gemm` or `maxsim_wgmma` (the same arguments, grid and output).
    pub(super) fn launch_gemm(
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
            let pp = p.device_ptr(s).0;
            let st = qb.start.device_ptr(s).0;
            let (nq, nd) = (queries.len as i32, n as i32);
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
    pub(super) unsafe fn launch_general(
        &self,
        kernel: Kernel,
        t: Target<'_>,
        a: GeneralArgs,
    ) -> Result<()> {
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
            // `maxsim_v2_*` in kernels/ablation.cu (DocRows by value, its #[repr(C)] twin); the
            // pointers are valid per this function's contract.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim launch"))?;
            start += count;
        }
        Ok(())
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

/// `maxsim_mma`'s task counter for one launch (`CudaScorer::task_counter`), held, not read:
/// the scorer's locked until the launch is enqueued, a launch's own until freed after it.
#[allow(dead_code)]
pub(super) enum TaskCounter<'a> {
    None,
    Shared(std::sync::MutexGuard<'a, CudaSlice<u64>>),
    Own(CudaSlice<u64>),
}

/// The general kernels' documents (kernels/ablation.cu: DocRows, passed by value): packed by
/// `offsets`, or a padded batch (`offsets` 0) of `max_len` rows per document, `batch_stride`
/// elements apart, `lengths` rows each (0: all `max_len`); rows `row_stride` elements apart.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DocRows {
    pub(super) tokens: u64,
    pub(super) offsets: u64,
    pub(super) lengths: u64,
    pub(super) row_stride: i64,
    pub(super) batch_stride: i64,
    pub(super) max_len: i64,
}

// SAFETY: #[repr(C)] plain data, laid out as `DocRows` in kernels/ablation.cu (three 8-byte
// pointers, three i64).
unsafe impl DeviceRepr for DocRows {}

impl DocRows {
    /// The rows a `RawDocs` describes, as they lie.
    pub(super) fn of_raw(docs: &RawDocs) -> Self {
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

    pub(super) fn packed(tokens: u64, offsets: u64, dim: usize) -> Self {
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
pub(super) struct GeneralArgs {
    pub(super) q_tokens: u64,
    pub(super) q_offsets: u64,
    pub(super) num_queries: usize,
    pub(super) docs: DocRows,
    pub(super) dim: usize,
    pub(super) dtype: DType,
}

/// `(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out)`: the leading
/// arguments of `maxsim_mma_*`, `maxsim_bulk_*` and `maxsim_ring_*` (kernels/mma.cu, bulk.cu, ring.cu).
pub(super) struct PairArgs {
    pub(super) qpad: CUdeviceptr,
    pub(super) q_offsets: CUdeviceptr,
    pub(super) num_queries: i32,
    pub(super) d_tokens: CUdeviceptr,
    pub(super) d_offsets: CUdeviceptr,
    pub(super) doc_index: CUdeviceptr,
    pub(super) num_docs: i32,
    pub(super) out: CUdeviceptr,
}

impl PairArgs {
    pub(super) fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
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

/// The arguments of `maxsim_gemm_*` (kernels/gemm.cu) and `maxsim_wgmma_*` (kernels/wgmma.cu):
/// the queries' 32-row blocks and each block's real rows, the documents, the candidates, and
/// the blocks × n partial scores (final scores where every query is one block).
pub(super) struct GemmArgs {
    pub(super) qpad: CUdeviceptr,
    pub(super) qblock_rows: CUdeviceptr,
    pub(super) num_qblocks: i32,
    pub(super) d_tokens: CUdeviceptr,
    pub(super) d_offsets: CUdeviceptr,
    pub(super) doc_index: CUdeviceptr,
    pub(super) num_docs: i32,
    pub(super) out: CUdeviceptr,
}

impl GemmArgs {
    pub(super) fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
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

/// The queries' 32-row blocks, which the tensor-core kernels need in the corpus's dtype.
pub(super) fn same_dtype_blocks<'a>(
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
