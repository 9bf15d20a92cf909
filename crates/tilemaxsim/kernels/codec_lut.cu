// The paper's lookup-table PQ kernel (TileMaxSim-PQ, Section 4), for the ablation beside the
// fused decode-and-multiply kernels (maxsim_codec_pq*, which decode the codebook entries into
// tensor-core fragments instead). Three steps, per call:
// - pq_lut_table: for every 32-row query block the distance table
//   T[b][r][m][k] = <q_r's sub-vector m, centroid k of sub-space m> in f32 (the paper's phase 1);
// - maxsim_pq_lut_m{M}: one CTA per (query block, group of G rows) keeps that group's part of
//   the table in shared memory (G·M·256 floats, 128 KB) and its warps walk the documents, one
//   warp a document: each lane scores its tokens for the G rows as sums of M table entries
//   picked by the token's codes (the paper's phase 2), keeps the running maxima, and the warp's
//   maxima of the valid rows are summed into the group's partial score;
// - pq_lut_sum: the groups' partial scores summed in a fixed order (deterministic).
// A document of no tokens scores -inf (as the fused kernels); NaN propagates (max.NaN).
#include "common.cuh"

#define LUT_THREADS 256
#define LUT_TABLE_FLOATS 32768  // G · M · 256 for every M: G = 128 / M

// T[b][r][m][k] for `num_blocks` blocks of 32 f16 rows of `dim`, codebooks f16 [M][256][dim / M].
extern "C" __global__ void pq_lut_table(const u16* __restrict__ qblocks, const u16* __restrict__ book,
                                        int num_blocks, int dim, int m_count, float* __restrict__ table)
{
    const int dsub = dim / m_count;
    const i64 n = (i64)num_blocks * 32 * m_count * 256;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const int k = (int)(i % 256), m = (int)((i / 256) % m_count);
        const i64 row = i / (256 * m_count);  // b · 32 + r
        const u16* q = qblocks + row * dim + m * dsub;
        const u16* c = book + ((i64)m * 256 + k) * dsub;
        float s = 0.f;
        for (int j = 0; j < dsub; ++j) s = fmaf(F16::load(q + j), F16::load(c + j), s);
        table[i] = s;
    }
}

// part[(grp · num_blocks + b) · num_docs + pair]: rows grp·G .. grp·G + G - 1 of block b (those
// below qrows[b]) against document pair (doc_index[pair], or pair).
template <int M>
__device__ __forceinline__ void maxsim_pq_lut_impl(const float* __restrict__ table, const int* __restrict__ qrows,
                                                   int num_blocks, const unsigned char* __restrict__ codes,
                                                   const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index,
                                                   int num_docs, float* __restrict__ part)
{
    constexpr int G = 128 / M;  // rows per group
    extern __shared__ float lut[];  // [G][M][256]
    const int b = blockIdx.y % num_blocks, grp = blockIdx.y / num_blocks;
    const float* src = table + ((i64)b * 32 + grp * G) * M * 256;
    for (int i = threadIdx.x; i < G * M * 256; i += blockDim.x) lut[i] = src[i];
    __syncthreads();
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const int valid = min(G, qrows[b] - grp * G);
    for (int pair = blockIdx.x * warps + (threadIdx.x >> 5); pair < num_docs; pair += gridDim.x * warps) {
        const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
        const i64 d0 = d_offsets[doc];
        const int nd = (int)(d_offsets[doc + 1] - d0);
        float best[G];
#pragma unroll
        for (int r = 0; r < G; ++r) best[r] = NEG_INF;
        for (int t = lane; t < nd; t += 32) {
            unsigned w[M / 4];  // the token's M code bytes (rows start 4-byte aligned: M ≥ 4)
            const unsigned* p = (const unsigned*)(codes + (d0 + t) * M);
#pragma unroll
            for (int i = 0; i < M / 4; ++i) w[i] = __ldg(p + i);
            float s[G];
#pragma unroll
            for (int r = 0; r < G; ++r) s[r] = 0.f;
#pragma unroll
            for (int m = 0; m < M; ++m) {
                const int k = (w[m / 4] >> (8 * (m % 4))) & 0xff;
#pragma unroll
                for (int r = 0; r < G; ++r) s[r] += lut[(r * M + m) * 256 + k];
            }
#pragma unroll
            for (int r = 0; r < G; ++r) best[r] = max_nan(best[r], s[r]);
        }
        float total = 0.f;
#pragma unroll
        for (int r = 0; r < G; ++r) {
            const float v = warp_max_xor(best[r], 16);
            if (r < valid) total += v;
        }
        if (lane == 0) part[((i64)grp * num_blocks + b) * num_docs + pair] = total;
    }
}

#define INSTANTIATE_PQ_LUT(M)                                                                          \
    extern "C" __global__ void __launch_bounds__(LUT_THREADS) maxsim_pq_lut_m##M(                      \
        const float* table, const int* qrows, int num_blocks, const unsigned char* codes,              \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* part)                         \
    {                                                                                                  \
        maxsim_pq_lut_impl<M>(table, qrows, num_blocks, codes, d_offsets, doc_index, num_docs, part); \
    }

INSTANTIATE_PQ_LUT(8)
INSTANTIATE_PQ_LUT(16)
INSTANTIATE_PQ_LUT(32)
INSTANTIATE_PQ_LUT(64)

// out[b · num_docs + pair] = the sum over the `groups` partial scores, in group order.
extern "C" __global__ void pq_lut_sum(const float* __restrict__ part, int groups, i64 n, float* __restrict__ out)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int g = 0; g < groups; ++g) s += part[g * n + i];
        out[i] = s;
    }
}
