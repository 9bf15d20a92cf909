// maxsim_bulk_rows (sm_90+): maxsim_bulk's grid, walk, ring and bulk copies at d past 128,
// with the warps splitting the query's rows and the tile's tokens instead of d. Warp w holds
// m-tile w & 1 of the query (rows 16 (w & 1) .. + 15) over the whole of d as A fragments in
// registers (8 a 32-wide chunk: 64 at d = 256, 96 at 384), and multiplies tokens
// TW (w >> 1) .. + TW - 1 of each 2 TW-token tile by it. So a warp's row maxima are whole dot
// products: no partial tiles go through shared memory and no partial sums are made, where
// maxsim_bulk_wide_impl (bulk.cu), splitting d over the warps, writes and reads 4 KB of partials
// a warp a tile whatever d (its cost at d = 256-384). The price: each token's B fragments are
// read by two warps (the two m-tiles), twice the shared-memory reads of the tile. Those reads
// also conflict: a quarter warp's two rows share 16 banks where 2 d is a multiple of 128
// (ncu at d = 256: 121M conflicts in 247M wavefronts). Reading the chunks by pairs in an order
// per lane that spreads them over every bank (9c9bb11, BULK_ROWS_SPREAD) took the conflicts to
// 0.3M but cost 48% more instructions (the selects back into k order) and 4-9 points of the read
// ceiling at d = 232-352 (bench/results/h200/2026-12-01c/call1.log): not kept.
// At a document's end each warp's row maxima go to shared memory by (token half, row), and after
// the tile's barrier warp 0 takes each row's larger half and sums the rows, as maxsim_bulk does.
// Rows d wide (d a multiple of 8 in 129 .. 32·KCH): the query's fragments zero past d and the
// last chunk's 8-dimension pieces past d zeros, not read (past a row lies the next row).
// The engine takes it at d = 232..352 with 32-token tiles and at 224 and 360..376 with 64
// (plan/bulk.rs: bulk_rows_tile, with the figures). H200, f16 U[32,256], % of the read ceiling
// against the kernels it replaces (bench/results/h200/2026-12-01b/): B = 100K d = 248 80.2 ->
// 86.0, 256 86.6 -> 89.3, 264 75.7 -> 84.9, 320 83.2 -> 86.7, 352 87.0 -> 95.0, 376 87.2 ->
// 90.4; B = 10K level at 256 and 320, +2 to +7 points at 232, 248, 264, 328, 352, 360 and 376;
// d = 224 (2026-12-01c) 83.5 -> 96.5 at B = 100K, 79.9 -> 89.8 at B = 10K. Not at 384, where
// twelve chunks hold 96 registers of the query (two blocks an SM) and the built width's split d
// was 1 point ahead (B = 100K); not at d < 224, where maxsim_span_any keeps its lead (d = 136:
// 79.6% against 67.8; d = 216 at B = 100K 94.5 against 90.7, 91.3 against 87.1 on 2026-12-01c).
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "bulk.cu"

// One m-tile's A fragments (rows row0 .. + 15 of the query block, `dim` halves a row at q16)
// in load_a_permuted's k order, zeros past d (d % 8 = 0: a 4-dimension piece is all in or out).
template <int KCH>
__device__ __forceinline__ void load_a_mtile(unsigned (&a)[KCH][2][4], const u16* q16, int dim, int row0, int g,
                                             int c) {
    const unsigned* q = (const unsigned*)q16;
#pragma unroll
    for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
        for (int kb = 0; kb < 2; ++kb) {
            const int k = ch * 32 + c * 8 + kb * 4;
            const bool in = k < dim;
            const unsigned* r0 = q + ((row0 + g) * dim + k) / 2;
            const unsigned* r8 = q + ((row0 + g + 8) * dim + k) / 2;
            a[ch][kb][0] = in ? r0[0] : 0u;
            a[ch][kb][1] = in ? r8[0] : 0u;
            a[ch][kb][2] = in ? r0[1] : 0u;
            a[ch][kb][3] = in ? r8[1] : 0u;
        }
}

