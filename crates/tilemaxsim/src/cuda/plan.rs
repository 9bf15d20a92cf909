//! The plan: which kernel runs which shape, as pure functions over plain data, with their unit
//! tests: [`Kernel`], `LaunchShape` and `choose_kernel`, `DocLengths`, the kernels' tile constants
//! (mirrors of the `#define`s in `kernels/`), their block layouts, and the defines an experiment
//! may override (`KernelShape`). The spanning kernel's sizes are in `plan/span.rs`, the padded
//! pitch of uploaded corpora in `plan/pitch.rs`, the tests in `plan/tests.rs`.

use crate::error::{Error, Result};

mod bulk;
mod pitch;
mod span;
pub(super) use bulk::*;
pub(super) use pitch::*;
pub(super) use span::*;

/// Threads per block of `maxsim_tiled` (kernels/ablation.cu: THREADS).
pub(super) const TILED_THREADS: u32 = 256;
/// Largest grid y dimension: queries per launch.
pub(super) const MAX_QUERIES_PER_LAUNCH: usize = 65_535;

/// Query rows per block of the tensor-core kernels (two m16 tiles).
pub(super) const QBLOCK: usize = 32;
/// Embedding dimensions `maxsim_mma`, `maxsim_bulk` and `maxsim_gemm` are instantiated for.
pub(super) const MMA_DIMS: [usize; 4] = [32, 64, 96, 128];
/// Wide embeddings (dimension-tiled by 128 in `maxsim_ring`, split in quarters among the warps
/// of `maxsim_bulk`): d = 256, 384, …, 1024.
pub(super) const WIDE_DIMS: [usize; 7] = [256, 384, 512, 640, 768, 896, 1024];
pub(super) fn wide_dim(dim: usize) -> bool {
    WIDE_DIMS.contains(&dim)
}
/// A d past 128 that no wide instantiation has but `maxsim_bulk_any` takes (a multiple of 8 up
/// to 1024): the d of the wide instantiation that bounds it (its KQ = that / 128), else `None`.
pub(super) fn wide_any_bound(dim: usize) -> Option<usize> {
    (dim > 128 && dim <= 1024 && dim.is_multiple_of(8) && !wide_dim(dim))
        .then(|| dim.div_ceil(128) * 128)
}
/// The dimensions each of `maxsim_bulk_any`'s four warps takes at `dim` (a `wide_any_bound` d):
/// a quarter of d rounded up to whole k16 steps, 32·KQ or 32·KQ − 16 for the bound's KQ (the
/// half-chunk instantiation; kernels/bulk.cu, HALF). d = 320: 80, not 96.
pub(super) fn bulk_any_slice(dim: usize) -> usize {
    dim.div_ceil(4).next_multiple_of(16)
}
/// A d `maxsim_bulk` is instantiated for (else, up to 128, only `maxsim_span_any` takes it).
pub(super) fn bulk_dim(dim: usize) -> bool {
    MMA_DIMS.contains(&dim) || wide_dim(dim)
}
/// The dimensions `maxsim_ring` takes, and the d of the instantiation that serves them (it walks
/// d in steps of min(d, 128)).
pub(super) fn ring_instance(dim: usize) -> Option<usize> {
    if MMA_DIMS.contains(&dim) {
        Some(dim)
    } else if wide_dim(dim) {
        Some(128)
    } else {
        None
    }
}

/// `maxsim_ring`'s block for d (f32: split, two copies of the query): (warps, dynamic shared
/// bytes), as many warps as `smem_per_block` holds up to `shape.ring_warps`; `None` if not one
/// fits. A stage is `shape.ring_tiles` 8-token tiles (f32: one) of min(d, 128) dimensions,
/// plus (f32) its 8-byte mbarrier with `shape.ring_bulk`.
pub(super) fn ring_layout(
    dim: usize,
    f32: bool,
    smem_per_block: usize,
    shape: KernelShape,
) -> Option<(u32, usize)> {
    let query = if f32 { 2 } else { 1 } * QBLOCK * dim * 2;
    let stage_bytes_per_dim = if f32 { 8 * 4 } else { shape.ring_tiles * 8 * 2 };
    let barrier = if shape.ring_bulk && f32 { 8 } else { 0 };
    let per_warp = shape.ring_stages * (ring_instance(dim)? * stage_bytes_per_dim + barrier);
    let warps = (smem_per_block.checked_sub(query)? / per_warp).min(shape.ring_warps);
    (warps > 0).then_some((warps as u32, query + warps * per_warp))
}

