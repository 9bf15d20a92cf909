// Top-k of each row of a [rows][n] score matrix, in the library's order: score descending,
// -0 == +0, ties to the lower index, NaN last. Two kernels, so that one query's row is spread
// over the whole GPU instead of one SM:
//
//   topk_segments  grid (rows, segments): the top min(k, segment) of each segment of at most
//                  TOPK_SEGMENT scores, held in registers across the passes of a radix select.
//                  With one segment (n <= TOPK_SEGMENT) this is the answer.
//   topk_merge     grid (rows): the top k of the segments' candidates, on 64-bit keys that
//                  carry the index (unique keys, so ties need no ordering pass).
//   topk_merge_groups  grid (rows, groups): the same for each group of the candidates first,
//                  where they are many (a large k over a long row: the IVF's 4,096 of 8.8M
//                  documents leave 4.4M candidates, which one block took 5.9 ms to merge),
//                  so that the merge too is spread over the GPU; the host repeats it until few
//                  are left for topk_merge.
//
// The global top k lies in the union of the segments' top k (the order is total), so the two
// steps are exact. Scores map to order-preserving 32-bit keys (NaN to 0, the lowest). The host
// sorts the k hits of a row.
#include "common.cuh"

#define TOPK_THREADS 1024
#define TOPK_ITEMS 8
#define TOPK_SEGMENT (TOPK_THREADS * TOPK_ITEMS)

__device__ __forceinline__ unsigned topk_key(float f) {
    unsigned b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;  // NaN: after every number
    if (b == 0x80000000u) b = 0u;                     // -0 ties with +0
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Warp 0: the bin of a 256-bin histogram that holds the take-th largest key (counting from bin
// 255 down), and how many keys lie in the bins above it. Needs 1 <= take <= the total count.
__device__ __forceinline__ void topk_digit(const unsigned* hist, unsigned take, unsigned* s_digit,
                                           unsigned* s_above) {
    const unsigned lane = threadIdx.x & 31u;
    unsigned c[8], sum = 0u;
#pragma unroll
    for (int j = 0; j < 8; ++j) { c[j] = hist[255u - 8u * lane - j]; sum += c[j]; }
    unsigned incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= (unsigned)o) incl += v;
    }
    unsigned above = incl - sum;
    if (above < take && take <= incl) {
        for (int j = 0; j < 8; ++j) {
            if (above + c[j] >= take) { *s_digit = 255u - 8u * lane - j; *s_above = above; break; }
            above += c[j];
        }
    }
}

