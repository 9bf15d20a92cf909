// maxsim_bulk_split and maxsim_bulk_planes (sm_90+): maxsim_bulk's grid, walk, bulk-copy ring
// and row-maxima exchange for f32 queries, exactly: against f32 corpora (both sides split into
// f16 parts, three tensor-core products a tile: hi*hi + hi*lo + lo*hi, as maxsim_ring does; the
// documents split in the kernel, or once at upload into planes: below) and against f16 and
// bf16 corpora (the query split into two f16 parts, or three bf16 parts, each multiplied by the
// stored 16-bit token). maxsim_ring holds one block of f32 rings a SM (12.5% occupancy, 66% of
// the read rate on the H200); here a stage is one bulk copy of TILE tokens (32 KB at d = 128:
// 64 f32 tokens, 16 a warp, or 128 16-bit tokens, 32 a warp) and three blocks fit a SM.
//
// The queries arrive as f32 rows (the engine's f32 query tokens and offsets, Nq <= 32).
// maxsim_split_parts splits each once a call (one block a query) into the order the scoring
// kernel takes (`SplitParts`); a block that reaches a new query loads part 0's A fragments into
// each warp's registers and copies the other parts to shared memory in fragment order (one
// conflict-free 16-byte load per fragment). Splitting in every block instead cost 9-41% at
// B = 10K and up to 10% at B = 100K on the H200 (bench/results/h200/2026-11-29/call5.log
// against call3.log, call4.log). k is permuted as maxsim_ring's f32 path does for f32 tokens (lane c holds
// dimensions kb*16 + c*4 .. +3 of each 32-wide chunk: the four lanes of a row read 64
// contiguous bytes), and as maxsim_bulk does for 16-bit tokens (c*8 + kb*4 .. +3).
//
// Against f16 and f32 corpora the query is first scaled by the power of two c that brings its
// largest magnitude into [2^14, 2^15): the parts f16(c q) and f16(c q - f16(c q))
// then hold any finite f32 query to about 2^-23 of its largest element (no range check on the host,
// so device tensors take this kernel too), both parts' products with a 16-bit token (or an f32
// token's high part) go to one accumulator (f16 corpora: c q . d in 164 registers, three blocks
// a SM), an f32 token's low part (scaled by 2^11) meets the high part of c q in a second one,
// and a document's row maxima are scaled back by 1/c (exact). f32 tokens must lie in the
// split's range (the host checks them: src/cuda/memory.rs, split_rows_ok).
//
// f32 corpora split once at upload (DOC 3, `maxsim_bulk_planes`: each token's 32-dimension
// chunks as 32 f16 high parts then 32 low parts, the same 4d bytes; `split_f32_planes`) take the
// in-kernel split's roughly 256 of a warp's 665 instructions a tile away. H200, B = 100K, Nd =
// 128, one run (bench/results/h200/2026-11-30b/call1.log): 95.6% of the read ceiling against
// 86.3% for the in-kernel split (U[32,256] 95.8 / 80.7%, B = 500K 98.0 / 89.3%, d = 96 94.8 /
// 87.5%, d = 64 83.3 / 77.7%, d = 32 69.8 / 63.2%); LIK's f32 1.4231 ms against our 1.4797 in
// that run's peer row (0.962x). With runs of about 512 KB a block (`planes_run`, src/cuda/plan/
// bulk.rs) 98.6-98.8%, and 1.4482 ms against LIK's 1.4545 (1.004x; call3.log). Both still run at the board's 700 W power cap (instant power
// sampled every 20 ms: planes 665-678 W at 1440 MHz, in-kernel split 653-685 W at 1470 MHz,
// throttled for power in about half the samples; f16 417 W at 1980 MHz, 2026-11-30 call5.log).
// So the split was issue, not power (call 6 of 2026-11-30 had guessed power: f32 queries on f16
// corpora, 128 products a warp's 8 KB against 96 here, draw 416 W at 1980 MHz; why the f32
// planes' three products draw more is not known). One launch under ncu at 1.78 GHz read 94.3%
// of DRAM with the in-kernel split (2026-11-30 call4.log).
// Not kept (bench/results/h200/2026-11-30/f32_candidates.patch, for 09929b5: kernels/bulk_f32.cu
// there): one f16 product a tile, a bound on its error (2^-8 |c q| |d|), and exact f32 dots on
// the CUDA cores only for the pairs within twice the bound of their row's maximum (28 a warp's
// 16-token tile on average, 20% over one a row). Exact and clean under memcheck, off the power
// cap at 1980 MHz, but 48.5-51.4% of the ceiling against 90.5-91.9% (H200, B = 100K, Nd = 128,
// one run; call2.log): 1,268M warp instructions against the three products' 532M, issued on
// 46.6% of cycles at two warps a scheduler (the query's f32 rows in shared memory leave two
// blocks a SM); from global memory at three blocks, 51.4%.
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "split.cuh"
#include "bulk.cu"

