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
// Mirrors `DocRows` in src/cuda/mod.rs (passed by value).
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
            m = fmaxf(m, s);
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
                if (jc + jj < nd) m = fmaxf(m, acc[jj]);
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

// Queries from device memory the engine borrows (`CudaScorer::score_raw`): query q's rows start
// at element src_start[q] of `src`, row_stride apart, d contiguous; they are copied, widened to
// f32, to rows dst_offsets[q] .. dst_offsets[q + 1] of `f32_out` (d wide, contiguous) and,
// where `blocks_out` is not null (16-bit types), as their raw bits into the 32-row blocks of
// the tensor-core kernels from block dst_block[q] on, zeros past the query's end. Block
// (q, y) copies rows y, y + gridDim.y, … of query q, its threads along d.
template <typename E>
__device__ __forceinline__ void pack_queries_impl(
    const typename E::T* __restrict__ src, const i64* __restrict__ src_start, i64 row_stride,
    const i64* __restrict__ dst_offsets, const int* __restrict__ dst_block, int dim,
    float* __restrict__ f32_out, u16* __restrict__ blocks_out)
{
    const int q = blockIdx.x;
    const i64 r0 = dst_offsets[q];
    const int rows = (int)(dst_offsets[q + 1] - r0);
    const int padded = blocks_out ? (rows + 31) / 32 * 32 : rows;
    u16* blocks = blocks_out ? blocks_out + (i64)dst_block[q] * 32 * dim : nullptr;
    for (int r = blockIdx.y; r < padded; r += gridDim.y) {
        const typename E::T* p = src + src_start[q] + r * row_stride;
        for (int c = threadIdx.x; c < dim; c += blockDim.x) {
            if (r < rows) {
                f32_out[(r0 + r) * dim + c] = E::load(p + c);
                if (sizeof(typename E::T) == 2 && blocks) blocks[(i64)r * dim + c] = *(const u16*)(p + c);
            } else {
                blocks[(i64)r * dim + c] = 0;
            }
        }
    }
}

#define INSTANTIATE_PACK(NAME, E)                                                              \
    extern "C" __global__ void __launch_bounds__(128) NAME(                                    \
        const E::T* src, const i64* src_start, i64 row_stride, const i64* dst_offsets,         \
        const int* dst_block, int dim, float* f32_out, u16* blocks_out)                        \
    {                                                                                          \
        pack_queries_impl<E>(src, src_start, row_stride, dst_offsets, dst_block, dim, f32_out, blocks_out); \
    }

INSTANTIATE_PACK(pack_queries_f32, F32)
INSTANTIATE_PACK(pack_queries_f16, F16)
INSTANTIATE_PACK(pack_queries_bf16, BF16)

// out[i] = i * step for i in 0 ..= count: the offsets of a dense batch of `count` documents of
// `step` rows each (so the packed-corpus kernels can score it in place).
extern "C" __global__ void iota_offsets(i64* __restrict__ out, i64 count, i64 step)
{
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i <= count; i += (i64)gridDim.x * blockDim.x)
        out[i] = i * step;
}

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

// ---------------------------------------------------------------------------------------------
// maxsim_mma: the tensor-core fast path for f16/bf16 documents and queries of the same type,
// Nq <= 32 (two 16-row m-tiles) and d in {32, 64, 96, 128}.
//
// One warp scores one (query, document) pair at a time and walks its tasks with a grid stride
// (a persistent grid sized to the device's occupancy). The query's A fragments stay in
// registers across tasks; document tokens go straight from memory into B fragments with
// 16-byte streaming loads, four 8-token tiles in flight, no shared memory: every byte of the
// document is read from memory once. The trick that makes the direct loads possible: the dot
// product does not care about the order of the k dimension, so k is permuted consistently for
// Q and D such that each thread's B fragment elements for two k16 steps are 8 consecutive
// halves in memory (thread c of a quad reads halves c*8 .. c*8+7 of each 32-wide chunk).
// mma.sync m16n8k16 accumulates in f32; the running max of each query row is kept in the
// C-fragment layout, reduced across the quad at the end of the document, then summed.
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

// Fold one m16n8 accumulator tile (this thread's C fragment: rows g and g+8, columns col and
// col + 1) into the running maxima of its two rows; columns at or past `limit` do not count.
__device__ __forceinline__ void fold_max(float (&best)[2], const float (&acc)[4], int col, int limit) {
    const float v0 = col < limit ? acc[0] : NEG_INF;
    const float v1 = col + 1 < limit ? acc[1] : NEG_INF;
    const float v2 = col < limit ? acc[2] : NEG_INF;
    const float v3 = col + 1 < limit ? acc[3] : NEG_INF;
    best[0] = fmaxf(best[0], fmaxf(v0, v1));
    best[1] = fmaxf(best[1], fmaxf(v2, v3));
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

// Tiles of 8 tokens loaded per step (overridable for experiments: TILEMAXSIM_KERNEL_DEFINES).
#ifndef MMA_TILES
#define MMA_TILES 4
#endif
#define MMA_THREADS 128

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_mma_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out,
    unsigned long long* __restrict__ next_task)
{
    constexpr int D = KCH * 32;
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    const i64 tasks = (i64)num_queries * num_docs;

    unsigned a[2][KCH][2][4];
    int cur_q = -1, nq = 0;
    // The next task's document extent is loaded one task ahead, so the dependent loads
    // (candidate index, then offsets) overlap the current document's work.
    auto extent = [&](i64 t, i64& start, int& len) {
        const int p = (int)(t % num_docs);
        const i64 doc = doc_index ? doc_index[p] : (i64)p;
        start = d_offsets[doc];
        len = (int)(d_offsets[doc + 1] - start);
    };
    // Dynamic scheduling: every warp starts on task `warp`, then takes the next unclaimed task
    // from a counter (zeroed before the launch; the host passes it only when there are many
    // tasks per warp), so documents of uneven length do not leave
    // warps idle at the end. The claim and the extent of the next task are fetched one task
    // ahead, so their latency overlaps the current document.
    // With few tasks per warp (next_task == null) the schedule stays static: task += nwarps.
    i64 task_static = warp;
    auto claim = [&]() -> i64 {
        if (!next_task) return task_static += nwarps;
        unsigned long long t = 0;
        if (lane == 0) t = atomicAdd(next_task, 1ull);
        return nwarps + (i64)__shfl_sync(0xffffffffu, t, 0);
    };
    i64 d0 = 0;
    int nd = 0;
    if (warp < tasks) extent(warp, d0, nd);
    i64 next = warp < tasks ? claim() : tasks;
    for (i64 task = warp; task < tasks;) {
        const int qi = (int)(task / num_docs);
        const int pair = (int)(task % num_docs);
        i64 next_d0 = 0;
        int next_nd = 0;
        if (next < tasks) extent(next, next_d0, next_nd);
        const i64 after = next < tasks ? claim() : tasks;
        if (qi != cur_q) {
            cur_q = qi;
            nq = (int)(q_offsets[qi + 1] - q_offsets[qi]);
            load_a_permuted<KCH>(a, qpad + (i64)qi * 32 * D, g, c);
        }
        const u16* base = d_tokens + d0 * D;

        float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
        for (int t0 = 0; t0 < nd; t0 += 8 * MMA_TILES) {
            U4 b[MMA_TILES][KCH];
#pragma unroll
            for (int tt = 0; tt < MMA_TILES; ++tt) {
                const int tok = t0 + tt * 8 + g;
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch) {
                    if (tok < nd) b[tt][ch] = ld_stream(base + (i64)tok * D + ch * 32 + c * 8);
                    else b[tt][ch] = U4{0u, 0u, 0u, 0u};
                }
            }
#pragma unroll
            for (int tt = 0; tt < MMA_TILES; ++tt) {
                if (t0 + tt * 8 < nd) {  // uniform across the warp
                    float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
                    for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            Mma<BF>::run(acc[mt], a[mt][ch][0], b[tt][ch].x, b[tt][ch].y);
                            Mma<BF>::run(acc[mt], a[mt][ch][1], b[tt][ch].z, b[tt][ch].w);
                        }
                    const int col = t0 + tt * 8 + 2 * c;
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        fold_max(best[mt], acc[mt], col, nd);
                    }
                }
            }
        }
        const float s = block_score(best, nq, g);
        if (lane == 0) out[(i64)qi * num_docs + pair] = s;
        d0 = next_d0;
        nd = next_nd;
        task = next;
        next = after;
    }
}

