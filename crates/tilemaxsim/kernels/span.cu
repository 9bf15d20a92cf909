// maxsim_span (sm_90+): maxsim_bulk for packed documents of any lengths, scored against every
// document (no candidate list). A block scores a run of `group` consecutive documents for one
// query, and its tiles cut the run's tokens, not its documents: a tile holds the end
// of one document and the start of the next, so every copy but the run's last is a full
// tile. On U[32,256], whole-document tiles are 72% full on average (1.57 tiles
// for 144 tokens), and the per-tile cost, not the bytes, set maxsim_bulk's rate there.
//
// Warp w multiplies the tile's window w: 32 << WLOG tokens (SPAN_WLOG_OF below; plan.rs:
// span_window_log), a 32-token chunk at a time. A document that lies inside one window is
// scored by that warp from its registers; its row maxima go on from chunk to chunk of the
// window in registers (`carry`). A document whose tokens lie in more than one window
// ("crossing") gathers its row maxima in shared memory by atomicMax on order-preserving
// integers; after the tile's __syncthreads the warp holding its last token sums them. Crossing
// documents are numbered in run order and take slot n % SPAN_SLOTS: the 16th crossing document
// after n starts at least 15 windows (3 tiles) past n's last window, so a slot is reset before
// reuse. At small d a 32-token chunk is little work, and wider windows spend the walk over the
// documents, the crossing documents' atomics and the block's barrier on more of it.
//
// Any d ≤ 256 (maxsim_span_any_*): the instantiation for KCH = ceil(d / 32) chunks of 32, with
// rows d wide in memory and in shared memory; the dimensions past d are zeros on chip (the
// query's A fragments and the document's B fragments are masked), never in the stored data.
// d % 8 = 0 keeps rows 16-byte aligned (MODE 1: 16-byte loads). Other d (MODE 2-4): the copy
// starts at the 16-byte boundary below the tile, the fragments are read by the widest loads
// the rows' alignment allows (load_b), and the corpus's last bytes past its last 16-byte
// boundary are copied by thread 0.
//
// Past four chunks (d > 128) the tile's B fragments are read a chunk at a time, so registers
// hold the query's fragments (16 a chunk), the accumulators and one chunk's B; maxsim_bulk_any
// splits d over the warps instead and sums their partial products through shared memory, which
// does not shrink with d (3.8 bytes of shared-memory traffic per byte read at d = 136).
//
// HALF (d whose last chunk of 32 holds at most 16 dimensions: (d - 1) % 32 < 16): the last
// chunk's K order is dims c*4 .. c*4 + 3 for the first k16 product, so the second one would
// multiply zeros only; it is skipped, with its loads and its A fragment (d = 16 does one
// product a tile column, not two).
//
// At d = 8-56 of 16-byte rows maxsim_stream (stream.cu) takes these launches by default: the
// same runs, streamed through registers by warp, whole documents a warp.
//
// The walk over the run's documents reads their offsets from shared memory (copied when the
// block starts): at small d a warp's chunk is a few hundred bytes, and a dependent read of the
// next offset from global memory per document set the pace.
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "any_frag.cuh"

#define SPAN_THREADS 128
#define SPAN_WARPS 4  // a tile is a window of 32 << WLOG tokens per warp
#define SPAN_SLOTS 16
#define SPAN_RUN_MAX 64  // documents per run at most (plan.rs: BULK_GROUP_RANGE)

// Floats as ints that order the same way under signed comparison (an involution).
__device__ __forceinline__ int span_ord(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float span_unord(int i) { return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff); }

// Fold a C fragment's columns col, col + 1 that lie in [lo, hi) into the rows' maxima.
__device__ __forceinline__ void fold_range(float (&best)[2], const float (&acc)[4], int col, int lo, int hi) {
    const bool in0 = col >= lo && col < hi, in1 = col + 1 >= lo && col + 1 < hi;
    best[0] = max_nan(best[0], max_nan(in0 ? acc[0] : NEG_INF, in1 ? acc[1] : NEG_INF));
    best[1] = max_nan(best[1], max_nan(in0 ? acc[2] : NEG_INF, in1 ? acc[3] : NEG_INF));
}