/// What the kernel choice needs of a corpus's document lengths: counts from its offsets in
/// one pass (or, for device memory the engine only borrows, from its shape: `mean`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DocLengths {
    pub(super) docs: usize,
    pub(super) tokens: usize,
    /// Tokens with every document padded to whole `WG_BN`-token tiles.
    pub(super) padded: usize,
    /// The longest document's tokens; `None`: not known (device offsets the engine borrows).
    pub(super) longest: Option<usize>,
}

impl DocLengths {
    pub(super) fn of(offsets: &[usize]) -> Self {
        let (mut tokens, mut padded, mut longest) = (0usize, 0usize, 0usize);
        for len in offsets.windows(2).map(|w| w[1] - w[0]) {
            tokens += len;
            padded += len.div_ceil(WG_BN) * WG_BN;
            longest = longest.max(len);
        }
        let docs = offsets.len().saturating_sub(1);
        DocLengths {
            docs,
            tokens,
            padded,
            longest: Some(longest),
        }
    }

    /// `docs` documents of `tokens` tokens in all, lengths unknown: as if each had the mean.
    pub(super) fn mean(docs: usize, tokens: usize) -> Self {
        let mean = tokens.checked_div(docs).unwrap_or(0);
        DocLengths {
            docs,
            tokens,
            padded: docs * mean.div_ceil(WG_BN) * WG_BN,
            longest: None,
        }
    }

    /// `docs` documents of `len` tokens each (a dense batch).
    pub(super) fn dense(docs: usize, len: usize) -> Self {
        DocLengths {
            longest: Some(len),
            ..Self::mean(docs, docs * len)
        }
    }

    /// Whether no document is known to be longer than 1.25 times the mean: a static share of
    /// them then gives each block about the same tokens.
    pub(super) fn even(&self) -> bool {
        self.longest
            .is_some_and(|l| l as u128 * self.docs as u128 * 4 <= self.tokens as u128 * 5)
    }

    /// Cut into `WG_BN`-token tiles, the documents pad at most 40% of their tokens:
    /// `maxsim_wgmma` (which multiplies whole tiles) then beats `maxsim_gemm` (which skips
    /// empty 8-token columns). U[32,256] pads 39%: 401 against 386 TFLOP/s on the H100
    /// (bench/results/race_ws.log); on whole tiles wgmma is 1.34x gemm, so the two meet near 45%.
    pub(super) fn fills_tiles(&self) -> bool {
        self.tokens > 0 && self.padded * 10 <= self.tokens * 14
    }

    /// `maxsim_bulk`'s runs of documents per block (`bulk_group`'s most).
    /// - d ≤ 128: about `tuning.bulk_tiles` 128-token tiles (BULK_TILE, = WG_BN) per block, 1
    ///   to that many documents. (Documents that leave tiles partly empty go to `maxsim_span`
    ///   when every document is scored: `spans_pay`.)
    /// - Wide d: about four 128 × 128-element tiles' worth of the document's bytes per block,
    ///   `tuning.least_at(dim)` to 4: two 128-token documents at d = 256 (48.61 M docs/s against
    ///   47.50 with one, H100, bench/results/profile_peer.log).
    pub(super) fn bulk_run(&self, dim: usize, tuning: &Tuning) -> u64 {
        let (work, unit) = if wide_dim(dim) {
            (self.tokens * dim, WG_BN * 128)
        } else {
            (self.padded, WG_BN)
        };
        let (tiles, least) = if wide_dim(dim) {
            (4, tuning.least_at(dim))
        } else {
            (tuning.bulk_tiles, 1)
        };
        (tiles * unit * self.docs)
            .checked_div(work)
            .map_or(tiles as u64, |r| r.clamp(least, tiles) as u64)
    }

