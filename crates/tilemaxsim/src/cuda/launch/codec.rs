//! The kernels of compressed corpora (kernels/codec.cu): the fused decode-and-multiply kernels
//! (`fused`), the residual codec's per-call centroid scores (`centroid_scores`) and inverse
//! norms (`inv_norms`), and the decoder to f32 rows (`decode_into`, `decode_f32`) for what no
//! fused kernel reads. They read a corpus through its addresses (`CodesView`): an upload of
//! ours or tensors a caller owns.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchArgs, LaunchConfig, PushKernelArg,
};

use super::{Target, grid_of, stride_grid, sum_qblocks};
use crate::cuda::codec_kernels::{CodecKernel, runs_kernel_of};
use crate::cuda::codes::{CodecQueries, CodesView, DeviceCodes};
use crate::cuda::context::GpuContext;
use crate::cuda::device::drv;
use crate::cuda::memory::{DeviceCorpus, Mem};
use crate::cuda::plan::{
    DocLengths, LUT_THREADS, TILE_META, WG_BN, WG_QBLOCKS, bulk_group, bulk_shape_env,
};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// Threads of a fused kernel's block (CODEC_THREADS), and of a batched one's (CWG_BLOCK_THREADS:
/// two consumer warpgroups and the decoding one).
const CODEC_THREADS: u32 = 128;
/// pq's fused kernels: 8 warps a block (CODEC_PQ_THREADS).
const CODEC_PQ_THREADS: u32 = 256;
const CODEC_WG_THREADS: u32 = 384;
/// The bulk-copy kernels (kernels/codec_bulk.cu): threads a block (CBK_THREADS), tokens a tile
/// (CBK_TILE), words of a stage's per-token array (CBK_SCALES).
const CBK_THREADS: u32 = 128;
const CBK_TILE: usize = 128;
const CBK_SCALES: usize = CBK_TILE + 4;

/// Dynamic shared bytes of a four-documents-a-warpgroup block (kernels/codec_quad.cu) of
/// `threads` threads: 1 KB of alignment, the query block and the identity block (4 KB arrays of
/// 64 dimensions: d / 64 + 1), the step table (2^(4·nbits) entries of 32 copies at nbits 2, 16
/// at nbits 1, 8 bytes each), each warp's two 1 KB stages of centroid scores.
fn codec_quad_smem(v: &CodesView, threads: u32) -> usize {
    let copies = if v.param == 2 { 32 } else { 16 };
    1024 + (v.dim / 64 + 1) * 4096
        + (1usize << (4 * v.param)) * copies * 8
        + threads as usize / 32 * 2048
}

/// A bulk-copy kernel's tiles in flight a block unless `TILEMAXSIM_BULK` sets them: the
/// residual's tiles are small (36 bytes a token at nbits 2), so more of them.
fn codec_bulk_stages(tag: i32) -> usize {
    if tag == 0 { 4 } else { 2 }
}

/// Dynamic shared bytes of a bulk-copy codec block: 1 KB of alignment, the query block (f16),
/// `stages` tiles of code rows (`row` bytes a token) with their per-token words (the residual's
/// ids and inverse norms, or the scales) and mbarriers, the column maxima of two documents,
/// the residual's tile of centroid scores (f16; its pair table is static shared memory).
fn codec_bulk_smem(v: &CodesView, stages: usize, row: usize) -> usize {
    let (words, cen) = match v.tag {
        0 => (2, CBK_TILE * 32 * 2),
        _ => (1, 0),
    };
    1024 + 32 * v.dim * 2
        + stages * (CBK_TILE * row + words * CBK_SCALES * 4 + 8)
        + 2 * 4 * 32 * 4
        + cen
}