// Blocks a SM the compiler must leave room for (__launch_bounds__'s second argument), per
// corpus dtype. f32: 3 holds the kernel to 168 registers (176 unbounded: two blocks a SM, the
// schedulers idle two cycles in three on the H200). H200, B = 100K: 58.0 -> 63.5 M docs/s (81% ->
// 89% of the read ceiling) in one run, 52.2-53.2 -> 56.7-57.6 on a slower machine
// (bench/results/h200/2026-11-28b/kernel_variants.log, bounds/bounds_ab.log). f16: 3, 164
// registers without spills, since the scaled query needs one accumulator (with two, 210,
// bounded to 168 they spilled: 97.9 -> 89.0 M docs/s). bf16: 1 (176 registers; its shared
// memory, two query parts beside the stages, holds it to two blocks a SM anyway).
// Not kept: eight f32 tokens a warp a tile (16 KB stages at d = 128), which let two to four
// stages or four blocks an SM (128 registers) fit: 85.0-87.4% of the read ceiling against 96.1%
// for sixteen (H200, B = 100K, Nd = 128; bench/results/h200/2026-11-29d/call1.log, the define
// SPLIT_F32_TW of that run).
#ifndef SPLIT_MIN_BLOCKS_F32
#define SPLIT_MIN_BLOCKS_F32 3
#endif
#ifndef SPLIT_MIN_BLOCKS_F16
#define SPLIT_MIN_BLOCKS_F16 3
#endif
#ifndef SPLIT_MIN_BLOCKS_BF16
#define SPLIT_MIN_BLOCKS_BF16 1
#endif
#define SPLIT_BLOCKS(DOC) ((DOC) >= 2 ? SPLIT_MIN_BLOCKS_F32 : (DOC) == 1 ? SPLIT_MIN_BLOCKS_BF16 : SPLIT_MIN_BLOCKS_F16)

// DOC 0: f16 tokens, 1: bf16, 2: f32 (split here), 3: f32 split once at upload into f16 planes
// (`split_f32_planes`: each 32-dimension chunk of a token as 32 high parts, then 32 low parts
// scaled by 2^11, in the order lane c reads them: dimensions c*4 .. +3 and 16 + c*4 .. +3 at
// halves c*8 .. +7; the same 4d bytes a token). The query's parts: f16 hi and lo of c q (f16 and
// f32 corpora) or bf16 p0, p1, p2 (bf16 corpora; unscaled, summed with the rest).
template <int DOC> struct SplitKind {
    static constexpr bool F32 = DOC == 2;
    static constexpr bool PLANES = DOC == 3;
    static constexpr bool LOW = F32 || PLANES;  // the documents' low parts multiplied apart
    static constexpr bool BF = DOC == 1;
    static constexpr bool SCALED_QUERY = !BF;  // f16 parts of c q (above)
    static constexpr int PARTS = BF ? 3 : 2;
    static constexpr int TW = LOW ? 16 : 32;  // tokens per warp per tile
    static constexpr int ROW_HALVES_PER_DIM = LOW ? 2 : 1;
};

