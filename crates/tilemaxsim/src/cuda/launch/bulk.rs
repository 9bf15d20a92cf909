//! `maxsim_bulk` (kernels/bulk.cu): one query's 128-token document tiles brought in by the
//! copy engine, runs of tasks per block; over every document of a packed corpus with tiles cut
//! across documents it is `maxsim_span` (kernels/span.cu; `maxsim_span_any` for the other
//! d ≤ 256), or at small d the same runs streamed through registers, `maxsim_stream`
//! (kernels/stream.cu); at d from 232 to 376 the warps split rows and tokens instead of d,
//! `maxsim_bulk_rows` (kernels/bulk_rows.cu).

use cudarc::driver::{CudaFunction, DevicePtr, LaunchConfig, PushKernelArg};

use super::{Launch, PairArgs, Target, grid_of, same_dtype_blocks, stride_grid};
use crate::cuda::context::GpuContext;
use crate::cuda::device::drv;
use crate::cuda::functions::kernel_in;
use crate::cuda::memory::{DeviceCorpus, DeviceQueries, Mem};
use crate::cuda::plan::{
    BULK_GROUP_RANGE, BULK_SPLIT_BF16_RUN, BULK_STAGES, BULK_TAIL_WAVES, BULK_THREADS, QBLOCK,
    SPAN_ANY_MAX_DIM, SPAN_MAX_TOKENS, SPAN_RUN_MAX, SPLIT_RUN_FACTOR, STREAM_WARPS,
    bulk_any_slice, bulk_any_smem, bulk_dim, bulk_group, bulk_resident_grid, bulk_rows_chunks,
    bulk_rows_dim, bulk_rows_smem, bulk_rows_tile, bulk_smem, bulk_split_smem, bulk_stages,
    bulk_tail, planes_run, span_any_key, span_smem, span_window_log, split_parts_bytes,
    stream_by_default, stream_group, wide_any_bound, wide_dim,
};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// The bulk family and its settings: tiles in flight per block and tasks per block when fixed
/// (`stages_group`), whether to cut tiles across documents when fixed (`span`; `None`:
/// where documents leave tiles partly empty, `DocLengths::spans_pay`), and the spanning
/// kernel's window a warp where the define SPAN_WLOG fixed it (`window`, log2 of 32-token
/// chunks; `None`: `span_window_log`'s choice per d).
pub(in crate::cuda) struct Bulk {
    pub(in crate::cuda) stages_group: Option<(usize, usize)>,
    pub(in crate::cuda) span: Option<bool>,
    pub(in crate::cuda) window: Option<usize>,
    /// Whole-document launches on a grid of the blocks that fit at once, each block walking
    /// its runs strided by the grid (kernels/bulk.cu, BulkWalk), instead of a block a run,
    /// when fixed; `None`: `bulk_resident_grid`.
    pub(in crate::cuda) resident: Option<bool>,
    /// Whether launches over every document at a d of `STREAM_DIMS` stream the documents
    /// through registers (`maxsim_stream`) instead of cutting spanning tiles, when fixed;
    /// `None`: `stream_by_default`.
    pub(in crate::cuda) stream: Option<bool>,
    /// `maxsim_bulk_rows`'s tile tokens where it takes d, when fixed (0: never); `None`:
    /// `bulk_rows_tile`.
    pub(in crate::cuda) rows: Option<usize>,
    /// Waves of blocks at the end of a block-a-run grid that take one task each, when fixed
    /// (`bulk_tail`); `None`: `BULK_TAIL_WAVES`.
    pub(in crate::cuda) tail: Option<u64>,
    /// Warps a `maxsim_stream` block when fixed (1, 2 or 4); `None`: `STREAM_WARPS`.
    pub(in crate::cuda) stream_warps: Option<u32>,
}