// A warp's place in the run's documents: document `doc` spans tokens [start, end) (counted from
// the run's first token), and `crossed` crossing documents come before it. Every warp walks
// every document of the run in order; `offs` holds the run's offsets from its first token
// (document p0 + i ends at offs[i + 1]; a run's tokens, rounded up to whole tiles, fit an int:
// the host takes corpora of at most SPAN_MAX_TOKENS tokens, plan.rs).
struct SpanCursor {
    int doc, crossed, start, end;
    // Whether the document's tokens lie in more than one warp window (2^wsh tokens).
    __device__ __forceinline__ bool crosses(int wsh) const {
        return end > start && (start >> wsh) != ((end - 1) >> wsh);
    }
    __device__ __forceinline__ void step(const int* offs, int p0, int last, int wsh) {
        crossed += crosses(wsh);
        ++doc;
        start = end;
        if (doc < last) end = offs[doc + 1 - p0];
    }
};

// The products of the query (A fragments `a`) with the 32 token rows at `buf` (`D` halves
// apart): acc[t][mt] is the C fragment of tokens t * 8 .. t * 8 + 7 and query rows mt * 16 ..
// mt * 16 + 15.
template <bool BF, int KCH, int MODE, bool HALF>
__device__ __forceinline__ void span_chunk_products(float (&acc)[4][2][4], const unsigned (&a)[2][KCH][2][4],
                                                    const u16* buf, int D, int g, int c) {
    if (KCH > 4) {
        // A chunk at a time: one chunk's B fragments live at once.
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[t][mt][e] = 0.f;
#pragma unroll
        for (int ch = 0; ch < KCH; ++ch) {
            const bool half = HALF && ch == KCH - 1;
            V4 b[4];
#pragma unroll
            for (int t = 0; t < 4; ++t)
                b[t] = half ? load_b_half<MODE>(buf + (t * 8 + g) * D, ch * 32 + c * 4, D)
                            : load_b<MODE, KCH>(buf + (t * 8 + g) * D, ch * 32 + c * 8, D, ch == KCH - 1);
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    Mma<BF>::run(acc[t][mt], a[mt][ch][0], b[t].x, b[t].y);
                    if (!half) Mma<BF>::run(acc[t][mt], a[mt][ch][1], b[t].z, b[t].w);
                }
        }
    } else {
        V4 b[4][KCH];
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch)
                b[t][ch] = HALF && ch == KCH - 1 ? load_b_half<MODE>(buf + (t * 8 + g) * D, ch * 32 + c * 4, D)
                                                 : load_b<MODE, KCH>(buf + (t * 8 + g) * D, ch * 32 + c * 8, D, ch == KCH - 1);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[t][mt][e] = 0.f;
            tile_products<BF, KCH, HALF>(acc[t], a, b[t]);
        }
    }
}