// The query's part `part` of the element pair at dimensions k, k + 1 of row `row` (zeros past
// the query's nq rows), as the tensor cores take it.
template <int DOC>
__device__ __forceinline__ unsigned split_query_word(const float* q, int nq, int dim, int row, int k, int part,
                                                     float c) {
    if (row >= nq) return 0u;
    const float x0 = q[(i64)row * dim + k], x1 = q[(i64)row * dim + k + 1];
    if constexpr (SplitKind<DOC>::BF) {
        unsigned p[3];
        split3_bf16x2(x0, x1, p);
        return p[part];
    } else {
        const float y0 = x0 * c, y1 = x1 * c;  // exact: c is a power of two
        const unsigned hi = f16x2_of(y0, y1);
        if (part == 0) return hi;
        float h0, h1;
        f32_of_f16x2(hi, h0, h1);
        return f16x2_of(y0 - h0, y1 - h1);
    }
}

// The first dimension of the four that lane c holds for k16 step kb of chunk ch. The planes
// keep the in-kernel split's order (split_f32_planes lays each chunk's parts out so), so both
// multiply the same fragments and score bit for bit alike.
template <int DOC>
__device__ __forceinline__ int split_k(int ch, int kb, int c) {
    return SplitKind<DOC>::LOW ? ch * 32 + kb * 16 + c * 4 : ch * 32 + c * 8 + kb * 4;
}

// A query's parts in the order maxsim_bulk_split_impl takes them, made once a call by
// maxsim_split_parts (one block a query) rather than by every block that reaches the query:
// first part 0's A fragments, V4 j = (mt * KCH + ch) * 2 + kb of lane l at [j * 32 + l], then
// the other parts as the block's shared copy `qx` holds them; 1/c to q_inv[query].
template <int DOC, int KCH> struct SplitParts {
    static constexpr int A = 4 * KCH * 32;                            // V4s of part 0
    static constexpr int X = (SplitKind<DOC>::PARTS - 1) * KCH * 4 * 32;  // V4s of the others
    static constexpr int ALL = A + X;
};

template <int DOC, int KCH>
__device__ __forceinline__ void maxsim_split_parts_impl(const float* __restrict__ q_tokens,
                                                        const i64* __restrict__ q_offsets, V4* __restrict__ parts,
                                                        float* __restrict__ q_inv) {
    constexpr int D = KCH * 32;
    using P = SplitParts<DOC, KCH>;
    __shared__ float qmax[BULK_WARPS];
    const int qi = blockIdx.x, lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const i64 q0 = q_offsets[qi];
    const int nq = (int)(q_offsets[qi + 1] - q0);
    const float* q = q_tokens + q0 * D;
    float qs = 1.f, inv_qs = 1.f;
    if constexpr (SplitKind<DOC>::SCALED_QUERY) {
        float m = 0.f;
        for (int e = threadIdx.x; e < nq * D; e += BULK_THREADS) m = fmaxf(m, fabsf(q[e]));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) qmax[wib] = m;
        __syncthreads();
#pragma unroll
        for (int w2 = 0; w2 < BULK_WARPS; ++w2) m = fmaxf(m, qmax[w2]);
        query_scale(m, qs, inv_qs);
    }
    if (threadIdx.x == 0) q_inv[qi] = inv_qs;
    V4* out = parts + (i64)qi * P::ALL;
    for (int e = threadIdx.x; e < P::ALL; e += BULK_THREADS) {
        int l = e & 31, mt, kb, ch, part;
        if (e < P::A) {
            const int j = e >> 5;
            kb = j & 1, ch = (j >> 1) % KCH, mt = (j >> 1) / KCH, part = 0;
        } else {
            const int x = e - P::A;
            mt = (x >> 5) & 1, kb = (x >> 6) & 1, ch = (x >> 7) % KCH, part = 1 + (x >> 7) / KCH;
        }
        const int k = split_k<DOC>(ch, kb, l & 3), r0 = mt * 16 + (l >> 2);
        out[e] = V4{split_query_word<DOC>(q, nq, D, r0, k, part, qs),
                    split_query_word<DOC>(q, nq, D, r0 + 8, k, part, qs),
                    split_query_word<DOC>(q, nq, D, r0, k + 2, part, qs),
                    split_query_word<DOC>(q, nq, D, r0 + 8, k + 2, part, qs)};
    }
}

