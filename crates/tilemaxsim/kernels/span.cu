// maxsim_span (sm_90+): maxsim_bulk for packed documents of any lengths, scored against every
// document (no candidate list). A block scores a run of `group` consecutive documents for one
// query, and its tiles cut the run's tokens, not its documents: a 128-token tile holds the end
// of one document and the start of the next, so every copy but the run's last is a full
// SPAN_TILE × d tile. On U[32,256], whole-document tiles are 72% full on average (1.57 tiles
// for 144 tokens), and the per-tile cost, not the bytes, set maxsim_bulk's rate there.
//
// Warp w multiplies the tile's 32-token chunk w. A document that lies inside one chunk is
// scored by that warp from its registers. A document that crosses a chunk boundary ("crossing")
// gathers its row maxima in shared memory by atomicMax on order-preserving integers; after the
// tile's __syncthreads the warp holding its last token sums them. Crossing documents are
// numbered in run order and take slot n % SPAN_SLOTS: the 16th crossing document after n
// starts at least 15 chunks (3 tiles) past n's last chunk, so a slot is reset before reuse.
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"

#define SPAN_THREADS 128
#define SPAN_TILE 128  // tokens: 32 per warp
#define SPAN_SLOTS 16

// Floats as ints that order the same way under signed comparison (an involution).
__device__ __forceinline__ int span_ord(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float span_unord(int i) { return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff); }

// Fold a C fragment's columns col, col + 1 that lie in [lo, hi) into the rows' maxima.
__device__ __forceinline__ void fold_range(float (&best)[2], const float (&acc)[4], int col, int lo, int hi) {
    const bool in0 = col >= lo && col < hi, in1 = col + 1 >= lo && col + 1 < hi;
    best[0] = fmaxf(best[0], fmaxf(in0 ? acc[0] : NEG_INF, in1 ? acc[1] : NEG_INF));
    best[1] = fmaxf(best[1], fmaxf(in0 ? acc[2] : NEG_INF, in1 ? acc[3] : NEG_INF));
}