/// The leading arguments of `maxsim_codec_*` and `maxsim_codec_bk_*`, in their order: the
/// query blocks and rows, their count, the codes, per-token words, inverse norms and centroid
/// scores, K, the codec's table, the offsets and candidates, the documents' count, the output.
struct FusedArgs {
    head: [u64; 2],
    nb: i32,
    words: [u64; 4],
    k: i32,
    tail: [u64; 3],
    nd: i32,
    out: u64,
}

impl FusedArgs {
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(&self.head[0]).arg(&self.head[1]).arg(&self.nb);
        for w in &self.words {
            b.arg(w);
        }
        b.arg(&self.k);
        for w in &self.tail {
            b.arg(w);
        }
        b.arg(&self.nd).arg(&self.out);
    }
}

/// Fill `out` (`v.tokens` f32) with a residual corpus's inverse reconstruction norms (eight
/// lanes per token). Nothing for other codecs.
///
/// # Safety
/// `v` describes live device memory (ids below K) and `out` holds `v.tokens` floats, on `stream`.
pub(in crate::cuda) unsafe fn inv_norms(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    v: &CodesView,
    out: u64,
) -> Result<()> {
    if v.tag != 0 || v.tokens == 0 {
        return Ok(());
    }
    let (nbits, dim, tokens) = (v.param, v.dim as i32, v.tokens as i64);
    let cfg = stride_grid(gpu, v.tokens as u64 * 8, 256);
    let mut b = stream.launch_builder(&gpu.kernels.residual_inv_norms);
    b.arg(&v.codes)
        .arg(&v.aux)
        .arg(&v.centroids)
        .arg(&v.values)
        .arg(&nbits)
        .arg(&dim)
        .arg(&tokens)
        .arg(&out);
    // SAFETY: `residual_inv_norms` reads `tokens` rows of codes and ids (ids < K: this
    // function's contract), K × d centroids and 2^nbits weights; writes `tokens` floats.
    unsafe { b.launch(cfg) }.map_err(drv("residual_inv_norms launch"))?;
    Ok(())
}

/// Decode every token of `v` to f32 rows at `out` (`v.tokens × v.dim` floats).
///
/// # Safety
/// As `inv_norms` (the residual's inverse norms filled), `out` holding tokens × d floats.
pub(in crate::cuda) unsafe fn decode_into(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    v: &CodesView,
    out: u64,
) -> Result<()> {
    let n = v.tokens * v.dim;
    if n == 0 {
        return Ok(());
    }
    let (dim, tokens) = (v.dim as i32, v.tokens as i64);
    let mut b = stream.launch_builder(&gpu.kernels.codec_decode_f32);
    b.arg(&v.tag)
        .arg(&v.param)
        .arg(&v.codes)
        .arg(&v.aux)
        .arg(&v.inv_norm)
        .arg(&v.centroids)
        .arg(&v.values)
        .arg(&dim)
        .arg(&tokens)
        .arg(&out);
    // SAFETY: the codec's buffers as `v` describes them (this function's contract).
    unsafe { b.launch(stride_grid(gpu, n as u64, 256)) }.map_err(drv("codec_decode_f32 launch"))?;
    Ok(())
}

/// The tokens decoded to f32 rows, as an exact corpus on the device (for the exact kernels).
pub(in crate::cuda) fn decode_f32(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    codes: &DeviceCodes,
    offsets: &[usize],
) -> Result<DeviceCorpus> {
    let n = codes.tokens * codes.dim;
    // SAFETY: every element is written by `decode_into` below.
    let out = unsafe { stream.alloc::<u8>(n.max(1) * 4) }.map_err(drv("decoded corpus"))?;
    // SAFETY: the upload's own buffers (inverse norms filled first); `out` holds n floats.
    unsafe { decode_into(gpu, stream, &codes.view(stream), out.device_ptr(stream).0) }?;
    let rel: Vec<i64> = offsets.iter().map(|&o| (o - offsets[0]) as i64).collect();
    Ok(DeviceCorpus {
        tokens: Mem::owned(out),
        offsets: Mem::owned(stream.clone_htod(&rel).map_err(drv("decoded corpus"))?),
        dtype: DType::F32,
        width: codes.dim,
        dim: codes.dim,
        len: codes.len,
        bytes: n * 4,
        split_ok: false,
        planes: None,
        lengths: DocLengths::of(offsets),
    })
}

