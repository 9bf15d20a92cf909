//! Which compressed-corpus kernel scores a call, and their names: the fused one-warp kernels
//! (kernels/codec.cu), the batched ones (kernels/codec_wgmma.cu, each twice: a document's own
//! tiles and runs of documents), the bulk-copy ones (kernels/codec_bulk.cu), the
//! four-documents-a-warpgroup ones (kernels/codec_quad.cu) and the paper's lookup-table one
//! (kernels/codec_lut.cu); and the properties of a corpus's document lengths that the choice
//! reads (`whole_blocks`, `pack_pays`, `quad_order`).

use super::plan::{Kernel, WG_BN, WG_DIMS};
use crate::codec::Codec;

/// The fused kernels built (kernels/codec.cu): residual, int8 and fp8 at these d; pq at these
/// (d, M) (sub-spaces of an even width, M a multiple of 4).
pub(super) const CODEC_DIMS: [usize; 4] = [32, 64, 96, 128];
pub(super) const PQ_SHAPES: [(usize, usize); 11] = [
    (32, 8),
    (32, 16),
    (64, 8),
    (64, 16),
    (64, 32),
    (96, 8),
    (96, 16),
    (128, 8),
    (128, 16),
    (128, 32),
    (128, 64),
];

/// The fused kernel for a codec at d, if one is built: its name in kernels/codec.cu.
pub(super) fn fused_kernel(codec: &Codec, dim: usize) -> Option<String> {
    let (tag, param) = codec_tag(codec);
    fused_kernel_of(tag, param, dim)
}

/// `fused_kernel` by codec tag and parameter (`codec_tag`).
pub(super) fn fused_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    match tag {
        0 if CODEC_DIMS.contains(&dim) => Some(format!("maxsim_codec_residual{param}_d{dim}")),
        1 if PQ_SHAPES.contains(&(dim, param as usize)) => {
            Some(format!("maxsim_codec_pq{param}_d{dim}"))
        }
        2 if CODEC_DIMS.contains(&dim) => Some(format!("maxsim_codec_int8_d{dim}")),
        3 if CODEC_DIMS.contains(&dim) => Some(format!("maxsim_codec_fp8_d{dim}")),
        _ => None,
    }
}

/// Every fused kernel's name (for loading the program's functions).
pub(super) fn fused_kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for d in CODEC_DIMS {
        for n in [1, 2, 4] {
            names.push(format!("maxsim_codec_residual{n}_d{d}"));
        }
        names.push(format!("maxsim_codec_int8_d{d}"));
        names.push(format!("maxsim_codec_fp8_d{d}"));
    }
    for (d, m) in PQ_SHAPES {
        names.push(format!("maxsim_codec_pq{m}_d{d}"));
    }
    names
}

/// The batched twin of a fused kernel (kernels/codec_wgmma.cu, sm_90a: a tile decoded once
/// into shared memory and multiplied against a query tile of 256 rows), where one is built:
/// d ∈ `WG_DIMS` and every codec the fused kernels read there.
pub(super) fn batched_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    if !WG_DIMS.contains(&dim) {
        return None;
    }
    fused_kernel_of(tag, param, dim).map(|n| n.replacen("maxsim_codec_", "maxsim_codec_wg_", 1))
}

/// Every lookup-table kernel's name (kernels/codec_lut.cu): one per M of `PQ_SHAPES`.
pub(super) fn lut_kernel_names() -> Vec<String> {
    let mut ms: Vec<usize> = PQ_SHAPES.iter().map(|&(_, m)| m).collect();
    ms.sort_unstable();
    ms.dedup();
    ms.into_iter()
        .map(|m| format!("maxsim_pq_lut_m{m}"))
        .collect()
}

/// The twin of batched kernel `name` that takes runs of documents (`maxsim_codec_wgp_*`).
pub(super) fn runs_kernel_of(name: &str) -> String {
    name.replacen("maxsim_codec_wg_", "maxsim_codec_wgp_", 1)
}

