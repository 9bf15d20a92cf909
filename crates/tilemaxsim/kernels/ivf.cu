// IVF search on the GPU: PLAID's candidate generation and centroid interaction, on the
// per-call centroid scores of the residual kernels (`codec_centroid_scores`: cs[b][k][p], f16,
// every centroid k against the 32 row positions p of query block b). Four kernels:
//
//   ivf_probe        grid (chunk groups, blocks): each warp takes a range of centroids and each
//                    lane (a row position) keeps its nprobe best in that range;
//   ivf_probe_merge  grid (blocks): each lane merges its position's lists into its nprobe best
//                    centroids (-1 for positions past the query's rows);
//   ivf_mark         a warp per probed centroid: its IVF list set in the query's bitmap of
//                    documents;
//   ivf_interaction  a warp per 32 documents (one bitmap word): each candidate's approximate
//                    score Σ_i max_t cs[id_t][i] (NEG_INF for the others), the lanes taking the
//                    document's tokens, their maxima reduced across lanes.
//
// Order: score descending, ties to the lower centroid (64-bit keys: the score's ordered bits,
// then the inverted id), as the CPU's probe orders them. Queries longer than 32 rows span
// several blocks: `qblocks[q] .. qblocks[q + 1]`; their blocks' interactions add.
#include "common.cuh"

#define IVF_MAX_PROBE 64

typedef unsigned long long u64;

// An f16 score as an unsigned key in the same order (finite scores only: the queries and
// centroids are checked finite), above 0, which marks an empty slot.
__device__ __forceinline__ u64 ivf_key(u16 h, int k) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    unsigned b = __float_as_uint(f);
    if (b == 0x80000000u) b = 0u;
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((u64)b << 32) | (0xffffffffu - (unsigned)k);
}

// Insert `key` into the descending list `top[0..n)` when it beats the last entry.
__device__ __forceinline__ void ivf_insert(u64 (&top)[IVF_MAX_PROBE], int n, u64 key) {
    if (key <= top[n - 1]) return;
    int i = n - 1;
    while (i > 0 && top[i - 1] < key) {
        top[i] = top[i - 1];
        --i;
    }
    top[i] = key;
}

// The query row that position p of a block holds (`codec_centroid_scores`' order).
__device__ __forceinline__ int ivf_row(int p) {
    const int cq = p / 8, mt = (p / 4) % 2, j = p % 4;
    return mt * 16 + 2 * cq + (j & 1) + 8 * (j >> 1);
}

// Block (x, b), four warps: warp w takes chunk c = 4x + w of `chunks` equal ranges of the K
// centroids and writes each lane's nprobe best keys to part[b][c][lane][nprobe] (0: empty).
extern "C" __global__ void __launch_bounds__(128) ivf_probe(
    const u16* __restrict__ cs, const int* __restrict__ rows, int num_centroids, int nprobe,
    int chunks, u64* __restrict__ part)
{
    const int b = blockIdx.y, lane = threadIdx.x & 31;
    const int chunk = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (chunk >= chunks) return;
    u64 top[IVF_MAX_PROBE];
    for (int i = 0; i < nprobe; ++i) top[i] = 0;
    if (ivf_row(lane) < rows[b]) {
        const int per = (num_centroids + chunks - 1) / chunks;
        const int k0 = chunk * per, k1 = min(num_centroids, k0 + per);
        const u16* col = cs + (i64)b * num_centroids * 32 + lane;
        for (int k = k0; k < k1; ++k) ivf_insert(top, nprobe, ivf_key(col[(i64)k * 32], k));
    }
    u64* out = part + (((i64)b * chunks + chunk) * 32 + lane) * nprobe;
    for (int i = 0; i < nprobe; ++i) out[i] = top[i];
}

// Block b, one warp: lane p merges the chunks' lists of its position into probed[b][p][nprobe]
// (centroid ids, best first; -1 where the position holds no query row).
extern "C" __global__ void __launch_bounds__(32) ivf_probe_merge(
    const u64* __restrict__ part, int nprobe, int chunks, int* __restrict__ probed)
{
    const int b = blockIdx.x, lane = threadIdx.x;
    u64 top[IVF_MAX_PROBE];
    for (int i = 0; i < nprobe; ++i) top[i] = 0;
    for (int c = 0; c < chunks; ++c) {
        const u64* in = part + (((i64)b * chunks + c) * 32 + lane) * nprobe;
        for (int i = 0; i < nprobe; ++i) {
            const u64 key = in[i];
            if (key <= top[nprobe - 1]) break;  // each list is descending
            ivf_insert(top, nprobe, key);
        }
    }
    int* out = probed + ((i64)b * 32 + lane) * nprobe;
    for (int i = 0; i < nprobe; ++i)
        out[i] = top[i] ? (int)(0xffffffffu - (unsigned)top[i]) : -1;
}