impl Launch for Bulk {
    unsafe fn launch(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        if corpus.dtype == DType::F32 || queries.dtype == DType::F32 {
            return self.launch_split(gpu, queries, corpus, t);
        }
        if let Some(tile) = self.rows_tile(corpus.width)
            && !(t.doc_index == 0 && self.span == Some(true))
        {
            return self.launch_rows(gpu, queries, corpus, t, tile);
        }
        if t.doc_index == 0 && self.spans(gpu, corpus)? {
            return self.launch_span(gpu, queries, corpus, t);
        }
        if let Some(bound) = wide_any_bound(corpus.width) {
            return self.launch_any(gpu, queries, corpus, t, bound);
        }
        let func = kernel_in(&gpu.kernels.bulk, (corpus.dtype, corpus.width), "bulk-copy")?;
        let qpad = same_dtype_blocks(queries, corpus)?;
        let tasks = (queries.len * t.n) as u64;
        let run = corpus.lengths.bulk_run(corpus.width, &gpu.tuning);
        let smem = |s| bulk_smem(s, corpus.width);
        let stages = bulk_stages(corpus.width, &gpu.tuning, |s| {
            gpu.blocks_per_sm(func, BULK_THREADS, smem(s))
        })?;
        let (cfg, st, gr) = self.grid(gpu, func, corpus, tasks, smem, run, stages)?;
        let args = PairArgs::new(&qpad.tokens, queries, corpus, t);
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&st).arg(&gr);
        // SAFETY: the arguments match `maxsim_bulk_*` in kernels/bulk.cu: as for
        // `maxsim_mma`, plus `d_tokens` 16-byte aligned (checked by the kernel choice) and
        // `smem` bytes of dynamic shared memory for `stages` tiles, their barriers and the row
        // maxima (`bulk_smem`, allowed by blocks_per_sm); the grid covers every task in runs of
        // `group`.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_bulk launch"))?;
        Ok(())
    }
}