template <bool BF, int KCH, int MODE, bool HALF, int WLOG>
__device__ __forceinline__ void maxsim_span_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, const u16* __restrict__ d_tokens,
    const i64* __restrict__ d_offsets, int num_docs, float* __restrict__ out, int stages, int group,
    int dim_arg)
{
#if __CUDA_ARCH__ >= 900
    const int D = MODE == 0 ? KCH * 32 : dim_arg;  // row width in halves
    // A warp's window: 2^wsh tokens, SUB chunks of 32; a tile is four windows.
    constexpr int wsh = 5 + WLOG, SUB = 1 << WLOG, W = 32 << WLOG, TILE = SPAN_WARPS << wsh;
    // A stage in halves: the tile, the copy's start rounded down (MODE 2, < 8 halves) and the
    // last row's read past d, in 128-byte steps (span_stage_halves in plan.rs).
    const int STAGE = MODE == 0 ? TILE * D : (TILE * D + 8 + 32 * KCH + 63) / 64 * 64;
    extern __shared__ __attribute__((aligned(128))) unsigned char span_smem[];
    u16* ring = (u16*)span_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    int* slots = (int*)(bars + stages);  // [SPAN_SLOTS][32]: crossing documents' row maxima
    int* offs = slots + SPAN_SLOTS * 32;  // [SPAN_RUN_MAX + 1]: the run's offsets from t0
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int runs = (num_docs + group - 1) / group;
    const int qi = blockIdx.x / runs;
    const int p0 = (blockIdx.x % runs) * group, p1 = min(p0 + group, num_docs);
    const i64 t0 = d_offsets[p0], t1 = d_offsets[p1];
    const int T = (int)(t1 - t0);  // the run's tokens
    const int tiles = (T + TILE - 1) / TILE;
    float* q_out = out + (i64)qi * num_docs;

    for (int i = threadIdx.x; i < SPAN_SLOTS * 32; i += SPAN_THREADS) slots[i] = span_ord(NEG_INF);
    for (int i = threadIdx.x; i <= p1 - p0; i += SPAN_THREADS) offs[i] = (int)(d_offsets[p0 + i] - t0);
    // Empty documents (possible in raw packed input): the sum of nothing found, as maxsim_bulk.
    for (int p = p0 + threadIdx.x; p < p1; p += SPAN_THREADS)
        if (d_offsets[p + 1] == d_offsets[p]) q_out[p] = NEG_INF;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[s]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // barriers initialized, slots reset, offsets copied
    // Thread 0 keeps `stages` tiles in flight: tile k goes to stage k % stages.
    // The corpus's last byte (MODE 2-4 copy from 16-byte boundaries and must not read past it).
    const i64 end_bytes = MODE >= 2 ? d_offsets[num_docs] * D * 2 : 0;
    auto produce = [&](int k) {
        if (k >= tiles) return;
        const i64 tok = t0 + (i64)k * TILE;
        const i64 ntok = min((i64)TILE, t1 - tok);
        u16* dst = ring + (i64)(k % stages) * STAGE;
        const unsigned bar = smem_addr(&bars[k % stages]);
        if (MODE < 2) {
            const unsigned bytes = (unsigned)ntok * D * 2u;
            mbar_expect_tx(bar, bytes);
            bulk_load(smem_addr(dst), d_tokens + tok * D, bytes, bar);
            return;
        }
        const i64 s = tok * D * 2, e = (tok + ntok) * D * 2;  // bytes from d_tokens
        const i64 a = s & ~15ll;
        const i64 b = min((e + 15) & ~15ll, end_bytes & ~15ll);  // the bulk copy: [a, b)
        // Past b (the corpus's last < 16 bytes): by hand, before the arrive that releases them.
        for (i64 x = max(b, a); x < e; x += 2)
            dst[(x - a) / 2] = d_tokens[x / 2];
        if (b > a) {
            mbar_expect_tx(bar, (unsigned)(b - a));
            bulk_load(smem_addr(dst), (const char*)d_tokens + a, (unsigned)(b - a), bar);
        } else {
            mbar_arrive(bar);
        }
    };
    if (threadIdx.x == 0)
        for (int k = 0; k < stages; ++k) produce(k);

    const int nq = (int)(q_offsets[qi + 1] - q_offsets[qi]);
    unsigned a[2][KCH][2][4];
    if (MODE == 0)
        load_a_permuted<KCH>(a, qpad + (i64)qi * 32 * D, g, c);
    else
        load_a_any<KCH, HALF>(a, qpad + (i64)qi * 32 * D, D, g, c);
    SpanCursor cur{p0, 0, 0, p0 < p1 ? offs[1] : 0};

    for (int k = 0; k < tiles; ++k) {
        const int s = k % stages;
        const int w0 = k * TILE + (wib << wsh), w1 = min(w0 + W, T);  // this warp's window
        int fin_slot = -1, fin_doc = 0;  // a crossing document that ends in this warp's window
        mbar_wait(smem_addr(&bars[s]), (unsigned)(k / stages) & 1u);
        // MODE 2-4: the tile's first token sits past the copy's 16-byte boundary.
        const int head = MODE >= 2 ? (int)(((t0 + (i64)k * TILE) * D) & 7) : 0;
        // The row maxima of the document that goes on into the window's next chunk.
        float carry[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
#pragma unroll 1
        for (int j = 0; j < SUB; ++j) {
            const int c0 = w0 + j * 32, c1 = min(c0 + 32, w1);
            if (c0 >= w1) break;  // uniform
            // Columns past the run's end hold whatever the stage held before; no document
            // range covers them.
            float acc[4][2][4];
            span_chunk_products<BF, KCH, MODE, HALF>(
                acc, a, ring + s * STAGE + head + ((wib << wsh) + j * 32) * D, D, g, c);
            while (cur.doc < p1 && cur.end <= c0) cur.step(offs, p0, p1, wsh);
            // The documents that meet this chunk, in order (warp-uniform control flow).
            SpanCursor seg = cur;
            while (seg.doc < p1 && seg.start < c1) {
                if (seg.end > seg.start) {
                    const int lo = max(seg.start, c0) - c0, hi = min(seg.end, c1) - c0;
                    // A document that began in this window's previous chunk goes on from there.
                    float best[2][2];
                    const bool cont = seg.start < c0 && c0 > w0;
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                        for (int r = 0; r < 2; ++r) best[mt][r] = cont ? carry[mt][r] : NEG_INF;
                    if (lo == 0 && hi == 32) {
                        // The document covers the whole chunk (most chunks of long documents):
                        // every column counts, no range test.
#pragma unroll
                        for (int t = 0; t < 4; ++t)
#pragma unroll
                            for (int mt = 0; mt < 2; ++mt) {
                                best[mt][0] = max_nan(best[mt][0], max_nan(acc[t][mt][0], acc[t][mt][1]));
                                best[mt][1] = max_nan(best[mt][1], max_nan(acc[t][mt][2], acc[t][mt][3]));
                            }
                    } else {
#pragma unroll
                        for (int t = 0; t < 4; ++t)
#pragma unroll
                            for (int mt = 0; mt < 2; ++mt)
                                fold_range(best[mt], acc[t][mt], t * 8 + 2 * c, lo, hi);
                    }
                    if (seg.end > c1 && c1 < w1) {
                        // It goes on into the window's next chunk: carried there.
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) carry[mt][0] = best[mt][0], carry[mt][1] = best[mt][1];
                        break;
                    }
                    if (!seg.crosses(wsh)) {
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
                seg.step(offs, p0, p1, wsh);
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

// Blocks an SM the register budget is set for: 3; SPAN_K1_BLOCKS at one chunk (d ≤ 32),
// where a chunk's work is small and more warps hide its latencies (four blocks, 121 registers,
// left the schedulers idle half the cycles at d = 16); 2 past five chunks, where the query's
// fragments alone take 96-128 registers and two 2-stage tiles of d > 160 fill shared memory.
// Six hold the one-chunk kernels to 80 registers, where k1a/u/w/d spill 28-44 bytes, the HALF
// forms 0-8 and d = 32's kernel 20 (NVRTC 13); yet five (96 registers, 0-20 bytes) and four (no spills) lose on the H200, f16
// U[32,256] B = 100K, % of the read ceiling at six / five / four blocks: d = 16 48.5 / 45.8 /
// 41.2 and 48.6 / 45.9 / 41.3, d = 20 37.1 / 34.1 / 32.0, d = 24 54.5 / 51.1 / 47.7; d = 32
// 71.5 / 72.9 / 65.7 and 72.5 / 73.5 / 65.6 (five within the runs' spread;
// bench/results/h200/2026-11-29d/call2.log).
#ifndef SPAN_K1_BLOCKS
#define SPAN_K1_BLOCKS 6
#endif
// Two to five chunks (d = 33..160): 3, but more for the any-d kernels (MODE > 0) of two chunks:
// 5 for k2ah (d = 33..48 at 16-byte rows; 96 registers, no spills): H200, B = 100K, U[32,256],
// d = 48: 70.0% -> 75.5% of the read ceiling in one run, 66.4% -> 68.4% (two runs each,
// alternating) on another machine; against four, d = 40 75.3 / 73.9% -> 70.6 / 70.6%, d = 48
// 80.3 / 82.8% -> 81.9 / 81.8%. 4 for the other k2 kernels (SPAN_K2_ANY_BLOCKS), which spill
// 16-52 bytes at five under NVRTC 13, and at four none (HALF, 119 registers) or 8-12 (128): d = 44 70.9 ->
// 74.5%, 52 65.0 -> 74.2, 56 72.9 -> 80.0, 63 66.4 -> 74.5 (two runs each), then 52 64.9 ->
// 70.6 and 63 65.3 -> 72.5 on another machine (bench/results/h200/2026-11-29d/call1.log,
// call2.log). Four at three chunks of the any-d kernels
// (SPAN_K3_ANY_BLOCKS), since B's loads are tested only in the last chunk (128 registers, no
// spills): d = 77 67.5 / 67.8% -> 72.6 / 71.8% (bench/results/h200/2026-11-29c/call1.log); before
// that change it measured +2.7%, then -0.8% on another machine. Not at four chunks (spills: d =
// 100 68.5% -> 44.6% and 28.9%; bench/results/h200/2026-11-28b/kernel_variants.log,
// bounds/bounds_ab.log), nor B a chunk at a time there (128 registers and 32-48 bytes of spills).
#ifndef SPAN_MID_BLOCKS
#define SPAN_MID_BLOCKS 3
#endif
#ifndef SPAN_K2_ANY_BLOCKS
#define SPAN_K2_ANY_BLOCKS 4
#endif
#ifndef SPAN_K2AH_BLOCKS
#define SPAN_K2AH_BLOCKS 5
#endif
// The window a warp, as log2 of its 32-token chunks (plan.rs: span_window_log mirrors it; the
// define SPAN_WLOG sets every instantiation's, for experiments). H200, f16 U[32,256] B = 100K,
// % of the read ceiling at windows of 32 / 64 / 128 / 256 tokens (bench/results/h200/
// 2026-11-29b/call1.log, the window then a launch argument): d = 16 32.2 / 41.5 / 49.0 / 40.7,
// d = 32 56.4 / 67.7 / 63.2 / 32.1, d = 48 70.1 / 77.4 / 71.3 / 49.6, d = 64 68.1 / 83.5 /
// 53.3, d = 77 60.9 / 60.5 / 43.5, d = 96 86.4 / 89.3 / 75.6, d = 100 66.7 / 62.6, d = 127
// 66.8 / 47.2, d = 128 91.4 / 70.6 (wider windows did not fit two stages). Wider windows lose
// where their stages leave fewer blocks an SM.
#ifdef SPAN_WLOG
#define SPAN_WLOG_OF(KCH, MODE, HALF) (SPAN_WLOG)
#else
#define SPAN_WLOG_OF(KCH, MODE, HALF)         \
    ((KCH) == 1                 ? ((HALF) ? 2 : 1) \
     : (KCH) == 2               ? 1            \
     : (KCH) == 3 && (MODE) == 0 ? 1            \
                                : 0)
#endif
#ifndef SPAN_K3_ANY_BLOCKS
#define SPAN_K3_ANY_BLOCKS 4
#endif
#define SPAN_BLOCKS(KCH, MODE, HALF)                             \
    ((KCH) == 1                 ? SPAN_K1_BLOCKS                 \
     : (KCH) == 2 && (MODE) == 1 && (HALF) ? SPAN_K2AH_BLOCKS    \
     : (KCH) == 2 && (MODE) > 0 ? SPAN_K2_ANY_BLOCKS             \
     : (KCH) == 3 && (MODE) > 0 ? SPAN_K3_ANY_BLOCKS             \
     : (KCH) <= 5               ? SPAN_MID_BLOCKS                \
                                : 2)
#define INSTANTIATE_SPAN(NAME, BF, KCH, MODE, HALF)                                                  \
    extern "C" __global__ void __launch_bounds__(SPAN_THREADS, SPAN_BLOCKS(KCH, MODE, HALF)) NAME(                          \
        const u16* qpad, const i64* q_offsets, const u16* d_tokens, const i64* d_offsets,     \
        int num_docs, float* out, int stages, int group, int dim)                              \
    {                                                                                          \
        maxsim_span_impl<BF, KCH, MODE, HALF, SPAN_WLOG_OF(KCH, MODE, HALF)>(                  \
            qpad, q_offsets, d_tokens, d_offsets, num_docs, out, stages, group, dim);          \
    }

// d = 32, 64, 96, 128 (`dim` unused), then any d ≤ 128 by chunks of 32, named by the rows'
// alignment: _a (d % 8 = 0), _d (d % 4 = 0), _w (even), _u (odd); then `h` for HALF.
INSTANTIATE_SPAN(maxsim_span_f16_d32, false, 1, 0, false)
INSTANTIATE_SPAN(maxsim_span_f16_d64, false, 2, 0, false)
INSTANTIATE_SPAN(maxsim_span_f16_d96, false, 3, 0, false)
INSTANTIATE_SPAN(maxsim_span_f16_d128, false, 4, 0, false)
INSTANTIATE_SPAN(maxsim_span_bf16_d32, true, 1, 0, false)
INSTANTIATE_SPAN(maxsim_span_bf16_d64, true, 2, 0, false)
INSTANTIATE_SPAN(maxsim_span_bf16_d96, true, 3, 0, false)
INSTANTIATE_SPAN(maxsim_span_bf16_d128, true, 4, 0, false)
#define INSTANTIATE_SPAN_ANY_KH(T, BF, K, H, S)                 \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##a##S, BF, K, 1, H) \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##u##S, BF, K, 2, H) \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##w##S, BF, K, 3, H) \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##d##S, BF, K, 4, H)
// Five to eight chunks (d = 129-256 but 256): rows 16-byte aligned (d % 8 = 0, every d a model
// ships), with and without HALF, and halves (any other d). plan.rs: span_any_instances.
#define INSTANTIATE_SPAN_WIDE_K(T, BF, K)                           \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##a, BF, K, 1, false) \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##ah, BF, K, 1, true) \
    INSTANTIATE_SPAN(maxsim_span_any_##T##_k##K##u, BF, K, 2, false)
// HALF only up to three chunks at d ≤ 128 (d ≤ 96): at d = 100 it measured 93.5% of the read
// ceiling against 93.2% without, too little for eight more kernels to compile at first start.
#define INSTANTIATE_SPAN_ANY(T, BF)                  \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 1, false, /**/) \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 2, false, /**/) \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 3, false, /**/) \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 4, false, /**/) \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 1, true, h)     \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 2, true, h)     \
    INSTANTIATE_SPAN_ANY_KH(T, BF, 3, true, h)     \
    INSTANTIATE_SPAN_WIDE_K(T, BF, 5)              \
    INSTANTIATE_SPAN_WIDE_K(T, BF, 6)              \
    INSTANTIATE_SPAN_WIDE_K(T, BF, 7)              \
    INSTANTIATE_SPAN_WIDE_K(T, BF, 8)
INSTANTIATE_SPAN_ANY(f16, false)
INSTANTIATE_SPAN_ANY(bf16, true)