    /// Whether `maxsim_span` (tiles cut across documents) should score every document: when
    /// whole-document tiles would be partly empty, i.e. some document is no multiple of
    /// `BULK_TILE` tokens. (At whole tiles the two do the same copies; `maxsim_bulk` then
    /// needs no shared-memory atomics.)
    pub(super) fn spans_pay(&self) -> bool {
        self.padded > self.tokens
    }

    /// `maxsim_span`'s documents per block: about `tuning.span_tiles(dim)` full tiles of
    /// tokens (tiles of `span_tile(wlog)` tokens), 1 to `BULK_GROUP_RANGE`'s most (the run's
    /// last tile is partly empty, once a run).
    pub(super) fn span_run(&self, dim: usize, wlog: usize, tuning: &Tuning) -> u64 {
        (tuning.span_tiles(dim) * span_tile(wlog) * self.docs)
            .checked_div(self.tokens)
            .map_or(1, |r| r.clamp(1, *BULK_GROUP_RANGE.end()) as u64)
    }
}

/// `maxsim_span`'s tiles per block (`DocLengths::span_run`).
pub(super) const SPAN_RUN_TILES: usize = 9;

/// The launch shapes on which the devices measured disagree, chosen by the device's name
/// (`for_device`): `DEFAULT` is the H200's, where they were first tuned; `H100` was measured on
/// 2026-11-27 (BENCHMARKS.md, "Any d", run 3: each setting against the others in one run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tuning {
    /// 128-token tiles per `maxsim_bulk` run at d ≤ 128 (`DocLengths::bulk_run`). H200, f16
    /// B = 100K: eight 140.95 M docs/s against four 137.78 (bench/results/h200/span.log); H100:
    /// four 96.73 against eight 95.67 (bf16 96.69 against 95.71, f32 48.09 against 47.97).
    pub(super) bulk_tiles: usize,
    /// Tiles per `maxsim_span` run at d = 128 (`DocLengths::span_run`). H100, U[32,256]: three
    /// (two documents) 86.08 M docs/s against nine (eight) 84.28, and 65.64 with one document.
    pub(super) span_tiles_d128: usize,
    /// Tiles per `maxsim_span` run at 33 ≤ d < 128 but d ≥ 80 with 16-byte rows
    /// (`span_tiles`; SPAN_RUN_TILES there, at d ≤ 32 and past 128). The block's start (the
    /// run's offsets, the query's fragments, the first tiles' copies) is paid once a run, and
    /// longer runs pay where the kernel's instructions, not the memory, set the pace. H200, f16 U[32,256]
    /// B = 100K, % of the read ceiling with nine tiles against 36 (8 against 32 documents at
    /// 128-token tiles, 16 against 64 at 256): d = 40 73.6 / 73.7, 48 80.1 / 83.9, 56 71.4 /
    /// 74.0, 64 88.0 / 91.0, 66 72.5 / 74.8, 72 81.9 / 85.8, 77 72.0 / 74.1, 100 77.9 / 83.4,
    /// 127 80.8 / 82.7; the 16-byte rows from 80 on, near the ceiling with nine, lose: 80 88.8
    /// / 85.1, 88 89.5 / 89.1, 96 93.4 / 86.7, 112 93.4 / 84.5, 120 91.5 / 90.5, but 104 85.2 /
    /// 90.1 (bench/results/h200/2026-11-29c/call1.log, call2.log, call4.log). At d = 16, 64
    /// documents lost 4% (2026-11-29b/call6.log). At B = 10K `bulk_group`'s six waves still cut
    /// runs to four documents. H100: nine (not measured there).
    pub(super) span_tiles_mid: usize,
    /// Fewest documents per `maxsim_bulk` run at wide d (`DocLengths::bulk_run`). H200,
    /// d = 768 B = 10K: two 21.45 M docs/s against one 20.43 (bench/results/h200/tuning.log);
    /// H100: one 15.70 against two 15.58.
    pub(super) wide_least: usize,
    /// Fewest documents per `maxsim_bulk` run at wide d of 32-token tiles (d = 256, 384, 512),
    /// `wide_least` past them. H200, f16 U[32,256] B = 100K: four documents d = 256 49.95 M
    /// docs/s against two 48.20, d = 384 33.57 against 32.66; B = 10K, d = 512 27.37 / 27.38
    /// against 26.62 / 26.52 (two rounds); at d = 768 (16-token tiles) four and two are level
    /// (bench/results/h200/2026-11-28d). `maxsim_bulk_any` takes the same at its bound. d =
    /// 320 (bound 384), U[32,256], four documents against two, % of the read ceiling: B = 10K
    /// 70.1 / 72.5 against 68.4 / 69.6, B = 100K 74.8 against 70.8; d = 448 (bound 512), B =
    /// 10K, 80.8 / 79.0 against 77.5 / 80.5 (bench/results/h200/2026-11-30g/call2.log).
    pub(super) wide_least_tok32: usize,
    /// Three stages at wide d of 16-token tiles (d > 512) where two blocks an SM still fit
    /// (`bulk_stages`). H100, d = 768: 15.94 M docs/s (99.5% of the read ceiling) against
    /// 15.70 with two stages; not measured on the H200.
    pub(super) wide_three_stages: bool,
}

