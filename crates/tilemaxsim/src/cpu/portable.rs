//! The portable flavour: 8-lane arrays the compiler vectorizes for whatever the target has
//! (SSE2 on any x86-64, NEON on aarch64). The fallback, and the pin for the SIMD flavours.

use half::{bf16, f16};

use super::kernel::{PreparedQuery, Scratch, Simd, fma_loop, score_doc};
use crate::matrix::Elements;

pub(crate) struct Portable;

impl Simd for Portable {
    const LANES: usize = 8;
    type V = [f32; 8];
    #[inline(always)]
    unsafe fn zero() -> [f32; 8] {
        [0.0; 8]
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> [f32; 8] {
        // SAFETY: the caller passes a valid pointer.
        [unsafe { *p }; 8]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> [f32; 8] {
        // SAFETY: the caller passes 8 valid floats.
        unsafe { p.cast::<[f32; 8]>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: [f32; 8]) {
        // SAFETY: the caller passes room for 8 floats.
        unsafe { p.cast::<[f32; 8]>().write_unaligned(v) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: [f32; 8], b: [f32; 8], c: [f32; 8]) -> [f32; 8] {
        // Plain multiply-add (not `mul_add`, which is a slow libm call without hardware FMA).
        std::array::from_fn(|i| a[i] * b[i] + c[i])
    }
    #[inline(always)]
    unsafe fn max(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|i| if b[i] > a[i] { b[i] } else { a[i] })
    }
    #[inline(always)]
    unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    #[inline(always)]
    unsafe fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits((s.to_bits() as u32) << 16);
        }
    }
    #[inline(always)]
    unsafe fn prefetch(_p: *const u8) {}
}

/// # Safety
/// See [`score_doc`].
pub(crate) unsafe fn score_doc_portable(
    q: &[PreparedQuery],
    doc: Elements<'_>,
    next: &[u8],
    dim: usize,
    s: &mut Scratch,
    out: &mut [f32],
) {
    unsafe { score_doc::<Portable, 2, 4>(q, doc, next, dim, s, out) }
}

pub(crate) fn fma_peak_portable(iters: usize, seed: &[f32; 16]) -> f32 {
    // SAFETY: no ISA requirement.
    unsafe { fma_loop::<Portable>(iters, seed) }
}
