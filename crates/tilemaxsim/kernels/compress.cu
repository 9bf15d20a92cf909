// Compression on the GPU (src/cuda/compress.rs): the residual codec's k-means and every codec's
// encoder, over tokens read in the corpus's dtype a chunk of rows at a time.
//
// - rows_to_f16_*: rows widened/narrowed to f16 in 32-row blocks (zeros past the last row), the
//   tensor-core operand of the assignment.
// - kmeans_assign_wgmma_d{64,128} (sm_90a): each point's centroid argmax_c <x, c> + bias[c],
//   ties to the lower index: maxsim_wgmma's pipeline (producer warp, mbarrier ring, two consumer
//   warpgroups) with the centroids as one long document and the points as its query blocks; the
//   running maximum keeps its column. kmeans_assign_simple: the same on CUDA cores, any d, any GPU.
//   `bias` holds a value per centroid padded with -inf to a multiple of 128 (padding never wins):
//   -|c|^2 / 2 for the nearest centroid (k-means), zeros for the largest dot product (PLAID).
// - kmeans_accumulate / kmeans_finish: a Lloyd update whose sums are exact (f16 points times 2^24
//   are integers, added as 64-bit integers), so the result does not depend on the order of the
//   atomics: a seed gives the same centroids on every run.
// - residual_encode_*, pq_encode_*, int8_encode_*, fp8_encode_*: the codes, bit-identical to the
//   CPU encoders given the same assignment (IEEE division and rounding spelled out in PTX).
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "tile_producer.cuh"
#include "wgmma.cu"