template <bool BF, int KCH, int TW>
__device__ __forceinline__ void maxsim_bulk_rows_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group,
    int dim)
{
#if __CUDA_ARCH__ >= 900
    constexpr int D = KCH * 32;  // the rows' bound
    constexpr int TILE = 2 * TW;
    constexpr int NT = TW / 8;   // 8-token tiles a warp a tile
    const int RD = dim;  // halves a row, in memory and in the stage
    const int STAGE = TILE * RD;  // halves
    extern __shared__ __attribute__((aligned(128))) unsigned char bulk_smem[];
    u16* ring = (u16*)bulk_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    float* red = (float*)(bars + stages);  // [2 documents][2 token halves][32 rows]
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int mt = wib & 1, th = wib >> 1;
    const i64 tasks = (i64)num_queries * num_docs;
    const BulkRun run(group);

    BulkProducer<TILE, D> producer{BulkWalk<TILE>(run.first, tasks, run.group, num_docs), ring, bars,
                                   d_tokens, d_offsets, doc_index, num_docs, RD};
    if (threadIdx.x == 0) producer.start(stages);
    BulkWalk<TILE> w(run.first, tasks, run.group, num_docs);
    w.extent(d_offsets, doc_index);
    __syncthreads();  // the barriers are initialized

    unsigned a[KCH][2][4];
    int cur_q = -1, nq = 0, ndone = 0;
    float best[2] = {NEG_INF, NEG_INF};  // rows 16 mt + g and + 8, this warp's tokens
    int s = 0;           // this tile's stage
    unsigned phase = 0;  // its barrier's phase
    while (!w.done()) {
        if (w.qi != cur_q) {
            cur_q = w.qi;
            nq = (int)(q_offsets[cur_q + 1] - q_offsets[cur_q]);
            load_a_mtile<KCH>(a, qpad + (i64)cur_q * 32 * RD, RD, mt * 16, g, c);
        }
        if (w.tok == 0) best[0] = best[1] = NEG_INF;
        const int mine = w.ntok() - th * TW;  // this warp's tokens of the tile (uniform)
        mbar_wait(smem_addr(&bars[s]), phase);
        if (mine > 0) {
            const u16* buf = ring + (i64)s * STAGE + (th * TW + g) * RD + c * 8;
            float acc[NT][4];
#pragma unroll
            for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
            // Rows past `mine` hold whatever the stage held; their columns are masked below.
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch) {
                V4 b[NT];
                const bool in_d = ch < KCH - 1 || ch * 32 + c * 8 < dim;
#pragma unroll
                for (int t = 0; t < NT; ++t)
                    b[t] = in_d ? *(const V4*)(buf + t * 8 * RD + ch * 32) : V4{0u, 0u, 0u, 0u};
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    Mma<BF>::run(acc[t], a[ch][0], b[t].x, b[t].y);
                    Mma<BF>::run(acc[t], a[ch][1], b[t].z, b[t].w);
                }
            }
#pragma unroll
            for (int t = 0; t < NT; ++t) fold_max(best, acc[t], t * 8 + 2 * c, mine);
        }
        const bool last = w.last();
        const int par = ndone & 1;
        if (last) {
            const float m0 = warp_max_xor(best[0], 2), m8 = warp_max_xor(best[1], 2);
            if (c == 0) {
                red[(par * 2 + th) * 32 + mt * 16 + g] = m0;
                red[(par * 2 + th) * 32 + mt * 16 + g + 8] = m8;
            }
        }
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the row maxima are in `red`
        if (threadIdx.x == 0) producer.produce(s);
        if (last) {
            if (wib == 0) bulk_document_score<2>(red, par, nq, lane, out + task);  // task = query * num_docs + pair
            ++ndone;  // the next document's maxima go to the other half of `red`
        }
        if (++s == stages) s = 0, phase ^= 1u;
    }
#endif
}

// Blocks a SM the registers must leave room for (__launch_bounds__'s second argument): three up
// to ten chunks (168 registers, no spills at 32-token tiles), two past (at three, eleven chunks
// spilled 20-60 bytes and twelve 68-116 with ptxas 13.0).
#ifndef BULK_ROWS_MIN_BLOCKS
#define BULK_ROWS_MIN_BLOCKS 3
#endif
#ifndef BULK_ROWS_MIN_BLOCKS_WIDE
#define BULK_ROWS_MIN_BLOCKS_WIDE 2
#endif
// maxsim_bulk_rows_{dtype}_k{KCH}_t{TILE}: d ≤ 32·KCH, a multiple of 8 past 128 (the built
// widths 256 and 384 too: the same kernel with d = 32·KCH).
#define INSTANTIATE_BULK_ROWS_ONE(NAME, BF, KCH, TW)                                            \
    extern "C" __global__ void __launch_bounds__(BULK_THREADS, (KCH) <= 10 ? BULK_ROWS_MIN_BLOCKS : BULK_ROWS_MIN_BLOCKS_WIDE) NAME( \
        const u16* qpad, const i64* q_offsets, int num_queries, const u16* d_tokens,           \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int stages,      \
        int group, int dim)                                                                    \
    {                                                                                          \
        maxsim_bulk_rows_impl<BF, KCH, TW>(qpad, q_offsets, num_queries, d_tokens, d_offsets, \
                                                 doc_index, num_docs, out, stages, group, dim); \
    }
#define INSTANTIATE_BULK_ROWS(KCH)                                                     \
    INSTANTIATE_BULK_ROWS_ONE(maxsim_bulk_rows_f16_k##KCH##_t32, false, KCH, 16)       \
    INSTANTIATE_BULK_ROWS_ONE(maxsim_bulk_rows_f16_k##KCH##_t64, false, KCH, 32)       \
    INSTANTIATE_BULK_ROWS_ONE(maxsim_bulk_rows_bf16_k##KCH##_t32, true, KCH, 16)       \
    INSTANTIATE_BULK_ROWS_ONE(maxsim_bulk_rows_bf16_k##KCH##_t64, true, KCH, 32)
INSTANTIATE_BULK_ROWS(5)
INSTANTIATE_BULK_ROWS(6)
INSTANTIATE_BULK_ROWS(7)
INSTANTIATE_BULK_ROWS(8)
INSTANTIATE_BULK_ROWS(9)
INSTANTIATE_BULK_ROWS(10)
INSTANTIATE_BULK_ROWS(11)
INSTANTIATE_BULK_ROWS(12)