/// Every batched kernel's name (each twice: `runs_kernel_of`), the bulk-copy kernels'
/// (`bulk_kernel_of`) and the four-documents-a-warpgroup ones (`quad_kernel_of`): all are
/// built for sm_90a only.
pub(super) fn batched_kernel_names() -> Vec<String> {
    let batched = fused_kernel_names()
        .into_iter()
        .filter(|n| WG_DIMS.iter().any(|d| n.ends_with(&format!("_d{d}"))))
        .map(|n| n.replacen("maxsim_codec_", "maxsim_codec_wg_", 1))
        .flat_map(|n| [runs_kernel_of(&n), n]);
    let bulk = WG_DIMS
        .into_iter()
        .flat_map(|d| BULK_CODECS.map(|(tag, param)| bulk_kernel_of(tag, param, d)))
        .flatten();
    let quad = WG_DIMS
        .into_iter()
        .flat_map(|d| [1, 2].map(|n| quad_kernel_of(0, n, d)))
        .flatten();
    batched.chain(bulk).chain(quad).collect()
}

/// The four-documents-a-warpgroup kernel of a codec at d (kernels/codec_quad.cu, sm_90a): the
/// residual at nbits 1 and 2 (its step table), d ∈ `WG_DIMS`.
pub(super) fn quad_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    (tag == 0 && matches!(param, 1 | 2) && WG_DIMS.contains(&dim))
        .then(|| format!("maxsim_codec_q4_residual{param}_d{dim}"))
}

/// The kernel of a call over every document of an upload that holds the grouped order
/// (`quad_order`), where the four-documents-a-warpgroup kernel is loaded (`loaded`): it
/// replaces the one-warp and bulk-copy kernels when asked for (`prefer` `Some(true)`), even
/// where one of them was forced. Not by default (`None`, as `Some(false)`): 0.84x the one-warp
/// kernel on the H200 (BENCHMARKS.md, twenty-eighth session).
pub(super) fn quad_or(
    kernel: CodecKernel,
    (tag, param, dim): (i32, i32, usize),
    loaded: bool,
    prefer: Option<bool>,
) -> CodecKernel {
    let Some(name) = quad_kernel_of(tag, param, dim).filter(|_| loaded) else {
        return kernel;
    };
    match (&kernel, prefer) {
        (CodecKernel::Warp(_) | CodecKernel::Bulk(_), Some(true)) => CodecKernel::Quad(name),
        _ => kernel,
    }
}

/// Tiles of 16 tokens the four-documents-a-warpgroup kernel takes for a document.
const QUAD_TILE: usize = 16;

/// The documents of `offsets` in the order the four-documents-a-warpgroup kernel walks them:
/// grouped by their tiles of 16 tokens (a stable counting sort), so each warpgroup's four
/// take the same tiles, as few as the longest needs.
pub(super) fn quad_order(offsets: &[usize]) -> Vec<i64> {
    let tiles: Vec<usize> = offsets
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(QUAD_TILE))
        .collect();
    let most = tiles.iter().copied().max().unwrap_or(0);
    let mut start = vec![0usize; most + 2];
    for &t in &tiles {
        start[t + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut order = vec![0i64; tiles.len()];
    for (doc, &t) in tiles.iter().enumerate() {
        order[start[t]] = doc as i64;
        start[t] += 1;
    }
    order
}

/// The codecs with a bulk-copy kernel (tag, nbits): int8, fp8, and the residual where a token's
/// codes are a multiple of 16 bytes (`bulk_kernel_of`).
const BULK_CODECS: [(i32, i32); 5] = [(2, 0), (3, 0), (0, 1), (0, 2), (0, 4)];

/// The bulk-copy kernel of a codec at d ∈ `WG_DIMS` (kernels/codec_bulk.cu, sm_90a: one query's
/// tiles brought in by the copy engine, the tokens decoded into wgmma's A registers): int8,
/// fp8, and the residual where a row of codes (d · nbits / 8 bytes) is a multiple of 16 bytes.
pub(super) fn bulk_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    let codec = match (tag, param) {
        (2, _) => "int8".to_string(),
        (3, _) => "fp8".to_string(),
        (0, 1 | 2 | 4) if (dim * param as usize / 8).is_multiple_of(16) => {
            format!("residual{param}")
        }
        _ => return None,
    };
    WG_DIMS
        .contains(&dim)
        .then(|| format!("maxsim_codec_bk_{codec}_d{dim}"))
}

/// Query blocks from which the batched kernel scores a call (it multiplies whole 256-row query
/// tiles, so below this the one-warp kernel wastes less). Measured on the H200 (BENCHMARKS.md,
/// "the batched codec kernels"): at 4 blocks the batched kernel is 1.5-1.6x the one-warp one on
/// int8, fp8 and every residual nbits (181.5 against 123.5 M pairs/s at nbits 2) and level on pq;
/// at 8 blocks it is ahead on every codec.
pub(super) const BATCHED_MIN_BLOCKS: usize = 4;