__device__ __forceinline__ u16 f16_bits(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float f16_value(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ float div_rn(float a, float b) {
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ i64 grid_thread() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 grid_threads() { return (i64)gridDim.x * blockDim.x; }

// dst[i] = f16(src[i]) for i < values, 0 for values <= i < padded (a whole number of 32-row blocks).
template <typename E>
__device__ __forceinline__ void rows_to_f16_impl(const typename E::T* __restrict__ src, i64 values, i64 padded,
                                                 u16* __restrict__ dst) {
    for (i64 i = grid_thread(); i < padded; i += grid_threads()) dst[i] = i < values ? f16_bits(E::load(src + i)) : (u16)0;
}
#define INSTANTIATE_TO_F16(NAME, E)                                                                   \
    extern "C" __global__ void __launch_bounds__(256) NAME(const E::T* src, i64 values, i64 padded, u16* dst) { \
        rows_to_f16_impl<E>(src, values, padded, dst);                                                \
    }
INSTANTIATE_TO_F16(rows_to_f16_f32, F32)
INSTANTIATE_TO_F16(rows_to_f16_f16, F16)
INSTANTIATE_TO_F16(rows_to_f16_bf16, BF16)

// Merge a (value, index) candidate into the running best: larger value, or the lower index on a tie.
__device__ __forceinline__ void argmax_merge(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Fold a half tile's accumulators (rows g and g + 8 of the warp's 16, centroid columns
// col0 + 8j + 2c and + 1) into the rows' running argmax, with each column's bias added, maximum
// first: each row's largest value of the half tile, and its column looked for only when it
// beats the running best (a few times a row over K centroids), so the common case costs an add
// and a max a value. Ties keep the lower column (the earlier tile, then the lower column).
__device__ __forceinline__ void argmax_fold_half(float (&bv)[2], int (&bi)[2], float (&d)[32],
                                                 const float* __restrict__ bias, int col0, int c) {
    float m0 = NEG_INF, m1 = NEG_INF;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float2 b = __ldg((const float2*)(bias + col0 + 8 * j + 2 * c));
        d[4 * j] += b.x;
        d[4 * j + 1] += b.y;
        d[4 * j + 2] += b.x;
        d[4 * j + 3] += b.y;
        m0 = fmaxf(m0, fmaxf(d[4 * j], d[4 * j + 1]));
        m1 = fmaxf(m1, fmaxf(d[4 * j + 2], d[4 * j + 3]));
    }
    if (m0 > bv[0]) {
        int at = 0;
#pragma unroll
        for (int j = 7; j >= 0; --j) {
            if (d[4 * j + 1] == m0) at = 8 * j + 1;
            if (d[4 * j] == m0) at = 8 * j;
        }
        bv[0] = m0;
        bi[0] = col0 + at + 2 * c;
    }
    if (m1 > bv[1]) {
        int at = 0;
#pragma unroll
        for (int j = 7; j >= 0; --j) {
            if (d[4 * j + 3] == m1) at = 8 * j + 1;
            if (d[4 * j + 2] == m1) at = 8 * j;
        }
        bv[1] = m1;
        bi[1] = col0 + at + 2 * c;
    }
}
#endif

// `pts`: the points as f16 rows in 32-row blocks (`num_points` real), `cents`: the centroids as
// f16 rows, `cent_offsets` = {0, K} (the one document's bounds), `bias`: K values padded with
// -inf to a multiple of WG_BN; out[p] = the point's centroid.
template <int KCH>
__device__ __forceinline__ void kmeans_assign_wgmma_impl(const u16* __restrict__ pts, i64 num_points,
                                                         const u16* __restrict__ cents, const i64* __restrict__ cent_offsets,
                                                         const float* __restrict__ bias, unsigned* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int D = KCH * 32;
    constexpr int KS = D / 16;
    constexpr int S = WG_STAGES;
    constexpr unsigned TILE_BYTES = WG_BN * D * 2;
    extern __shared__ __attribute__((aligned(1024))) unsigned char km_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, warp = threadIdx.x >> 5;
    const int num_qblocks = (int)((num_points + 31) / 32);
    const int qtiles = (num_qblocks + WG_QBLOCKS - 1) / WG_QBLOCKS;
    const WgRing ring = wg_ring<D, S>(km_smem, 33, false);
    if (warp == WG_THREADS / 32) {  // the producer warp
        wg_copy_tiles<D, S>(ring, cents, cent_offsets, nullptr, 1, qtiles, lane);
        return;
    }

    unsigned a[2][KS][4];
    float acc[32];
    float bv[2][2];
    int bi[2][2];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
    bv[0][0] = bv[0][1] = bv[1][0] = bv[1][1] = NEG_INF;
    bi[0][0] = bi[0][1] = bi[1][0] = bi[1][1] = 0;
    int cur_qtile = -1, rows = 0, qblock = 0, slot = 0, tok0 = 0;
    unsigned phase = 0;
    bool live = false;
    while (true) {
        mbar_wait(ring.full0 + 8u * slot, phase);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        const TileMeta m = ring.meta[slot];
        if (m.pair < 0) break;
        if (m.qtile != cur_qtile) {
            cur_qtile = m.qtile;
            qblock = m.qtile * WG_QBLOCKS + warp;
            const i64 left = num_points - (i64)qblock * 32;
            rows = left <= 0 ? 0 : left >= 32 ? 32 : (int)left;
            live = m.qtile * WG_QBLOCKS + (warp & ~3) < num_qblocks;
            if (rows > 0) {
                qblock_fragments<D>(a, pts + (i64)qblock * 32 * D, g, c);
            } else {
#pragma unroll
                for (int mb = 0; mb < 2; ++mb)
#pragma unroll
                    for (int kk = 0; kk < KS; ++kk) a[mb][kk][0] = a[mb][kk][1] = a[mb][kk][2] = a[mb][kk][3] = 0u;
            }
        }
        // One accumulator set, each chain waited for and folded before the next is issued:
        // the other warpgroup's chains keep the tensor cores busy meanwhile (a second set, as
        // maxsim_wgmma keeps, spills: the argmax needs its columns' indices and biases too).
        if (live) {
            const unsigned tile0 = ring.tiles + (unsigned)slot * TILE_BYTES;
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int mb = 0; mb < 2; ++mb) {
                    wg_chain<false, KS>(acc, a[mb], tile0, h);
                    wg_wait<0>(acc);
                    argmax_fold_half(bv[mb], bi[mb], acc, bias, tok0 + h * (WG_BN / 2), c);
                }
        }
        mbar_arrive(ring.empty0 + 8u * slot);
        if (m.last) {  // every centroid seen: the block's rows are assigned
#pragma unroll
            for (int mb = 0; mb < 2; ++mb)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float v = bv[mb][h];
                    int i = bi[mb][h];
                    for (int o = 1; o <= 2; o <<= 1) {
                        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
                        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
                        argmax_merge(v, i, ov, oi);
                    }
                    const int row = mb * 16 + g + 8 * h;
                    if (c == 0 && row < rows) out[(i64)qblock * 32 + row] = (unsigned)i;
                    bv[mb][h] = NEG_INF;
                    bi[mb][h] = 0;
                }
            tok0 = 0;
        } else {
            tok0 += WG_BN;
        }
        if (++slot == S) {
            slot = 0;
            phase ^= 1u;
        }
    }
#endif
}

#define INSTANTIATE_ASSIGN(NAME, KCH)                                                                  \
    extern "C" __global__ void __launch_bounds__(WG_BLOCK_THREADS, 1) NAME(                           \
        const u16* pts, i64 num_points, const u16* cents, const i64* cent_offsets, const float* bias,   \
        unsigned* out) {                                                                                \
        kmeans_assign_wgmma_impl<KCH>(pts, num_points, cents, cent_offsets, bias, out);                 \
    }
INSTANTIATE_ASSIGN(kmeans_assign_wgmma_d64, 2)
INSTANTIATE_ASSIGN(kmeans_assign_wgmma_d128, 4)

// The same assignment on CUDA cores, for any d and any GPU: a block takes 64 points (threads
// 16 x 16, each 4 points x 4 centroids), walks the centroids (f32 rows) 64 at a time and d in
// chunks of 16 through shared memory; each thread keeps its points' best, and the 16 threads
// sharing points merge theirs at the end.
#define SIMPLE_P 64
#define SIMPLE_K 16
extern "C" __global__ void __launch_bounds__(256) kmeans_assign_simple(
    const u16* __restrict__ pts, i64 num_points, int dim, const float* __restrict__ cents, int k,
    const float* __restrict__ bias, unsigned* __restrict__ out)
{
    __shared__ float sp[SIMPLE_K][SIMPLE_P];
    __shared__ __attribute__((aligned(16))) float sc[SIMPLE_K][SIMPLE_P];
    __shared__ float rv[SIMPLE_P][17];
    __shared__ int ri[SIMPLE_P][17];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const i64 p0 = (i64)blockIdx.x * SIMPLE_P;
    float bv[4] = {NEG_INF, NEG_INF, NEG_INF, NEG_INF};
    int bi[4] = {0, 0, 0, 0};
    for (int c0 = 0; c0 < k; c0 += SIMPLE_P) {
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
        for (int k0 = 0; k0 < dim; k0 += SIMPLE_K) {
            __syncthreads();
            for (int e = threadIdx.x; e < SIMPLE_K * SIMPLE_P; e += 256) {
                const int r = e / SIMPLE_K, kk = e % SIMPLE_K;
                const i64 p = p0 + r;
                const int cc = c0 + r;
                sp[kk][r] = (p < num_points && k0 + kk < dim) ? f16_value(pts[p * dim + k0 + kk]) : 0.f;
                sc[kk][r] = (cc < k && k0 + kk < dim) ? cents[(i64)cc * dim + k0 + kk] : 0.f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < SIMPLE_K; ++kk) {
                float av[4], cv[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) av[i] = sp[kk][ty * 4 + i];
#pragma unroll
                for (int j = 0; j < 4; ++j) cv[j] = sc[kk][tx * 4 + j];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * cv[j];
            }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = c0 + tx * 4 + j;
            if (col < k) {
                const float b = bias[col];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float v = acc[i][j] + b;
                    if (v > bv[i]) { bv[i] = v; bi[i] = col; }
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        rv[ty * 4 + i][tx] = bv[i];
        ri[ty * 4 + i][tx] = bi[i];
    }
    __syncthreads();
    if (threadIdx.x < SIMPLE_P) {
        const int r = threadIdx.x;
        float v = rv[r][0];
        int i = ri[r][0];
        for (int t = 1; t < 16; ++t) argmax_merge(v, i, rv[r][t], ri[r][t]);
        if (p0 + r < num_points) out[p0 + r] = (unsigned)i;
    }
}

// sums[c][j] += x[j] * 2^24 and counts[c] += 1 for each point x of centroid c = ids[p]: f16 values
// times 2^24 are integers, so the 64-bit sums are exact in any order.
extern "C" __global__ void __launch_bounds__(256) kmeans_accumulate(
    const u16* __restrict__ pts, const unsigned* __restrict__ ids, i64 num_points, int dim,
    unsigned long long* __restrict__ sums, unsigned* __restrict__ counts)
{
    for (i64 e = grid_thread(); e < num_points * dim; e += grid_threads()) {
        const i64 p = e / dim;
        const int j = (int)(e - p * dim);
        const unsigned c = ids[p];
        const long long v = (long long)(f16_value(pts[e]) * 16777216.f);
        atomicAdd(&sums[(i64)c * dim + j], (unsigned long long)v);
        if (j == 0) atomicAdd(&counts[c], 1u);
    }
}

// One block per centroid: the mean of its points (a centroid without points keeps its place),
// its f16 row and its bias -|c|^2 / 2 (summed in a fixed order); the sums and count are zeroed
// for the next iteration.
extern "C" __global__ void __launch_bounds__(128) kmeans_finish(
    unsigned long long* __restrict__ sums, unsigned* __restrict__ counts, int dim, float* __restrict__ cents,
    u16* __restrict__ cents16, float* __restrict__ half_neg)
{
    __shared__ float part[128];
    const int c = blockIdx.x;
    const unsigned n = counts[c];
    float sq = 0.f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        const i64 at = (i64)c * dim + j;
        float x = cents[at];
        if (n > 0) x = (float)((double)(long long)sums[at] / 16777216.0 / (double)n);
        cents[at] = x;
        cents16[at] = f16_bits(x);
        sq += x * x;
        sums[at] = 0ull;
    }
    part[threadIdx.x] = sq;
    __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        half_neg[c] = -0.5f * part[0];
        counts[c] = 0u;
    }
}

// The residual codec's codes of `n` tokens (one warp a token): bucket = the number of cutoffs
// strictly below token - centroid[ids[t]], packed most significant bit first as np.packbits
// (dimension k's bucket bit b at stream bit k * nbits + b). A token whose norm is off 1 by more
// than 0.02 (or not finite) lowers *first_bad to row0 + t.
template <typename E>
__device__ __forceinline__ void residual_encode_impl(const typename E::T* __restrict__ tokens, i64 n, int dim,
                                                     const unsigned* __restrict__ ids, const u16* __restrict__ cents,
                                                     const float* __restrict__ cutoffs, int nbits, i64 row0,
                                                     unsigned char* __restrict__ out, unsigned long long* __restrict__ first_bad) {
    const int lane = threadIdx.x & 31;
    const int buckets = 1 << nbits, per = 8 / nbits, rb = (dim * nbits + 7) / 8;
    float cut[15];
#pragma unroll
    for (int i = 0; i < 15; ++i) cut[i] = i < buckets - 1 ? cutoffs[i] : 0.f;
    for (i64 t = grid_thread() >> 5; t < n; t += grid_threads() >> 5) {
        const typename E::T* x = tokens + t * dim;
        const u16* cen = cents + (i64)ids[t] * dim;
        float sq = 0.f;
        for (int j = lane; j < rb; j += 32) {
            unsigned byte = 0;
            for (int s = 0; s < per; ++s) {
                const int k = j * per + s;
                if (k >= dim) break;
                const float v = E::load(x + k);
                sq += v * v;
                const float r = v - f16_value(cen[k]);
                int b = 0;
#pragma unroll
                for (int i = 0; i < 15; ++i) b += (i < buckets - 1 && cut[i] < r) ? 1 : 0;
                for (int bit = 0; bit < nbits; ++bit)
                    if ((b >> bit) & 1) byte |= 0x80u >> (s * nbits + bit);
            }
            out[t * rb + j] = (unsigned char)byte;
        }
        sq = warp_sum(sq);
        float norm;
        asm("sqrt.rn.f32 %0, %1;" : "=f"(norm) : "f"(sq));
        const float off = norm - 1.f;
        if (lane == 0 && !(off <= 0.02f && off >= -0.02f)) atomicMin(first_bad, (unsigned long long)(row0 + t));
    }
}
#define INSTANTIATE_RESIDUAL_ENC(NAME, E)                                                                     \
    extern "C" __global__ void __launch_bounds__(256) NAME(const E::T* tokens, i64 n, int dim, const unsigned* ids, \
        const u16* cents, const float* cutoffs, int nbits, i64 row0, unsigned char* out, unsigned long long* first_bad) { \
        residual_encode_impl<E>(tokens, n, dim, ids, cents, cutoffs, nbits, row0, out, first_bad);              \
    }
INSTANTIATE_RESIDUAL_ENC(residual_encode_f32, F32)
INSTANTIATE_RESIDUAL_ENC(residual_encode_f16, F16)
INSTANTIATE_RESIDUAL_ENC(residual_encode_bf16, BF16)

// Product-quantization codes (one warp per token and sub-space, grid.y = sub-spaces): the
// nearest of the sub-space's 256 centroids by <x, c> - |c|^2 / 2, ties to the lower index.
// `books` [M, 256, sub] and `half_neg` [M, 256], f32; shared memory holds the sub-space's book
// (rows padded to sub + 1 floats: no bank conflicts) and its biases.
template <typename E>
__device__ __forceinline__ void pq_encode_impl(const typename E::T* __restrict__ tokens, i64 n, int dim, int m,
                                               const float* __restrict__ books, const float* __restrict__ half_neg,
                                               unsigned char* __restrict__ out) {
    extern __shared__ float pq_smem[];
    const int s = blockIdx.y, sub = dim / m, pitch = sub + 1, lane = threadIdx.x & 31;
    float* book = pq_smem;
    float* bias = pq_smem + 256 * pitch;
    for (int e = threadIdx.x; e < 256 * sub; e += blockDim.x) book[(e / sub) * pitch + e % sub] = books[(i64)s * 256 * sub + e];
    for (int e = threadIdx.x; e < 256; e += blockDim.x) bias[e] = half_neg[s * 256 + e];
    __syncthreads();
    for (i64 t = grid_thread() >> 5; t < n; t += grid_threads() >> 5) {
        const typename E::T* x = tokens + t * dim + s * sub;
        float dots[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) dots[i] = 0.f;
        for (int j = 0; j < sub; ++j) {
            const float v = E::load(x + j);
#pragma unroll
            for (int i = 0; i < 8; ++i) dots[i] += v * book[(lane + 32 * i) * pitch + j];
        }
        float v = NEG_INF;
        int best = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float w = dots[i] + bias[lane + 32 * i];
            if (w > v) { v = w; best = lane + 32 * i; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, v, o);
            const int oi = __shfl_xor_sync(0xffffffffu, best, o);
            argmax_merge(v, best, ov, oi);
        }
        if (lane == 0) out[t * m + s] = (unsigned char)best;
    }
}
#define INSTANTIATE_PQ_ENC(NAME, E)                                                                    \
    extern "C" __global__ void __launch_bounds__(256) NAME(const E::T* tokens, i64 n, int dim, int m,   \
        const float* books, const float* half_neg, unsigned char* out) {                               \
        pq_encode_impl<E>(tokens, n, dim, m, books, half_neg, out);                                    \
    }
