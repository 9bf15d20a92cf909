// codec_tables.cu: what the fused codec kernels read beside the codes, made per upload or per
// call: the residual's centroid scores (`codec_centroid_scores`), inverse norms
// (`residual_inv_norms`) and pair table from device weights (`residual_pair_table`), the
// queries packed into 32-row blocks (`codec_pack_queries`), and decoded f32 tokens where no
// fused kernel is built (`codec_decode_f32`).
#include "codec.cu"

// The centroid part of the residual kernels, per call: cs[b][k][p] = ⟨q_b[row(p)], centroid k⟩
// in f16 for every 32-row query block b (f32 rows `q32` [blocks][32][d]) and centroid k (f16
// [K][d]), positions p in the order the kernel's thread c reads them: p = c·8 + mt·4 + j is
// row mt·16 + 2c + (j & 1) + 8·(j >> 1). Block (x, b): eight warps, one centroid each at a
// time (the grid strides over the K: the host launches about what stays resident, so the
// query rows are read into shared memory once a block, not once every eight centroids), a
// lane per row. The rows are padded to d + 4 floats: a quarter warp's 16-byte loads of its
// eight consecutive rows fall on distinct banks (lanes taking rows in position order put four
// on one bank: measured 1.7x slower than one scalar load a dimension). Where d is a multiple of 8 and the centroids lie on 16
// bytes, eight dimensions a step (one broadcast 16-byte load of the centroid, two of the row);
// the sum runs over the dimensions in order either way, so both paths give the same bits.
extern "C" __global__ void __launch_bounds__(256) codec_centroid_scores(
    const float* __restrict__ q32, const u16* __restrict__ centroids, int num_centroids, int dim,
    u16* __restrict__ cs)
{
    extern __shared__ __align__(16) float qs[];  // [32][dim + 4]
    const int b = blockIdx.y, pitch = dim + 4;
    for (int i = threadIdx.x; i < 32 * dim; i += blockDim.x)
        qs[(i / dim) * pitch + i % dim] = q32[(i64)b * 32 * dim + i];
    __syncthreads();
    // Lane r takes row r (rows in order: a quarter warp's rows are eight consecutive ones, on
    // distinct banks) and writes position p, the one that holds row r.
    const int row = threadIdx.x & 31;
    const int rem = row & 15, j = (rem & 1) | ((rem >> 3) << 1);
    const int pos = ((rem & 7) >> 1) * 8 + (row >> 4) * 4 + j;
    const float* qr = qs + row * pitch;
    const bool wide = (dim & 7) == 0 && ((size_t)centroids & 15) == 0;
    for (int k = blockIdx.x * 8 + (threadIdx.x >> 5); k < num_centroids; k += gridDim.x * 8) {
        const u16* cen = centroids + (i64)k * dim;
        float s = 0.f;
        if (wide) {
            for (int x = 0; x < dim; x += 8) {
                const uint4 c = __ldg(reinterpret_cast<const uint4*>(cen + x));
                const float4 lo = *reinterpret_cast<const float4*>(qr + x);
                const float4 hi = *reinterpret_cast<const float4*>(qr + x + 4);
                const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
                const unsigned w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    float f;
                    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }"
                        : "=f"(f)
                        : "h"((u16)(w[e / 2] >> (16 * (e & 1)))));
                    s = fmaf(a[e], f, s);
                }
            }
        } else {
            for (int x = 0; x < dim; ++x) s = fmaf(qr[x], F16::load(cen + x), s);
        }
        u16 h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(s));
        cs[((i64)b * num_centroids + k) * 32 + pos] = h;
    }
}