#define INSTANTIATE_MMA(NAME, BF, KCH)                                                         \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS) NAME(                           \
        const u16* qpad, const i64* q_offsets, int num_queries, const u16* d_tokens,           \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out,                  \
        unsigned long long* next_task)                                                         \
    {                                                                                          \
        maxsim_mma_impl<BF, KCH>(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out, next_task); \
    }

INSTANTIATE_MMA(maxsim_mma_f16_d32, false, 1)
INSTANTIATE_MMA(maxsim_mma_f16_d64, false, 2)
INSTANTIATE_MMA(maxsim_mma_f16_d96, false, 3)
INSTANTIATE_MMA(maxsim_mma_f16_d128, false, 4)
INSTANTIATE_MMA(maxsim_mma_bf16_d32, true, 1)
INSTANTIATE_MMA(maxsim_mma_bf16_d64, true, 2)
INSTANTIATE_MMA(maxsim_mma_bf16_d96, true, 3)
INSTANTIATE_MMA(maxsim_mma_bf16_d128, true, 4)

// ---------------------------------------------------------------------------------------------
// maxsim_bulk (sm_90+): maxsim_mma's tensor-core math on document tiles that the copy engine
// brings into shared memory (cp.async.bulk, completion on an mbarrier). One block of BULK_WARPS
// warps scores a run of `group` consecutive tasks (task = query * num_docs + pair), a grid of
// all of them: the hardware hands blocks out in order as others retire, so the documents in
// flight form one compact window of addresses, and blocks of short documents simply retire
// sooner (no schedule to balance). Measured on the H100 (bench/read_patterns.cu, `cta`): a
// block per 32 KB document reads 3188-3212 GB/s where persistent per-warp rings read 3150.
// A document goes through a ring of `stages` tiles of BULK_TILE tokens (a tile never spans two
// documents; one bulk copy per tile, issued by thread 0 `stages` tiles ahead across document
// boundaries); warp w multiplies tokens 32w .. 32w + 31 of each tile, the four warps' running
// maxima meet in shared memory at the document's end, and warp 0 sums them. Every thread walks
// the same tile sequence (BulkWalk), so no tile metadata goes through shared memory. Needs
// d_tokens 16-byte aligned (every row is 2d bytes, a multiple of 16).
#define BULK_WARPS 4
#define BULK_THREADS (BULK_WARPS * 32)
#define BULK_TILE (BULK_WARPS * 32)
// Wide d (maxsim_bulk_wide_impl): tokens per tile for KQ 128-wide quarters (so a stage stays
// 16-24 KB), and floats per column of a warp's partial tile (32 rows + 4: conflict-free).
#define BULK_WIDE_TOK(KQ) ((KQ) <= 4 ? 32 : 16)
#define BULK_WIDE_RS 36

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals = 1) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
#else  // declared only: the `if constexpr` branches that call them are discarded below sm_90
__device__ void mbar_init(unsigned bar, unsigned arrivals = 1);
__device__ void mbar_expect_tx(unsigned bar, unsigned bytes);
__device__ void mbar_wait(unsigned bar, unsigned parity);
__device__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar);
#endif

struct alignas(16) V4 { unsigned x, y, z, w; };

// The tile sequence of a run of `left` tasks from (query qi, pair): (first token, tokens,
// document length) stepped tile by tile, the task stepped without dividing. Empty documents
// take one empty tile (their score is then the sum of nothing found, as in maxsim_mma).
template <int TILE>
struct BulkWalk {
    int qi, pair, left, tok, nd;
    i64 d0;
    __device__ __forceinline__ BulkWalk(i64 first, i64 tasks, int group, int num_docs)
        : qi((int)(first / num_docs)), pair((int)(first % num_docs)),
          left((int)min((i64)group, tasks - first)), tok(0), nd(0), d0(0) {}
    __device__ __forceinline__ void extent(const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index) {
        if (left > 0) {
            const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
            d0 = d_offsets[doc];
            nd = (int)(d_offsets[doc + 1] - d0);
        }
    }
    __device__ __forceinline__ bool done() const { return left <= 0; }
    __device__ __forceinline__ int ntok() const { return min(TILE, nd - tok); }
    __device__ __forceinline__ bool last() const { return tok + TILE >= nd; }
    __device__ __forceinline__ void step(const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index,
                                         int num_docs) {
        tok += TILE;
        if (tok >= nd) {
            tok = 0;
            --left;
            if (++pair == num_docs) {
                pair = 0;
                ++qi;
            }
            extent(d_offsets, doc_index);
        }
    }
};

// Thread 0's side of both maxsim_bulk kernels: its own walk over the block's tiles, running
// `stages` tiles ahead of the consumers' walk; tile t goes to stage t % stages by one bulk copy
// of its rows (ROW halves each), completing on the stage's mbarrier (an empty tile: an arrive).
template <int TILE, int ROW>
struct BulkProducer {
    BulkWalk<TILE> walk;
    u16* ring;
    unsigned long long* bars;
    const u16* d_tokens;
    const i64* d_offsets;
    const i64* doc_index;
    int num_docs;
    __device__ __forceinline__ void produce(int s) {
        const unsigned bar = smem_addr(&bars[s]);
        if (walk.done()) return;
        const int ntok = walk.ntok();
        if (ntok > 0) {
            const unsigned bytes = (unsigned)ntok * ROW * 2u;
            mbar_expect_tx(bar, bytes);
            bulk_load(smem_addr(ring + (i64)s * TILE * ROW), d_tokens + (walk.d0 + walk.tok) * ROW, bytes, bar);
        } else {
            mbar_arrive(bar);
        }
        walk.step(d_offsets, doc_index, num_docs);
    }
    // Initialize the stages' barriers and fill every stage (the block syncs after).
    __device__ __forceinline__ void start(int stages) {
        for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[s]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        walk.extent(d_offsets, doc_index);
        for (int s = 0; s < stages; ++s) produce(s);
    }
};

