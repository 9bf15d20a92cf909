//! x86-64 flavours of the kernel: AVX-512 (32 × 512-bit registers: a 2 × 12 tile of 16-lane
//! vectors) and AVX2 + FMA + F16C (16 × 256-bit registers: a 2 × 6 tile of 8-lane vectors).
//! Each entry point enables its ISA with `#[target_feature]` and instantiates the generic kernel
//! inside it, so the intrinsics inline; the dispatcher calls one only after run-time detection.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::kernel::{PreparedQuery, Scratch, Simd, fma_loop, score_doc};
use crate::matrix::Elements;

pub(crate) struct Avx512;

impl Simd for Avx512 {
    const LANES: usize = 16;
    type V = __m512;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> __m512 {
        unsafe { _mm512_set1_ps(*p) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
        let n = src.len() / 16 * 16;
        for i in (0..n).step_by(16) {
            // SAFETY: `i + 16 ≤ n ≤ len` for both slices.
            unsafe {
                let h = _mm256_loadu_si256(src.as_ptr().add(i).cast());
                _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
            }
        }
        for i in n..src.len() {
            dst[i] = src[i].to_f32();
        }
    }
    #[inline(always)]
    unsafe fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) {
        let n = src.len() / 16 * 16;
        for i in (0..n).step_by(16) {
            // SAFETY: `i + 16 ≤ n ≤ len` for both slices.
            unsafe {
                let h = _mm256_loadu_si256(src.as_ptr().add(i).cast());
                let w = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h));
                _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_castsi512_ps(w));
            }
        }
        for i in n..src.len() {
            dst[i] = src[i].to_f32();
        }
    }
    #[inline(always)]
    unsafe fn prefetch(p: *const u8) {
        unsafe { prefetch_l1(p) }
    }
}

pub(crate) struct Avx2;

#[inline(always)]
unsafe fn prefetch_l1(p: *const u8) {
    // SAFETY: a prefetch never faults.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
}

impl Simd for Avx2 {
    const LANES: usize = 8;
    type V = __m256;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> __m256 {
        unsafe { _mm256_broadcast_ss(&*p) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
        let n = src.len() / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: `i + 8 ≤ n ≤ len` for both slices.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
        }
        for i in n..src.len() {
            dst[i] = src[i].to_f32();
        }
    }
    #[inline(always)]
    unsafe fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) {
        let n = src.len() / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: `i + 8 ≤ n ≤ len` for both slices.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                let w = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h));
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_castsi256_ps(w));
            }
        }
        for i in n..src.len() {
            dst[i] = src[i].to_f32();
        }
    }
    #[inline(always)]
    unsafe fn prefetch(p: *const u8) {
        unsafe { prefetch_l1(p) }
    }
}

/// # Safety
/// The CPU must have AVX-512 F/BW/VL; see [`score_doc`] for the rest.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) unsafe fn score_doc_avx512(
    q: &[PreparedQuery],
    doc: Elements<'_>,
    next: &[u8],
    dim: usize,
    s: &mut Scratch,
    out: &mut [f32],
) {
    unsafe { score_doc::<Avx512, 2, 12>(q, doc, next, dim, s, out) }
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C; see [`score_doc`] for the rest.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn score_doc_avx2(
    q: &[PreparedQuery],
    doc: Elements<'_>,
    next: &[u8],
    dim: usize,
    s: &mut Scratch,
    out: &mut [f32],
) {
    unsafe { score_doc::<Avx2, 2, 6>(q, doc, next, dim, s, out) }
}

/// # Safety
/// The CPU must have AVX-512 F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) unsafe fn fma_peak_avx512(iters: usize, seed: &[f32; 16]) -> f32 {
    unsafe { fma_loop::<Avx512>(iters, seed) }
}

/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn fma_peak_avx2(iters: usize, seed: &[f32; 16]) -> f32 {
    unsafe { fma_loop::<Avx2>(iters, seed) }
}
