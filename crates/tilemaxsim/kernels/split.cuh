// The exact split of an f32 into 16-bit parts that the tensor cores multiply exactly, shared
// by maxsim_ring and maxsim_bulk_split: f16 high and low parts (the low part scaled by 2^11,
// SPLIT_SCALE) and bf16 high, middle and low parts (bf16 has f32's exponent range: no scale).
#pragma once
#include "common.cuh"

// 0: the f16 high part of an f32 converted to f16 and back, so the low part carries what f16
// loses, subnormal range included (exact to 2^-36 absolute). 1: rounded to 11 bits with integer
// ops instead (two conversions fewer, the same speed on the H100, bench/results/ring.log; on the
// H200 maxsim_bulk_split's f32 corpora, B = 100K, read 91.9% of the ceiling with it against
// 96.1% without, bench/results/h200/2026-11-29d/call1.log), which loses up to 2^-25 absolute
// where the high part falls below f16's normal range.
#ifndef SPLIT_ROUND_BITS
#define SPLIT_ROUND_BITS 0
#endif
#define SPLIT_SCALE 2048.0f

// Two floats as f16x2 (`first` in the low half: the lower k index).
__device__ __forceinline__ unsigned f16x2_of(float first, float second) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}
// The two halves of an f16x2 as f32 (the low half first).
__device__ __forceinline__ void f32_of_f16x2(unsigned w, float& first, float& second) {
    asm("{ .reg .b16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }"
        : "=f"(first), "=f"(second) : "r"(w));
}
// Split two f32 into f16 high parts (hi) and f16 low parts scaled by 2^11 (lo); see
// SPLIT_ROUND_BITS. The host's split of the queries (split_f32 in src/cuda/memory.rs) is mode 0's.
__device__ __forceinline__ void split_f32x2(float x0, float x1, unsigned& hi, unsigned& lo) {
    float h0, h1;
#if SPLIT_ROUND_BITS
    h0 = __uint_as_float((__float_as_uint(x0) + 0x1000u) & 0xffffe000u);
    h1 = __uint_as_float((__float_as_uint(x1) + 0x1000u) & 0xffffe000u);
    hi = f16x2_of(h0, h1);
#else
    hi = f16x2_of(x0, x1);
    f32_of_f16x2(hi, h0, h1);
#endif
    lo = f16x2_of((x0 - h0) * SPLIT_SCALE, (x1 - h1) * SPLIT_SCALE);
}

// Two floats as bf16x2, rounded to nearest (`first` in the low half), and back.
__device__ __forceinline__ unsigned bf16x2_of(float first, float second) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}
__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
// Split two f32 into three bf16 parts each, x = p0 + p1 + p2 to about 2^-24 of x.
__device__ __forceinline__ void split3_bf16x2(float x0, float x1, unsigned (&p)[3]) {
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        p[k] = bf16x2_of(x0, x1);
        x0 -= bf16_lo(p[k]);
        x1 -= bf16_hi(p[k]);
    }
}

// The power of two c that brings a query's (or a query row's) largest magnitude `m` into
// [2^14, 2^15), and 1/c (maxsim_bulk_split, and the training kernels' float32 forward).
// Its exponent is clamped to f32's normal range: a query whose largest |q| is subnormal (below
// 2^-126) keeps about 17 bits of it, not 23. An all-zero query gets 2^14 (it scores 0 either
// way). An infinite value scores NaN (the engine leaves infinities' scores unspecified;
// `check=True` in Python refuses them).
__device__ __forceinline__ void query_scale(float m, float& c, float& inv) {
    const int e = m > 0.f ? (int)((__float_as_uint(m) >> 23) & 0xff) - 127 : 0;
    const int k = min(max(14 - e, -126), 126);
    c = __uint_as_float((unsigned)(127 + k) << 23);
    inv = __uint_as_float((unsigned)(127 - k) << 23);
}