// Row blockIdx.x, segment blockIdx.y = scores [s * seg, min(n, (s + 1) * seg)), seg <=
// TOPK_SEGMENT. Writes kk = min(k, seg) entries at out + (row * gridDim.y + s) * kk: the segment's
// top min(k, len) (row-local indices; those above the k-th key first, then the ties, each group
// in index order), padded with (-1, NaN), which rank below every real score in topk_merge.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS) topk_segments(
    const float* __restrict__ scores, int n, int seg, int k, int* __restrict__ out_index,
    float* __restrict__ out_score)
{
    __shared__ unsigned hist[256];
    __shared__ unsigned s_digit, s_above;
    __shared__ unsigned warp_sum[TOPK_THREADS / 32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const i64 row = blockIdx.x;
    const int start = blockIdx.y * seg;
    const int len = min(seg, n - start);
    const int kk = min(k, seg);
    const unsigned want = (unsigned)min(k, len);
    const float* src = scores + row * n + start;
    const i64 base = (row * gridDim.y + blockIdx.y) * (i64)kk;
    int* out = out_index + base;
    float* out_s = out_score + base;

    // Thread t holds scores [t * ITEMS, (t + 1) * ITEMS) of the segment: index order is
    // (thread, item) order, which the ordered writes below rely on.
    unsigned key[TOPK_ITEMS];
#pragma unroll
    for (int j = 0; j < TOPK_ITEMS; ++j) {
        const int i = tid * TOPK_ITEMS + j;
        key[j] = i < len ? topk_key(src[i]) : 0u;
    }
    unsigned prefix = 0u, mask = 0u, take = want;
    for (int shift = 24; shift >= 0; shift -= 8) {
        if (tid < 256) hist[tid] = 0u;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TOPK_ITEMS; ++j) {
            if (tid * TOPK_ITEMS + j < len && (key[j] & mask) == prefix)
                atomicAdd(&hist[(key[j] >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (warp == 0) topk_digit(hist, take, &s_digit, &s_above);
        __syncthreads();
        prefix |= s_digit << shift;
        take -= s_above;
        mask |= 255u << shift;
    }
    // prefix is T, the want-th key; `take` keys equal to T join the want - take keys above it.
    // One block-wide scan of (above, equal) counts, packed as 16-bit halves, ranks every
    // selected score in index order.
    unsigned gt = 0u, eq = 0u;
#pragma unroll
    for (int j = 0; j < TOPK_ITEMS; ++j) {
        if (tid * TOPK_ITEMS + j < len) { gt += key[j] > prefix; eq += key[j] == prefix; }
    }
    const unsigned mine = (gt << 16) | eq;
    unsigned incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const unsigned w = warp_sum[lane];
        unsigned wi = w;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned v = __shfl_up_sync(0xffffffffu, wi, o);
            if (lane >= o) wi += v;
        }
        warp_sum[lane] = wi - w;
    }
    __syncthreads();
    const unsigned before = warp_sum[warp] + incl - mine;
    unsigned r_gt = before >> 16, r_eq = before & 0xffffu;
    const unsigned above = want - take;
#pragma unroll
    for (int j = 0; j < TOPK_ITEMS; ++j) {
        const int i = tid * TOPK_ITEMS + j;
        if (i >= len) break;
        if (key[j] > prefix) {
            out[r_gt] = start + i;
            out_s[r_gt] = src[i];
            ++r_gt;
        } else if (key[j] == prefix) {
            if (r_eq < take) {
                out[above + r_eq] = start + i;
                out_s[above + r_eq] = src[i];
            }
            ++r_eq;
        }
    }
    for (int t = (int)want + tid; t < kk; t += TOPK_THREADS) {
        out[t] = -1;
        out_s[t] = __uint_as_float(0x7fffffffu);
    }
}

// The top k of the `m` candidates (index, score) at ci / cs, written to out / out_s in any
// order, by the whole block. Keys are (score key, ~index): unique, so exactly k are >= the
// k-th. Needs 1 <= k <= the number of real (index >= 0) candidates.
__device__ __forceinline__ void topk_merge_block(const int* __restrict__ ci, const float* __restrict__ cs, int m, int k,
                                                 int* __restrict__ out, float* __restrict__ out_s)
{
    __shared__ unsigned hist[256];
    __shared__ unsigned s_digit, s_above, s_slot;
    const int tid = threadIdx.x;
    typedef unsigned long long u64;

    u64 prefix = 0ull, mask = 0ull;
    unsigned take = (unsigned)k;
    for (int shift = 56; shift >= 0; shift -= 8) {
        if (tid < 256) hist[tid] = 0u;
        __syncthreads();
        for (int i = tid; i < m; i += TOPK_THREADS) {
            const u64 key = ((u64)topk_key(cs[i]) << 32) | (unsigned)~ci[i];
            if ((key & mask) == prefix) atomicAdd(&hist[(unsigned)(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (tid < 32) topk_digit(hist, take, &s_digit, &s_above);
        __syncthreads();
        prefix |= (u64)s_digit << shift;
        take -= s_above;
        mask |= 255ull << shift;
    }
    if (tid == 0) s_slot = 0u;
    __syncthreads();
    for (int i = tid; i < m; i += TOPK_THREADS) {
        const u64 key = ((u64)topk_key(cs[i]) << 32) | (unsigned)~ci[i];
        if (key >= prefix) {
            const unsigned slot = atomicAdd(&s_slot, 1u);
            out[slot] = ci[i];
            out_s[slot] = cs[i];
        }
    }
}

// Row blockIdx.x: the top k of its m candidates at row * m, written to out + row * k in any
// order. Needs 1 <= k <= the number of real candidates of each row.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS) topk_merge(
    const int* __restrict__ cand_index, const float* __restrict__ cand_score, int m, int k,
    int* __restrict__ out_index, float* __restrict__ out_score)
{
    const i64 row = blockIdx.x;
    topk_merge_block(cand_index + row * m, cand_score + row * m, m, k, out_index + row * k, out_score + row * k);
}

// Row blockIdx.x, group blockIdx.y: candidates [g * group, (g + 1) * group) of the row's m, of
// which the row's first `real` are real and the rest padding (-1, NaN), as topk_segments leaves
// them (only its last segment pads). Writes k at out + (row * gridDim.y + g) * k: the top k of
// the group's real candidates, or all of them then padding where it has k or fewer, so padding
// again lies only at the end, in the last group's place.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS) topk_merge_groups(
    const int* __restrict__ cand_index, const float* __restrict__ cand_score, int m, int real, int group, int k,
    int* __restrict__ out_index, float* __restrict__ out_score)
{
    const i64 row = blockIdx.x;
    const int first = (int)blockIdx.y * group;  // (m < 2^31: the host checks)
    const int len = max(0, min(group, real - first));
    const i64 at = row * (i64)m + first;
    const i64 base = (row * gridDim.y + blockIdx.y) * (i64)k;
    if (len <= k) {  // uniform across the block
        for (int t = threadIdx.x; t < k; t += TOPK_THREADS) {
            out_index[base + t] = t < len ? cand_index[at + t] : -1;
            out_score[base + t] = t < len ? cand_score[at + t] : __uint_as_float(0x7fffffffu);
        }
        return;
    }
    topk_merge_block(cand_index + at, cand_score + at, len, k, out_index + base, out_score + base);
}
