// The masked fragments of rows of any d (the spanning and streaming kernels, span.cu and
// stream.cu): the query's A fragments with zeros past d, and a token row's B fragments read by
// the widest loads its alignment allows, from shared or global memory, zeros past d.
#pragma once
#include "common.cuh"
#include "async_copy.cuh"

// A's fragments as load_a_permuted<KCH> lays them out, from 32 rows `dim` wide at q (any
// alignment), zeros past d.
template <int KCH, bool HALF>
__device__ __forceinline__ void load_a_any(unsigned (&a)[2][KCH][2][4], const u16* q, int dim, int g, int c) {
    auto pair = [&](int row, int k) -> unsigned {
        const unsigned lo = k < dim ? q[row * dim + k] : 0u, hi = k + 1 < dim ? q[row * dim + k + 1] : 0u;
        return lo | (hi << 16);
    };
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) {
                const bool half = HALF && ch == KCH - 1;  // dims c*4 .. c*4 + 3 (+ 16 for kb 1)
                const int k = ch * 32 + (half ? c * 4 + kb * 16 : c * 8 + kb * 4);
                a[mt][ch][kb][0] = pair(mt * 16 + g, k);
                a[mt][ch][kb][1] = pair(mt * 16 + g + 8, k);
                a[mt][ch][kb][2] = pair(mt * 16 + g, k + 2);
                a[mt][ch][kb][3] = pair(mt * 16 + g + 8, k + 2);
            }
}

// B's eight halves k .. k + 7 of a token row in shared memory (`row`: its first half), zeros
// past d, by the widest loads the rows' alignment allows (it follows d). MODE 0: d = KCH * 32;
// MODE 1: d % 8 = 0 (16-byte loads); MODE 4: d % 4 = 0 (two 8-byte loads); MODE 3: even d (four
// 4-byte loads); MODE 2: odd d (a half at a time; words at four chunks, below). `last`: the
// row's last chunk of 32, the only one that can reach past d (KCH = ceil(d / 32), so every other
// chunk lies inside the row); the others load without tests (the chunk loops unroll, so `last`
// is known at compile time).
// H200, f16 U[32,256] B = 100K, against tests in every chunk (SPAN_MASK_ALL=1), two rounds
// (bench/results/h200/2026-11-29c/call1.log): d = 77 64.9 / 64.7% -> 67.5 / 67.8% of the read
// ceiling, d = 100 69.8 / 69.3 -> 78.6 / 78.5, d = 127 72.0 / 71.8 -> 77.1 / 79.3, d = 48 level.
// Odd d at four chunks: five aligned 4-byte words and four byte permutes for eight halves, not
// eight 2-byte loads: d = 127 81.4 / 80.6 / 79.4 / 80.8% against 77.1 / 79.3 / 79.0 / 79.1
// (call1.log, call2.log). They lost at three chunks (d = 77 70.4 / 69.8 against 72.0 / 72.7)
// and at seven and eight (d = 201 77.3 / 78.5 against 79.2 / 79.7, d = 255 67.0 / 67.6 against
// 70.5 / 70.6). On the H100, before the tests left the inner chunks, joining words by a funnel
// shift lost at d = 77 (95.0 against 123.3 M docs/s) and d = 127 (75.9 against 80.6).
#ifndef SPAN_MASK_ALL
#define SPAN_MASK_ALL 0
#endif
template <int MODE, int KCH>
__device__ __forceinline__ V4 load_b(const u16* row, int k, int dim, bool last) {
    last = last || SPAN_MASK_ALL;
    if (MODE == 0 || (MODE == 1 && !last)) return *(const V4*)(row + k);
    if (MODE == 1) return k < dim ? *(const V4*)(row + k) : V4{0u, 0u, 0u, 0u};
    unsigned w[4];
    if (MODE == 2 && KCH == 4 && !last) {
        // Five aligned words around the eight halves, and a byte permute per pair: the halves
        // start at an odd or even half by the row (half k + 8, the fifth word's, lies in the row).
        const size_t at = (size_t)(row + k);
        const unsigned* p = (const unsigned*)(at & ~(size_t)3);
        const unsigned sel = (at & 2) ? 0x5432u : 0x3210u;
        unsigned x[5];
#pragma unroll
        for (int j = 0; j < 5; ++j) x[j] = p[j];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = __byte_perm(x[j], x[j + 1], sel);
        return V4{w[0], w[1], w[2], w[3]};
    }
    if (MODE == 2) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned lo = !last || k + 2 * j < dim ? row[k + 2 * j] : 0u;
            const unsigned hi = !last || k + 2 * j + 1 < dim ? row[k + 2 * j + 1] : 0u;
            w[j] = lo | (hi << 16);
        }
        return V4{w[0], w[1], w[2], w[3]};
    }
    if (last && k >= dim) return V4{0u, 0u, 0u, 0u};
    const u16* p = row + k;
    if (MODE == 4) {
        const unsigned long long x = *(const unsigned long long*)p, y = *(const unsigned long long*)(p + 4);
        w[0] = (unsigned)x, w[1] = (unsigned)(x >> 32), w[2] = (unsigned)y, w[3] = (unsigned)(y >> 32);
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = ((const unsigned*)p)[j];
    }
    // d is even here: whole words of the row, or none.
    const int n = dim - k;
    if (last && n < 8) {
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = 2 * j < n ? w[j] : 0u;
    }
    return V4{w[0], w[1], w[2], w[3]};
}

// B's four halves k .. k + 3 of a token row (the last chunk of HALF, its first product), zeros
// past d, as x, y of a V4 (z, w zero). MODE 1, 4: d % 4 = 0, so one 8-byte load or none.
template <int MODE>
__device__ __forceinline__ V4 load_b_half(const u16* row, int k, int dim) {
    if (k >= dim) return V4{0u, 0u, 0u, 0u};
    const u16* p = row + k;
    if (MODE == 1 || MODE == 4) {
        const unsigned long long x = *(const unsigned long long*)p;
        return V4{(unsigned)x, (unsigned)(x >> 32), 0u, 0u};
    }
    unsigned w[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        if (MODE == 3) {
            w[j] = k + 2 * j < dim ? ((const unsigned*)p)[j] : 0u;  // even d: whole words
        } else {
            const unsigned lo = k + 2 * j < dim ? p[2 * j] : 0u;
            const unsigned hi = k + 2 * j + 1 < dim ? p[2 * j + 1] : 0u;
            w[j] = lo | (hi << 16);
        }
    }
    return V4{w[0], w[1], 0u, 0u};
}