/// The residual codec's centroid scores for every query block: `[blocks][K][32]` f16.
///
/// # Safety
/// `v.centroids` holds K × d halves on `stream`.
pub(in crate::cuda) unsafe fn centroid_scores(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    queries: &CodecQueries,
    v: &CodesView,
) -> Result<CudaSlice<u16>> {
    let (0, Some(q32)) = (v.tag, queries.f32.as_ref()) else {
        return Err(Error::Argument(
            "centroid scores are the residual codec's".into(),
        ));
    };
    let k = v.num_centroids;
    // SAFETY: every element is written by `codec_centroid_scores`.
    let mut cs = unsafe { stream.alloc::<u16>((queries.blocks * k * 32).max(1)) }
        .map_err(drv("centroid scores"))?;
    let smem = 32 * (v.dim + 4) * 4;
    let func = &gpu.kernels.codec_centroid_scores;
    // Twice the blocks that stay resident, split over the query blocks: each block reads its
    // query rows once, then strides over the centroids eight at a time.
    let resident = 2 * gpu.resident_blocks(func, 256, smem)? as usize;
    let x = k
        .div_ceil(8)
        .min(resident.div_ceil(queries.blocks.max(1)))
        .clamp(1, 65535) as u32;
    let cfg = LaunchConfig {
        grid_dim: (x, queries.blocks as u32, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: smem as u32,
    };
    let (kk, dim) = (k as i32, v.dim as i32);
    let mut b = stream.launch_builder(func);
    b.arg(q32).arg(&v.centroids).arg(&kk).arg(&dim).arg(&mut cs);
    // SAFETY: `q32` holds blocks × 32 × d floats, the centroids K × d halves (this function's
    // contract), `cs` blocks × K × 32.
    unsafe { b.launch(cfg) }.map_err(drv("codec_centroid_scores launch"))?;
    Ok(cs)
}

/// What the batched kernel's launches take from the scorer and the corpus: its ring depth
/// (WG_STAGES of the program); where fixed (`CudaScorer::pack_documents`, TILEMAXSIM_PACK), its
/// documents a run, which takes the kernel of runs (`runs_kernel_of`) wherever the documents
/// lie back to back (0: never); else whether runs pay for the corpus's documents (`pack_pays`;
/// `false` where their lengths are not known on the host).
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct WgShape {
    pub(in crate::cuda) stages: usize,
    pub(in crate::cuda) pack: Option<usize>,
    pub(in crate::cuda) pays: bool,
}

/// The most documents a run (`CudaScorer::pack_documents`): at most a tile's tokens end in it.
pub(in crate::cuda) const PACK_MAX: usize = WG_BN;

/// Documents a batched codec block takes as one run (RunWalk, kernels/tile_producer.cuh) when
/// it scores `n` consecutive documents for `qtiles` query tiles with `resident` blocks at once:
/// a run's tokens are cut into 128-token tiles across its documents, so short documents fill
/// their tiles (a run of one is a document in tiles of its own). Runs of up to 64 documents,
/// so a run's part-empty last tile costs little, but short enough to leave every block 16
/// tasks (a run × a query tile), so the blocks finish together.
pub(in crate::cuda) fn pack_run(n: u64, qtiles: u64, resident: u64) -> u64 {
    (n * qtiles / (16 * resident.max(1))).clamp(1, 64)
}

/// Enqueue the fused kernel `kernel` for the queries against the target's documents:
/// `t.out[q * t.n + i]`, queries longer than one block summed from per-block partial scores.
/// `cs`: the address of the residual codec's centroid scores (`centroid_scores`; the
/// one-warp and bulk-copy kernels');
/// `wg`: the batched kernel's ring depth (WG_STAGES of the program) and, where fixed, its
/// documents a run (`pack_run`).
///
/// # Safety
/// `v` describes live device memory (the residual's inverse norms filled for the one-warp
/// kernel), `t.doc_index` is 0 or `t.n` indices below the corpus's documents, `t.out` holds
/// Q × `t.n` floats, all usable on `t.stream`.
pub(in crate::cuda) unsafe fn fused(
    gpu: &GpuContext,
    kernel: &CodecKernel,
    queries: &CodecQueries,
    v: &CodesView,
    cs: Option<u64>,
    wg: WgShape,
    t: Target<'_>,
) -> Result<()> {
    let tasks = (queries.blocks * t.n) as u64;
    if queries.blocks * t.n > i32::MAX as usize || t.n > i32::MAX as usize {
        return Err(Error::Argument(format!(
            "{tasks} (query block, document) pairs per launch is over the limit"
        )));
    }
    let s = t.stream;
    let partial = if queries.blocks == queries.len {
        None
    } else {
        // SAFETY: the fused kernel writes every one of blocks × n partial scores.
        Some(unsafe { s.alloc::<f32>(queries.blocks * t.n) }.map_err(drv("score buffer"))?)
    };
    let out = partial.as_ref().map_or(t.out, |p| p.device_ptr(s).0);
    let (nb, nd) = (queries.blocks as i32, t.n as i32);
    let (q16, rows) = (queries.f16.device_ptr(s).0, queries.rows.device_ptr(s).0);
    let shared = FusedArgs {
        head: [q16, rows],
        nb,
        words: [v.codes, v.aux, v.inv_norm, cs.unwrap_or(0)],
        k: v.num_centroids as i32,
        tail: [v.table, v.offsets, t.doc_index],
        nd,
        out,
    };
    match kernel {
        CodecKernel::Warp(name) => {
            let func = find(&gpu.kernels.codec, name)?;
            // The residual's step table (nbits 1 and 2: 2^(4·nbits) entries of 128 bytes, two
            // pairs in each of 16 copies; of 256 bytes, 32 copies, at nbits 2 on sm_90+:
            // CODEC_WIDE_TABLE) or pair table (nbits 4: 2^(2·nbits) entries of a word in each of
            // 32 copies); the pq codebooks as f16.
            let wide = v.param == 2 && gpu.info.compute_capability.0 >= 9;
            let smem = match v.tag {
                0 if v.param <= 2 => (1usize << (4 * v.param)) * if wide { 256 } else { 128 },
                0 => (1usize << (2 * v.param)) * 128,
                1 => v.dim * 256 * 2,
                _ => 0,
            };
            let threads = if v.tag == 1 {
                CODEC_PQ_THREADS
            } else {
                CODEC_THREADS
            };
            let cfg = gpu.persistent_grid(func, threads, smem, tasks.div_ceil(4))?;
            let (_counter, tc) = gpu.task_counter(tasks, &cfg, s)?;
            let mut b = s.launch_builder(func);
            shared.push(&mut b);
            b.arg(&tc);
            // SAFETY: the arguments match `maxsim_codec_*` in kernels/codec.cu: the query
            // blocks and their rows, the codes, words, inverse norms, centroid scores and table
            // as `upload` and `centroid_scores` made them for this codec; the candidates and
            // output are the caller's.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim_codec launch"))?;
        }
        CodecKernel::Batched(name) => {
            // The ring (1 KB of alignment, per stage a tile, a TileMeta and two mbarriers, and
            // int8/fp8's column scales), for runs each stage's end columns, each consumer
            // warp's stash and the run's document ends (RunWalk), then the pq codebooks as f16
            // or the residual's two tiles of gathered centroid chunks.
            let scales = if matches!(v.tag, 2 | 3) { WG_BN * 4 } else { 0 };
            let tables = match v.tag {
                0 => 2 * WG_BN * (v.dim * 2 + 64),
                1 => v.dim * 256 * 2,
                _ => 0,
            };
            let smem_of = |runs: bool| {
                let ends = if runs {
                    wg.stages * WG_BN + 8 * WG_BN * 4 + WG_BN * 8
                } else {
                    0
                };
                1024 + wg.stages * (WG_BN * v.dim * 2 + TILE_META + 16 + scales) + ends + tables
            };
            let own = find(&gpu.kernels.codec_wg, name)?;
            let qtiles = queries.blocks.div_ceil(WG_QBLOCKS) as u64;
            let resident = gpu.resident_blocks(own, CODEC_WG_THREADS, smem_of(false))?;
            // Runs where the documents lie back to back (no candidates) and runs pay or are
            // asked for; a run of one packs nothing, so the engine takes the kernel of tiles of
            // their own there (asked for, it takes runs of one: for tests).
            let run = match wg.pack {
                _ if t.doc_index != 0 => 0,
                Some(g) => g.min(PACK_MAX),
                None if wg.pays => pack_run(t.n as u64, qtiles, resident) as usize,
                None => 0,
            };
            let runs = run > 1 || (run == 1 && wg.pack.is_some());
            let (func, smem, run) = if runs {
                let func = find(&gpu.kernels.codec_wg, &runs_kernel_of(name))?;
                (func, smem_of(true), run)
            } else {
                (own, smem_of(false), 1)
            };
            // A persistent grid, a multiple of the query tiles where it holds them all (as
            // `Gemm`): each block keeps its query tile.
            let tasks = qtiles * (t.n as u64).div_ceil(run as u64);
            let mut cfg = gpu.persistent_grid(func, CODEC_WG_THREADS, smem, tasks)?;
            if cfg.grid_dim.0 as u64 >= qtiles {
                cfg.grid_dim.0 -= (cfg.grid_dim.0 as u64 % qtiles) as u32;
            }
            let run_docs = run as i32;
            let mut b = s.launch_builder(func);
            b.arg(&q16)
                .arg(&rows)
                .arg(&nb)
                .arg(&v.codes)
                .arg(&v.aux)
                .arg(&v.centroids)
                .arg(&v.values)
                .arg(&v.table)
                .arg(&v.offsets)
                .arg(&t.doc_index)
                .arg(&nd)
                .arg(&out)
                .arg(&run_docs);
            // SAFETY: the arguments match `maxsim_codec_wg_*` in kernels/codec_wgmma.cu: the
            // query blocks and rows, the codes and words, the residual's centroids (16-byte
            // aligned: `upload` and `raw_residual::batched_ok`) and bucket weights, the pq
            // codebooks; `smem` bytes for its ring, end columns, stashes and tables; candidates
            // and output the caller's; runs of one document where there are candidates (their
            // tokens are not back to back), of at most WG_BN otherwise.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim_codec_wg launch"))?;
        }
        CodecKernel::Bulk(name) => {
            let func = find(&gpu.kernels.codec_wg, name)?;
            if v.tag == 0 && cs.is_none() {
                return Err(Error::Argument(
                    "the residual's bulk-copy kernel needs the centroid scores".into(),
                ));
            }
            let (stages, group) = bulk_shape_env().unzip();
            let stages = stages.unwrap_or(codec_bulk_stages(v.tag));
            let row = if v.tag == 0 {
                v.dim * v.param as usize / 8
            } else {
                v.dim
            };
            let smem = codec_bulk_smem(v, stages, row);
            let resident = gpu.resident_blocks(func, CBK_THREADS, smem)?;
            // Runs of about eight tiles (`bulk_group`, as maxsim_bulk's).
            let tiles = v.tokens.div_ceil(v.docs.max(1)).div_ceil(CBK_TILE).max(1);
            let run = (8 / tiles).max(1) as u64;
            let group = group.map_or_else(|| bulk_group(tasks, resident, run), |g| g as u64);
            let cfg = LaunchConfig {
                grid_dim: (grid_of(tasks, tasks.div_ceil(group))?, 1, 1),
                block_dim: (CBK_THREADS, 1, 1),
                shared_mem_bytes: smem as u32,
            };
            let (st, gr) = (stages as i32, group as i32);
            let mut b = s.launch_builder(func);
            shared.push(&mut b);
            b.arg(&st).arg(&gr);
            // SAFETY: the arguments match `maxsim_codec_bk_*` in kernels/codec_bulk.cu: the query
            // blocks and rows, the code rows (256-byte aligned, a multiple of 16 bytes each, so
            // every tile's copy is 16-byte aligned), the per-token words and the residual's
            // inverse norms (each padded by four words by `DeviceCodes::upload`, the only views
            // `codec_kernel` gives this kernel), its centroid scores and pair table; `smem` bytes
            // (`codec_bulk_smem`, allowed by resident_blocks); the grid covers every task in
            // runs of `group`; candidates and output the caller's.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim_codec_bk launch"))?;
        }
        CodecKernel::Quad(name) => {
            let func = find(&gpu.kernels.codec_wg, name)?;
            if cs.is_none() || v.order == 0 || t.doc_index != 0 || t.n != v.docs {
                return Err(Error::Argument(
                    "the four-documents-a-warpgroup kernel scores every document of an upload \
                     in its grouped order, with the centroid scores"
                        .into(),
                ));
            }
            // The block's threads: its launch bound (CQ4_THREADS, warpgroups of 128).
            let threads = func
                .max_threads_per_block()
                .map_err(drv("maxsim_codec_q4 threads"))? as u32;
            let smem = codec_quad_smem(v, threads);
            // A row of blocks a query block (blockIdx.y), each warpgroup taking every
            // (grid · warpgroups)-th group of four documents; as many blocks as fit at once.
            let resident = gpu.resident_blocks(func, threads, smem)?;
            let groups = (t.n as u64).div_ceil(4);
            let per_row = (resident / queries.blocks as u64)
                .min(groups.div_ceil(threads as u64 / 128))
                .max(1);
            if queries.blocks > 65535 {
                return Err(Error::Argument(format!(
                    "{} query blocks in one launch of the four-documents-a-warpgroup kernel \
                     (at most 65,535)",
                    queries.blocks
                )));
            }
            let cfg = LaunchConfig {
                grid_dim: (per_row as u32, queries.blocks as u32, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: smem as u32,
            };
            let args = FusedArgs {
                tail: [v.table, v.offsets, v.order],
                ..shared
            };
            let mut b = s.launch_builder(func);
            args.push(&mut b);
            // SAFETY: the arguments match `maxsim_codec_q4_*` in kernels/codec_quad.cu: the query
            // blocks and rows, the codes, ids, inverse norms (filled by `upload_codes`), the
            // centroid scores and step table as for the one-warp kernel, the offsets and the
            // upload's grouped order (a permutation of its `t.n` documents, checked above);
            // `smem` bytes (`codec_quad_smem`, allowed by persistent_grid); the output holds
            // blocks × n floats.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim_codec_q4 launch"))?;
        }
        CodecKernel::Lut(name) => {
            // SAFETY: as this function's (the pq codebooks in `v.table`), `out` holding blocks ×
            // n floats.
            unsafe { lut(gpu, name, queries, v, out, t) }?;
        }
    }
    if let Some(p) = &partial {
        sum_qblocks(
            gpu,
            t,
            p.device_ptr(s).0,
            queries.start.device_ptr(s).0,
            queries.len,
        )?;
    }
    Ok(())
}

/// Shared memory of a lookup-table kernel's group table (LUT_TABLE_FLOATS in
/// kernels/codec_lut.cu: G rows × M sub-spaces × 256 floats, G = 128 / M).
const LUT_TABLE_BYTES: usize = 32768 * 4;

/// The paper's lookup-table kernel for a pq corpus (kernels/codec_lut.cu): the distance tables
/// of every query block, the group partial scores, their sums into `out` (`[blocks][t.n]`).
///
/// # Safety
/// As `fused`: `v` a pq corpus on the device (its f16 codebooks in `v.table`), `out` holding
/// blocks × `t.n` floats, all on `t.stream`.
unsafe fn lut(
    gpu: &GpuContext,
    name: &str,
    queries: &CodecQueries,
    v: &CodesView,
    out: u64,
    t: Target<'_>,
) -> Result<()> {
    let s = t.stream;
    let m = v.param as usize;
    let groups = m / 4; // 32 rows in groups of G = 128 / M
    let blocks = queries.blocks;
    if blocks * groups > 65535 {
        return Err(Error::Argument(format!(
            "{blocks} query blocks: over the lookup-table kernel's grid"
        )));
    }
    let entries = blocks * 32 * m * 256;
    // SAFETY: `pq_lut_table` writes every entry.
    let mut table = unsafe { s.alloc::<f32>(entries) }.map_err(drv("pq lookup tables"))?;
    let (nb, dim, mm) = (blocks as i32, v.dim as i32, m as i32);
    let q16 = queries.f16.device_ptr(s).0;
    let mut b = s.launch_builder(&gpu.kernels.pq_lut_table);
    b.arg(&q16)
        .arg(&v.table)
        .arg(&nb)
        .arg(&dim)
        .arg(&mm)
        .arg(&mut table);
    // SAFETY: blocks × 32 × d query halves, M × 256 × d / M codebook halves, `entries` floats.
    unsafe { b.launch(stride_grid(gpu, entries as u64, 256)) }
        .map_err(drv("pq_lut_table launch"))?;

    let n = blocks * t.n;
    // SAFETY: the kernel writes every one of groups × blocks × n partial scores.
    let mut part = unsafe { s.alloc::<f32>((groups * n).max(1)) }.map_err(drv("score buffer"))?;
    let func = find(&gpu.kernels.codec_lut, name)?;
    let mut cfg =
        gpu.persistent_grid(func, LUT_THREADS, LUT_TABLE_BYTES, (t.n as u64).div_ceil(8))?;
    cfg.grid_dim.1 = (blocks * groups) as u32;
    let (rows, nd) = (queries.rows.device_ptr(s).0, t.n as i32);
    let mut b = s.launch_builder(func);
    b.arg(&table)
        .arg(&rows)
        .arg(&nb)
        .arg(&v.codes)
        .arg(&v.offsets)
        .arg(&t.doc_index)
        .arg(&nd)
        .arg(&mut part);
    // SAFETY: the tables above, the blocks' rows, the corpus's M-byte codes and offsets, the
    // candidates (`t.doc_index`, or 0), groups × blocks × n partial scores.
    unsafe { b.launch(cfg) }.map_err(drv("maxsim_pq_lut launch"))?;

    let (g, total) = (groups as i32, n as i64);
    let mut b = s.launch_builder(&gpu.kernels.pq_lut_sum);
    b.arg(&part).arg(&g).arg(&total).arg(&out);
    // SAFETY: groups × n partial scores in, n scores out at `out` (this function's contract).
    unsafe { b.launch(stride_grid(gpu, total as u64, 256)) }.map_err(drv("pq_lut_sum launch"))?;
    Ok(())
}

/// The function called `name` in a table of loaded kernels.
fn find<'f>(table: &'f [(String, CudaFunction)], name: &str) -> Result<&'f CudaFunction> {
    table
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, f)| f)
        .ok_or_else(|| Error::Argument(format!("no fused kernel {name}")))
}