// Warp 0 of a maxsim_bulk block: a document's score from the warps' maxima of row `lane` in
// red[par] (`red`: [2][BULK_WARPS][32]), summed over the query's `nq` rows, stored at `out`.
__device__ __forceinline__ void bulk_document_score(const float* red, int par, int nq, int lane, float* out) {
    float m = red[par * BULK_WARPS * 32 + lane];
#pragma unroll
    for (int k = 1; k < BULK_WARPS; ++k) m = fmaxf(m, red[(par * BULK_WARPS + k) * 32 + lane]);
    const float sum = warp_sum(lane < nq ? m : 0.f);
    if (lane == 0) *out = sum;
}

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_bulk_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group)
{
#if __CUDA_ARCH__ >= 900
    constexpr int D = KCH * 32;
    constexpr int STAGE = BULK_TILE * D;  // halves
    extern __shared__ __attribute__((aligned(128))) unsigned char bulk_smem[];
    u16* ring = (u16*)bulk_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    float* red = (float*)(bars + stages);  // [2][BULK_WARPS][32]: row maxima per warp, two documents
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const i64 tasks = (i64)num_queries * num_docs;
    const i64 first = (i64)blockIdx.x * group;

    BulkProducer<BULK_TILE, D> producer{BulkWalk<BULK_TILE>(first, tasks, group, num_docs), ring, bars,
                                        d_tokens, d_offsets, doc_index, num_docs};
    if (threadIdx.x == 0) producer.start(stages);
    BulkWalk<BULK_TILE> w(first, tasks, group, num_docs);
    w.extent(d_offsets, doc_index);
    __syncthreads();  // the barriers are initialized

    unsigned a[2][KCH][2][4];
    int cur_q = -1, nq = 0, ndone = 0;
    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
    for (int i = 0; !w.done(); ++i) {
        const int s = i % stages;
        if (w.qi != cur_q) {
            cur_q = w.qi;
            nq = (int)(q_offsets[cur_q + 1] - q_offsets[cur_q]);
            load_a_permuted<KCH>(a, qpad + (i64)cur_q * 32 * D, g, c);
        }
        if (w.tok == 0) best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        const int mine = w.ntok() - wib * 32;  // this warp's tokens of the tile (uniform)
        mbar_wait(smem_addr(&bars[s]), (unsigned)(i / stages) & 1u);
        if (mine > 0) {
            const u16* buf = ring + (i64)s * STAGE + wib * 32 * D;
            // All four 8-token tiles, loaded before the first MMA; columns past `mine` hold
            // whatever the stage held before and are masked out of the maxima.
            V4 b[4][KCH];
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch)
                    b[t][ch] = *(const V4*)(buf + (t * 8 + g) * D + ch * 32 + c * 8);
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        Mma<BF>::run(acc[mt], a[mt][ch][0], b[t][ch].x, b[t][ch].y);
                        Mma<BF>::run(acc[mt], a[mt][ch][1], b[t][ch].z, b[t][ch].w);
                    }
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) fold_max(best[mt], acc[mt], t * 8 + 2 * c, mine);
            }
        }
        const bool last = w.last();
        const int par = ndone & 1;
        if (last) {
            // This warp's row maxima (max over the quad), rows g, g + 8, 16 + g, 24 + g.
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                const float m0 = warp_max_xor(best[mt][0], 2);
                const float m8 = warp_max_xor(best[mt][1], 2);
                if (c == 0) {
                    red[(par * BULK_WARPS + wib) * 32 + mt * 16 + g] = m0;
                    red[(par * BULK_WARPS + wib) * 32 + mt * 16 + g + 8] = m8;
                }
            }
        }
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the row maxima are in `red`
        if (threadIdx.x == 0) producer.produce(s);
        if (last) {
            if (wib == 0) bulk_document_score(red, par, nq, lane, out + task);  // task = query * num_docs + pair
            ++ndone;  // the next document's maxima go to the other half of `red`
        }
    }
#endif
}

// Both maxsim_bulk kernels take the same arguments: IMPL is maxsim_bulk_impl (K: 32-wide chunks
// of d) or maxsim_bulk_wide_impl (K: 128-wide quarters of d).
#define INSTANTIATE_BULK(NAME, IMPL, BF, K)                                                    \
    extern "C" __global__ void __launch_bounds__(BULK_THREADS) NAME(                          \
        const u16* qpad, const i64* q_offsets, int num_queries, const u16* d_tokens,           \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int stages,      \
        int group)                                                                             \
    {                                                                                          \
        IMPL<BF, K>(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out, stages, group); \
    }

INSTANTIATE_BULK(maxsim_bulk_f16_d32, maxsim_bulk_impl, false, 1)
INSTANTIATE_BULK(maxsim_bulk_f16_d64, maxsim_bulk_impl, false, 2)
INSTANTIATE_BULK(maxsim_bulk_f16_d96, maxsim_bulk_impl, false, 3)
INSTANTIATE_BULK(maxsim_bulk_f16_d128, maxsim_bulk_impl, false, 4)
INSTANTIATE_BULK(maxsim_bulk_bf16_d32, maxsim_bulk_impl, true, 1)
INSTANTIATE_BULK(maxsim_bulk_bf16_d64, maxsim_bulk_impl, true, 2)
INSTANTIATE_BULK(maxsim_bulk_bf16_d96, maxsim_bulk_impl, true, 3)
INSTANTIATE_BULK(maxsim_bulk_bf16_d128, maxsim_bulk_impl, true, 4)