/// The compressed-corpus kernel of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum CodecKernel {
    /// `maxsim_codec_*` (kernels/codec.cu): a warp per (query block, document).
    Warp(String),
    /// `maxsim_codec_wg_*` (kernels/codec_wgmma.cu).
    Batched(String),
    /// `maxsim_codec_bk_*` (kernels/codec_bulk.cu): below `BATCHED_MIN_BLOCKS`.
    Bulk(String),
    /// `maxsim_codec_q4_*` (kernels/codec_quad.cu): every document of an upload, in its
    /// grouped order (`quad_or`).
    Quad(String),
    /// `maxsim_pq_lut_m*` (kernels/codec_lut.cu): the paper's lookup-table kernel, pq only,
    /// when forced (`Kernel::Lut`), for the ablation.
    Lut(String),
}

/// The kernel for `blocks` query blocks of a codec at d: the batched one where it is loaded
/// (`batched_ok`: the sm_90a kernels) and the call has `BATCHED_MIN_BLOCKS` blocks, or when
/// forced (`Kernel::Wgmma` or `Kernel::Gemm`); below that, the bulk-copy kernel where it is
/// built and loaded and the corpus's per-token words are padded for its copies (`padded`: our
/// uploads, not borrowed tensors), forced by `Kernel::Bulk`, and by default where it pays
/// (`bulk_by_default`, which asks the residual and int8 for documents that fill its 64-token
/// blocks: `whole_blocks`, [`whole_blocks`]); the lookup-table kernel for pq when forced (`Kernel::Lut`); the one-warp
/// kernel otherwise (forced by the others). `None`: no fused kernel at this d (the tokens are
/// decoded and scored by the exact kernels).
pub(super) fn codec_kernel(
    (tag, param, dim): (i32, i32, usize),
    blocks: usize,
    batched_ok: bool,
    (padded, whole_blocks): (bool, bool),
    force: Option<Kernel>,
) -> Option<CodecKernel> {
    let warp = fused_kernel_of(tag, param, dim)?;
    if force == Some(Kernel::Lut) && tag == 1 {
        return Some(CodecKernel::Lut(format!("maxsim_pq_lut_m{param}")));
    }
    let batched = batched_kernel_of(tag, param, dim).filter(|_| batched_ok);
    let bulk = bulk_kernel_of(tag, param, dim).filter(|_| batched_ok && padded);
    let want = match force {
        Some(Kernel::Wgmma | Kernel::Gemm) => true,
        Some(_) => false,
        None => blocks >= BATCHED_MIN_BLOCKS,
    };
    let want_bulk = match force {
        Some(k) => k == Kernel::Bulk,
        None => !want && bulk_by_default(tag, param, dim, whole_blocks),
    };
    Some(match (batched, bulk) {
        (Some(name), _) if want => CodecKernel::Batched(name),
        (_, Some(name)) if want_bulk => CodecKernel::Bulk(name),
        _ => CodecKernel::Warp(warp),
    })
}

/// Whether documents of these `offsets` fill the bulk-copy kernel's blocks of 64 tokens: every
/// one a multiple of 64 tokens, and at least 128. Elsewhere, for the residual and int8, its
/// last, partly empty block costs more than the one-warp kernel's whole document (H100, B =
/// 200K, M docs/s bulk against one-warp; residual nbits 2: Nd = 128 156.2 / 134.3, 192 103.8 /
/// 94.5, 256 88.2 / 73.8, but 64 214.8 / 226.6, 80 63.6 / 192.7, 112 135.0 / 148.8, 144 58.2 /
/// 120.9, U[32,256] 78.9 / 117.9, U[8,180] 81.2 / 164.7; int8: 128 181.8 / 164.2, but 80 195.8
/// / 253.5, U[32,256] 135.4 / 142.0, U[8,180] 196.0 / 211.7. fp8 keeps the bulk-copy kernel:
/// U[32,256] 147.5 / 124.9, U[8,180] 201.6 / 185.2, 80 210.5 / 221.3. BENCHMARKS.md, "The
/// bulk-copy codec kernel at other document lengths").
pub(super) fn whole_blocks(offsets: &[usize]) -> bool {
    offsets.windows(2).all(|w| {
        let n = w[1] - w[0];
        n >= 128 && n.is_multiple_of(64)
    })
}

