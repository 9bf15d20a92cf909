// The general kernels (CUDA cores, every shape and dtype, exact for f32) and the paper's ablation
// family: maxsim_tiled, maxsim_v1, maxsim_v2. Documents as DocRows (packed or a padded batch).
//
// Exact MaxSim on the GPU: score(Q, D) = sum_i max_j <q_i, d_j>, f32 accumulation.
//
// maxsim_tiled: the general kernel, correct for every shape the engine accepts: any d
// (tiled by BK), any Nq (tiled by BQ), documents as DocRows (packed by offsets or a padded
// batch, any row stride: device memory as PyTorch hands it over), a candidate list,
// f32/f16/bf16 documents widened to f32 on load, queries in f32. One block scores one
// (query, document) pair: query and document tiles go through shared memory, each thread holds
// a 2 x 2 piece of the BQ x BN similarity tile in registers, and the running maxima of the
// query tokens never leave the chip. CUDA-core FMA: exact for f32 inputs. The tensor-core
// kernels for the memory-bound fast path build on the same interface.
#include "common.cuh"

// Where the general kernels find each document's rows: packed (`offsets`: document i is rows
// offsets[i] .. offsets[i + 1]) or a padded batch (document i starts at element
// i * batch_stride and has lengths[i] rows, or max_len where `lengths` is null); row r of a
// document starts row_stride elements after row r - 1, its d elements contiguous.
// Mirrors `DocRows` in src/cuda/launch.rs (passed by value).
struct DocRows {
    const void* tokens;
    const i64* offsets;
    const i64* lengths;
    i64 row_stride;
    i64 batch_stride;
    i64 max_len;
    // The element offset of document `doc`'s first row and its rows (a padded batch's
    // lengths clamped to 0 .. max_len).
    __device__ __forceinline__ void extent(i64 doc, i64& base, int& rows) const {
        if (offsets) {
            const i64 r0 = offsets[doc];
            base = r0 * row_stride;
            rows = (int)(offsets[doc + 1] - r0);
        } else {
            base = doc * batch_stride;
            const i64 n = lengths ? lengths[doc] : max_len;
            rows = (int)(n < 0 ? 0 : n > max_len ? max_len : n);
        }
    }
    template <typename E>
    __device__ __forceinline__ const typename E::T* row(i64 base, int r) const {
        return (const typename E::T*)tokens + base + (i64)r * row_stride;
    }
};

#define BQ 32
#define BN 32
#define BK 64
#define THREADS 256