template <int DOC, int KCH>
__device__ __forceinline__ void maxsim_bulk_split_impl(
    const V4* __restrict__ q_parts, const i64* __restrict__ q_offsets, int num_queries,
    const void* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group,
    const float* __restrict__ q_inv)
{
#if __CUDA_ARCH__ >= 900
    using K = SplitKind<DOC>;
    constexpr int D = KCH * 32;
    constexpr int TW = K::TW, NT = TW / 8, TILE = TW * BULK_WARPS;
    constexpr int ROW = D * K::ROW_HALVES_PER_DIM;  // halves per token row
    constexpr int STAGE = TILE * ROW;                // halves
    constexpr int XP = K::PARTS - 1;                 // parts in shared memory
    constexpr bool SCALED = K::LOW;  // the documents' low parts' products summed apart, scaled back
    extern __shared__ __attribute__((aligned(128))) unsigned char bulk_smem[];
    u16* ring = (u16*)bulk_smem;
    V4* qx = (V4*)(ring + (i64)stages * STAGE);  // [XP][KCH][2 kb][2 mt][32 lanes]
    unsigned long long* bars = (unsigned long long*)(qx + XP * KCH * 4 * 32);
    float* red = (float*)(bars + stages);       // [2][BULK_WARPS][32]
    using P = SplitParts<DOC, KCH>;
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const i64 tasks = (i64)num_queries * num_docs;
    const BulkRun run(group);

    BulkProducer<TILE, ROW> producer{BulkWalk<TILE>(run.first, tasks, run.group, num_docs), ring, bars,
                                     (const u16*)d_tokens, d_offsets, doc_index, num_docs};
    if (threadIdx.x == 0) producer.start(stages);
    BulkWalk<TILE> w(run.first, tasks, run.group, num_docs);
    w.extent(d_offsets, doc_index);
    __syncthreads();  // the barriers are initialized

    unsigned a[2][KCH][2][4];
    int cur_q = -1, nq = 0, ndone = 0;
    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
    float inv_qs = 1.f;  // 1/c of the query (SCALED_QUERY)
    for (int i = 0; !w.done(); ++i) {
        const int s = i % stages;
        if (w.qi != cur_q) {  // uniform: every thread walks the same tiles
            cur_q = w.qi;
            const i64 q0 = q_offsets[cur_q];
            nq = (int)(q_offsets[cur_q + 1] - q0);
            const V4* src = q_parts + (i64)cur_q * P::ALL;
            inv_qs = q_inv[cur_q];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                    for (int kb = 0; kb < 2; ++kb) {
                        const V4 v = src[((mt * KCH + ch) * 2 + kb) * 32 + lane];
                        a[mt][ch][kb][0] = v.x, a[mt][ch][kb][1] = v.y;
                        a[mt][ch][kb][2] = v.z, a[mt][ch][kb][3] = v.w;
                    }
            // The previous tile's barrier ordered every read of the old parts.
            for (int e = threadIdx.x; e < P::X; e += BULK_THREADS) qx[e] = src[P::A + e];
            __syncthreads();
        }
        if (w.tok == 0) best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        const int mine = w.ntok() - wib * TW;  // this warp's tokens of the tile (uniform)
        mbar_wait(smem_addr(&bars[s]), (unsigned)(i / stages) & 1u);
        if (mine > 0) {
            const u16* buf = ring + (i64)s * STAGE + wib * TW * ROW;
            // Columns past `mine` hold whatever the stage held before: masked in the fold.
            float acc[NT][2][4], cor[NT][2][4];
#pragma unroll
            for (int t = 0; t < NT; ++t)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) acc[t][mt][r] = cor[t][mt][r] = 0.f;
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch) {
                unsigned bh[NT][4], bl[NT][4];
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    if constexpr (K::F32) {
                        const float* row = (const float*)buf + (t * 8 + g) * D + ch * 32 + c * 4;
                        const V4 v0 = *(const V4*)row, v1 = *(const V4*)(row + 16);
                        split_f32x2(__uint_as_float(v0.x), __uint_as_float(v0.y), bh[t][0], bl[t][0]);
                        split_f32x2(__uint_as_float(v0.z), __uint_as_float(v0.w), bh[t][1], bl[t][1]);
                        split_f32x2(__uint_as_float(v1.x), __uint_as_float(v1.y), bh[t][2], bl[t][2]);
                        split_f32x2(__uint_as_float(v1.z), __uint_as_float(v1.w), bh[t][3], bl[t][3]);
                    } else if constexpr (K::PLANES) {
                        const u16* row = buf + (t * 8 + g) * ROW + ch * 64 + c * 8;
                        const V4 h = *(const V4*)row, l = *(const V4*)(row + 32);
                        bh[t][0] = h.x; bh[t][1] = h.y; bh[t][2] = h.z; bh[t][3] = h.w;
                        bl[t][0] = l.x; bl[t][1] = l.y; bl[t][2] = l.z; bl[t][3] = l.w;
                    } else {
                        const V4 v = *(const V4*)(buf + (t * 8 + g) * D + ch * 32 + c * 8);
                        bh[t][0] = v.x; bh[t][1] = v.y; bh[t][2] = v.z; bh[t][3] = v.w;
                    }
                }
#pragma unroll
                for (int kb = 0; kb < 2; ++kb)
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        unsigned ax[XP][4];
#pragma unroll
                        for (int p = 0; p < XP; ++p) {
                            const V4 v = qx[(((p * KCH + ch) * 2 + kb) * 2 + mt) * 32 + lane];
                            ax[p][0] = v.x; ax[p][1] = v.y; ax[p][2] = v.z; ax[p][3] = v.w;
                        }
#pragma unroll
                        for (int t = 0; t < NT; ++t) {
                            const unsigned b0 = bh[t][2 * kb], b1 = bh[t][2 * kb + 1];
                            Mma<K::BF>::run(acc[t][mt], a[mt][ch][kb], b0, b1);
                            if constexpr (K::LOW)
                                Mma<false>::run(cor[t][mt], a[mt][ch][kb], bl[t][2 * kb], bl[t][2 * kb + 1]);
#pragma unroll
                            for (int p = 0; p < XP; ++p)
                                Mma<K::BF>::run(acc[t][mt], ax[p], b0, b1);
                        }
                    }
            }
