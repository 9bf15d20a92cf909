// IVF search on the GPU: PLAID's candidate generation and centroid interaction, on the
// per-call centroid scores of the residual kernels (`codec_centroid_scores`: cs[b][k][p], f16,
// every centroid k against the 32 row positions p of query block b). Four kernels:
//
//   ivf_probe_pP     grid (chunk groups, blocks): each warp takes a range of a few hundred
//                    centroids and each lane (a row position) keeps its nprobe best in that
//                    range, in registers (P >= nprobe: 8, 16, 32 or 64);
//   ivf_probe_merge_pP  grid (list groups, blocks): each lane merges 32 of its position's lists
//                    into one, step by step (the host repeats it), the last step into its nprobe
//                    best centroids (-1 for positions past the query's rows);
//   ivf_mark         warps per probed centroid: its IVF list set in the query's bitmap of
//                    documents;
//   ivf_interaction  a warp per 32 documents (one bitmap word): each candidate's approximate
//                    score Σ_i max_t cs[id_t][i] (NEG_INF for the others), a half warp a
//                    candidate, its lanes taking two positions each over the tokens.
//
// Order: score descending, ties to the lower centroid (64-bit keys: the score's ordered bits,
// then the inverted id), as the CPU's probe orders them. Queries longer than 32 rows span
// several blocks: `qblocks[q] .. qblocks[q + 1]`; their blocks' interactions add.
#include "common.cuh"

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

// Insert `key` into the descending list `top` when it beats the last entry: unrolled, so the
// list stays in registers (P is a compile-time size; a dynamic index would put it in local
// memory), and each entry computed from the old list alone (not a chain of P selects).
template <int P>
__device__ __forceinline__ void ivf_insert(u64 (&top)[P], u64 key) {
    if (key <= top[P - 1]) return;
#pragma unroll
    for (int i = P - 1; i > 0; --i)
        top[i] = key > top[i] ? (key > top[i - 1] ? top[i - 1] : key) : top[i];
    top[0] = key > top[0] ? key : top[0];
}

// The query row that position p of a block holds (`codec_centroid_scores`' order).
__device__ __forceinline__ int ivf_row(int p) {
    const int cq = p / 8, mt = (p / 4) % 2, j = p % 4;
    return mt * 16 + 2 * cq + (j & 1) + 8 * (j >> 1);
}

// Block (x, b), four warps: warp w takes chunk c = 4x + w, centroids [c per, (c + 1) per) of
// the K, and writes each lane's nprobe best keys to part[b][c][lane][nprobe] (0: empty). P is
// the list's size (nprobe <= P: the top nprobe are the top P's first), the loads eight at a time.
template <int P>
__device__ __forceinline__ void ivf_probe_body(const u16* __restrict__ cs, const int* __restrict__ rows,
                                               int num_centroids, int nprobe, int per, int chunks,
                                               u64* __restrict__ part)
{
    const int b = blockIdx.y, lane = threadIdx.x & 31;
    const int chunk = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (chunk >= chunks) return;
    u64 top[P];
#pragma unroll
    for (int i = 0; i < P; ++i) top[i] = 0;
    if (ivf_row(lane) < rows[b]) {
        const int k0 = chunk * per, k1 = min(num_centroids, k0 + per);
        const u16* col = cs + (i64)b * num_centroids * 32 + lane;
        int k = k0;
        for (; k + 8 <= k1; k += 8) {
            u16 v[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = col[(i64)(k + j) * 32];
            u64 key[8], best = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                key[j] = ivf_key(v[j], k + j);
                best = max(best, key[j]);
            }
            if (best <= top[P - 1]) continue;  // most batches, once the list fills
#pragma unroll 1
            for (int j = 0; j < 8; ++j) ivf_insert<P>(top, key[j]);
        }
        for (; k < k1; ++k) ivf_insert<P>(top, ivf_key(col[(i64)k * 32], k));
    }
    u64* out = part + (((i64)b * chunks + chunk) * 32 + lane) * nprobe;
#pragma unroll
    for (int i = 0; i < P; ++i)
        if (i < nprobe) out[i] = top[i];
}

// Block (x, b), four warps: warp w merges group g = 4x + w, lists [g fan, (g + 1) fan) of the
// `chunks` in part[b][chunks][32][nprobe], lane by lane, into out[b][groups][32][nprobe]; with
// one group (the last step) into probed[b][32][nprobe] instead: centroid ids, best first (-1
// where the position holds no query row).
template <int P>
__device__ __forceinline__ void ivf_probe_merge_body(const u64* __restrict__ part, int nprobe, int chunks, int fan,
                                                     u64* __restrict__ out, int* __restrict__ probed)
{
    const int b = blockIdx.y, lane = threadIdx.x & 31;
    const int g = blockIdx.x * 4 + (threadIdx.x >> 5), groups = (chunks + fan - 1) / fan;
    if (g >= groups) return;
    u64 top[P];
#pragma unroll
    for (int i = 0; i < P; ++i) top[i] = 0;
    for (int c = g * fan; c < min(chunks, (g + 1) * fan); ++c) {
        const u64* in = part + (((i64)b * chunks + c) * 32 + lane) * nprobe;
        for (int i = 0; i < nprobe; ++i) {
            const u64 key = in[i];
            if (key <= top[P - 1]) break;  // each list is descending
            ivf_insert<P>(top, key);
        }
    }
    if (groups == 1) {
        int* o = probed + ((i64)b * 32 + lane) * nprobe;
#pragma unroll
        for (int i = 0; i < P; ++i)
            if (i < nprobe) o[i] = top[i] ? (int)(0xffffffffu - (unsigned)top[i]) : -1;
    } else {
        u64* o = out + (((i64)b * groups + g) * 32 + lane) * nprobe;
#pragma unroll
        for (int i = 0; i < P; ++i)
            if (i < nprobe) o[i] = top[i];
    }
}