/// Whether the batched kernel's runs of documents (`maxsim_codec_wgp_*`, cut into 128-token
/// tiles across their boundaries) pay for documents of these `offsets`: each in tiles of its
/// own they take at least 1.3 times the tiles they fill back to back. A tile of runs costs
/// about 1.2 times one of a document's own (the H200, Nd = 128, 32 queries, M pairs/s: residual
/// nbits 2 258 against 310, int8 359 against 443, pq M = 16 406 against 448); documents of
/// U[8,124] tokens (mean 66, as MS MARCO passages) take 1.94 times, and ran 1.42 times faster
/// on runs (443 against 313; BENCHMARKS.md, "Runs of documents in the batched codec kernels").
pub(super) fn pack_pays(offsets: &[usize]) -> bool {
    let tokens = offsets.last().unwrap_or(&0) - offsets.first().unwrap_or(&0);
    let own: usize = offsets
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(WG_BN).max(1))
        .sum();
    own > 0 && own * 10 >= tokens.div_ceil(WG_BN) * 13
}

/// Where the bulk-copy kernel is ahead of the one-warp one at one query (the H200, B = 100K ×
/// 128 tokens, BENCHMARKS.md "The bulk-copy codec kernels"): the residual at nbits 1 and 2
/// (144.5 against 123.2 M docs/s at nbits 2, d = 128; 185.6 against 171.8 at d = 64), int8 and
/// fp8 at d = 128 (180.8 / 193.0 against 175.0 / 152.1). Not at nbits 4, whose 32 KB pair table
/// halves the blocks per SM (97.4 against 119.6), nor int8 and fp8 at d = 64 (270.6 / 284.6
/// against 307.7 / 289.7); the residual and int8 only where the documents fill its 64-token
/// blocks (`whole_blocks`). Elsewhere it runs when forced (`Kernel::Bulk`).
fn bulk_by_default(tag: i32, param: i32, dim: usize, whole_blocks: bool) -> bool {
    match tag {
        0 => param <= 2 && whole_blocks,
        2 => dim == 128 && whole_blocks,
        3 => dim == 128,
        _ => false,
    }
}