// maxsim_bulk for wide embeddings (f16/bf16, d = 128 * KQ, 256 .. 1024): the same grid of
// blocks, walk, ring and bulk copies, but the four warps split a tile's d instead of its tokens.
// A tile is TOK tokens of the whole row (one contiguous copy: 24 KB at d = 768); warp w
// multiplies every token of it by its quarter of d (its query slice's A fragments, KQ 32-wide
// chunks, stay in registers), and leaves the 32 x TOK partial dot products in shared memory
// (column-major, 36 floats a column: the C-fragment stores and the row-per-lane reads are both
// conflict-free). After the tile's barrier, warp w sums the four partials of its TOK / 4 columns
// for row `lane` and keeps the running maximum; at a document's end the warps' row maxima meet
// in shared memory as in maxsim_bulk, and warp 0 sums them after the next barrier (the block's
// next tile, or the end). Partials and maxima are double-buffered, so one barrier a tile orders
// them all.
template <bool BF, int KQ>
__device__ __forceinline__ void maxsim_bulk_wide_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group)
{
#if __CUDA_ARCH__ >= 900
    constexpr int D = KQ * 128;          // the embedding dimension
    constexpr int DW = KQ * 32;          // dimensions per warp
    constexpr int TOK = BULK_WIDE_TOK(KQ);
    constexpr int NT = TOK / 8;          // 8-token tiles per tile
    constexpr int CW = TOK / BULK_WARPS; // columns each warp reduces
    constexpr int RS = BULK_WIDE_RS;     // floats per partial column
    constexpr int STAGE = TOK * D;       // halves
    extern __shared__ __attribute__((aligned(128))) unsigned char bulk_smem[];
    u16* ring = (u16*)bulk_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    float* part = (float*)(bars + stages);          // [2][BULK_WARPS][TOK][RS]
    float* red = part + 2 * BULK_WARPS * TOK * RS;  // [2][BULK_WARPS][32]
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const i64 tasks = (i64)num_queries * num_docs;
    const i64 first = (i64)blockIdx.x * group;

    BulkProducer<TOK, D> producer{BulkWalk<TOK>(first, tasks, group, num_docs), ring, bars,
                                  d_tokens, d_offsets, doc_index, num_docs};
    if (threadIdx.x == 0) producer.start(stages);
    BulkWalk<TOK> w(first, tasks, group, num_docs);
    w.extent(d_offsets, doc_index);
    __syncthreads();  // the barriers are initialized

    // Warp 0 sums the row maxima of a finished document once a barrier has ordered them.
    bool pending = false;
    i64 p_task = 0;
    int p_nq = 0, p_par = 0;
    auto finish = [&]() {
        if (pending && wib == 0) bulk_document_score(red, p_par, p_nq, lane, out + p_task);
        pending = false;
    };

    unsigned a[2][KQ][2][4];
    int cur_q = -1, nq = 0, ndone = 0;
    float best = NEG_INF;  // row `lane`'s running maximum over this warp's columns
    for (int i = 0; !w.done(); ++i) {
        const int s = i % stages;
        if (w.qi != cur_q) {
            cur_q = w.qi;
            nq = (int)(q_offsets[cur_q + 1] - q_offsets[cur_q]);
            load_a_permuted<KQ, D>(a, qpad + (i64)cur_q * 32 * D + wib * DW, g, c);
        }
        if (w.tok == 0) best = NEG_INF;
        const int ntok = w.ntok();
        mbar_wait(smem_addr(&bars[s]), (unsigned)(i / stages) & 1u);
        const u16* buf = ring + (i64)s * STAGE + wib * DW;
        float* pw_part = part + ((i & 1) * BULK_WARPS + wib) * TOK * RS;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            // Rows past the tile's tokens hold whatever the stage held; their columns are not
            // reduced below.
            float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
            for (int ch = 0; ch < KQ; ++ch) {
                const V4 b = *(const V4*)(buf + (t * 8 + g) * D + ch * 32 + c * 8);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    Mma<BF>::run(acc[mt], a[mt][ch][0], b.x, b.y);
                    Mma<BF>::run(acc[mt], a[mt][ch][1], b.z, b.w);
                }
            }
            const int col = t * 8 + 2 * c;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                const int row = mt * 16 + g;
                pw_part[col * RS + row] = acc[mt][0];
                pw_part[(col + 1) * RS + row] = acc[mt][1];
                pw_part[col * RS + row + 8] = acc[mt][2];
                pw_part[(col + 1) * RS + row + 8] = acc[mt][3];
            }
        }
        const bool last = w.last();
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the partials and row maxima are in place
        if (threadIdx.x == 0) producer.produce(s);
        finish();
        const float* pt = part + (i & 1) * BULK_WARPS * TOK * RS;
#pragma unroll
        for (int k = 0; k < CW; ++k) {
            const int col = wib * CW + k;
            float v = pt[col * RS + lane];
#pragma unroll
            for (int ww = 1; ww < BULK_WARPS; ++ww) v += pt[(ww * TOK + col) * RS + lane];
            if (col < ntok) best = fmaxf(best, v);
        }
        if (last) {
            const int par = ndone & 1;
            red[(par * BULK_WARPS + wib) * 32 + lane] = best;
            pending = true;
            p_task = task;
            p_nq = nq;
            p_par = par;
            ++ndone;
        }
    }
    __syncthreads();
    finish();
#endif
}

INSTANTIATE_BULK(maxsim_bulk_f16_d256, maxsim_bulk_wide_impl, false, 2)
INSTANTIATE_BULK(maxsim_bulk_f16_d384, maxsim_bulk_wide_impl, false, 3)
INSTANTIATE_BULK(maxsim_bulk_f16_d512, maxsim_bulk_wide_impl, false, 4)
INSTANTIATE_BULK(maxsim_bulk_f16_d640, maxsim_bulk_wide_impl, false, 5)
INSTANTIATE_BULK(maxsim_bulk_f16_d768, maxsim_bulk_wide_impl, false, 6)
INSTANTIATE_BULK(maxsim_bulk_f16_d896, maxsim_bulk_wide_impl, false, 7)
INSTANTIATE_BULK(maxsim_bulk_f16_d1024, maxsim_bulk_wide_impl, false, 8)
INSTANTIATE_BULK(maxsim_bulk_bf16_d256, maxsim_bulk_wide_impl, true, 2)
INSTANTIATE_BULK(maxsim_bulk_bf16_d384, maxsim_bulk_wide_impl, true, 3)
INSTANTIATE_BULK(maxsim_bulk_bf16_d512, maxsim_bulk_wide_impl, true, 4)
INSTANTIATE_BULK(maxsim_bulk_bf16_d640, maxsim_bulk_wide_impl, true, 5)
INSTANTIATE_BULK(maxsim_bulk_bf16_d768, maxsim_bulk_wide_impl, true, 6)
INSTANTIATE_BULK(maxsim_bulk_bf16_d896, maxsim_bulk_wide_impl, true, 7)
INSTANTIATE_BULK(maxsim_bulk_bf16_d1024, maxsim_bulk_wide_impl, true, 8)

// ---------------------------------------------------------------------------------------------
// maxsim_gemm: many query rows against the same documents, the compute-bound case (a batch of
// queries, or ColPali-style queries of hundreds of tokens), f16/bf16, d in {32, 64, 96, 128}.
//
// Queries come as blocks of 32 rows (a query of Nq tokens takes ceil(Nq / 32) blocks, zero
// rows past its end; `qblock_rows` says how many rows of each block are real). One block of
// GEMM_WARPS warps takes GEMM_WARPS query blocks (a "query tile") and one document at a time;
// each warp holds its query block's A fragments in registers, so a document tile of GEMM_BN
// tokens copied into shared memory once feeds all GEMM_WARPS warps (ldmatrix). Tiles go
// through a GEMM_STAGES-deep cp.async ring that runs ahead across document boundaries; rows
// are XOR-swizzled by 16-byte chunk so ldmatrix is free of bank conflicts. The grid is
// persistent and a multiple of the number of query tiles where it can be, so a block keeps
// its query tile (A is loaded once) and the blocks working on one document at the same time
// read it from HBM once, then from L2. Each warp writes its block's partial score
// (sum over its rows of the max over the document): out[qblock * num_docs + pair]; a query
// of one block is then final, longer ones are summed by sum_qblocks.
#define GEMM_WARPS 8
#define GEMM_THREADS (GEMM_WARPS * 32)
#define GEMM_BN 128
// Tiles in flight; document tokens a warp multiplies per pass over a tile (8-token n-tiles:
// NH / 8 of them, NH / 2 accumulators per thread); blocks per SM the registers are bounded for.
// Measured on the H100 (bench/results/gemm_tune.log): two blocks of 8 warps per SM (at the
// cost of a few spilled registers) beat one by 23% on 32 queries; NH and stages matter little.
#ifndef GEMM_STAGES
#define GEMM_STAGES 3
#endif
#ifndef GEMM_NH
#define GEMM_NH 16
#endif
#ifndef GEMM_MINB
#define GEMM_MINB 2
#endif

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// The swizzled byte offset of 16-byte chunk `ch` of token row `row` in a tile with C chunks per
// row: 8 consecutive rows at the same logical chunk land in 8 distinct bank groups.
template <int C> __device__ __forceinline__ unsigned gemm_swz(int row, int ch) {
    const int x = (C % 8 == 0) ? (row & 7) : ((row >> 1) & 3);
    return (unsigned)(row * C + (ch ^ x)) * 16u;
}