impl Tuning {
    pub(super) const DEFAULT: Tuning = Tuning {
        bulk_tiles: 8,
        span_tiles_d128: SPAN_RUN_TILES,
        span_tiles_mid: 36,
        wide_least: 2,
        wide_least_tok32: 4,
        wide_three_stages: false,
    };
    pub(super) const H100: Tuning = Tuning {
        bulk_tiles: 4,
        span_tiles_d128: 3,
        span_tiles_mid: SPAN_RUN_TILES,
        wide_least: 1,
        wide_least_tok32: 1,
        wide_three_stages: true,
    };

    /// Tiles per `maxsim_span` run at `dim`: `span_tiles_d128` at d = 128, `span_tiles_mid` at
    /// 33 ≤ d < 128 but the 16-byte rows from 80 on, SPAN_RUN_TILES elsewhere.
    pub(super) fn span_tiles(&self, dim: usize) -> usize {
        match dim {
            128 => self.span_tiles_d128,
            80..128 if dim.is_multiple_of(8) => SPAN_RUN_TILES,
            33..128 => self.span_tiles_mid,
            _ => SPAN_RUN_TILES,
        }
    }

    /// Fewest documents per `maxsim_bulk` run at wide `dim` (`DocLengths::bulk_run`).
    pub(super) fn least_at(&self, dim: usize) -> usize {
        if bulk_wide_tok(dim) == 32 {
            self.wide_least_tok32
        } else {
            self.wide_least
        }
    }

    /// The shapes for a device of this name (`GpuInfo::name`).
    pub(super) fn for_device(name: &str) -> Self {
        if name.contains("H100") {
            Self::H100
        } else {
            Self::DEFAULT
        }
    }
}

/// `maxsim_bulk`'s stages per block at `dim` when not fixed: BULK_STAGES, or three where
/// `tuning` asks for them at wide d of 16-token tiles and `blocks_at(3)` (resident blocks an SM
/// with three stages) is still at least two.
pub(super) fn bulk_stages(
    dim: usize,
    tuning: &Tuning,
    blocks_at: impl Fn(usize) -> Result<u32>,
) -> Result<usize> {
    if tuning.wide_three_stages && wide_dim(dim) && bulk_wide_tok(dim) == 16 && blocks_at(3)? >= 2 {
        return Ok(3);
    }
    Ok(BULK_STAGES)
}