#pragma unroll
            for (int t = 0; t < NT; ++t)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    if (SCALED)
#pragma unroll
                        for (int r = 0; r < 4; ++r) acc[t][mt][r] += cor[t][mt][r] * (1.0f / SPLIT_SCALE);
                    fold_max(best[mt], acc[t][mt], t * 8 + 2 * c, mine);
                }
        }
        const bool last = w.last();
        const int par = ndone & 1;
        if (last) {
            if constexpr (K::SCALED_QUERY)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) best[mt][0] *= inv_qs, best[mt][1] *= inv_qs;
            bulk_store_maxima(best, red, par, wib, g, c);
        }
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the row maxima are in `red`
        if (threadIdx.x == 0) producer.produce(s);
        if (last) {
            if (wib == 0) bulk_document_score(red, par, nq, lane, out + task);
            ++ndone;
        }
    }
#endif
}

#define INSTANTIATE_BULK_SPLIT(NAME, PARTS_NAME, DOC, KCH)                                     \
    extern "C" __global__ void __launch_bounds__(BULK_THREADS) PARTS_NAME(                    \
        const float* q_tokens, const i64* q_offsets, V4* parts, float* q_inv)                  \
    {                                                                                          \
        maxsim_split_parts_impl<DOC, KCH>(q_tokens, q_offsets, parts, q_inv);                  \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(BULK_THREADS, SPLIT_BLOCKS(DOC)) NAME(      \
        const V4* q_parts, const i64* q_offsets, int num_queries, const void* d_tokens,        \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int stages,      \
        int group, const float* q_inv)                                                         \
    {                                                                                          \
        maxsim_bulk_split_impl<DOC, KCH>(q_parts, q_offsets, num_queries, d_tokens, d_offsets, doc_index, \
                                         num_docs, out, stages, group, q_inv);                 \
    }

// The planes' kernel takes the f32 corpora's query parts (maxsim_split_parts_f32_d*).
#define INSTANTIATE_BULK_PLANES(NAME, KCH)                                                     \
    extern "C" __global__ void __launch_bounds__(BULK_THREADS, SPLIT_BLOCKS(3)) NAME(         \
        const V4* q_parts, const i64* q_offsets, int num_queries, const void* d_tokens,        \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int stages,      \
        int group, const float* q_inv)                                                         \
    {                                                                                          \
        maxsim_bulk_split_impl<3, KCH>(q_parts, q_offsets, num_queries, d_tokens, d_offsets, doc_index, \
                                       num_docs, out, stages, group, q_inv);                   \
    }

// f32 tokens split into planes (DOC 3 above), `count` tokens of d = KCH * 32: one thread a
// token's chunk's lane c, the eight dimensions maxsim_bulk_split_impl's lane c splits (c*4 .. +3
// and 16 + c*4 .. +3), split as it does; one 16-byte store of high parts, one of low parts.
template <int KCH>
__device__ __forceinline__ void split_f32_planes_impl(const float* __restrict__ src, V4* __restrict__ dst, i64 count) {
    constexpr int PER_TOKEN = KCH * 4;  // threads a token
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < count * PER_TOKEN; e += (i64)gridDim.x * blockDim.x) {
        const i64 token = e / PER_TOKEN;
        const int j = (int)(e % PER_TOKEN), ch = j >> 2, c = j & 3;
        const float* x = src + token * (KCH * 32) + ch * 32 + c * 4;
        const V4 a = *(const V4*)x, b = *(const V4*)(x + 16);
        V4 hi, lo;
        split_f32x2(__uint_as_float(a.x), __uint_as_float(a.y), hi.x, lo.x);
        split_f32x2(__uint_as_float(a.z), __uint_as_float(a.w), hi.y, lo.y);
        split_f32x2(__uint_as_float(b.x), __uint_as_float(b.y), hi.z, lo.z);
        split_f32x2(__uint_as_float(b.z), __uint_as_float(b.w), hi.w, lo.w);
        V4* out = dst + token * (KCH * 8) + ch * 8;  // 16-byte units: a chunk's 64 halves are 8
        out[c] = hi;
        out[4 + c] = lo;
    }
}