#define IVF_PROBE_KERNELS(P)                                                                          \
    extern "C" __global__ void __launch_bounds__(128) ivf_probe_p##P(                                 \
        const u16* __restrict__ cs, const int* __restrict__ rows, int num_centroids, int nprobe, int per, \
        int chunks, u64* __restrict__ part)                                                           \
    {                                                                                                 \
        ivf_probe_body<P>(cs, rows, num_centroids, nprobe, per, chunks, part);                        \
    }                                                                                                 \
    extern "C" __global__ void __launch_bounds__(128) ivf_probe_merge_p##P(                           \
        const u64* __restrict__ part, int nprobe, int chunks, int fan, u64* __restrict__ out,         \
        int* __restrict__ probed)                                                                     \
    {                                                                                                 \
        ivf_probe_merge_body<P>(part, nprobe, chunks, fan, out, probed);                              \
    }
IVF_PROBE_KERNELS(8)
IVF_PROBE_KERNELS(16)
IVF_PROBE_KERNELS(32)
IVF_PROBE_KERNELS(64)

// `split` warps per entry e of probed[blocks][32][nprobe], warp s of them taking every
// split-th 32 of the IVF list of e's centroid (CSR: ivf_offsets [K + 1], ivf_docs; the host
// makes `split` such that the longest list is a few dozen steps a warp): its documents set in
// bitmap[q][words], q the query of block e / (32 nprobe).
extern "C" __global__ void __launch_bounds__(128) ivf_mark(
    const int* __restrict__ probed, int entries, int per_block, int split, const int* __restrict__ block_query,
    const i64* __restrict__ ivf_offsets, const unsigned* __restrict__ ivf_docs, int words,
    unsigned* __restrict__ bitmap)
{
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int e = (int)(warp / split), s = (int)(warp % split);
    const int lane = threadIdx.x & 31;
    if (e >= entries) return;
    const int c = probed[e];
    if (c < 0) return;
    unsigned* bits = bitmap + (i64)block_query[e / per_block] * words;
    const i64 end = ivf_offsets[c + 1];
    for (i64 t = ivf_offsets[c] + (i64)s * 32 + lane; t < end; t += (i64)split * 32) {
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
// query rows are zero). Each half warp takes a candidate (the two halves every other one of the
// word's), lane l of it positions 2l and 2l + 1: per token one 4-byte load of the 64-byte
// row and one max, so no reduction of maxima across lanes. The 16 lanes' sums are added in
// position order (the same bits as any other order of loads: maxima are exact).
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
    const int half = lane >> 4, l = lane & 15;
    const unsigned hmask = 0xffffu << (16 * half);
    const unsigned ninf2 = 0xfc00fc00u;  // two f16 -inf
    // The second half drops the lowest candidate: each half then takes the lowest of what is
    // left and drops two a step.
    if (half) bits &= bits - 1;
    while (bits) {
        const int doc = first + __ffs(bits) - 1;
        bits &= bits - 1;
        bits &= bits - 1;
        if (doc >= num_docs) break;
        const i64 t0 = offsets[doc], t1 = offsets[doc + 1];
        float total = t0 < t1 ? 0.f : NEG_INF;
        for (int b = b0; b < b1; ++b) {
            const unsigned* table = reinterpret_cast<const unsigned*>(cs + (i64)b * num_centroids * 32) + l;
            unsigned m = ninf2;
            for (i64 t = t0; t < t1; t += 16) {
                const int n = (int)min((i64)16, t1 - t);
                const unsigned mine = l < n ? aux[t + l] : 0u;
                int i = 0;
                for (; i + 4 <= n; i += 4) {
                    unsigned r[4];
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        const unsigned id = __shfl_sync(hmask, mine, (half << 4) | (i + u));
                        r[u] = table[(i64)id * 16];
                    }
#pragma unroll
                    for (int u = 0; u < 4; ++u) m = ivf_hmax2(m, r[u]);
                }
                for (; i < n; ++i) {
                    const unsigned id = __shfl_sync(hmask, mine, (half << 4) | i);
                    m = ivf_hmax2(m, table[(i64)id * 16]);
                }
            }
            const float mine = ivf_half_sum(m);
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < 16; ++i) s += __shfl_sync(hmask, mine, (half << 4) | i);
            if (t0 < t1) total += s;
        }
        if (l == 0) out[doc] = total;
    }
}