// A query block's 32 rows (`qb`, rows of D halves) as A fragments of mma.m16n8k16 (the layout
// of a wgmma warp's 16 rows too), rows 16mt .. 16mt + 15 in a[mt]: register i of k16 step kk
// holds rows g / g + 8 at k = 16kk + 2c (+ 8), the many-row kernels' query operand.
template <int D>
__device__ __forceinline__ void qblock_fragments(unsigned (&a)[2][D / 16][4], const u16* __restrict__ qb, int g, int c) {
    const unsigned* q = (const unsigned*)qb;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const unsigned* r0 = q + (mt * 16 + g) * (D / 2) + kk * 8 + c;
            const unsigned* r8 = r0 + 8 * (D / 2);
            a[mt][kk][0] = r0[0];
            a[mt][kk][1] = r8[0];
            a[mt][kk][2] = r0[4];
            a[mt][kk][3] = r8[4];
        }
}

// The producer of the many-row kernels (maxsim_gemm, maxsim_wgmma). A block walks (query tile,
// document) tasks with a grid stride, task = pair * qtiles + query tile, kept as (pair, qtile)
// and stepped without dividing. TileProducer copies each document in tiles of TOKENS tokens by
// cp.async, one call a stage, 16-byte chunk `ch` of token row `row` to byte `swz(row, ch)` of
// the stage (rows past the document's end zero-filled), running ahead across document
// boundaries; each call commits a group, empty ones too, so the consumers' wait count stays
// uniform. It returns what the consumers need of the tile (TileMeta), which thread 0 leaves in
// shared memory beside the stage: the consumers read no offsets and divide nothing. A task's
// offsets are loaded when the task before it ends and first used a call later, so no thread
// waits on those loads.
struct alignas(16) TileMeta {
    int ntok;   // the tile's tokens
    int last;   // it ends its document
    int qtile;  // the task's query tile
    int pair;   // the task's document (in the launch's order); -1: no task (the walk is over)
};
template <int D, int TOKENS, int NTHREADS>
struct TileProducer {
    const i64* __restrict__ d_offsets;
    const i64* __restrict__ doc_index;
    i64 num_docs, pair, step_pair;  // (64-bit: a step past the last of 2^31 - 1 documents)
    int qtiles, qtile, step_q, tile = 0;
    unsigned tid;            // this thread's index among the NTHREADS copying threads
    i64 start = 0, end = 0;  // the current task's tokens (as loaded: used a call later)
    __device__ __forceinline__ TileProducer(const i64* offsets, const i64* index, int docs, int tiles, unsigned thread)
        : d_offsets(offsets), doc_index(index), num_docs(docs), qtiles(tiles), tid(thread) {
        const unsigned t = tiles > 0 ? (unsigned)tiles : 1u;
        pair = tiles > 0 ? (i64)(blockIdx.x / t) : num_docs;  // no query tile: no task
        step_pair = gridDim.x / t;
        qtile = (int)(blockIdx.x % t);
        step_q = (int)(gridDim.x % t);
        load();
    }
    __device__ __forceinline__ void load() {
        if (pair < num_docs) {
            const i64 doc = doc_index ? doc_index[pair] : pair;
            start = d_offsets[doc];
            end = d_offsets[doc + 1];
        }
    }
    template <class Swz>
    __device__ __forceinline__ TileMeta issue(const u16* __restrict__ d_tokens, unsigned dst0, Swz swz) {
        constexpr int C = D / 8;  // 16-byte chunks per token row
        TileMeta m{0, 0, 0, -1};
        if (pair < num_docs) {
            const int nd = (int)(end - start);
            const int tok0 = tile * TOKENS;
            const int ntok = min(TOKENS, nd - tok0);
            const u16* base = d_tokens + (start + tok0) * D;
            if constexpr (NTHREADS % C == 0) {  // a thread copies one chunk column, every RSTEP rows
                constexpr int RSTEP = NTHREADS / C;
                static_assert(TOKENS % RSTEP == 0, "every thread copies the same number of chunks");
                const int ch = (int)(tid % C), row0 = (int)(tid / C);
                const u16* src = base + (i64)row0 * D + ch * 8;
#pragma unroll
                for (int i = 0; i < TOKENS / RSTEP; ++i) {
                    const int row = row0 + i * RSTEP;
                    const bool ok = row < ntok;
                    cp_async16(dst0 + swz(row, ch), ok ? (const void*)(src + i * RSTEP * D) : (const void*)d_tokens,
                               ok ? 16u : 0u);
                }
            } else {
#pragma unroll 4
                for (int idx = (int)tid; idx < TOKENS * C; idx += NTHREADS) {
                    const int row = idx / C, ch = idx % C;
                    const bool ok = row < ntok;
                    cp_async16(dst0 + swz(row, ch), ok ? (const void*)(base + (i64)row * D + ch * 8) : (const void*)d_tokens,
                               ok ? 16u : 0u);
                }
            }
            m = TileMeta{ntok, tok0 + TOKENS >= nd, qtile, (int)pair};
            if (m.last) {
                tile = 0;
                pair += step_pair;
                qtile += step_q;
                if (qtile >= qtiles) {
                    qtile -= qtiles;
                    ++pair;
                }
                load();
            } else {
                ++tile;
            }
        }
        cp_async_commit();
        return m;
    }
};

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_gemm_impl(
    const u16* __restrict__ qpad, const int* __restrict__ qblock_rows, int num_qblocks,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out)
{
    constexpr int D = KCH * 32;
    constexpr int C = D / 8;                   // 16-byte chunks per token row
    constexpr int KS = D / 16;                 // k16 steps
    constexpr unsigned TILE_BYTES = GEMM_BN * D * 2;
    extern __shared__ __attribute__((aligned(128))) unsigned char gemm_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int qtiles = (num_qblocks + GEMM_WARPS - 1) / GEMM_WARPS;
    const unsigned smem0 = smem_addr(gemm_smem);
    TileMeta* meta = (TileMeta*)(gemm_smem + GEMM_STAGES * TILE_BYTES);  // per stage

    TileProducer<D, GEMM_BN, GEMM_THREADS> producer(d_offsets, doc_index, num_docs, qtiles, threadIdx.x);
    auto issue = [&](int slot) {
        const TileMeta m =
            producer.issue(d_tokens, smem0 + (unsigned)slot * TILE_BYTES, [](int row, int ch) { return gemm_swz<C>(row, ch); });
        if (threadIdx.x == 0) meta[slot] = m;
    };
#pragma unroll
    for (int s = 0; s < GEMM_STAGES - 1; ++s) issue(s);

    unsigned a[2][KS][4];
    int cur_qtile = -1, rows = 0, qblock = 0, slot = 0;
    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
    while (true) {
        cp_async_wait<GEMM_STAGES - 2>();
        __syncthreads();
        const TileMeta m = meta[slot];
        if (m.pair < 0) break;  // uniform across the block
        issue((slot + GEMM_STAGES - 1) % GEMM_STAGES);
        if (m.qtile != cur_qtile) {
            cur_qtile = m.qtile;
            qblock = m.qtile * GEMM_WARPS + wib;
            rows = qblock < num_qblocks ? qblock_rows[qblock] : 0;
            if (rows > 0) qblock_fragments<D>(a, qpad + (i64)qblock * 32 * D, g, c);
        }
        const int ntok = m.ntok;
        if (rows > 0) {
            const unsigned tile0 = smem0 + (unsigned)slot * TILE_BYTES;
            const int mi = lane >> 3, r = lane & 7;
            constexpr int NT = GEMM_NH / 8;
#pragma unroll
            for (int h = 0; h < GEMM_BN / GEMM_NH; ++h) {
                if (h * GEMM_NH >= ntok) break;  // uniform across the block
                float acc[2][NT][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
                        acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
#pragma unroll
                for (int kk = 0; kk < KS; ++kk) {
                    unsigned b[NT][2];
#pragma unroll
                    for (int np = 0; np < NT / 2; ++np) {
                        const int row = h * GEMM_NH + np * 16 + (mi >> 1) * 8 + r;
                        ldsm_x4(tile0 + gemm_swz<C>(row, 2 * kk + (mi & 1)), b[2 * np][0], b[2 * np][1],
                                b[2 * np + 1][0], b[2 * np + 1][1]);
                    }
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) Mma<BF>::run(acc[mt][nt], a[mt][kk], b[nt][0], b[nt][1]);
                }
                if ((h + 1) * GEMM_NH <= ntok) {  // every column a token: no masks
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            best[mt][0] = fmaxf(best[mt][0], fmaxf(acc[mt][nt][0], acc[mt][nt][1]));
                            best[mt][1] = fmaxf(best[mt][1], fmaxf(acc[mt][nt][2], acc[mt][nt][3]));
                        }
                } else {
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        const int col = h * GEMM_NH + nt * 8 + 2 * c;
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            fold_max(best[mt], acc[mt][nt], col, ntok);
                        }
                    }
                }
            }
        }
        if (m.last) {  // the document is done
            if (rows > 0) {
                const float s = block_score(best, rows, g);
                if (lane == 0) out[(i64)qblock * num_docs + m.pair] = s;
            }
            best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        }
        slot = (slot + 1) % GEMM_STAGES;
    }
    cp_async_wait<0>();
}

