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
#include "common.cuh"
#include "mma_frag.cuh"

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
                    tile_products<BF, KCH>(acc, a, b[tt]);
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