/// Threads per block of the tensor-core kernels (kernels/mma.cu: MMA_THREADS, bulk.cu: BULK_THREADS:
/// four warps; GEMM_THREADS: eight; maxsim_ring: `ring_layout`; kernels/wgmma.cu: WG_THREADS,
/// two consumer warpgroups, and a producer warp more).
pub(super) const MMA_THREADS: u32 = 128;
pub(super) const BULK_THREADS: u32 = 128;
pub(super) const GEMM_THREADS: u32 = 256;
pub(super) const WG_THREADS: u32 = 256;
/// Threads of `maxsim_pq_lut_m*` (LUT_THREADS in kernels/codec_lut.cu).
pub(super) const LUT_THREADS: u32 = 256;
/// `maxsim_wgmma`: query blocks per block (WG_QBLOCKS), tokens per tile (WG_BN), the d it is
/// instantiated for (128-byte swizzle atoms of 64 dimensions).
pub(super) const WG_QBLOCKS: usize = 8;
pub(super) const WG_BN: usize = 128;
pub(super) const WG_DIMS: [usize; 2] = [64, 128];
/// Whether the engine picks `maxsim_bulk` over `maxsim_mma` where both apply (sm_90+).
pub(super) const BULK_BY_DEFAULT: bool = true;
/// Whether the engine picks `maxsim_bulk` over `maxsim_ring` at wide d (f16/bf16, sm_90+).
pub(super) const WIDE_BULK_BY_DEFAULT: bool = true;
/// Whether the engine picks `maxsim_bulk_split` over `maxsim_ring` for f32 corpora (sm_90+).
pub(super) const SPLIT_BULK_BY_DEFAULT: bool = true;
/// Document tokens per tile of `maxsim_gemm` (GEMM_BN).
pub(super) const GEMM_BN: usize = 128;
/// Bytes of a `TileMeta` (kernels/tile_producer.cuh), one per stage of `maxsim_gemm` and `maxsim_wgmma`.
pub(super) const TILE_META: usize = 16;
/// From this many queries in one launch the engine scores them with `maxsim_gemm` (one read of
/// each document tile for eight query blocks) rather than one warp per (query, document).
pub(super) const GEMM_MIN_QUERIES: usize = 8;

/// Which kernel scores a launch: the production pair (chosen per shape) and the paper's
/// ablation family (chosen by name, for `bench --kernel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Tensor cores (the paper's V2-MQ on mma.sync), f16/bf16, Nq ≤ 32, d ∈ {32, 64, 96, 128}:
    /// one warp per (query, document), memory-bound.
    Mma,
    /// Tensor cores for many query rows (a batch of queries, or long queries): a document tile
    /// in shared memory feeds eight 32-row query blocks; f16/bf16, any Nq, d as `Mma`.
    Gemm,
    /// `Gemm`'s work on Hopper's warpgroup MMA (`wgmma`, sm_90a: H100, H200), d ∈ {64, 128};
    /// chosen on documents that mostly fill their 128-token tiles (`choose_kernel`).
    Wgmma,
    /// One warp per (query, document) with the query in shared memory and the document streamed
    /// through a per-warp cp.async ring, Nq ≤ 32: wide embeddings (d a multiple of 128 up to
    /// 1024, dimension-tiled) in f16/bf16, and f32 exactly (f16 high and low parts, three
    /// tensor-core products); d ∈ {32, 64, 96, 128} as well.
    Ring,
    /// A grid of blocks, each scoring a run of consecutive (query, document) pairs from tiles
    /// the copy engine brings into shared memory (`cp.async.bulk`), Nq ≤ 32, f16/bf16: the
    /// warps split a tile's tokens at d ∈ {32, 64, 96, 128}, its d at d = 256..1024. sm_90+.
    Bulk,
    /// Query tile × document tile through shared memory on CUDA cores: every shape and dtype,
    /// exact for f32.
    Tiled,
    /// The paper's V1: one thread per query token, the document streamed from memory per token.
    V1,
    /// The paper's V2: document tiles staged in shared memory, one thread per query token.
    V2,
    /// The paper's lookup-table kernel for PQ corpora (kernels/codec_lut.cu, the ablation of the
    /// fused decode-and-multiply kernel): distance tables per query row, sums of table entries
    /// picked by the codes. Exact and other compressed corpora take their usual kernels.
    Lut,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Mma => "maxsim_mma",
            Kernel::Bulk => "maxsim_bulk",
            Kernel::Gemm => "maxsim_gemm",
            Kernel::Wgmma => "maxsim_wgmma",
            Kernel::Ring => "maxsim_ring",
            Kernel::Tiled => "maxsim_tiled",
            Kernel::V1 => "maxsim_v1",
            Kernel::V2 => "maxsim_v2",
            Kernel::Lut => "maxsim_pq_lut",
        }
    }

    /// The tensor-core kernels: they read the queries' 32-row blocks (of the corpus's dtype, or
    /// f32 queries' own rows in `maxsim_bulk_split`), never the CUDA-core kernels' f32 rows of
    /// 16-bit queries, and take counts as i32.
    pub(super) fn tensor_core(self) -> bool {
        matches!(
            self,
            Kernel::Mma | Kernel::Bulk | Kernel::Gemm | Kernel::Wgmma | Kernel::Ring
        )
    }

    pub(super) fn threads(self) -> u32 {
        match self {
            Kernel::Tiled => TILED_THREADS,
            Kernel::Mma => MMA_THREADS,
            Kernel::Bulk => BULK_THREADS,
            Kernel::Gemm => GEMM_THREADS,
            Kernel::Wgmma => WG_THREADS + 32,
            // launch_ring sizes its block from the shared memory it needs.
            Kernel::Ring => (KernelShape::DEFAULT.ring_warps * 32) as u32,
            Kernel::V1 | Kernel::V2 => 128,
            Kernel::Lut => LUT_THREADS,
        }
    }
}