/// The codec tag of kernels/codec.cu (`CodecTag`) and its parameter (nbits, M).
pub(super) fn codec_tag(codec: &Codec) -> (i32, i32) {
    match codec {
        Codec::Residual(r) => (0, r.nbits() as i32),
        Codec::Pq(p) => (1, p.m() as i32),
        Codec::Int8 => (2, 0),
        Codec::Fp8 => (3, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_pay_where_documents_leave_their_own_tiles_part_empty() {
        let offsets = |lens: &[usize]| {
            let mut o = vec![0];
            for l in lens {
                o.push(o.last().unwrap() + l);
            }
            o
        };
        // Full tiles: no gain. 66-token documents: each its own tile, two to a tile in runs.
        assert!(!pack_pays(&offsets(&[128; 10])));
        assert!(!pack_pays(&offsets(&[256, 384, 128])));
        assert!(pack_pays(&offsets(&[66; 100])));
        assert!(pack_pays(&offsets(&[1; 300])));
        // 100 tokens: 100 tiles against 79, under 1.3 times.
        assert!(!pack_pays(&offsets(&[100; 100])));
        assert!(!pack_pays(&offsets(&[])));
        assert_eq!(
            runs_kernel_of("maxsim_codec_wg_residual2_d128"),
            "maxsim_codec_wgp_residual2_d128"
        );
    }

    #[test]
    fn every_fused_kernel_has_a_name() {
        let names = fused_kernel_names();
        assert_eq!(names.len(), CODEC_DIMS.len() * 5 + PQ_SHAPES.len());
        for (d, m) in PQ_SHAPES {
            assert!((d / m) % 2 == 0 && m % 4 == 0 && d % m == 0, "({d}, {m})");
        }
        // The batched kernels: every codec at d 64 and 128, each instantiated in the source twice
        // (a document's own tiles, runs); then the bulk-copy kernels (int8 and fp8 at d 64 and
        // 128; the residual at nbits 2, 4 at d 64 and 1, 2, 4 at d 128).
        let names = batched_kernel_names();
        assert_eq!(names.len(), 2 * (2 * 5 + 7) + 4 + 5 + 4);
        let (names, quad) = names.split_at(names.len() - 4);
        let quad_src = include_str!("../../kernels/codec_quad.cu");
        for name in quad {
            assert!(
                quad_src.contains(&format!("INSTANTIATE_CODEC_QUAD({name},")),
                "{name}"
            );
        }
        let (batched, bulk) = names.split_at(2 * (2 * 5 + 7));
        let bulk_src = include_str!("../../kernels/codec_bulk.cu");
        for name in bulk {
            assert!(
                bulk_src.contains(&format!("INSTANTIATE_CODEC_BULK({name},")),
                "{name}"
            );
        }
        let src = include_str!("../../kernels/codec_wgmma.cu");
        for name in batched {
            let suffix = name
                .strip_prefix("maxsim_codec_wgp_")
                .or_else(|| name.strip_prefix("maxsim_codec_wg_"))
                .unwrap();
            let (stem, d) = suffix.rsplit_once("_d").unwrap();
            let per_d = format!("INSTANTIATE_CODEC_WG_DIMS({stem},");
            let one = format!("INSTANTIATE_CODEC_WG({suffix},");
            assert!(
                src.contains(&one) || (src.contains(&per_d) && ["64", "128"].contains(&d)),
                "{name}"
            );
        }
        assert_eq!(
            batched
                .iter()
                .filter(|n| n.starts_with("maxsim_codec_wgp_"))
                .count(),
            2 * 5 + 7
        );
    }

    #[test]
    fn quad_order_groups_documents_by_their_tiles() {
        // Lengths 20, 5, 0, 16, 17, 33, 1: tiles 2, 1, 0, 1, 2, 3, 1.
        let order = quad_order(&[0, 20, 25, 25, 41, 58, 91, 92]);
        assert_eq!(order, vec![2, 1, 3, 6, 0, 4, 5]);
        assert!(quad_order(&[0]).is_empty());
        let r2 = (0, 2, 128);
        let warp = || CodecKernel::Warp("maxsim_codec_residual2_d128".into());
        let bulk = || CodecKernel::Bulk("maxsim_codec_bk_residual2_d128".into());
        let quad = || CodecKernel::Quad("maxsim_codec_q4_residual2_d128".into());
        assert_eq!(quad_or(warp(), r2, true, None), warp(), "off by default");
        assert_eq!(quad_or(warp(), r2, true, Some(true)), quad());
        assert_eq!(quad_or(warp(), r2, false, Some(true)), warp(), "not loaded");
        assert_eq!(quad_or(warp(), r2, true, Some(false)), warp());
        assert_eq!(quad_or(bulk(), r2, true, None), bulk());
        assert_eq!(quad_or(bulk(), r2, true, Some(true)), quad());
        // nbits 4 and d = 96: none built.
        let w4 = CodecKernel::Warp("maxsim_codec_residual4_d128".into());
        assert_eq!(quad_or(w4.clone(), (0, 4, 128), true, Some(true)), w4);
        assert_eq!(quad_kernel_of(0, 1, 96), None);
        assert_eq!(quad_kernel_of(2, 0, 128), None);
        let batched = CodecKernel::Batched("maxsim_codec_wg_residual2_d128".into());
        assert_eq!(quad_or(batched.clone(), r2, true, Some(true)), batched);
    }

    #[test]
    fn whole_blocks_are_multiples_of_64_tokens_from_128() {
        assert!(whole_blocks(&[0, 128, 320, 576]));
        assert!(whole_blocks(&[0]), "no documents");
        assert!(!whole_blocks(&[0, 64]), "one block");
        assert!(!whole_blocks(&[0, 128, 208]), "80 tokens");
        assert!(!whole_blocks(&[0, 128, 128]), "an empty document");
        assert!(!whole_blocks(&[0, 144]));
    }

    #[test]
    fn batched_kernel_from_enough_blocks_or_when_forced() {
        let r2 = (0, 2, 128);
        let pick = |shape, blocks, force| codec_kernel(shape, blocks, true, (true, true), force);
        let warp = || Some(CodecKernel::Warp("maxsim_codec_residual2_d128".into()));
        let bulk = || Some(CodecKernel::Bulk("maxsim_codec_bk_residual2_d128".into()));
        let batched = || {
            Some(CodecKernel::Batched(
                "maxsim_codec_wg_residual2_d128".into(),
            ))
        };
        // Below the batched kernel's blocks: the bulk-copy kernel where loaded and the words
        // are padded (our uploads), else the one-warp kernel.
        assert_eq!(pick(r2, 1, None), bulk());
        assert_eq!(pick(r2, 3, None), bulk());
        // Documents that leave its 64-token blocks partly empty: the one-warp kernel, unless
        // forced.
        let partial = |force| codec_kernel(r2, 1, true, (true, false), force);
        assert_eq!(partial(None), warp());
        assert_eq!(partial(Some(Kernel::Bulk)), bulk());
        assert_eq!(codec_kernel(r2, 4, true, (true, false), None), batched());
        let partly = |tag| codec_kernel((tag, 0, 128), 1, true, (true, false), None);
        assert!(matches!(partly(2), Some(CodecKernel::Warp(_))), "int8");
        assert!(matches!(partly(3), Some(CodecKernel::Bulk(_))), "fp8");
        assert_eq!(codec_kernel(r2, 1, true, (false, true), None), warp());
        assert_eq!(codec_kernel(r2, 1, false, (true, true), None), warp());
        assert_eq!(pick(r2, 4, None), batched());
        assert_eq!(codec_kernel(r2, 4, true, (false, true), None), batched());
        assert!(matches!(
            pick((2, 0, 128), 4, None),
            Some(CodecKernel::Batched(_))
        ));
        assert_eq!(codec_kernel(r2, 32, false, (true, true), None), warp());
        for (tag, name) in [(2, "int8"), (3, "fp8")] {
            assert_eq!(
                pick((tag, 0, 128), 3, None),
                Some(CodecKernel::Bulk(format!("maxsim_codec_bk_{name}_d128")))
            );
        }
        // The residual's bulk kernels: rows of codes a multiple of 16 bytes, d 64 and 128; by
        // default at nbits 1 and 2 only, int8 and fp8's at d = 128 only. ((tag, nbits, d),
        // query blocks, forced kernel, the family picked)
        let family = |k: Option<CodecKernel>| match k {
            Some(CodecKernel::Warp(_)) => "warp",
            Some(CodecKernel::Bulk(_)) => "bulk",
            Some(CodecKernel::Batched(_)) => "batched",
            Some(CodecKernel::Lut(_)) => "lut",
            Some(CodecKernel::Quad(_)) => "quad",
            None => "none",
        };
        for (shape, blocks, force, want) in [
            ((0, 1, 128), 1, None, "bulk"),
            ((0, 2, 64), 1, None, "bulk"),
            ((0, 4, 64), 1, None, "warp"),
            ((0, 4, 128), 1, None, "warp"),
            ((0, 4, 64), 1, Some(Kernel::Bulk), "bulk"),
            ((2, 0, 64), 1, None, "warp"),
            ((0, 1, 64), 1, None, "warp"),
            ((0, 2, 96), 1, None, "warp"),
            ((1, 16, 128), 1, None, "warp"),
            ((3, 0, 96), 1, None, "warp"),
            ((2, 0, 64), 9, Some(Kernel::Bulk), "bulk"),
            ((2, 0, 64), 1, Some(Kernel::Mma), "warp"),
            // d = 96: the one-warp kernel only.
            ((3, 0, 96), 32, None, "warp"),
        ] {
            assert_eq!(
                family(pick(shape, blocks, force)),
                want,
                "{shape:?} x{blocks} {force:?}"
            );
        }
        // Without the batched and bulk kernels loaded (before sm_90a): one warp.
        assert_eq!(
            family(codec_kernel((3, 0, 64), 1, false, (true, true), None)),
            "warp"
        );
        assert_eq!(pick(r2, 9, Some(Kernel::Bulk)), bulk());
        assert_eq!(
            codec_kernel(r2, 1, true, (false, true), Some(Kernel::Bulk)),
            warp()
        );
        assert_eq!(pick(r2, 1, Some(Kernel::Wgmma)), batched());
        assert_eq!(pick(r2, 32, Some(Kernel::Mma)), warp());
        // The lookup-table kernel: pq only, when forced.
        assert_eq!(
            pick((1, 16, 128), 1, Some(Kernel::Lut)),
            Some(CodecKernel::Lut("maxsim_pq_lut_m16".into()))
        );
        assert_eq!(pick(r2, 1, Some(Kernel::Lut)), warp());
        assert!(lut_kernel_names().contains(&"maxsim_pq_lut_m64".to_string()));
        // d = 48: none (decoded at upload).
        assert_eq!(pick((0, 2, 48), 32, None), None);
        assert_eq!(
            batched_kernel_of(1, 16, 128).as_deref(),
            Some("maxsim_codec_wg_pq16_d128")
        );
    }
}
