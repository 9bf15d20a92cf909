// Exact MaxSim on the GPU: score(Q, D) = sum_i max_j <q_i, d_j>, f32 accumulation.
//
// maxsim_tiled: the general kernel, correct for every shape the engine accepts: any d
// (tiled by BK), any Nq (tiled by BQ), packed variable-length documents (offsets), a candidate
// list, f32/f16/bf16 documents widened to f32 on load, queries in f32. One block scores one
// (query, document) pair: query and document tiles go through shared memory, each thread holds
// a 2 x 2 piece of the BQ x BN similarity tile in registers, and the running maxima of the
// query tokens never leave the chip. CUDA-core FMA: exact for f32 inputs. The tensor-core
// kernels for the memory-bound fast path build on the same interface.
#include "common.cuh"

#define BQ 32
#define BN 32
#define BK 64
#define THREADS 256

template <typename E>
__device__ __forceinline__ void maxsim_tiled_impl(
    const float* __restrict__ q_tokens, const i64* __restrict__ q_offsets,
    const typename E::T* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
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
    const i64 d0 = d_offsets[doc];
    const int nd = (int)(d_offsets[doc + 1] - d0);
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
                    sd[r][c] = (jc + r < nd && kc + c < dim) ? E::load(d_tokens + (d0 + jc + r) * dim + kc + c) : 0.f;
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
                    if (jc + 2 * tx + b < nd) rmax[a] = fmaxf(rmax[a], acc[a][b]);
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
        const float* q_tokens, const i64* q_offsets, const E::T* d_tokens, const i64* d_offsets, \
        const i64* doc_index, int num_docs, int dim, float* out)                               \
    {                                                                                          \
        maxsim_tiled_impl<E>(q_tokens, q_offsets, d_tokens, d_offsets, doc_index, num_docs, dim, out); \
    }

INSTANTIATE(maxsim_tiled_f32, F32)
INSTANTIATE(maxsim_tiled_f16, F16)
INSTANTIATE(maxsim_tiled_bf16, BF16)

// The device's streaming read ceiling: 16-byte loads, grid-stride, nothing written unless the
// impossible happens (so the compiler keeps every load).
extern "C" __global__ void read_ceiling(const uint4* __restrict__ p, i64 n, unsigned* __restrict__ sink)
{
    unsigned x = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const uint4 v = __ldg(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u) sink[0] = x;
}
