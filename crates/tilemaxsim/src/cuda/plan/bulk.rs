//! The whole-document bulk-copy kernels' side of the plan (`maxsim_bulk`, `_any`, `_split`):
//! stages, tiles, shared memory, runs of documents a block and the grid they take.
use super::{DocLengths, QBLOCK, wide_dim};

/// `maxsim_bulk`'s tiles in flight per block (each BULK_TILE tokens).
pub(in crate::cuda) const BULK_STAGES: usize = 2;
pub(in crate::cuda) const BULK_STAGES_RANGE: std::ops::RangeInclusive<usize> = 1..=6;
pub(in crate::cuda) const BULK_GROUP_RANGE: std::ops::RangeInclusive<usize> = 1..=64;
/// Tokens per `maxsim_bulk` tile (kernels/bulk.cu: BULK_TILE, 32 per warp).
pub(in crate::cuda) const BULK_TILE: usize = 128;

/// Tokens per `maxsim_bulk` tile at wide d (kernels/bulk.cu: BULK_WIDE_TOK), and floats per
/// column of a warp's partial tile there (BULK_WIDE_RS).
pub(in crate::cuda) fn bulk_wide_tok(dim: usize) -> usize {
    if dim <= 512 { 32 } else { 16 }
}
pub(in crate::cuda) const BULK_WIDE_RS: usize = 36;

/// Most documents per `maxsim_bulk_split` block against a bf16 corpus (`bulk_group`'s run).
pub(in crate::cuda) const BULK_SPLIT_BF16_RUN: u64 = 64;
/// `maxsim_bulk_split`'s run against f32 corpora split in the kernel and against f16 corpora,
/// in `maxsim_bulk` runs (`DocLengths::bulk_run`): each block splits its query once.
pub(in crate::cuda) const SPLIT_RUN_FACTOR: u64 = 4;

/// `maxsim_bulk_planes`'s run (an f32 corpus split at upload): about this many bytes of tokens
/// a block, whatever d. H200, B = 100K of 128 tokens, stages 2, one run
/// (bench/results/h200/2026-11-30b/call2.log, % of the read ceiling by documents a block):
/// d = 128: 4 99.4, 8 99.0, 16 98.3, 32 97.0 (`SPLIT_RUN_FACTOR`'s run), 64 97.4; d = 64: 4
/// 85.5, 8 86.7, 16 90.3, 32 86.2, 64 90.5; d = 32: 4 69.4, 8 72.5, 16 72.9, 32 73.5, 64 73.2.
pub(in crate::cuda) const PLANES_RUN_BYTES: u64 = 512 << 10;

/// Documents a `maxsim_bulk_planes` run over `docs` documents of `bytes` bytes of tokens in
/// all: `PLANES_RUN_BYTES` of them on average, 1 to `BULK_GROUP_RANGE`'s most.
pub(in crate::cuda) fn planes_run(bytes: usize, docs: usize) -> u64 {
    (PLANES_RUN_BYTES * docs as u64 / bytes.max(1) as u64).clamp(1, *BULK_GROUP_RANGE.end() as u64)
}

/// Dynamic shared bytes of a `maxsim_bulk_split` block (kernels/bulk_split.cu) for a corpus of
/// `doc`: as `maxsim_bulk`'s at d ≤ 128 (a stage is BULK_TILE × d halves: 64 f32 tokens or 128
/// 16-bit ones), plus the query's parts past the first in fragment order.
pub(in crate::cuda) fn bulk_split_smem(
    stages: usize,
    dim: usize,
    doc: crate::matrix::DType,
) -> usize {
    bulk_smem(stages, dim) + (split_parts_bytes(dim, doc) - QBLOCK * dim * 2)
}

/// Bytes of one query's parts as `maxsim_split_parts` lays them out for `maxsim_bulk_split`
/// (kernels/bulk_split.cu, `SplitParts`): 32 × d halves a part (two parts against f16 and f32
/// corpora, three against bf16).
pub(in crate::cuda) fn split_parts_bytes(dim: usize, doc: crate::matrix::DType) -> usize {
    let parts = if doc == crate::matrix::DType::BF16 {
        3
    } else {
        2
    };
    parts * QBLOCK * dim * 2
}

/// Dynamic shared bytes of a `maxsim_bulk` block: its `stages` tiles of d-wide f16/bf16 rows,
/// one 8-byte mbarrier per stage, the row maxima of two documents (2 × 4 warps × 32 floats),
/// and at wide d two sets of the four warps' partial tiles.
pub(in crate::cuda) fn bulk_smem(stages: usize, dim: usize) -> usize {
    let maxima = 2 * 4 * 32 * 4;
    if wide_dim(dim) {
        let tok = bulk_wide_tok(dim);
        stages * (tok * dim * 2 + 8) + 2 * 4 * tok * BULK_WIDE_RS * 4 + maxima
    } else {
        stages * (BULK_TILE * dim * 2 + 8) + maxima
    }
}

