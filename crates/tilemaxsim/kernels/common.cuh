// Shared helpers for tilemaxsim's kernels. Header-free on purpose: NVRTC compiles these
// without the CUDA toolkit's headers (users' machines may only have the driver and libnvrtc),
// so element conversions are inline PTX or bit operations, and constants are spelled out.
#pragma once

typedef unsigned short u16;
typedef long long i64;

#define NEG_INF __int_as_float(0xff800000)

// A compile-time bool as a value, so one generic lambda compiles as two (`decltype(f)::value`).
template <bool B> struct Flag { static constexpr bool value = B; };

// Element loads widened to f32 (exact for every type).
struct F32 {
    typedef float T;
    static __device__ __forceinline__ float load(const float* p) { return *p; }
};
struct F16 {
    typedef u16 T;
    static __device__ __forceinline__ float load(const u16* p) {
        float f;
        asm("{ .reg .f16 t; ld.global.nc.b16 t, [%1]; cvt.f32.f16 %0, t; }" : "=f"(f) : "l"(p));
        return f;
    }
};
struct BF16 {
    typedef u16 T;
    static __device__ __forceinline__ float load(const u16* p) {
        return __uint_as_float(((unsigned)__ldg(p)) << 16);
    }
};

// The larger of a and b, and NaN when either is NaN (PTX max.NaN, sm_80 and newer), so a NaN
// in a query or document token reaches its scores instead of being dropped by fmaxf.
// MAXSIM_NAN=0 (TILEMAXSIM_KERNEL_DEFINES) builds plain fmaxf instead, to time the difference.
#if defined(MAXSIM_NAN) && MAXSIM_NAN == 0
__device__ __forceinline__ float max_nan(float a, float b) { return fmaxf(a, b); }
#else
__device__ __forceinline__ float max_nan(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
#endif

__device__ __forceinline__ float warp_max_xor(float v, int width_mask) {
    for (int o = width_mask; o > 0; o >>= 1) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