#define INSTANTIATE_GEMM(NAME, BF, KCH)                                                        \
    extern "C" __global__ void __launch_bounds__(GEMM_THREADS, GEMM_MINB) NAME(                       \
        const u16* qpad, const int* qblock_rows, int num_qblocks, const u16* d_tokens,         \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out)                  \
    {                                                                                          \
        maxsim_gemm_impl<BF, KCH>(qpad, qblock_rows, num_qblocks, d_tokens, d_offsets, doc_index, num_docs, out); \
    }

INSTANTIATE_GEMM(maxsim_gemm_f16_d32, false, 1)
INSTANTIATE_GEMM(maxsim_gemm_f16_d64, false, 2)
INSTANTIATE_GEMM(maxsim_gemm_f16_d96, false, 3)
INSTANTIATE_GEMM(maxsim_gemm_f16_d128, false, 4)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d32, true, 1)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d64, true, 2)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d96, true, 3)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d128, true, 4)

// The scores of queries longer than one 32-row block: out[q * num_docs + p] is the sum, in
// block order, of the partial scores of the query's blocks qblock_start[q] .. qblock_start[q+1].
extern "C" __global__ void sum_qblocks(const float* __restrict__ partial, const int* __restrict__ qblock_start,
                                       int num_queries, int num_docs, float* __restrict__ out)
{
    const i64 n = (i64)num_queries * num_docs;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const int q = (int)(i / num_docs), p = (int)(i % num_docs);
        float s = 0.f;
        for (int b = qblock_start[q]; b < qblock_start[q + 1]; ++b) s += partial[(i64)b * num_docs + p];
        out[i] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// maxsim_ring: one warp per (query, document), as maxsim_mma, for what maxsim_mma's registers
// cannot hold: wide embeddings (f16/bf16, d = 256..1024, walked in 128-wide steps: dimension
// tiling) and exact f32 (each element split into an f16 high part and an f16 low part scaled by
// 2^11; three tensor-core products per tile, hi*hi + hi*lo + lo*hi, the lo*lo term is below
// 2^-22 of the product). Also instantiated for f16/bf16 at d <= 128. On sm_90 the engine sends
// wide f16/bf16 to maxsim_bulk (its warps split d; 1.07x this kernel at d = 768, H100,
// bench/results/bulk_wide.log); this one keeps f32 and GPUs before sm_90.
//
// The block's query sits in shared memory in fragment order: the four A registers of lane l for
// k16 step j and m-tile mt are the 16 bytes at [j][mt][l], one conflict-free 128-bit load (the
// permuted-k order of maxsim_mma). The document streams through a ring of RING_STAGES stages per
// warp (RING_TILES * 8 tokens x STEP of d for f16/bf16, 8 tokens for f32: 4 KB at STEP = 128 and
// the default 2 tiles; ring_layout in cuda/mod.rs sizes them) by cp.async, RING_STAGES - 1
// stages ahead and across document boundaries. Each lane copies exactly the 16-byte pieces it
// later feeds the tensor cores as B fragments, into lane-major slots: no other lane reads them,
// so there is no barrier, no bank conflict and no register held by a load in flight.
// Blocks take (query, group of `warps` documents) tasks with a grid stride, so a change of
// query is block-uniform: the shared query is rewritten between two barriers.
#ifndef RING_STAGES
#define RING_STAGES 4
#endif
// Most warps per block (the host launches as many as shared memory holds, up to this).
#ifndef RING_WARPS
#define RING_WARPS 8
#endif
// f16/bf16: 8-token tiles per stage, each query A fragment read from shared memory feeding that
// many tensor-core products (2: 2 bytes of query read per byte of document; 4 halves it).
#ifndef RING_TILES
#define RING_TILES 2
#endif
// f32 only. 1 permutes k by 4-float pieces (piece kb of lane c = floats kb*16 + c*4 .. +3 of the
// chunk), so the four lanes of a row copy 64 contiguous bytes (two whole 32-byte sectors) per
// instruction; 0 copies each lane's 8 consecutive floats as two 16-byte halves, four half
// sectors per instruction: half the speed (bench/results/tiles.log, H200: 29.4 against 59.7 M).
#ifndef SPLIT_SECTOR_PIECES
#define SPLIT_SECTOR_PIECES 1
#endif
// 0: the f16 high part of an f32 converted to f16 and back, so the low part carries what f16
// loses, subnormal range included (exact to 2^-36 absolute). 1: rounded to 11 bits with integer
// ops instead (two conversions fewer, the same speed on the H100, bench/results/ring.log), which
// loses up to 2^-25 absolute where the high part falls below f16's normal range.
#ifndef SPLIT_ROUND_BITS
#define SPLIT_ROUND_BITS 0
#endif
#define SPLIT_SCALE 2048.0f
// 1 (the default; sm_90+, f32 only): lane 0 fills each stage with cp.async.bulk copies (one per
// stage when a stage spans whole token rows, else one per row), completion on a per-stage
// mbarrier, as maxsim_bulk does; the stage holds its tokens row-major and each lane reads its B
// pieces from there (2-way bank conflicts where a row is a multiple of 128 bytes). Otherwise
// each lane copies its own pieces by cp.async into lane-major slots, conflict-free. On the H100
// (bench/results/ring_bulk.log) bulk copies read f32 at 3.06 TB/s against 2.91 (46.75 against
// 44.50 M docs/s at B = 100K), but f16 at d = 768 at 2.69 against 2.85 (one 256-byte copy per
// row), so f16/bf16 keep the per-lane copies. ptxas 12.9: 72 bytes of spills in
// maxsim_ring_f32_d64.
#ifndef RING_BULK
#define RING_BULK 1
#endif
#if RING_BULK && __CUDA_ARCH__ >= 900
#define RING_TMA_ARCH true
#else
#define RING_TMA_ARCH false
#endif

// Two floats as f16x2 (`first` in the low half: the lower k index).
__device__ __forceinline__ unsigned f16x2_of(float first, float second) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}
// Split two f32 into f16 high parts (hi) and f16 low parts scaled by 2^11 (lo); see
// SPLIT_ROUND_BITS. The host's split of the queries (split_f32 in cuda/mod.rs) is mode 0's.
__device__ __forceinline__ void split_f32x2(float x0, float x1, unsigned& hi, unsigned& lo) {
    float h0, h1;
#if SPLIT_ROUND_BITS
    h0 = __uint_as_float((__float_as_uint(x0) + 0x1000u) & 0xffffe000u);
    h1 = __uint_as_float((__float_as_uint(x1) + 0x1000u) & 0xffffe000u);
    hi = f16x2_of(h0, h1);
#else
    hi = f16x2_of(x0, x1);
    asm("{ .reg .b16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }"
        : "=f"(h0), "=f"(h1) : "r"(hi));
#endif
    lo = f16x2_of((x0 - h0) * SPLIT_SCALE, (x1 - h1) * SPLIT_SCALE);
}