/// Dynamic shared bytes of a `maxsim_bulk_any` block at `dim` under the wide instantiation of
/// `bound`: `bulk_smem(stages, bound)` less the stages' rows past d (kernels/bulk.cu: STAGE).
pub(in crate::cuda) fn bulk_any_smem(stages: usize, dim: usize, bound: usize) -> usize {
    bulk_smem(stages, bound) - stages * bulk_wide_tok(bound) * (bound - dim) * 2
}

/// Consecutive tasks per `maxsim_bulk` (and `maxsim_span`) block, for `tasks` tasks,
/// `resident` blocks at once and runs of at most `run` (`DocLengths::bulk_run`, `span_run`):
/// the query's fragments are loaded, and the block set up, once per run, so runs are long, but
/// no longer than six waves of blocks allow, and at least four tasks where `run` allows. On the
/// H200, f16 Nd = 128: B = 1K 61.39 M docs/s with four tasks a block against 57.34 with three
/// (one wave) and 44.33 with one; B = 10K 117.61 with four against 113.72 with eight
/// (bench/results/h200/tuning.log).
pub(in crate::cuda) fn bulk_group(tasks: u64, resident: u64, run: u64) -> u64 {
    let run = run.max(1);
    (tasks / (6 * resident.max(1))).clamp(run.min(4), run)
}

/// Whether a whole-document bulk launch of `tasks` tasks over documents of `lengths` at `dim`,
/// `resident` blocks at once, takes a grid of those blocks, each scoring every grid-th task
/// with one ring of stages across them (kernels/bulk.cu, BulkWalk), rather than a block a run
/// of `bulk_group` tasks. A block's start (its barriers, the query's fragments, the first
/// stages' copies) is then paid once, the documents in flight stay one window of addresses,
/// and the last blocks finish at most one document apart; but the share is static, so only
/// for `even` lengths, from 8 tasks a block, and up to 64 of them at d ≤ 128.
///
/// H200, Nd = 128 (bench/results/h200/2026-11-29d/call4.log, against a block a run in the same
/// process; call3.log on a slower machine agrees):
/// - 25 tasks a block gain: f16 B = 10K 82.6 / 82.7% -> 85.7 / 86.0% of the read ceiling,
///   f32 B = 10K 81.0 -> 85.0%, d = 768 B = 10K 94.2 -> 97.0%;
/// - 252 gain at d = 768 (B = 100K, 98.1 -> 100.2%) and not at d = 128 (f16 98.7 / 98.7 ->
///   98.4 / 98.5%, bf16 99.0 -> 97.5, f32 91.7 -> 90.3, f32 queries on f16 92.3 -> 91.4);
/// - 2.5 (B = 1K) lost (call3.log: 41.0 -> 38.5%), and so did U[32,256] at d = 512, B = 10K
///   (91.0 -> 87.4%), whose uneven lengths a static share does not balance.
///
/// Runs of two, four and eight tasks strided by the grid were slower than one (call3.log:
/// 82.9, 84.6, 79.2% at f16 B = 10K against 86.5). Between 25 and 252 tasks a block, and at
/// wide d other than 768, this was not measured. Not kept: the fewest blocks that take as many
/// rounds (385 of 396 at B = 10K, so no 26th round is left to 100 blocks): d = 768 96.4 / 96.6 ->
/// 96.0 / 95.7%, f32 -1 to -2 points, 16-bit d = 128 +0.5 to 1.0 (2026-11-29j/call7.log).
pub(in crate::cuda) fn bulk_resident_grid(
    tasks: u64,
    resident: u64,
    lengths: &DocLengths,
    dim: usize,
) -> bool {
    let per_block = tasks / resident.max(1);
    lengths.even() && per_block >= 8 && (per_block <= 64 || wide_dim(dim))
}

/// `TILEMAXSIM_BULK=stages,group` (experiments): `maxsim_bulk`'s stages per block and tasks
/// per block, overriding BULK_STAGES and `bulk_group`.
pub(in crate::cuda) fn bulk_shape_env() -> Option<(usize, usize)> {
    std::env::var("TILEMAXSIM_BULK")
        .ok()
        .and_then(|v| {
            let (s, g) = v.split_once(',')?;
            Some((s.trim().parse().ok()?, g.trim().parse().ok()?))
        })
        .filter(|(s, g)| BULK_STAGES_RANGE.contains(s) && BULK_GROUP_RANGE.contains(g))
}