template <typename E>
__device__ __forceinline__ void maxsim_tiled_impl(
    const float* __restrict__ q_tokens, const i64* __restrict__ q_offsets, const DocRows& docs,
    const i64* __restrict__ doc_index, int num_docs, int dim, float* __restrict__ out)
{
    __shared__ float sq[BQ][BK + 1];
    __shared__ float sd[BN][BK + 1];
    __shared__ float partial[THREADS / 32];

    const int tid = threadIdx.x;
    const int tx = tid & 15;        // document column pair
    const int ty = tid >> 4;        // query row pair
    const int pair = blockIdx.x;    // selected-document position
    const int qi = blockIdx.y;
    const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
    i64 d0;
    int nd;
    docs.extent(doc, d0, nd);
    const i64 q0 = q_offsets[qi];
    const int nq = (int)(q_offsets[qi + 1] - q0);

    float total = 0.f;
    for (int qc = 0; qc < nq; qc += BQ) {
        float rmax[2] = {NEG_INF, NEG_INF};
        for (int jc = 0; jc < nd; jc += BN) {
            float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
            for (int kc = 0; kc < dim; kc += BK) {
                for (int e = tid; e < BQ * BK; e += THREADS) {
                    const int r = e / BK, c = e % BK;
                    sq[r][c] = (qc + r < nq && kc + c < dim) ? q_tokens[(q0 + qc + r) * dim + kc + c] : 0.f;
                    sd[r][c] = (jc + r < nd && kc + c < dim) ? E::load(docs.row<E>(d0, jc + r) + kc + c) : 0.f;
                }
                __syncthreads();
#pragma unroll 8
                for (int k = 0; k < BK; ++k) {
                    const float a0 = sq[2 * ty][k], a1 = sq[2 * ty + 1][k];
                    const float b0 = sd[2 * tx][k], b1 = sd[2 * tx + 1][k];
                    acc[0][0] = fmaf(a0, b0, acc[0][0]);
                    acc[0][1] = fmaf(a0, b1, acc[0][1]);
                    acc[1][0] = fmaf(a1, b0, acc[1][0]);
                    acc[1][1] = fmaf(a1, b1, acc[1][1]);
                }
                __syncthreads();
            }
#pragma unroll
            for (int a = 0; a < 2; ++a)
#pragma unroll
                for (int b = 0; b < 2; ++b)
                    if (jc + 2 * tx + b < nd) rmax[a] = max_nan(rmax[a], acc[a][b]);
        }
        // The 16 threads of one ty are lanes 0-15 or 16-31 of a warp: reduce over them.
#pragma unroll
        for (int a = 0; a < 2; ++a) rmax[a] = warp_max_xor(rmax[a], 8);
        if (tx == 0) {
            if (qc + 2 * ty < nq) total += rmax[0];
            if (qc + 2 * ty + 1 < nq) total += rmax[1];
        }
    }
    total = warp_sum(total);
    if ((tid & 31) == 0) partial[tid >> 5] = total;
    __syncthreads();
    if (tid == 0) {
        float s = 0.f;
        for (int w = 0; w < THREADS / 32; ++w) s += partial[w];
        out[(i64)qi * num_docs + pair] = s;
    }
}

#define INSTANTIATE(NAME, E)                                                                   \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(                               \
        const float* q_tokens, const i64* q_offsets, DocRows docs,                             \
        const i64* doc_index, int num_docs, int dim, float* out)                               \
    {                                                                                          \
        maxsim_tiled_impl<E>(q_tokens, q_offsets, docs, doc_index, num_docs, dim, out);       \
    }

INSTANTIATE(maxsim_tiled_f32, F32)
INSTANTIATE(maxsim_tiled_f16, F16)
INSTANTIATE(maxsim_tiled_bf16, BF16)

// ---------------------------------------------------------------------------------------------
// The paper's ablation family, on CUDA cores, same arguments as maxsim_tiled (one block of
// ABL_THREADS per (document, query) pair):
// - maxsim_v1 (per query token): each thread owns one query token and streams the whole
//   document from global memory (through L1), so a document is read once per query token.
// - maxsim_v2 (per document): document tiles of 32 tokens x 64 dims are staged in shared memory
//   once per query-token group; each thread still owns one query token.
// The multi-query tiling (V2-MQ) is maxsim_tiled on CUDA cores and maxsim_mma on tensor cores.
#define ABL_THREADS 128

__device__ __forceinline__ float block_sum_128(float v, float* partial) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0.f;
    if (threadIdx.x == 0)
        for (int w = 0; w < ABL_THREADS / 32; ++w) s += partial[w];
    return s;
}

template <typename E>
__device__ __forceinline__ void maxsim_v1_impl(
    const float* __restrict__ q_tokens, const i64* __restrict__ q_offsets, const DocRows& docs,
    const i64* __restrict__ doc_index, int num_docs, int dim, float* __restrict__ out)
{
    __shared__ float partial[ABL_THREADS / 32];
    const int pair = blockIdx.x, qi = blockIdx.y;
    const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
    i64 d0;
    int nd;
    docs.extent(doc, d0, nd);
    const i64 q0 = q_offsets[qi];
    const int nq = (int)(q_offsets[qi + 1] - q0);
    float sum = 0.f;
    for (int i = threadIdx.x; i < nq; i += ABL_THREADS) {
        const float* q = q_tokens + (q0 + i) * dim;
        float m = NEG_INF;
        for (int j = 0; j < nd; ++j) {
            const typename E::T* d = docs.row<E>(d0, j);
            float s = 0.f;
            for (int k = 0; k < dim; ++k) s = fmaf(q[k], E::load(d + k), s);
            m = max_nan(m, s);
        }
        sum += m;
    }
    const float total = block_sum_128(sum, partial);
    if (threadIdx.x == 0) out[(i64)qi * num_docs + pair] = total;
}