impl Bulk {
    /// `maxsim_stream` for the corpus where it is instantiated for its d (`STREAM_DIMS`) and
    /// on (`stream`, else `stream_by_default`); `None`: the spanning kernel scores it.
    fn stream_function<'g>(
        &self,
        gpu: &'g GpuContext,
        corpus: &DeviceCorpus,
    ) -> Option<&'g CudaFunction> {
        let dim = corpus.width;
        if !self.stream.unwrap_or_else(|| stream_by_default(dim)) {
            return None;
        }
        let key = (corpus.dtype, dim);
        gpu.kernels
            .stream
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, f)| f)
    }

    /// The spanning kernel's window a warp at `dim` (log2 of its 32-token chunks).
    fn window_log(&self, dim: usize) -> usize {
        span_window_log(dim, self.window)
    }

    /// Whether every document is scored by `maxsim_span` (tiles cut across documents):
    /// - d with a `maxsim_bulk` instantiation up to 128: as `span` says, else where documents
    ///   leave whole-document tiles partly empty (`DocLengths::spans_pay`);
    /// - d up to 256 that `maxsim_bulk_any` takes too (multiples of 8 past 128): as `span` says,
    ///   else where two spanning blocks fit an SM (two stages of d-wide 128-token tiles; d past
    ///   about 220 leaves one, and `maxsim_bulk_any` runs);
    /// - any other d up to 256: always (no other tensor-core kernel takes it); past: never.
    ///
    /// A corpus of more tokens than the spanning kernel counts (`SPAN_MAX_TOKENS`) goes to
    /// whole-document tiles wherever another kernel takes its d.
    fn spans(&self, gpu: &GpuContext, corpus: &DeviceCorpus) -> Result<bool> {
        let dim = corpus.width;
        if wide_dim(dim) || dim > SPAN_ANY_MAX_DIM {
            return Ok(false);
        }
        let fits = corpus.lengths.tokens <= SPAN_MAX_TOKENS;
        if bulk_dim(dim) {
            return Ok(fits && self.span.unwrap_or_else(|| corpus.lengths.spans_pay()));
        }
        if wide_any_bound(dim).is_none() {
            return Ok(true);
        }
        if !fits {
            return Ok(false);
        }
        if let Some(span) = self.span {
            return Ok(span);
        }
        let stages = self.stages_group.map_or(BULK_STAGES, |f| f.0);
        let smem = span_smem(stages, dim, self.window_log(dim));
        if smem > gpu.info.smem_per_block {
            return Ok(false); // a fixed shape whose stages fit only `maxsim_bulk_any`'s tiles
        }
        let func = span_any_function(gpu, corpus)?;
        Ok(gpu.blocks_per_sm(func, BULK_THREADS, smem)? >= 2)
    }

    /// The grid of a whole-document bulk launch of `tasks` (query, document) tasks, unless
    /// the shape or the grid is fixed: where `bulk_resident_grid`, the blocks that fit at once,
    /// each taking every grid-th task; else runs of `bulk_group` tasks a block (at most `run`).
    /// Then `stages` stages, `smem(stages)` bytes a block; with the stages and the run as the
    /// kernels take them (i32).
    #[allow(clippy::too_many_arguments)]
    fn grid(
        &self,
        gpu: &GpuContext,
        func: &CudaFunction,
        corpus: &DeviceCorpus,
        tasks: u64,
        smem: impl Fn(usize) -> usize,
        run: u64,
        stages: usize,
    ) -> Result<(LaunchConfig, i32, i32)> {
        let stages = self.stages_group.map_or(stages, |f| f.0);
        let smem = smem(stages);
        let resident = gpu.resident_blocks(func, BULK_THREADS, smem)?;
        // A fixed shape (TILEMAXSIM_BULK) keeps its tasks a block unless the grid is fixed too.
        let on_resident = self.resident.unwrap_or_else(|| {
            self.stages_group.is_none()
                && bulk_resident_grid(tasks, resident, &corpus.lengths, corpus.width)
        });
        let group = match self.stages_group {
            Some(f) => f.1 as u64,
            None if on_resident => 1,
            None => bulk_group(tasks, resident, run),
        };
        let (blocks, code) = if on_resident {
            (tasks.div_ceil(group).min(resident), group)
        } else {
            bulk_tail(tasks, group, resident, self.tail.unwrap_or(BULK_TAIL_WAVES))
        };
        let cfg = LaunchConfig {
            grid_dim: (grid_of(tasks, blocks)?, 1, 1),
            block_dim: (BULK_THREADS, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        Ok((cfg, stages as i32, code as i32))
    }

    /// `maxsim_bulk_rows`'s tile at `dim` (`rows`, else `bulk_rows_tile`), where it takes d.
    fn rows_tile(&self, dim: usize) -> Option<usize> {
        if !bulk_rows_dim(dim) {
            return None;
        }
        match self.rows {
            Some(0) => None,
            Some(tile) => Some(tile),
            None => bulk_rows_tile(dim),
        }
    }

    /// `maxsim_bulk_rows`: d past 128 (a multiple of 8, up to `BULK_ROWS_MAX_DIM`), the warps
    /// splitting the query's rows and the tile's tokens, `tile` tokens a tile.
    fn launch_rows(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
        tile: usize,
    ) -> Result<()> {
        let dim = corpus.width;
        let tiles = kernel_in(
            &gpu.kernels.bulk_rows,
            (corpus.dtype, 32 * bulk_rows_chunks(dim)),
            "bulk-copy (rows a warp)",
        )?;
        let func = &tiles[usize::from(tile == 64)];
        let qpad = same_dtype_blocks(queries, corpus)?;
        let tasks = (queries.len * t.n) as u64;
        let run = corpus
            .lengths
            .bulk_run(dim.div_ceil(128) * 128, &gpu.tuning);
        let smem = |s| bulk_rows_smem(s, dim, tile);
        let (cfg, st, gr) = self.grid(gpu, func, corpus, tasks, smem, run, BULK_STAGES)?;
        let args = PairArgs::new(&qpad.tokens, queries, corpus, t);
        let d = dim as i32;
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&st).arg(&gr).arg(&d);
        // SAFETY: the arguments match `maxsim_bulk_rows_*` in kernels/bulk_rows.cu: as
        // `maxsim_bulk_any_*`'s, d a multiple of 8 up to the instantiation's 32·KCH
        // (`bulk_rows_dim`, `bulk_rows_chunks`), the corpus 16-byte aligned (the kernel
        // choice), and `smem` bytes for `stages` tiles of `tile` d-wide rows (`bulk_rows_smem`).
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_bulk_rows launch"))?;
        Ok(())
    }

    /// `maxsim_bulk_any`: the wide kernel at a d (a multiple of 8 past 128) below the `bound`
    /// of its instantiation, rows d wide, fragments zero past d.
    fn launch_any(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
        bound: usize,
    ) -> Result<()> {
        let func = kernel_in(
            &gpu.kernels.bulk_any,
            (corpus.dtype, bulk_any_slice(corpus.width)),
            "bulk-copy (dimensions a warp)",
        )?;
        let qpad = same_dtype_blocks(queries, corpus)?;
        let tasks = (queries.len * t.n) as u64;
        let run = corpus.lengths.bulk_run(bound, &gpu.tuning);
        let smem = |s| bulk_any_smem(s, corpus.width, bound);
        let (cfg, st, gr) = self.grid(gpu, func, corpus, tasks, smem, run, BULK_STAGES)?;
        let args = PairArgs::new(&qpad.tokens, queries, corpus, t);
        let d = corpus.width as i32;
        let mut b = t.stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&st).arg(&gr).arg(&d);
        // SAFETY: the arguments match `maxsim_bulk_any_*` in kernels/bulk.cu: as
        // `maxsim_bulk_*`'s, the query blocks 32 rows of d, d a multiple of 8 (rows of 16
        // bytes' multiples, `wide_any_bound`) up to `bound`, the corpus 16-byte aligned (the
        // kernel choice), and `smem` bytes for `stages` tiles of d-wide rows (`bulk_any_smem`).
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_bulk_any launch"))?;
        Ok(())
    }

    /// `maxsim_bulk_split`: f32 queries (split into 16-bit parts in the kernel) against an
    /// f32, f16 or bf16 corpus, whole-document tiles.
    fn launch_split(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let (split, parts_fn) = kernel_in(
            &gpu.kernels.bulk_split,
            (corpus.dtype, corpus.width),
            "split bulk-copy",
        )?;
        // An f32 corpus split at upload: the planes' kernel, with the same query parts (it
        // multiplies the same fragments as the in-kernel split).
        let func = match &corpus.planes {
            Some(_) => {
                let planes = (DType::F32, corpus.width);
                &kernel_in(&gpu.kernels.bulk_planes, planes, "f32 planes")?.0
            }
            None => split,
        };
        if queries.dtype != DType::F32 || queries.longest > QBLOCK {
            return Err(Error::Argument(
                "the split bulk-copy kernel takes f32 queries of ≤ 32 tokens".into(),
            ));
        }
        let tasks = (queries.len * t.n) as u64;
        // A block loads its query's parts where it starts: long runs pay for it. bf16 (three
        // parts; H100, B = 100K, when each block split its query itself): 74.2 M docs/s with
        // 8 documents a block, 87.1 with 32, 89.3 with 64. f32 and f16 corpora:
        // SPLIT_RUN_FACTOR times `maxsim_bulk`'s run. On the H200 at B = 100K of 128 tokens,
        // when each block split its query, f32 went 57.6 M docs/s with 8, 61.3 with 16, 64.3
        // with 32, 64.2 with 64, and f32 queries on f16 98.6-99.4 with 8, 117.7-123.3 with 32
        // (bench/results/h200/2026-11-29/call2.log, call3.log). With the parts made once a
        // call the gap is small: f32 61.5 / 62.7 with 8, 64.7 / 62.3 with 32; on f16 127.5 /
        // 122.3 with 8, 127.7 / 127.9 with 32 (call5.log). Small batches still get enough
        // blocks (`bulk_group`).
        let run = match corpus.dtype {
            DType::BF16 => BULK_SPLIT_BF16_RUN,
            _ if corpus.planes.is_some() => planes_run(corpus.bytes, corpus.len),
            _ => (SPLIT_RUN_FACTOR * corpus.lengths.bulk_run(corpus.width, &gpu.tuning))
                .min(*BULK_GROUP_RANGE.end() as u64),
        };
        // Each query split into its parts once (one block a query), on the same stream before
        // the scoring kernel; the buffers are freed in stream order after it.
        let stream = t.stream;
        let part_bytes = split_parts_bytes(corpus.width, corpus.dtype);
        // SAFETY: `maxsim_split_parts` writes all of both, every query's parts and 1/c.
        let parts = unsafe { stream.alloc::<u8>(queries.len * part_bytes) }
            .map_err(drv("query parts buffer"))?;
        let inv = unsafe { stream.alloc::<f32>(queries.len) }.map_err(drv("query scales"))?;
        let q_rows = queries.f32_rows(stream)?;
        let q_offsets = queries.offsets.device_ptr(stream).0;
        let parts_ptr = parts.device_ptr(stream).0;
        let inv_ptr = inv.device_ptr(stream).0;
        let cfg = LaunchConfig {
            grid_dim: (grid_of(queries.len as u64, queries.len as u64)?, 1, 1),
            block_dim: (BULK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(parts_fn);
        b.arg(&q_rows).arg(&q_offsets).arg(&parts_ptr).arg(&inv_ptr);
        // SAFETY: the arguments match `maxsim_split_parts_*` in kernels/bulk_split.cu: the
        // queries' f32 rows and offsets (each ≤ 32 rows, checked above), `parts` room for
        // Q × split_parts_bytes, `inv` for Q floats; one block a query.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_split_parts launch"))?;

        let smem = |s| bulk_split_smem(s, corpus.width, corpus.dtype);
        let (cfg, st, gr) = self.grid(gpu, func, corpus, tasks, smem, run, BULK_STAGES)?;
        let mut args = PairArgs::at(parts_ptr, queries, corpus, t);
        if let Some(planes) = &corpus.planes {
            args.d_tokens = planes.device_ptr(stream).0;
        }
        let mut b = stream.launch_builder(func);
        args.push(&mut b);
        b.arg(&st).arg(&gr).arg(&inv_ptr);
        // SAFETY: the arguments match `maxsim_bulk_split_*` (or `maxsim_bulk_planes_*`) in
        // kernels/bulk_split.cu: the queries' parts and 1/c (written just above, in stream
        // order) and their offsets, the corpus's rows (or its planes, 4d bytes a token as f32
        // rows) 16-byte aligned (the kernel choice; rows are 2d or 4d bytes, d % 32 = 0), its
        // offsets, `doc_index` null or `n` indices < corpus.len (the caller's
        // contract), `out` room for Q × n floats, and `smem` bytes for `stages` tiles, the
        // query's parts past the first, the barriers and the row maxima (`bulk_split_smem`,
        // allowed by blocks_per_sm); the grid covers every task in runs of `group`.
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_bulk_split launch"))?;
        drop((parts, inv));
        Ok(())
    }

    /// `maxsim_span`: `maxsim_bulk` over every document with tiles cut across documents (one
    /// query's run of consecutive documents per block).
    fn launch_span(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let dim = corpus.width;
        // Refused before anything is made for the launch.
        if corpus.lengths.tokens > SPAN_MAX_TOKENS {
            return Err(Error::Argument(format!(
                "the spanning kernel takes at most {SPAN_MAX_TOKENS} tokens a corpus at d = {dim}, \
                 got {} (split it in shards)",
                corpus.lengths.tokens
            )));
        }
        let stream = self.stream_function(gpu, corpus);
        let func = match stream {
            Some(f) => f,
            None if bulk_dim(dim) => {
                kernel_in(&gpu.kernels.span, (corpus.dtype, dim), "spanning bulk-copy")?
            }
            None => span_any_function(gpu, corpus)?,
        };
        let qpad = same_dtype_blocks(queries, corpus)?;
        let tasks = (queries.len * t.n) as u64;
        let stages = self.stages_group.map_or(BULK_STAGES, |f| f.0);
        let wlog = self.window_log(dim);
        // `maxsim_stream` has no tiles: its only shared memory is the run's offsets (static).
        let smem = if stream.is_some() {
            0
        } else {
            span_smem(stages, dim, wlog)
        };
        if smem > gpu.info.smem_per_block {
            return Err(Error::Argument(format!(
                "{stages} stages of the spanning kernel at d = {dim} need {smem} bytes of shared \
                 memory, more than this GPU's {} a block (fewer stages: bulk_shape, TILEMAXSIM_BULK)",
                gpu.info.smem_per_block
            )));
        }
        // A streaming block's warps split its run's tokens; the spanning kernel's are four.
        let warps = match stream {
            Some(_) => self.stream_warps.unwrap_or(STREAM_WARPS),
            None => BULK_THREADS / 32,
        };
        let threads = warps * 32;
        let resident = gpu.resident_blocks(func, threads, smem)?;
        // Runs of documents as the spanning kernel's (a streaming warp's share as at four warps).
        let group = self.stages_group.map_or_else(
            || {
                let run = corpus.lengths.span_run(dim, wlog, &gpu.tuning);
                match stream {
                    Some(_) => stream_group(tasks, resident, run, warps),
                    None => bulk_group(tasks, resident, run),
                }
            },
            |f| f.1 as u64,
        );
        if group as usize > SPAN_RUN_MAX {
            return Err(Error::Argument(format!(
                "a spanning run of {group} documents (at most {SPAN_RUN_MAX})"
            )));
        }
        let blocks = (t.n as u64).div_ceil(group) * queries.len as u64;
        let cfg = LaunchConfig {
            grid_dim: (grid_of(tasks, blocks)?, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let a = PairArgs::new(&qpad.tokens, queries, corpus, t);
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
        // SAFETY: the arguments match `maxsim_span_*` in kernels/span.cu and `maxsim_stream_*`
        // in kernels/stream.cu (`stages` unused there): `qpad` holds 32 × d
        // halves per query, the offsets cover every query and the `n` = corpus.len documents
        // (no candidate list: checked by the caller), `out` holds Q × n floats, `d_tokens` is
        // 16-byte aligned (the kernel choice), and `smem` bytes hold `stages` tiles, their
        // barriers, the slots and the run's offsets (`span_smem` at the window `wlog` the kernel
        // was compiled with; allowed by blocks_per_sm); the
        // grid covers each query's runs of at most SPAN_RUN_MAX documents (checked above).
        unsafe { b.launch(cfg) }.map_err(drv("maxsim_span launch"))?;
        Ok(())
    }
}

/// The `maxsim_span_any` instantiation for the corpus's dtype and d (`span_any_key`).
fn span_any_function<'g>(gpu: &'g GpuContext, corpus: &DeviceCorpus) -> Result<&'g CudaFunction> {
    let (chunks, align, half) = span_any_key(corpus.width);
    let key = (corpus.dtype, chunks, align, half);
    let found = gpu.kernels.span_any.iter().find(|(k, _)| *k == key);
    Ok(&found
        .ok_or_else(|| {
            let (dtype, dim) = (corpus.dtype, corpus.width);
            Error::Argument(format!("no spanning kernel for {dtype} d = {dim}"))
        })?
        .1)
}

/// Split an f32 corpus on the device, once, into the f16 planes `maxsim_bulk_planes` reads
/// (`split_f32_planes`, kernels/bulk_split.cu), beside its f32 rows, which the other kernels
/// read. Only where that kernel would score it (f32 tokens in the split's range, d ≤ 128
/// instantiated, sm_90+) and where the planes leave as many bytes free again; elsewhere, and
/// where the device is out of memory, the corpus stays as it is (the in-kernel split).
pub(in crate::cuda) fn add_planes(gpu: &GpuContext, corpus: &mut DeviceCorpus) -> Result<()> {
    let key = (corpus.dtype, corpus.width);
    let Some((_, (_, split))) = gpu.kernels.bulk_planes.iter().find(|(k, _)| *k == key) else {
        return Ok(());
    };
    if !corpus.split_ok || corpus.bytes == 0 || !gpu.fits(2 * corpus.bytes)? {
        return Ok(());
    }
    let stream = &gpu.stream;
    // SAFETY: `split_f32_planes` writes every byte (4d a token, as the rows).
    let Ok(planes) = (unsafe { stream.alloc::<u8>(corpus.bytes) }) else {
        return Ok(());
    };
    let count = (corpus.bytes / (4 * corpus.width)) as i64;
    // A thread a piece of 8 dimensions (grid-stride).
    let cfg = stride_grid(gpu, count as u64 * (corpus.width / 8) as u64, 256);
    let (src, dst) = (
        corpus.tokens.device_ptr(stream).0,
        planes.device_ptr(stream).0,
    );
    let mut b = stream.launch_builder(split);
    b.arg(&src).arg(&dst).arg(&count);
    // SAFETY: `src` holds `count` f32 tokens of d = corpus.width (a `split_f32_planes_d*` d) and
    // `dst` as many bytes, both 16-byte aligned (owned allocations); grid-stride over them.
    unsafe { b.launch(cfg) }.map_err(drv("split_f32_planes launch"))?;
    corpus.planes = Some(Mem::owned(planes));
    // Other streams (a searcher's) may score the corpus next: the planes are made first.
    gpu.synchronize()
}