impl std::str::FromStr for Kernel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim_start_matches("maxsim_") {
            "mma" | "v2mq" | "v2-mq" => Ok(Kernel::Mma),
            "bulk" | "tma" => Ok(Kernel::Bulk),
            "gemm" | "batch" => Ok(Kernel::Gemm),
            "wgmma" => Ok(Kernel::Wgmma),
            "ring" | "wide" | "split" => Ok(Kernel::Ring),
            "tiled" => Ok(Kernel::Tiled),
            "v1" => Ok(Kernel::V1),
            "v2" => Ok(Kernel::V2),
            "lut" | "pq_lut" => Ok(Kernel::Lut),
            other => Err(Error::Argument(format!(
                "unknown GPU kernel {other:?}: expected mma, bulk, gemm, wgmma, ring, tiled, v1, v2 or lut"
            ))),
        }
    }
}

/// What the kernel choice depends on.
#[derive(Clone, Copy, Debug)]
pub(super) struct LaunchShape {
    /// The queries' 32-row blocks when they can take the tensor cores (the corpus's dtype, d
    /// instantiated; f32 only with every query and document in the split's range), else `None`.
    pub(super) blocks: Option<usize>,
    pub(super) queries: usize,
    pub(super) dim: usize,
    /// The corpus is f32 (`maxsim_bulk_split` and `maxsim_ring` take it on the tensor cores).
    pub(super) f32: bool,
    /// The queries are f32 and the corpus f16 or bf16: only `maxsim_bulk_split` (sm_90+, d as
    /// `Mma`) takes them on the tensor cores, splitting the queries into 16-bit parts.
    pub(super) mixed: bool,
    /// `maxsim_bulk` is loaded (sm_90+) and the corpus tokens are 16-byte aligned.
    pub(super) bulk_available: bool,
    /// `maxsim_wgmma` is loaded (sm_90a) and the corpus tokens are 16-byte aligned.
    pub(super) wgmma_available: bool,
    /// The corpus's documents mostly fill their 128-token tiles (`DocLengths`).
    pub(super) fills_tiles: bool,
    /// `maxsim_ring`'s block fits the device's shared memory and the tokens are 16-byte aligned.
    pub(super) ring_available: bool,
}