template <typename E>
__device__ __forceinline__ void maxsim_v2_impl(
    const float* __restrict__ q_tokens, const i64* __restrict__ q_offsets, const DocRows& docs,
    const i64* __restrict__ doc_index, int num_docs, int dim, float* __restrict__ out)
{
    __shared__ float sd[32][64 + 1];
    __shared__ float partial[ABL_THREADS / 32];
    const int pair = blockIdx.x, qi = blockIdx.y;
    const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
    i64 d0;
    int nd;
    docs.extent(doc, d0, nd);
    const i64 q0 = q_offsets[qi];
    const int nq = (int)(q_offsets[qi + 1] - q0);
    float sum = 0.f;
    for (int i0 = 0; i0 < nq; i0 += ABL_THREADS) {
        const int i = i0 + threadIdx.x;
        const float* q = q_tokens + (q0 + (i < nq ? i : 0)) * dim;
        float m = NEG_INF;
        for (int jc = 0; jc < nd; jc += 32) {
            float acc[32];
#pragma unroll
            for (int jj = 0; jj < 32; ++jj) acc[jj] = 0.f;
            for (int kc = 0; kc < dim; kc += 64) {
                for (int e = threadIdx.x; e < 32 * 64; e += ABL_THREADS) {
                    const int r = e / 64, c = e % 64;
                    sd[r][c] = (jc + r < nd && kc + c < dim) ? E::load(docs.row<E>(d0, jc + r) + kc + c) : 0.f;
                }
                __syncthreads();
                const int kn = dim - kc < 64 ? dim - kc : 64;
                for (int k = 0; k < kn; ++k) {
                    const float qk = q[kc + k];
#pragma unroll
                    for (int jj = 0; jj < 32; ++jj) acc[jj] = fmaf(qk, sd[jj][k], acc[jj]);
                }
                __syncthreads();
            }
#pragma unroll
            for (int jj = 0; jj < 32; ++jj)
                if (jc + jj < nd) m = max_nan(m, acc[jj]);
        }
        if (i < nq) sum += m;
    }
    const float total = block_sum_128(sum, partial);
    if (threadIdx.x == 0) out[(i64)qi * num_docs + pair] = total;
}

#define INSTANTIATE_ABL(NAME, IMPL, E)                                                         \
    extern "C" __global__ void __launch_bounds__(ABL_THREADS) NAME(                           \
        const float* q_tokens, const i64* q_offsets, DocRows docs,                             \
        const i64* doc_index, int num_docs, int dim, float* out)                               \
    {                                                                                          \
        IMPL<E>(q_tokens, q_offsets, docs, doc_index, num_docs, dim, out);                    \
    }

INSTANTIATE_ABL(maxsim_v1_f32, maxsim_v1_impl, F32)
INSTANTIATE_ABL(maxsim_v1_f16, maxsim_v1_impl, F16)
INSTANTIATE_ABL(maxsim_v1_bf16, maxsim_v1_impl, BF16)
INSTANTIATE_ABL(maxsim_v2_f32, maxsim_v2_impl, F32)
INSTANTIATE_ABL(maxsim_v2_f16, maxsim_v2_impl, F16)
INSTANTIATE_ABL(maxsim_v2_bf16, maxsim_v2_impl, BF16)