#define INSTANTIATE_PLANES(NAME, SPLIT_NAME, KCH)                                              \
    INSTANTIATE_BULK_PLANES(NAME, KCH)                                                         \
    extern "C" __global__ void __launch_bounds__(256) SPLIT_NAME(const float* src, V4* dst, i64 count) \
    {                                                                                          \
        split_f32_planes_impl<KCH>(src, dst, count);                                           \
    }

INSTANTIATE_PLANES(maxsim_bulk_planes_d32, split_f32_planes_d32, 1)
INSTANTIATE_PLANES(maxsim_bulk_planes_d64, split_f32_planes_d64, 2)
INSTANTIATE_PLANES(maxsim_bulk_planes_d96, split_f32_planes_d96, 3)
INSTANTIATE_PLANES(maxsim_bulk_planes_d128, split_f32_planes_d128, 4)

INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f32_d32, maxsim_split_parts_f32_d32, 2, 1)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f32_d64, maxsim_split_parts_f32_d64, 2, 2)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f32_d96, maxsim_split_parts_f32_d96, 2, 3)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f32_d128, maxsim_split_parts_f32_d128, 2, 4)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f16_d32, maxsim_split_parts_f16_d32, 0, 1)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f16_d64, maxsim_split_parts_f16_d64, 0, 2)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f16_d96, maxsim_split_parts_f16_d96, 0, 3)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_f16_d128, maxsim_split_parts_f16_d128, 0, 4)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_bf16_d32, maxsim_split_parts_bf16_d32, 1, 1)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_bf16_d64, maxsim_split_parts_bf16_d64, 1, 2)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_bf16_d96, maxsim_split_parts_bf16_d96, 1, 3)
INSTANTIATE_BULK_SPLIT(maxsim_bulk_split_bf16_d128, maxsim_split_parts_bf16_d128, 1, 4)
