// Tensor-core helpers shared by the mma.sync kernels (maxsim_mma, maxsim_bulk, maxsim_span,
// maxsim_stream, maxsim_gemm, maxsim_ring, the training kernels, and maxsim_wgmma's fold): the
// m16n8k16 instruction per dtype, an 8-token tile's products, the running-max fold of a C
// fragment, a 32-row block's score, streaming loads and the permuted-k A fragments.
#pragma once
#include "common.cuh"

template <bool BF> struct Mma;
template <> struct Mma<false> {
    static __device__ __forceinline__ void run(float* c, const unsigned* a, unsigned b0, unsigned b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct Mma<true> {
    static __device__ __forceinline__ void run(float* c, const unsigned* a, unsigned b0, unsigned b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

struct U4 { unsigned x, y, z, w; };

// One 8-token tile's products with a 32-row query block (its two m16 tiles): acc[mt] += A[mt] B
// over the KCH 32-dimension chunks of the tile's B fragments `b` (U4 or V4), A in
// load_a_permuted's order; HALF skips the last chunk's second k16 product (its columns past d).
template <bool BF, int KCH, bool HALF = false, typename B>
__device__ __forceinline__ void tile_products(float (&acc)[2][4], const unsigned (&a)[2][KCH][2][4], const B (&b)[KCH]) {
#pragma unroll
    for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            Mma<BF>::run(acc[mt], a[mt][ch][0], b[ch].x, b[ch].y);
            if (!(HALF && ch == KCH - 1)) Mma<BF>::run(acc[mt], a[mt][ch][1], b[ch].z, b[ch].w);
        }
}

// Fold one m16n8 accumulator tile (this thread's C fragment: rows g and g+8, columns col and
// col + 1) into the running maxima of its two rows; columns at or past `limit` do not count.
__device__ __forceinline__ void fold_max(float (&best)[2], const float (&acc)[4], int col, int limit) {
    const float v0 = col < limit ? acc[0] : NEG_INF;
    const float v1 = col + 1 < limit ? acc[1] : NEG_INF;
    const float v2 = col < limit ? acc[2] : NEG_INF;
    const float v3 = col + 1 < limit ? acc[3] : NEG_INF;
    best[0] = max_nan(best[0], max_nan(v0, v1));
    best[1] = max_nan(best[1], max_nan(v2, v3));
}

// One 16-row m-block's part of a 32-row query block's score from its rows' running maxima in
// the C-fragment layout (rows g and g + 8 of m-block mb): the max over the quad (the four lanes
// that share a row), then the sum over its rows among the block's first `rows`; every lane
// gets it.
__device__ __forceinline__ float mblock_score(const float (&best)[2], int mb, int rows, int g) {
    const float m0 = warp_max_xor(best[0], 2), m8 = warp_max_xor(best[1], 2);
    float s = (mb * 16 + g < rows ? m0 : 0.f) + (mb * 16 + g + 8 < rows ? m8 : 0.f);
    for (int o = 4; o < 32; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}
// The score of a 32-row query block from its running maxima in the C-fragment layout: the max
// over the quad (the four lanes that share a row), then the sum over the first `rows` rows
// (eight quads); every lane gets it.
__device__ __forceinline__ float block_score(const float (&best)[2][2], int rows, int g) {
    float s = 0.f;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        const float m0 = warp_max_xor(best[mt][0], 2);
        const float m8 = warp_max_xor(best[mt][1], 2);
        if (mt * 16 + g < rows) s += m0;
        if (mt * 16 + g + 8 < rows) s += m8;
    }
    for (int o = 4; o < 32; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}
// The same as the sum of its two m-blocks' parts in that order, as the batched codec kernels
// over runs of documents add them (m-block 0's part stashed): both batched codec kernels score
// a document bit for bit alike, whichever a call takes.
__device__ __forceinline__ float block_score_split(const float (&best)[2][2], int rows, int g) {
    return mblock_score(best[0], 0, rows, g) + mblock_score(best[1], 1, rows, g);
}


__device__ __forceinline__ U4 ld_stream(const void* p) {
    U4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// A query's A fragments (32 rows of d = KCH * 32 halves at q) in the permuted k order of the
// direct B loads: for chunk ch and k16 step kb, thread (g, c) holds halves
// ch * 32 + c * 8 + kb * 4 .. + 3 of rows g, g + 8 (and 16 + g, 24 + g for the second m-tile).
// ROW: the row stride in halves (KCH * 32 but where a warp takes a slice of wider rows).
template <int KCH, int ROW = KCH * 32>
__device__ __forceinline__ void load_a_permuted(unsigned (&a)[2][KCH][2][4], const u16* q16, int g, int c) {
    constexpr int D = ROW;
    const unsigned* q = (const unsigned*)q16;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) {
                const int w = (ch * 32 + c * 8 + kb * 4) / 2;  // word index in a row
                const unsigned* r0 = q + (mt * 16 + g) * (D / 2);
                const unsigned* r8 = q + (mt * 16 + g + 8) * (D / 2);
                a[mt][ch][kb][0] = r0[w];
                a[mt][ch][kb][1] = r8[w];
                a[mt][ch][kb][2] = r0[w + 1];
                a[mt][ch][kb][3] = r8[w + 1];
            }
}

// load_a_permuted's fragments of the 32-dimension chunks from `first` on of 32 rows `dim` wide
// at q16 (d % 4 = 0, 4-byte aligned rows), zeros past d: a warp's slice of a wide query. HALF:
// the last chunk is 16 dimensions, one k16 step (thread c's dimensions c·4 .. + 3), its second
// step zeros.
template <int KCH, bool HALF = false>
__device__ __forceinline__ void load_a_slice(unsigned (&a)[2][KCH][2][4], const u16* q16, int dim, int first,
                                             int g, int c) {
    const unsigned* q = (const unsigned*)q16;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
            for (int kb = 0; kb < 2; ++kb) {
                const bool half = HALF && ch == KCH - 1;
                // four dimensions: in or past d (none for the half chunk's second step)
                const int k = first + ch * 32 + (half ? c * 4 : c * 8 + kb * 4);
                const bool in = k < dim && !(half && kb == 1);
                const unsigned* r0 = q + ((mt * 16 + g) * dim + k) / 2;
                const unsigned* r8 = q + ((mt * 16 + g + 8) * dim + k) / 2;
                a[mt][ch][kb][0] = in ? r0[0] : 0u;
                a[mt][ch][kb][1] = in ? r8[0] : 0u;
                a[mt][ch][kb][2] = in ? r0[1] : 0u;
                a[mt][ch][kb][3] = in ? r8[1] : 0u;
            }
}