INSTANTIATE_PQ_ENC(pq_encode_f32, F32)
INSTANTIATE_PQ_ENC(pq_encode_f16, F16)
INSTANTIATE_PQ_ENC(pq_encode_bf16, BF16)

// e4m3fn of y (|y| <= 448), rounded to nearest even, as the float8 crate (and cuda_fp8.hpp).
__device__ __forceinline__ unsigned e4m3_rne(float y) {
    const unsigned u = __float_as_uint(y), sign = (u >> 24) & 0x80u;
    const float a = __uint_as_float(u & 0x7FFFFFFFu);
    unsigned code;
    if (a < 0.015625f) {  // below the smallest normal 2^-6: multiples of 2^-9
        float m;
        asm("cvt.rni.f32.f32 %0, %1;" : "=f"(m) : "f"(a * 512.f));
        code = (unsigned)m;  // 8 is the smallest normal's code
    } else {
        const unsigned b = __float_as_uint(a);
        code = ((b + 0x7FFFFu + ((b >> 20) & 1u)) >> 20) - (120u << 3);
    }
    return code | sign;
}

// int8 (FP8 = false) or fp8 e4m3 (FP8 = true) codes with one scale per token (one warp a token):
// scale = max|x| / 127 (448), code = round(x / scale) (half away from zero; e4m3: to nearest
// even, clamped to +-448); a zero token gets zero codes and scale 0. The scales go to `scales`.
template <typename E, bool FP8>
__device__ __forceinline__ void scaled_encode_impl(const typename E::T* __restrict__ tokens, i64 n, int dim,
                                                   unsigned char* __restrict__ out, float* __restrict__ scales) {
    const int lane = threadIdx.x & 31;
    const float top = FP8 ? 448.f : 127.f;
    for (i64 t = grid_thread() >> 5; t < n; t += grid_threads() >> 5) {
        const typename E::T* x = tokens + t * dim;
        float amax = 0.f;
        for (int k = lane; k < dim; k += 32) amax = fmaxf(amax, fabsf(E::load(x + k)));
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        const float scale = amax == 0.f ? 0.f : div_rn(amax, top);
        for (int k = lane; k < dim; k += 32) {
            unsigned code = 0;
            if (scale != 0.f) {
                float y = div_rn(E::load(x + k), scale);
                y = fminf(fmaxf(y, -top), top);
                if constexpr (FP8) {
                    code = e4m3_rne(y);
                } else {
                    float r;
                    asm("cvt.rzi.f32.f32 %0, %1;" : "=f"(r) : "f"(y));
                    const float frac = y - r;
                    if (frac >= 0.5f) r += 1.f;
                    else if (frac <= -0.5f) r -= 1.f;
                    code = (unsigned)(int)r & 0xFFu;
                }
            }
            out[t * dim + k] = (unsigned char)code;
        }
        if (lane == 0) scales[t] = scale;
    }
}
#define INSTANTIATE_SCALED_ENC(NAME, E, FP8)                                                           \
    extern "C" __global__ void __launch_bounds__(256) NAME(const E::T* tokens, i64 n, int dim,          \
        unsigned char* out, float* scales) {                                                           \
        scaled_encode_impl<E, FP8>(tokens, n, dim, out, scales);                                       \
    }
INSTANTIATE_SCALED_ENC(int8_encode_f32, F32, false)
INSTANTIATE_SCALED_ENC(int8_encode_f16, F16, false)
INSTANTIATE_SCALED_ENC(int8_encode_bf16, BF16, false)
INSTANTIATE_SCALED_ENC(fp8_encode_f32, F32, true)
INSTANTIATE_SCALED_ENC(fp8_encode_f16, F16, true)
INSTANTIATE_SCALED_ENC(fp8_encode_bf16, BF16, true)
