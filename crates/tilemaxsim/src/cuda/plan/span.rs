//! `maxsim_span`'s side of the plan: its tiles and windows, shared memory, stages, token cap
//! and the `maxsim_span_any` instantiations by d (mirrors of kernels/span.cu's defines); and
//! `maxsim_stream`'s instantiations (kernels/stream.cu), which take the same launches at small d.
use super::{BULK_GROUP_RANGE, BULK_TILE, MMA_DIMS, bulk_group};

/// Dynamic shared bytes of a `maxsim_span` block: `stages` tiles (windows of `32 << wlog`
/// tokens a warp), their mbarriers, the crossing documents' row maxima (kernels/span.cu:
/// SPAN_SLOTS × 32 ints) and the run's offsets from its first token (SPAN_RUN_MAX + 1 ints).
pub(in crate::cuda) fn span_smem(stages: usize, dim: usize, wlog: usize) -> usize {
    stages * (span_stage_halves(dim, wlog) * 2 + 8) + 16 * 32 * 4 + (SPAN_RUN_MAX + 1) * 4
}

/// Tokens of a `maxsim_span` tile: four warps' windows of `32 << wlog` tokens
/// (kernels/span.cu: TILE).
pub(in crate::cuda) const fn span_tile(wlog: usize) -> usize {
    BULK_TILE << wlog
}

/// The most a `maxsim_span` window may be (SPAN_WLOG): 32 << 3 = 256 tokens a warp.
pub(super) const SPAN_WINDOW_LOG_MAX: usize = 3;

/// The most tokens a corpus may hold for `maxsim_span`, which counts a run's tokens in 32 bits
/// (kernels/span.cu: SpanCursor, the tiles and windows): `i32::MAX` less the widest tile, so
/// the last tile's rounding up stays in range.
pub(in crate::cuda) const SPAN_MAX_TOKENS: usize =
    i32::MAX as usize - span_tile(SPAN_WINDOW_LOG_MAX);

/// `maxsim_span`'s window a warp at `dim`, as log2 of its 32-token chunks, as the kernel
/// compiled it (kernels/span.cu: SPAN_WLOG_OF, or the define SPAN_WLOG: `fixed`). A warp's
/// window is the tokens it multiplies between two of the block's barriers; a document inside
/// one is folded in registers, with no shared-memory atomics. At small d a 32-token chunk is
/// too little work for those costs: 128-token windows at one k16 product (d ≤ 16), 64 up to
/// d = 64 and at d = 96, 32 past.
pub(in crate::cuda) fn span_window_log(dim: usize, fixed: Option<usize>) -> usize {
    if let Some(w) = fixed {
        return w;
    }
    let (chunks, mode0) = if MMA_DIMS.contains(&dim) {
        (dim / 32, true)
    } else {
        (dim.div_ceil(32), false)
    };
    match chunks {
        1 if !mode0 && span_any_key(dim).2 => 2,
        1 | 2 => 1,
        3 if mode0 => 1,
        _ => 0,
    }
}

/// Documents per `maxsim_span` run at most (kernels/span.cu: SPAN_RUN_MAX, the offsets it
/// copies to shared memory).
pub(in crate::cuda) const SPAN_RUN_MAX: usize = *BULK_GROUP_RANGE.end();

/// Halves of a `maxsim_span` stage (kernels/span.cu: STAGE): a tile of d-wide rows; at d not a
/// multiple of 32 also the copy's start rounded down to 16 bytes and the last row's reads past
/// d, in 128-byte steps.
pub(in crate::cuda) fn span_stage_halves(dim: usize, wlog: usize) -> usize {
    let tile = span_tile(wlog);
    if MMA_DIMS.contains(&dim) {
        tile * dim
    } else {
        (tile * dim + 8 + 32 * dim.div_ceil(32)).div_ceil(64) * 64
    }
}

/// The alignment of `maxsim_span_any`'s rows in halves (8, 4, 2 or 1: the largest dividing
/// d), which picks its loads (kernels/span.cu: MODE 1, 4, 3, 2).
pub(super) fn span_row_align(dim: usize) -> usize {
    [8, 4, 2]
        .into_iter()
        .find(|a| dim.is_multiple_of(*a))
        .unwrap_or(1)
}

/// `maxsim_span_any`'s instantiations (kernels/span.cu: INSTANTIATE_SPAN_ANY), as (32-wide
/// chunks of d, the rows' alignment in halves, HALF: one k16 product in the last chunk):
/// - up to four chunks (d ≤ 128), every alignment, HALF up to SPAN_HALF_MAX_DIM;
/// - five to eight (d ≤ 256), 16-byte rows with and without HALF, and halves for other d.
pub(in crate::cuda) fn span_any_instances() -> Vec<(usize, usize, bool)> {
    let mut all = Vec::new();
    for chunks in 1..=4 {
        for align in [8, 4, 2, 1] {
            all.push((chunks, align, false));
            if chunks * 32 <= SPAN_HALF_MAX_DIM {
                all.push((chunks, align, true));
            }
        }
    }
    for chunks in 5..=SPAN_ANY_MAX_DIM / 32 {
        all.extend([(chunks, 8, false), (chunks, 8, true), (chunks, 1, false)]);
    }
    all
}