/// The engine's kernel per shape (`force`: `CudaScorer::force_kernel`). One query of ≤ 32
/// tokens at d ≤ 128: `Bulk` (sm_90) or `Mma`, memory-bound; from GEMM_MIN_QUERIES queries, or
/// any longer query: compute-bound, `Wgmma` (sm_90a) at d = 64 and 128 on documents that
/// mostly fill their 128-token tiles, else `Gemm`; d = 256..1024 (≤ 32 tokens per query):
/// `Bulk` (sm_90), else `Ring`; f32 (≤ 32 tokens per query, in the split's range): `Ring`;
/// everything else: `Tiled`. A forced kernel that does not apply falls back to the
/// nearest that does.
pub(super) fn choose_kernel(force: Option<Kernel>, s: LaunchShape) -> Kernel {
    let fallback = match force {
        Some(k @ (Kernel::V1 | Kernel::V2)) => k,
        _ => Kernel::Tiled,
    };
    let tensor = matches!(
        force,
        None | Some(Kernel::Mma | Kernel::Bulk | Kernel::Gemm | Kernel::Wgmma | Kernel::Ring)
    );
    let Some(blocks) = s.blocks.filter(|_| tensor) else {
        return fallback;
    };
    // Every query one block: the one-warp-per-pair kernels apply.
    let single = blocks == s.queries;
    let ring_ok = single && s.ring_available;
    let bulk_ok = single && s.bulk_available;
    // `maxsim_bulk_split`: f32 queries, d ≤ 128 instantiated, sm_90.
    let split_ok = bulk_ok && MMA_DIMS.contains(&s.dim);
    if s.mixed {
        return if split_ok { Kernel::Bulk } else { fallback };
    }
    if s.f32 || wide_dim(s.dim) {
        // Wide f16/bf16 and f32: `Bulk` (sm_90), unless `Ring` is asked for by name.
        let bulk = if s.f32 {
            split_ok && SPLIT_BULK_BY_DEFAULT
        } else {
            bulk_ok && WIDE_BULK_BY_DEFAULT
        };
        return match force {
            Some(Kernel::Ring) if ring_ok => Kernel::Ring,
            Some(Kernel::Bulk) if (!s.f32 || split_ok) && bulk_ok => Kernel::Bulk,
            _ if bulk => Kernel::Bulk,
            _ if ring_ok => Kernel::Ring,
            _ => fallback,
        };
    }
    if !MMA_DIMS.contains(&s.dim) {
        // Other d ≤ 256: `maxsim_span_any` (sm_90+, zero-padded on chip) when every document is
        // scored (`kernel_to_run` hands a candidate list to the general kernel); multiples of 8
        // past 128: `maxsim_bulk_any` as well (any documents).
        let any_ok =
            bulk_ok && (s.dim <= SPAN_ANY_MAX_DIM || wide_any_bound(s.dim).is_some()) && !s.f32;
        return match force {
            None | Some(Kernel::Bulk | Kernel::Mma | Kernel::Ring) if any_ok => Kernel::Bulk,
            _ => fallback,
        };
    }
    let wgmma_ok = s.wgmma_available && WG_DIMS.contains(&s.dim);
    match force {
        Some(Kernel::Wgmma) if wgmma_ok => Kernel::Wgmma,
        Some(Kernel::Ring) if ring_ok => Kernel::Ring,
        Some(Kernel::Bulk) if bulk_ok => Kernel::Bulk,
        Some(Kernel::Mma | Kernel::Bulk | Kernel::Ring) if single => Kernel::Mma,
        None if single && s.queries < GEMM_MIN_QUERIES => {
            if bulk_ok && BULK_BY_DEFAULT {
                Kernel::Bulk
            } else {
                Kernel::Mma
            }
        }
        // The H100 (bench/results/ws.log, wgmma_meta.log, race_ws.log), TFLOP/s against gemm:
        // ColPali's 1024-token documents 603-607 against 431-433, 32 queries x 128-token
        // documents 561-562 against 418, U[32,256] 401 against 386, bf16 d = 64 449 against 364.
        None if wgmma_ok && s.fills_tiles => Kernel::Wgmma,
        _ => Kernel::Gemm,
    }
}

/// Queries of `dim` against documents of `doc_dim`: a `DimMismatch` unless the same.
pub(super) fn queries_dim_ok(dim: usize, doc_dim: usize) -> Result<()> {
    if dim != doc_dim {
        return Err(Error::DimMismatch {
            what: "queries".into(),
            expected: doc_dim,
            got: dim,
        });
    }
    Ok(())
}

/// The launch limits of the tensor-core kernels: `n` documents and `rows` queries (or query
/// blocks) as i32.
pub(super) fn launch_size_ok(n: usize, rows: usize) -> Result<()> {
    if n > i32::MAX as usize || rows > i32::MAX as usize {
        return Err(Error::Argument(format!(
            "{n} documents or {rows} queries per launch is over the limit"
        )));
    }
    Ok(())
}

