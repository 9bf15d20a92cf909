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
//   ivf_interaction  a warp per 64 documents (two bitmap words): each candidate's approximate
//                    score Σ_i max_t cs[id_t][i] (NEG_INF for the others), a quarter warp a
//                    candidate, its lanes taking four positions each over the tokens.
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

// Block (x, q), four warps: warp w takes bitmap words 2(4x + w) and the next of query q, the 64
// documents from 64 (4x + w) (`all`: every document is a candidate). approx[q][doc] for each of
// them: NEG_INF where the bit is clear, else Σ over the query's blocks and positions of the
// maximum over the document's tokens t of cs[b][aux[t]][p] (positions past the query's rows
// score 0: their query rows are zero). Each quarter warp takes a candidate (quarter g the g-th
// of the two words' candidates, then every fourth), lane s of it positions 4s .. 4s + 3: per
// token one 8-byte load of the 64-byte row and two maxima, so no reduction of maxima across
// lanes. Two words and quarters, not one word and halves: a word holds one or two candidates
// at MS MARCO shape, and the halves left lanes idle (ncu: 19.6 threads of 32 active).
// The position pairs' sums are added in position order (the same bits as any other order of
// loads: maxima are exact). Ten blocks an SM at least: 2026-11-29g's call 2 had the device's
// compiler give a kernel of this kind 96 registers and 31% occupancy where ptxas here gave 48.
extern "C" __global__ void __launch_bounds__(128, 10) ivf_interaction(
    const u16* __restrict__ cs, int num_centroids, const int* __restrict__ qblocks,
    const unsigned* __restrict__ bitmap, int all, int words, const unsigned* __restrict__ aux,
    const i64* __restrict__ offsets, int num_docs, float* __restrict__ approx)
{
    const int q = blockIdx.y, lane = threadIdx.x & 31;
    const int w = (blockIdx.x * 4 + (threadIdx.x >> 5)) * 2;
    if (w >= words) return;
    const unsigned* row = bitmap + (i64)q * words;
    const unsigned lo = all ? 0xffffffffu : row[w];
    const unsigned hi = w + 1 >= words ? 0u : all ? 0xffffffffu : row[w + 1];
    float* out = approx + (i64)q * num_docs;
    const int first = w * 32;
    if (first + lane < num_docs && !(lo >> lane & 1u)) out[first + lane] = NEG_INF;
    if (first + 32 + lane < num_docs && !(hi >> lane & 1u)) out[first + 32 + lane] = NEG_INF;
    const int b0 = qblocks[q], b1 = qblocks[q + 1];
    const int g = lane >> 3, s = lane & 7;
    const unsigned gmask = 0xffu << (8 * g);
    const unsigned ninf2 = 0xfc00fc00u;  // two f16 -inf
    // Quarter g drops the g lowest candidates, then takes the lowest of what is left and drops
    // four a step.
    u64 bits = (u64)hi << 32 | lo;
    for (int i = 0; i < g; ++i) bits &= bits - 1;
    while (bits) {
        const int doc = first + __ffsll((long long)bits) - 1;
#pragma unroll
        for (int i = 0; i < 4; ++i) bits &= bits - 1;
        if (doc >= num_docs) break;
        const i64 t0 = offsets[doc], t1 = offsets[doc + 1];
        float total = t0 < t1 ? 0.f : NEG_INF;
        for (int b = b0; b < b1; ++b) {
            const uint2* table = reinterpret_cast<const uint2*>(cs + (i64)b * num_centroids * 32) + s;
            unsigned mx = ninf2, my = ninf2;
            for (i64 t = t0; t < t1; t += 8) {
                const int n = (int)min((i64)8, t1 - t);
                const unsigned mine = s < n ? aux[t + s] : 0u;
                // Eight rows in flight; past n a load repeats token 0's row (a maximum is the
                // same with a token twice), so no load waits on a select.
                uint2 r[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    const unsigned id = __shfl_sync(gmask, mine, (g << 3) | (u < n ? u : 0));
                    r[u] = table[(i64)id * 8];
                }
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    mx = ivf_hmax2(mx, r[u].x);
                    my = ivf_hmax2(my, r[u].y);
                }
            }
            // Pairs 2s and 2s + 1, added pair by pair in position order.
            const float a = ivf_half_sum(mx), c = ivf_half_sum(my);
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                sum += __shfl_sync(gmask, a, (g << 3) | i);
                sum += __shfl_sync(gmask, c, (g << 3) | i);
            }
            if (t0 < t1) total += sum;
        }
        if (s == 0) out[doc] = total;
    }
}