// The inverse norm of every residual token's reconstruction centroid[id] + weights[buckets], in
// f32 as the CPU decoder computes it (F.normalize's eps 1e-12). Eight lanes per token (four
// tokens a warp in flight), each lane a contiguous eighth of the dimensions; the weights in
// shared memory. Per call on borrowed tensors (score_residual_raw), so it must keep up with the
// scoring: one warp per token, lanes strided over d, was latency-bound.
template <int NB>
__device__ __forceinline__ float residual_norm2_part(const u16* __restrict__ cen, const unsigned char* __restrict__ p,
                                                     const float* w, int x0, int x1)
{
    float s = 0.f;
    int x = x0;
    // Eight dimensions at a time where they lie on 16 bytes of centroid: one 16-byte load, NB
    // code bytes (the eight dimensions' bits start on a byte), the first dimension's bits highest.
    if (((x1 - x0) & 7) == 0 && ((size_t)(cen + x0) & 15) == 0) {
        for (; x < x1; x += 8) {
            const U4 v = ld_stream(cen + x);
            const unsigned h[4] = {v.x, v.y, v.z, v.w};
            unsigned bits = 0;
#pragma unroll
            for (int i = 0; i < NB; ++i) bits = (bits << 8) | __ldg(p + x * NB / 8 + i);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                int bucket = 0;
#pragma unroll
                for (int bit = 0; bit < NB; ++bit)
                    bucket |= (int)((bits >> (8 * NB - 1 - (j * NB + bit))) & 1u) << bit;
                const u16 hv = (u16)(h[j / 2] >> (16 * (j & 1)));
                float c;
                asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(c) : "h"(hv));
                const float e = c + w[bucket];
                s = fmaf(e, e, s);
            }
        }
    }
    for (; x < x1; ++x) {
        int bucket = 0;
#pragma unroll
        for (int bit = 0; bit < NB; ++bit) {
            const int pos = x * NB + bit;
            bucket |= ((__ldg(p + (pos >> 3)) >> (7 - (pos & 7))) & 1) << bit;
        }
        const float e = F16::load(cen + x) + w[bucket];
        s = fmaf(e, e, s);
    }
    return s;
}

extern "C" __global__ void __launch_bounds__(256) residual_inv_norms(
    const unsigned char* __restrict__ codes, const unsigned* __restrict__ ids,
    const u16* __restrict__ centroids, const float* __restrict__ weights, int nbits, int dim,
    i64 tokens, float* __restrict__ out)
{
    __shared__ float w[16];
    if (threadIdx.x < (1 << nbits)) w[threadIdx.x] = weights[threadIdx.x];
    __syncthreads();
    const int lane = threadIdx.x & 31, sub = lane & 7;
    const int row = (dim * nbits + 7) / 8;
    const int chunk = (dim + 7) / 8;
    const int x0 = min(sub * chunk, dim), x1 = min(x0 + chunk, dim);
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    // The loop runs the same number of times on every lane (shuffles below need all 32).
    for (i64 base = warp * 4; base < tokens; base += nwarps * 4) {
        const i64 t = base + (lane >> 3);
        float s = 0.f;
        if (t < tokens) {
            const u16* cen = centroids + (i64)__ldg(ids + t) * dim;
            const unsigned char* p = codes + t * row;
            s = nbits == 1 ? residual_norm2_part<1>(cen, p, w, x0, x1)
              : nbits == 2 ? residual_norm2_part<2>(cen, p, w, x0, x1)
                           : residual_norm2_part<4>(cen, p, w, x0, x1);
        }
        s += __shfl_xor_sync(0xffffffffu, s, 4);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        if (sub == 0 && t < tokens) out[t] = 1.f / fmaxf(sqrtf(s), 1e-12f);
    }
}