/// The kernel constants the host sizes launches by (the `#ifndef` defaults in kernels/gemm.cu, ring.cu and wgmma.cu).
/// An experiment overrides them through TILEMAXSIM_KERNEL_DEFINES (e.g.
/// `GEMM_STAGES=4,RING_WARPS=12`, which compile.rs passes to NVRTC as -D options); read once,
/// when the scorer opens, so the host and the compiled kernels agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KernelShape {
    /// Tiles in flight of `maxsim_gemm` (GEMM_STAGES).
    pub(super) gemm_stages: usize,
    /// Tiles in flight of `maxsim_wgmma` (WG_STAGES).
    pub(super) wg_stages: usize,
    /// Stages of `maxsim_ring`'s per-warp ring (RING_STAGES).
    pub(super) ring_stages: usize,
    /// Most warps per block of `maxsim_ring` (RING_WARPS). 12 and 16 measured within noise of 8
    /// on the H100 (bench/results/ring.log).
    pub(super) ring_warps: usize,
    /// 8-token tiles per f16/bf16 stage of `maxsim_ring` (RING_TILES).
    pub(super) ring_tiles: usize,
    /// `maxsim_ring` fills its f32 stages with `cp.async.bulk` copies completing on one
    /// mbarrier per stage (RING_BULK=1, the default, sm_90+; 8 more bytes of shared memory per
    /// stage): 46.75 against 44.50 M docs/s at B = 100K on the H100; f16/bf16 keep per-lane
    /// copies, faster at d = 768 (bench/results/ring_bulk.log).
    pub(super) ring_bulk: bool,
    /// `maxsim_span`'s window a warp when the define SPAN_WLOG fixes it for every d (log2 of
    /// 32-token chunks); `None`: `span_window_log`'s choice per d.
    pub(super) span_wlog: Option<usize>,
}

impl KernelShape {
    pub(super) const DEFAULT: KernelShape = KernelShape {
        gemm_stages: 3,
        wg_stages: 4,
        ring_stages: 4,
        ring_warps: 8,
        ring_tiles: 2,
        ring_bulk: true,
        span_wlog: None,
    };

    /// The shape under `defines` (`NAME=VALUE,...`); a value out of the range the host can
    /// launch is an error, not a silent default (the kernels would be compiled with it).
    pub(super) fn parse(defines: Option<&str>) -> Result<Self> {
        let mut k = Self::DEFAULT;
        let mut ring_bulk = usize::from(k.ring_bulk);
        let mut span_wlog = usize::MAX;
        for d in defines.unwrap_or("").split(',').map(str::trim) {
            // A bare name has no value: an error for the host's knobs (NVRTC would read it
            // as 1, the host as its default).
            let (name, value) = d.split_once('=').unwrap_or((d, ""));
            let (slot, range) = match name.trim() {
                "GEMM_STAGES" => (&mut k.gemm_stages, 2..=8),
                "WG_STAGES" => (&mut k.wg_stages, 2..=6),
                "RING_STAGES" => (&mut k.ring_stages, 2..=8),
                "RING_WARPS" => (&mut k.ring_warps, 1..=32),
                "RING_TILES" => (&mut k.ring_tiles, 1..=4),
                "RING_BULK" => (&mut ring_bulk, 0..=1),
                "SPAN_WLOG" => (&mut span_wlog, 0..=SPAN_WINDOW_LOG_MAX),
                _ => continue,
            };
            *slot = value
                .trim()
                .parse()
                .ok()
                .filter(|v| range.contains(v))
                .ok_or_else(|| {
                    Error::Argument(format!(
                        "TILEMAXSIM_KERNEL_DEFINES: {d} is not in {}..={}",
                        range.start(),
                        range.end()
                    ))
                })?;
        }
        k.ring_bulk = ring_bulk == 1;
        k.span_wlog = (span_wlog != usize::MAX).then_some(span_wlog);
        Ok(k)
    }
}

#[cfg(test)]
mod tests;