// A warp's place in the run's documents: document `doc` spans tokens [start, end), and `crossed`
// crossing documents come before it. Every warp walks every document of the run in order.
struct SpanCursor {
    int doc, crossed;
    i64 start, end;
    __device__ __forceinline__ bool crosses(i64 t0) const {
        return end > start && ((start - t0) >> 5) != ((end - 1 - t0) >> 5);
    }
    __device__ __forceinline__ void step(const i64* __restrict__ d_offsets, i64 t0, int last) {
        crossed += crosses(t0);
        ++doc;
        start = end;
        if (doc < last) end = d_offsets[doc + 1];
    }
};

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_span_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, const u16* __restrict__ d_tokens,
    const i64* __restrict__ d_offsets, int num_docs, float* __restrict__ out, int stages, int group)
{
#if __CUDA_ARCH__ >= 900
    constexpr int D = KCH * 32;
    constexpr int STAGE = SPAN_TILE * D;  // halves
    extern __shared__ __attribute__((aligned(128))) unsigned char span_smem[];
    u16* ring = (u16*)span_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    int* slots = (int*)(bars + stages);  // [SPAN_SLOTS][32]: crossing documents' row maxima
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int runs = (num_docs + group - 1) / group;
    const int qi = blockIdx.x / runs;
    const int p0 = (blockIdx.x % runs) * group, p1 = min(p0 + group, num_docs);
    const i64 t0 = d_offsets[p0], t1 = d_offsets[p1];
    const int tiles = (int)((t1 - t0 + SPAN_TILE - 1) / SPAN_TILE);
    float* q_out = out + (i64)qi * num_docs;

    for (int i = threadIdx.x; i < SPAN_SLOTS * 32; i += SPAN_THREADS) slots[i] = span_ord(NEG_INF);
    // Empty documents (possible in raw packed input): the sum of nothing found, as maxsim_bulk.
    for (int p = p0 + threadIdx.x; p < p1; p += SPAN_THREADS)
        if (d_offsets[p + 1] == d_offsets[p]) q_out[p] = NEG_INF;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[s]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // barriers initialized, slots reset
    // Thread 0 keeps `stages` tiles in flight: tile k goes to stage k % stages.
    auto produce = [&](int k) {
        if (k >= tiles) return;
        const i64 tok = t0 + (i64)k * SPAN_TILE;
        const unsigned bytes = (unsigned)min((i64)SPAN_TILE, t1 - tok) * D * 2u;
        const unsigned bar = smem_addr(&bars[k % stages]);
        mbar_expect_tx(bar, bytes);
        bulk_load(smem_addr(ring + (i64)(k % stages) * STAGE), d_tokens + tok * D, bytes, bar);
    };
    if (threadIdx.x == 0)
        for (int k = 0; k < stages; ++k) produce(k);

    const int nq = (int)(q_offsets[qi + 1] - q_offsets[qi]);
    unsigned a[2][KCH][2][4];
    load_a_permuted<KCH>(a, qpad + (i64)qi * 32 * D, g, c);
    SpanCursor cur{p0, 0, t0, p0 < p1 ? d_offsets[p0 + 1] : t0};

    for (int k = 0; k < tiles; ++k) {
        const int s = k % stages;
        const i64 c0 = t0 + (i64)k * SPAN_TILE + wib * 32, c1 = min(c0 + 32, t1);
        int fin_slot = -1, fin_doc = 0;  // a crossing document that ends in this warp's chunk
        mbar_wait(smem_addr(&bars[s]), (unsigned)(k / stages) & 1u);
        if (c0 < t1) {
            const u16* buf = ring + (i64)s * STAGE + wib * 32 * D;
            float acc[4][2][4];
            {
                // Columns past the run's end hold whatever the stage held before; no document
                // range covers them.
                V4 b[4][KCH];
#pragma unroll
                for (int t = 0; t < 4; ++t)
#pragma unroll
                    for (int ch = 0; ch < KCH; ++ch)
                        b[t][ch] = *(const V4*)(buf + (t * 8 + g) * D + ch * 32 + c * 8);
#pragma unroll
                for (int t = 0; t < 4; ++t)
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) acc[t][mt][e] = 0.f;
#pragma unroll
                        for (int ch = 0; ch < KCH; ++ch) {
                            Mma<BF>::run(acc[t][mt], a[mt][ch][0], b[t][ch].x, b[t][ch].y);
                            Mma<BF>::run(acc[t][mt], a[mt][ch][1], b[t][ch].z, b[t][ch].w);
                        }
                    }
            }
            while (cur.doc < p1 && cur.end <= c0) cur.step(d_offsets, t0, p1);
            // The documents that meet this chunk, in order (warp-uniform control flow).
            SpanCursor seg = cur;
            while (seg.doc < p1 && seg.start < c1) {
                if (seg.end > seg.start) {
                    const int lo = (int)(max(seg.start, c0) - c0), hi = (int)(min(seg.end, c1) - c0);
                    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
#pragma unroll
                    for (int t = 0; t < 4; ++t)
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) fold_range(best[mt], acc[t][mt], t * 8 + 2 * c, lo, hi);
                    if (!seg.crosses(t0)) {
                        const float sc = block_score(best, nq, g);
                        if (lane == 0) q_out[seg.doc] = sc;
                    } else {
                        int* slot = slots + (seg.crossed % SPAN_SLOTS) * 32;
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            const float m0 = warp_max_xor(best[mt][0], 2);
                            const float m8 = warp_max_xor(best[mt][1], 2);
                            if (c == 0) {
                                atomicMax(slot + mt * 16 + g, span_ord(m0));
                                atomicMax(slot + mt * 16 + g + 8, span_ord(m8));
                            }
                        }
                        if (seg.end <= c1) {
                            fin_slot = seg.crossed % SPAN_SLOTS;
                            fin_doc = seg.doc;
                        }
                    }
                }
                if (seg.end > c1) break;
                seg.step(d_offsets, t0, p1);
            }
        }
        __syncthreads();  // stage s is read by every warp; the crossing maxima are in their slots
        if (threadIdx.x == 0) produce(k + stages);
        if (fin_slot >= 0) {
            int* slot = slots + fin_slot * 32;
            const float sum = warp_sum(lane < nq ? span_unord(slot[lane]) : 0.f);
            slot[lane] = span_ord(NEG_INF);
            if (lane == 0) q_out[fin_doc] = sum;
        }
    }
#endif
}

#define INSTANTIATE_SPAN(NAME, BF, KCH)                                                        \
    extern "C" __global__ void __launch_bounds__(SPAN_THREADS) NAME(                          \
        const u16* qpad, const i64* q_offsets, const u16* d_tokens, const i64* d_offsets,     \
        int num_docs, float* out, int stages, int group)                                       \
    {                                                                                          \
        maxsim_span_impl<BF, KCH>(qpad, q_offsets, d_tokens, d_offsets, num_docs, out, stages, group); \
    }

INSTANTIATE_SPAN(maxsim_span_f16_d32, false, 1)
INSTANTIATE_SPAN(maxsim_span_f16_d64, false, 2)
INSTANTIATE_SPAN(maxsim_span_f16_d96, false, 3)
INSTANTIATE_SPAN(maxsim_span_f16_d128, false, 4)
INSTANTIATE_SPAN(maxsim_span_bf16_d32, true, 1)
INSTANTIATE_SPAN(maxsim_span_bf16_d64, true, 2)
INSTANTIATE_SPAN(maxsim_span_bf16_d96, true, 3)
INSTANTIATE_SPAN(maxsim_span_bf16_d128, true, 4)
