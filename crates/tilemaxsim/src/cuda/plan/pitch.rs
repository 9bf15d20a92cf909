//! The padded pitch: the width (in elements) the engine stores an uploaded corpus's rows at,
//! past its d where a wider row reads faster than the d's own kernels do, zeros in the padding
//! (and in the queries, re-pitched to match: the products are unchanged).
use super::MMA_DIMS;

/// The row width an uploaded corpus of `dim` is stored at (`dim` itself where it is not padded),
/// on a device with the bulk-copy kernels (sm_90+; without them, no d is padded).
///
/// - 16-bit rows, 8 ≤ d ≤ 256 and d not a multiple of 4: the next multiple of 8, whose rows
///   load whole (16-byte pieces) instead of a half at a time (`maxsim_span_any`'s odd rows).
/// - 16-bit rows, 256 < d < 1024 and d not a multiple of 8: the next multiple of 8, which
///   `maxsim_bulk_any` and `maxsim_bulk_rows` take; without it, the CUDA-core kernel.
/// - f32 rows in the split's range (`split_ok`), 16 < d < 128 and not a tensor-core d: the
///   next of `MMA_DIMS`, where `maxsim_bulk_planes` scores them; without it, the CUDA-core
///   kernel.
///
/// H200, f16 U[32,256] B = 100K, % of the read ceiling of the d's own bytes, the d on its own
/// kernel against the padded d's rate × d / d_pad (bench/results/h200/2026-12-02/call1.log):
/// 15 35.4 → 69.8, 33 48.0 → 65.7 (40), 47 66.8 → 81.3, 63 72.0 → 87.1, 77 74.8 → 87.0,
/// 127 86.3 → 97.4, 199 80.2 → 93.4, 255 70.9 → 91.9, 333 8.0 → 90.3, 511 9.2 → 100.1,
/// 767 9.2 → 100.6; f32 77 11.1 → 75.9 (96), 100 14.1 → 77.1 (128), 127 17.9 → 97.9. At
/// d = 100 (a multiple of 4, 8-byte rows) padding to 104 lost at B = 100K (85.2 against 83.8)
/// and won at 10K (64.3 against 68.4): d % 4 = 0 is left as it is.
pub(in crate::cuda) fn stored_dim(dim: usize, f32: bool, split_ok: bool) -> usize {
    if f32 {
        return match MMA_DIMS.iter().find(|&&m| m >= dim) {
            Some(&m) if split_ok && dim > 16 => m,
            _ => dim,
        };
    }
    let pads = match dim {
        8..=256 => !dim.is_multiple_of(4),
        257..=1023 => !dim.is_multiple_of(8),
        _ => false,
    };
    if pads { dim.next_multiple_of(8) } else { dim }
}
