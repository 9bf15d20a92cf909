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

/// The widest d `maxsim_bulk_rows` takes (kernels/bulk_rows.cu: twelve 32-wide chunks, the
/// query's m-tile in 96 registers a thread).
pub(in crate::cuda) const BULK_ROWS_MAX_DIM: usize = 384;

/// `maxsim_bulk_rows`'s 32-wide chunks of d (its instantiation's KCH).
pub(in crate::cuda) fn bulk_rows_chunks(dim: usize) -> usize {
    dim.div_ceil(32)
}

/// Whether `maxsim_bulk_rows` takes `dim`: a multiple of 8 (16-byte rows) past 128 up to
/// `BULK_ROWS_MAX_DIM`.
pub(in crate::cuda) fn bulk_rows_dim(dim: usize) -> bool {
    dim > 128 && dim <= BULK_ROWS_MAX_DIM && dim.is_multiple_of(8)
}

/// `maxsim_bulk_rows`'s tile by default at `dim` (`None`: the kernels that split d, or cut
/// spanning tiles, take it): 32 tokens from 232 to 352 and 64 at 224 and 360-376, where it beat
/// them.
/// H200, f16 U[32,256], % of the read ceiling, the kernel it replaces against 32-token rows
/// (and 64-token ones), bench/results/h200/2026-12-01b/call1-4.log, call6.log:
/// - B = 10K: d = 232 77.6 / 79.7, 248 78.0 / 81.3, 256 86.4 / 85.1 and 85.9 / 84.8 (level),
///   264 77.1 / 83.7, 320 81.3 / 81.6 and 82.1 / 81.8 (level), 328 76.0 / 79.8, 352 82.9 /
///   90.2 (88.0), 360 82.6 / 83.4 (87.5), 376 85.0 / 85.8 (88.8);
/// - B = 100K: 248 80.2 / 86.0, 256 86.6 / 89.3, 264 75.7 / 84.9, 320 83.2 / 86.7, 352 87.0 /
///   95.0 (96.0), 376 87.2 / 87.8 (90.4);
/// - d = 224, `maxsim_span_any` against 32- and 64-token rows (2026-12-01c/call7.log,
///   call9.log): B = 10K 79.9 / 87.7 / 89.8, 30K 83.2 / 93.4 / 93.7, 100K 83.5 / 94.3 / 96.5.
///
/// Not taken: 384 (`maxsim_bulk_f16_d384` 90.8 against 89.7 with 64-token tiles at B = 100K;
/// 32-token ones 79.5 at B = 10K), and d < 224, where `maxsim_span_any` scores every document
/// (d = 136 B = 10K: 79.6 against 67.8 and 75.2; 216: 82.8 against 83.8 and 86.6 at B = 10K,
/// but 94.5 against 86.9 and 90.7 at B = 100K; 200 one B = 10K run, 81.9 against 80.7 and
/// 84.0). d = 216 again on 2026-12-01c (call7.log, call9.log), the spanning kernel against
/// 64-token rows: B = 10K 79.9 / 84.9, 30K 89.6 / 87.1, 100K 91.3 / 87.1 (a choice by batch
/// size would take both).
pub(in crate::cuda) fn bulk_rows_tile(dim: usize) -> Option<usize> {
    match dim {
        232..=352 => Some(32),
        224 | 360..=376 => Some(64),
        _ => None,
    }
}

/// Dynamic shared bytes of a `maxsim_bulk_rows` block: `stages` tiles of `tile` d-wide rows,
/// their mbarriers, and two documents' row maxima by token half (2 × 2 × 32 floats).
pub(in crate::cuda) fn bulk_rows_smem(stages: usize, dim: usize, tile: usize) -> usize {
    stages * (tile * dim * 2 + 8) + 2 * 2 * 32 * 4
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

/// `bulk_tail`'s waves of one-task blocks by default. H200, f16 U[32,256] B = 10K, % of the read
/// ceiling with no tail, one wave and two, three rounds (bench/results/h200/2026-12-01b/
/// call2.log, call3.log): d = 256 83.5 / 83.0 / 82.9, 83.0 / 84.3 / 83.7, 88.2 / 84.0 / 83.6;
/// d = 320 78.6 / 78.9 / 79.1, 80.6 / 80.8 / 79.9, 79.4 / 80.2 / 80.1; d = 512 92.3 / 92.3 /
/// 93.1, 94.4 / 94.2 / 94.3, 95.3 / 95.3 / 93.7; d = 768 95.3 / 95.4 / 95.3, 96.3 / 96.1 / 96.5,
/// 96.5 / 95.8 / 95.8; d = 384 (one round) 89.0, 88.5, 85.9.
pub(in crate::cuda) const BULK_TAIL_WAVES: u64 = 1;

/// Waves of runs a grid needs before `bulk_tail` cuts its last ones into one-task blocks.
pub(in crate::cuda) const TAIL_LEAST_WAVES: u64 = 4;

/// The grid of a whole-document bulk launch a block a run, and its `group` argument: `tasks`
/// tasks in runs of `group`, except the last `tail_waves` waves of `resident` blocks, which
/// take one task a block (kernels/bulk.cu, BulkRun: the tail's count in the argument's bits
/// from 8 on), so the blocks handed out last are short and the SMs finish together. Only
/// where the runs make at least `TAIL_LEAST_WAVES` waves: on fewer, one-task blocks cost
/// more than the tail they save (H200, Nd = 128, B = 1K: 44.33 M docs/s a task a block against
/// 61.39 with four; `bulk_group`). Returns (blocks, the argument).
pub(in crate::cuda) fn bulk_tail(
    tasks: u64,
    group: u64,
    resident: u64,
    tail_waves: u64,
) -> (u64, u64) {
    let head = tasks.saturating_sub(tail_waves * resident) / group * group;
    let tail = tasks - head;
    if tail_waves == 0
        || group <= 1
        || tasks / group < TAIL_LEAST_WAVES * resident
        || tail >= 1 << 23
    {
        return (tasks.div_ceil(group), group);
    }
    (head / group + tail, group | tail << 8)
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