// A warp per entry e of probed[blocks][32][nprobe]: the IVF list of its centroid (CSR:
// ivf_offsets [K + 1], ivf_docs) set in bitmap[q][words], q the query of block e / (32 nprobe).
extern "C" __global__ void __launch_bounds__(128) ivf_mark(
    const int* __restrict__ probed, int entries, int per_block, const int* __restrict__ block_query,
    const i64* __restrict__ ivf_offsets, const unsigned* __restrict__ ivf_docs, int words,
    unsigned* __restrict__ bitmap)
{
    const int e = (int)(((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31;
    if (e >= entries) return;
    const int c = probed[e];
    if (c < 0) return;
    unsigned* bits = bitmap + (i64)block_query[e / per_block] * words;
    for (i64 t = ivf_offsets[c] + lane; t < ivf_offsets[c + 1]; t += 32) {
        const unsigned doc = ivf_docs[t];
        atomicOr(bits + doc / 32, 1u << (doc % 32));
    }
}

__device__ __forceinline__ unsigned ivf_hmax2(unsigned a, unsigned b) {
    unsigned r;
    asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

__device__ __forceinline__ float ivf_half_sum(unsigned w) {
    float lo, hi;
    asm("{ .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h; }"
        : "=f"(lo), "=f"(hi)
        : "r"(w));
    return lo + hi;
}

// Block (x, q), four warps: warp w takes bitmap word 4x + w of query q, documents 32 (4x + w)
// onwards (`all`: every document is a candidate). approx[q][doc] for each of them: NEG_INF
// where the bit is clear, else Σ over the query's blocks and positions of the maximum over the
// document's tokens t of cs[b][aux[t]][p] (positions past the query's rows score 0: their
// query rows are zero).
extern "C" __global__ void __launch_bounds__(128) ivf_interaction(
    const u16* __restrict__ cs, int num_centroids, const int* __restrict__ qblocks,
    const unsigned* __restrict__ bitmap, int all, int words, const unsigned* __restrict__ aux,
    const i64* __restrict__ offsets, int num_docs, float* __restrict__ approx)
{
    const int q = blockIdx.y, lane = threadIdx.x & 31;
    const int w = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (w >= words) return;
    unsigned bits = all ? 0xffffffffu : bitmap[(i64)q * words + w];
    float* out = approx + (i64)q * num_docs;
    const int first = w * 32;
    if (first + lane < num_docs && !(bits >> lane & 1u)) out[first + lane] = NEG_INF;
    const int b0 = qblocks[q], b1 = qblocks[q + 1];
    const unsigned ninf2 = 0xfc00fc00u;  // two f16 -inf
    while (bits) {
        const int doc = first + __ffs(bits) - 1;
        bits &= bits - 1;
        if (doc >= num_docs) break;
        const i64 t0 = offsets[doc], t1 = offsets[doc + 1];
        float total = t0 < t1 ? 0.f : NEG_INF;
        for (int b = b0; b < b1; ++b) {
            unsigned m[16];
#pragma unroll
            for (int i = 0; i < 16; ++i) m[i] = ninf2;
            const u16* table = cs + (i64)b * num_centroids * 32;
            for (i64 t = t0 + lane; t < t1; t += 32) {
                const uint4* row = reinterpret_cast<const uint4*>(table + (i64)aux[t] * 32);
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    const uint4 r = row[v];
                    m[4 * v] = ivf_hmax2(m[4 * v], r.x);
                    m[4 * v + 1] = ivf_hmax2(m[4 * v + 1], r.y);
                    m[4 * v + 2] = ivf_hmax2(m[4 * v + 2], r.z);
                    m[4 * v + 3] = ivf_hmax2(m[4 * v + 3], r.w);
                }
            }
            // Each lane holds the maxima over its tokens; after the butterfly every lane holds
            // them over all the document's tokens, and sums the 32 positions itself.
#pragma unroll
            for (int i = 0; i < 16; ++i)
#pragma unroll
                for (int o = 16; o >= 1; o >>= 1)
                    m[i] = ivf_hmax2(m[i], __shfl_xor_sync(0xffffffffu, m[i], o));
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < 16; ++i) s += ivf_half_sum(m[i]);
            if (t0 < t1) total += s;
        }
        if (lane == 0) out[doc] = total;
    }
}