// Decoded tokens as f32 rows, for the codecs and d no fused kernel is built for (then scored by
// the exact kernels) and for the decompress-then-score ablation. One thread per value; tag as
// in CodecTag, `param` nbits (residual) or M (pq); `values`: the residual's bucket weights or
// the pq codebooks (f32 [M][256][d / M]); residual tokens are scaled by `inv_norm`.
extern "C" __global__ void codec_decode_f32(
    int tag, int param, const unsigned char* __restrict__ codes, const unsigned* __restrict__ aux,
    const float* __restrict__ inv_norm, const u16* __restrict__ centroids,
    const float* __restrict__ values, int dim, i64 tokens, float* __restrict__ out)
{
    const i64 n = tokens * dim;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const i64 t = i / dim;
        const int x = (int)(i % dim);
        float v;
        if (tag == RESIDUAL) {
            const int row = (dim * param + 7) / 8;
            const unsigned char* p = codes + t * row;
            int bucket = 0;
            for (int bit = 0; bit < param; ++bit) {
                const int pos = x * param + bit;
                bucket |= ((p[pos / 8] >> (7 - pos % 8)) & 1) << bit;
            }
            v = (F16::load(centroids + (i64)aux[t] * dim + x) + values[bucket]) * inv_norm[t];
        } else if (tag == PQ) {
            const int sub = dim / param, m = x / sub;
            v = values[((i64)m * 256 + codes[t * param + m]) * sub + x % sub];
        } else if (tag == INT8) {
            v = (float)(signed char)codes[t * dim + x] * __uint_as_float(aux[t]);
        } else {
            const unsigned b = codes[t * dim + x];
            const unsigned h = ((b & 0x80u) << 8) | ((b & 0x7fu) << 7);
            float f;
            asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"((unsigned short)h));
            v = f * 256.f * __uint_as_float(aux[t]);
        }
        out[i] = v;
    }
}

// For residual tensors the engine borrows (`CudaScorer::score_residual_raw`):
//
// The pair table of the residual kernels from bucket weights in device memory (f32, 2^nbits),
// as `residual_pair_table` in codes.rs builds it on the host: for each key of 2·nbits code
// bits, the pair's weights as f16 (round to nearest even), the first dimension's bucket in the
// key's higher bits, each bucket's bit 0 first. One thread per key.
extern "C" __global__ void residual_pair_table(const float* __restrict__ weights, int nbits,
                                               unsigned* __restrict__ out)
{
    const int key = threadIdx.x;
    if (key >= 1 << (2 * nbits)) return;
    const unsigned byte = (unsigned)key << (8 - 2 * nbits);
    int b0 = 0, b1 = 0;
    for (int bit = 0; bit < nbits; ++bit) {
        b0 |= (int)((byte >> (7 - bit)) & 1u) << bit;
        b1 |= (int)((byte >> (7 - nbits - bit)) & 1u) << bit;
    }
    u16 lo, hi;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(lo) : "f"(weights[b0]));
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(hi) : "f"(weights[b1]));
    out[key] = (unsigned)lo | ((unsigned)hi << 16);
}

// Queries (f32 rows) as the fused kernels take them: query q's rows, from element src_start[q]
// of `src`, row_stride apart, d contiguous, into its 32-row blocks from block start[q] on, as
// f32 (`q32`, for the centroid scores) and f16 (`q16`, round to nearest even), zeros past the
// query's lens[q] rows. Block (q, y) takes rows y, y + gridDim.y, … of query q.
extern "C" __global__ void __launch_bounds__(128) codec_pack_queries(
    const float* __restrict__ src, const i64* __restrict__ src_start, i64 row_stride,
    const int* __restrict__ lens, const int* __restrict__ start, int dim,
    float* __restrict__ q32, u16* __restrict__ q16)
{
    const int q = blockIdx.x;
    const int rows = lens[q];
    const int padded = (start[q + 1] - start[q]) * 32;
    for (int r = blockIdx.y; r < padded; r += gridDim.y) {
        const i64 at = ((i64)start[q] * 32 + r) * dim;
        for (int c = threadIdx.x; c < dim; c += blockDim.x) {
            const float v = r < rows ? src[src_start[q] + r * row_stride + c] : 0.f;
            u16 h;
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
            q32[at + c] = v;
            q16[at + c] = h;
        }
    }
}