// KIND 0: f16, 1: bf16, 2: f32 split. STEP = KCH * 32 dimensions per stage; d a multiple of it.
template <int KIND, int KCH>
__device__ __forceinline__ void maxsim_ring_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const void* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int dim)
{
    constexpr bool SPLIT = KIND == 2;
    constexpr int EB = SPLIT ? 4 : 2;          // bytes per stored element
    constexpr int PIECES = EB / 2;             // 16-byte pieces per lane per (tile, chunk)
    constexpr int TT = SPLIT ? 1 : RING_TILES; // 8-token tiles per stage
    constexpr int TOK = TT * 8;
    constexpr int STEP = KCH * 32;
    constexpr int CPL = TT * KCH * PIECES;     // 16-byte pieces per lane per stage
    constexpr int S = RING_STAGES;
    extern __shared__ __attribute__((aligned(16))) V4 ring_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int nw = blockDim.x >> 5;
    const int kj = dim / 16;                   // k16 steps
    const int ks_per_tok = dim / STEP;
    V4* qa = ring_smem;                                         // [SPLIT + 1][kj][2][32]
    V4* wring = ring_smem + (SPLIT ? 2 : 1) * kj * 64 + (i64)wib * S * CPL * 32;  // this warp's ring
    V4* ring = wring + lane;                                    // per-lane copies: its lane-major slots
    // Bulk copies: the stages' mbarriers, and a token's bytes in one stage.
    constexpr bool TMA = RING_TMA_ARCH && SPLIT;
    constexpr unsigned ROW_BYTES = STEP * EB;
    unsigned long long* bars =
        (unsigned long long*)(ring_smem + (SPLIT ? 2 : 1) * kj * 64 + (i64)nw * S * CPL * 32) + wib * S;
    if (TMA) {
        if (lane == 0) {
            for (int s = 0; s < S; ++s) mbar_init(smem_addr(&bars[s]));
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
    }
    const int groups = (num_docs + nw - 1) / nw;
    const i64 tasks = (i64)num_queries * groups;
    const char* tok_bytes = (const char*)d_tokens;

    // The extent of this warp's document of task t (nd = 0: none).
    auto extent = [&](i64 t, i64& d0, int& nd) {
        const int pair = (int)(t % groups) * nw + wib;
        nd = 0;
        if (pair < num_docs) {
            const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
            d0 = d_offsets[doc];
            nd = (int)(d_offsets[doc + 1] - d0);
        }
    };
    // Producer cursor: task, first token of the stage, d step; runs S - 1 stages ahead.
    i64 pt = blockIdx.x, pd0 = 0;
    int pnd = 0, ptok = 0, pks = 0;
    auto p_seek = [&]() {
        for (; pt < tasks; pt += gridDim.x) {
            extent(pt, pd0, pnd);
            if (pnd > 0) return;
        }
    };
    auto produce = [&](int slot) {
        if (pt < tasks) {
            const char* doc = tok_bytes + pd0 * dim * EB;
            if constexpr (TMA) {
                if (lane == 0) {
                    const int rows = min(TOK, pnd - ptok);
                    const unsigned bar = smem_addr(&bars[slot]), dst = smem_addr(wring + slot * CPL * 32);
                    const char* src = doc + (i64)ptok * dim * EB + pks * STEP * EB;
                    mbar_expect_tx(bar, (unsigned)rows * ROW_BYTES);
                    if (ks_per_tok == 1)  // whole rows: one contiguous copy
                        bulk_load(dst, src, (unsigned)rows * ROW_BYTES, bar);
                    else
                        for (int r = 0; r < rows; ++r)
                            bulk_load(dst + r * ROW_BYTES, src + (i64)r * dim * EB, ROW_BYTES, bar);
                }
            } else {
                const unsigned dst = smem_addr(ring + slot * CPL * 32);
#pragma unroll
                for (int tt = 0; tt < TT; ++tt) {
                    const int tok = ptok + tt * 8 + g;
                    const bool ok = tok < pnd;
                    const char* row = doc + (i64)(ok ? tok : 0) * dim * EB + pks * STEP * EB;
#pragma unroll
                    for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                        for (int h = 0; h < PIECES; ++h)
                            cp_async16(dst + ((tt * KCH + ch) * PIECES + h) * 512u,
                                       row + ch * 32 * EB + (SPLIT && SPLIT_SECTOR_PIECES ? h * 64 + c * 16 : c * 8 * EB + h * 16),
                                       ok ? 16u : 0u);
                }
            }
            if (++pks == ks_per_tok) {
                pks = 0;
                ptok += TOK;
                if (ptok >= pnd) { ptok = 0; pt += gridDim.x; p_seek(); }
            }
        }
        if (!TMA) cp_async_commit();
    };
    // Piece h of 16 bytes of chunk ch of 8-token tile tt in stage `slot`: this lane's B
    // fragment elements (see produce) for its token row g.
    auto piece = [&](int slot, int tt, int ch, int h) -> V4 {
        if constexpr (TMA)
            return *(const V4*)((const char*)(wring + slot * CPL * 32) + (tt * 8 + g) * ROW_BYTES + ch * 32 * EB +
                                (SPLIT && SPLIT_SECTOR_PIECES ? h * 64 + c * 16 : c * 8 * EB + h * 16));
        else
            return ring[(slot * CPL + (tt * KCH + ch) * PIECES + h) * 32];
    };
    p_seek();
#pragma unroll
    for (int s = 0; s < S - 1; ++s) produce(s);

    int stage = 0, cur_q = -1, nq = 0;
    for (i64 t = blockIdx.x; t < tasks; t += gridDim.x) {
        const int qi = (int)(t / groups);
        if (qi != cur_q) {  // uniform across the block
            __syncthreads();
            const unsigned* q = (const unsigned*)(qpad + (i64)qi * (SPLIT ? 2 : 1) * 32 * dim);
            const int half_row = dim / 2;
            for (int e = threadIdx.x; e < kj * 64; e += blockDim.x) {
                const int j = e >> 6, mt = (e >> 5) & 1, l = e & 31;
                // Lane c holds elements c*8 .. c*8+7 of each 32-wide chunk (k16 step kb: the
                // four from kb*4), or with SPLIT_SECTOR_PIECES (f32) elements kb*16 + c*4 .. +3.
                const int w = ((j >> 1) * 32 + (SPLIT && SPLIT_SECTOR_PIECES ? (j & 1) * 16 + (l & 3) * 4
                                                                              : (l & 3) * 8 + (j & 1) * 4)) / 2;
                const int r0 = (mt * 16 + (l >> 2)) * half_row + w, r8 = r0 + 8 * half_row;
                qa[e] = V4{q[r0], q[r8], q[r0 + 1], q[r8 + 1]};
                if (SPLIT) {
                    const unsigned* ql = q + 32 * half_row;
                    qa[kj * 64 + e] = V4{ql[r0], ql[r8], ql[r0 + 1], ql[r8 + 1]};
                }
            }
            __syncthreads();
            cur_q = qi;
            nq = (int)(q_offsets[qi + 1] - q_offsets[qi]);
        }
        i64 d0;
        int nd;
        extent(t, d0, nd);
        if (nd == 0) continue;  // uniform across the warp; the producer skipped it too
        const int pair = (int)(t % groups) * nw + wib;
        float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
        for (int tok0 = 0; tok0 < nd; tok0 += TOK) {
            float acc[TT][2][4], cor[TT][2][4];
#pragma unroll
            for (int tt = 0; tt < TT; ++tt)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) acc[tt][mt][r] = cor[tt][mt][r] = 0.f;
            for (int ks = 0; ks < ks_per_tok; ++ks, ++stage) {
                if constexpr (TMA) {
                    __syncwarp();  // every lane is done with the slot produce() refills
                    produce((stage + S - 1) % S);
                    mbar_wait(smem_addr(&bars[stage % S]), (unsigned)(stage / S) & 1u);
                } else {
                    cp_async_wait<S - 2>();
                    produce((stage + S - 1) % S);
                }
                const int slot = stage % S;
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch) {
                    unsigned bh[TT][4], bl[TT][4];
#pragma unroll
                    for (int tt = 0; tt < TT; ++tt) {
                        if (SPLIT) {
                            const V4 v0 = piece(slot, tt, ch, 0), v1 = piece(slot, tt, ch, 1);
                            split_f32x2(__uint_as_float(v0.x), __uint_as_float(v0.y), bh[tt][0], bl[tt][0]);
                            split_f32x2(__uint_as_float(v0.z), __uint_as_float(v0.w), bh[tt][1], bl[tt][1]);
                            split_f32x2(__uint_as_float(v1.x), __uint_as_float(v1.y), bh[tt][2], bl[tt][2]);
                            split_f32x2(__uint_as_float(v1.z), __uint_as_float(v1.w), bh[tt][3], bl[tt][3]);
                        } else {
                            const V4 v = piece(slot, tt, ch, 0);
                            bh[tt][0] = v.x; bh[tt][1] = v.y; bh[tt][2] = v.z; bh[tt][3] = v.w;
                        }
                    }
#pragma unroll
                    for (int kb = 0; kb < 2; ++kb) {
                        const int j = (ks * KCH + ch) * 2 + kb;
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            const V4 av = qa[(j * 2 + mt) * 32 + lane];
                            const unsigned a[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
                            for (int tt = 0; tt < TT; ++tt) {
                                if (tok0 + tt * 8 >= nd) continue;  // uniform across the warp
                                Mma<KIND == 1>::run(acc[tt][mt], a, bh[tt][2 * kb], bh[tt][2 * kb + 1]);
                                if (SPLIT) {
                                    const V4 lv = qa[kj * 64 + (j * 2 + mt) * 32 + lane];
                                    const unsigned al[4] = {lv.x, lv.y, lv.z, lv.w};
                                    Mma<false>::run(cor[tt][mt], a, bl[tt][2 * kb], bl[tt][2 * kb + 1]);
                                    Mma<false>::run(cor[tt][mt], al, bh[tt][2 * kb], bh[tt][2 * kb + 1]);
                                }
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int tt = 0; tt < TT; ++tt) {
                const int col = tok0 + tt * 8 + 2 * c;
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    if (SPLIT)
#pragma unroll
                        for (int r = 0; r < 4; ++r) acc[tt][mt][r] += cor[tt][mt][r] * (1.0f / SPLIT_SCALE);
                    fold_max(best[mt], acc[tt][mt], col, nd);
                }
            }
        }
        const float score = block_score(best, nq, g);
        if (lane == 0) out[(i64)qi * num_docs + pair] = score;
    }
    cp_async_wait<0>();
}

#define INSTANTIATE_RING(NAME, KIND, KCH)                                                      \
    extern "C" __global__ void __launch_bounds__(RING_WARPS * 32) NAME(                      \
        const u16* qpad, const i64* q_offsets, int num_queries, const void* d_tokens,          \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int dim)         \
    {                                                                                          \
        maxsim_ring_impl<KIND, KCH>(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out, dim); \
    }

INSTANTIATE_RING(maxsim_ring_f16_d32, 0, 1)
INSTANTIATE_RING(maxsim_ring_f16_d64, 0, 2)
INSTANTIATE_RING(maxsim_ring_f16_d96, 0, 3)
INSTANTIATE_RING(maxsim_ring_f16_d128, 0, 4)
INSTANTIATE_RING(maxsim_ring_bf16_d32, 1, 1)
INSTANTIATE_RING(maxsim_ring_bf16_d64, 1, 2)
INSTANTIATE_RING(maxsim_ring_bf16_d96, 1, 3)
INSTANTIATE_RING(maxsim_ring_bf16_d128, 1, 4)
INSTANTIATE_RING(maxsim_ring_f32_d32, 2, 1)
INSTANTIATE_RING(maxsim_ring_f32_d64, 2, 2)
INSTANTIATE_RING(maxsim_ring_f32_d96, 2, 3)
INSTANTIATE_RING(maxsim_ring_f32_d128, 2, 4)