/// The `maxsim_span_any` instantiation that scores d (a key of `span_any_instances`): the
/// widest loads instantiated for its rows' alignment, and HALF where the last 32-wide chunk
/// holds at most 16 dimensions and it is instantiated. H100, f16 U[32,256], HALF: d = 48 94.6%
/// of the read ceiling against 84.8%, d = 77 90.4% against 87.6%, d = 16 41.6% against 38.8%
/// (BENCHMARKS.md, "Any d", run 7).
pub(in crate::cuda) fn span_any_key(dim: usize) -> (usize, usize, bool) {
    let chunks = dim.div_ceil(32);
    let align = match span_row_align(dim) {
        a if chunks > 4 && a < 8 => 1,
        a => a,
    };
    let half = dim > 0 && (dim - 1) % 32 < 16 && (chunks > 4 || chunks * 32 <= SPAN_HALF_MAX_DIM);
    (chunks, align, half && (align == 8 || chunks <= 4))
}

/// The widest d of the HALF instantiations at d ≤ 128 (three chunks; kernels/span.cu:
/// INSTANTIATE_SPAN_ANY).
pub(super) const SPAN_HALF_MAX_DIM: usize = 96;

/// The widest d the spanning kernel takes at any d (`maxsim_span_any`, d ≤ 256; at 256 itself
/// `maxsim_bulk`'s wide instantiation).
pub(in crate::cuda) const SPAN_ANY_MAX_DIM: usize = 256;

/// The d `maxsim_stream` is instantiated for (kernels/stream.cu: INSTANTIATE_STREAM_ALL): 16-byte
/// rows of one or two 32-wide chunks.
pub(in crate::cuda) const STREAM_DIMS: [usize; 8] = [8, 16, 24, 32, 40, 48, 56, 64];

/// Whether launches over every document take `maxsim_stream` at `dim` when not fixed
/// (`Bulk::stream`; TILEMAXSIM_STREAM=0/1 fixes it for every d of `STREAM_DIMS`, for
/// experiments).
///
/// H200, f16 U[32,256] B = 100K, % of the read ceiling, streamed against spanning tiles, two
/// rounds (bench/results/h200/2026-11-30d/call2.log): d = 16 72.4 / 72.8 against 49.3 / 49.2,
/// 24 66.4 / 66.6 against 55.5 / 54.3, 32 83.7 / 83.6 against 70.6 / 69.9, 40 76.5 / 77.5
/// against 72.1 / 71.2, 48 82.1 / 82.7 against 79.5 / 79.5, 56 80.9 / 80.2 against 77.6 / 76.2;
/// but d = 64 83.4 / 83.3 against 86.6 / 86.6 (`maxsim_span_f16_d64`, whose rows need no masks
/// and whose windows are 64 tokens), so d = 64 keeps the spanning tiles.
pub(in crate::cuda) fn stream_by_default(dim: usize) -> bool {
    STREAM_DIMS.contains(&dim) && dim < 64
}

/// Warps a `maxsim_stream` block by default (1, 2 or 4; `Bulk::stream_warps` and
/// TILEMAXSIM_STREAM_WARPS fix it): one. A block's warps split its run's tokens, and its slot
/// on the SM frees only when the last of them ends; a block of one warp frees its slot as soon
/// as its own documents are done, and the next block starts there.
///
/// H200, f16 U[32,256], % of the read ceiling, four warps a block / two / one, each warp's share
/// of a run the same (bench/results/h200/2026-12-01c/call5.log):
/// - B = 100K: d = 16 73.7 / 72.2 / 76.0 (again 73.8 / 76.1), 24 74.3 / 73.7 / 78.0, 32 85.1 /
///   84.6 / 88.6, 40 80.1 / 80.3 / 81.0, 48 83.6 / 84.2 / 84.7 (84.0 / 84.7), 56 82.9 / 84.6 /
///   85.2;
/// - B = 10K: d = 16 36.9 / 33.1 / 43.3, 24 39.6 / 36.9 / 46.6, 32 50.2 / 46.7 / 58.6, 40 52.6 /
///   48.6 / 59.3, 48 62.8 / 59.3 / 68.8, 56 53.1 / 48.6 / 62.7.
///
/// d = 64 keeps the spanning tiles: 91.2 against 86.5 streamed at four warps and 89.4 at one.
pub(in crate::cuda) const STREAM_WARPS: u32 = 1;

/// Documents a run of a `maxsim_stream` launch of `warps` warps a block, `resident` such blocks
/// at once: a warp's share as at four warps (`bulk_group` over the same warps), at least one.
pub(in crate::cuda) fn stream_group(tasks: u64, resident: u64, run: u64, warps: u32) -> u64 {
    let w = u64::from(warps.clamp(1, 4));
    (bulk_group(tasks, resident * w / 4, run) * w)
        .div_ceil(4)
        .max(1)
}
