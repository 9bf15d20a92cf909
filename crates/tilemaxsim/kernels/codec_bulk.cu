// maxsim_codec_bk_*: one query's MaxSim over a residual, int8 or fp8 corpus at the read
// ceiling, sm_90a, d in {64, 128}. maxsim_bulk's grid and walk (a block scores a run of
// consecutive (query block, document) tasks; thread 0 brings each document tile of CBK_TILE
// tokens into a ring of `stages` by bulk copies, `stages` tiles ahead), but the operands of the
// tensor-core product are turned around: the tile's tokens are the 64 rows of a wgmma
// m64n32k16 operand, decoded from their codes straight into A registers, and the 32-row query
// block is the B operand in shared memory. The codes reach the SM by the copy engine (the
// one-warp kernels' loads left them latency-bound at 12 warps per SM: BENCHMARKS.md, ncu of
// the fp8 and residual misses), and no decoded value is stored anywhere.
//
// k order: the dot product is blind to it, so the query is stored permuted such that thread c
// of a quad decodes the c-th quarter of each of its two rows' dimensions (c·d/4 .. (c+1)·d/4,
// the codes' bytes c·ROW/4 .. (c+1)·ROW/4); k16 step s takes that quarter's dimensions 4s ..
// 4s + 3 (a0, a2 of row g; a1, a3 of row g + 8), as the one-warp kernels' B fragments do
// (codec.cu). The query sits in wgmma's 128-byte-swizzled K-major layout (wgmma.cu: arrays of
// 64 dims, here of 32 rows, 4 KB each).
//
// Per codec (the tile's per-token words copied with its codes, from the 16-byte boundary at or
// before its first token; the uploads pad them by four words, so the rounded-up end stays
// inside):
// - int8, fp8: codes decode to f16 exactly (int8 as integers, e4m3 by the hardware
//   conversion); each token's scale (one word) is applied to its accumulator row.
// - residual (nbits 1/2/4): the residual decodes through codec.cu's pair table (shared memory,
//   one copy per lane); the centroid's part ⟨q_i, centroid[id]⟩ is read from the per-call table
//   CS (f16, `codec_centroid_scores`, whose order is exactly this accumulator layout's: thread
//   c's 16 bytes of a row are its columns 8j + 2c + e), gathered by cp.async into shared memory
//   at the tile's start so the loads hide behind the decoding, and added to the product, which
//   is then scaled by the token's inverse norm. Two words a token: the id and the inverse norm.
// For the residual both walks load each next document's extent a document ahead (BulkWalk's
// AHEAD): its tiles are short, and waiting on those loads once a tile cost more than the
// copies. int8 and fp8 (4.5 times the bytes a tile) ran 4-5% slower with it (BENCHMARKS.md).
// Rows past the document's end are masked, and each column's (query row's) running maximum is
// kept per thread, reduced over the warp and the four warps at the document's end
// (bulk_document_score).
#include "codec.cu"
#include "wgmma.cu"
#include "bulk.cu"

#define CBK_THREADS 128
#define CBK_TILE 128
#define CBK_SCALES (CBK_TILE + 4)  // words of a stage's per-token array (from a 16-byte boundary)
// Blocks per SM the registers must allow (5 costs spills at d = 128).
#ifndef CBK_MIN_BLOCKS
#define CBK_MIN_BLOCKS 4
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Four 8-bit codes (a word) as two f16 pairs: bytes 0, 1 to b0, bytes 2, 3 to b1. fp8 through
// the hardware conversion (cvt.rn.f16x2.e4m3x2, exact; one F2FP per pair) rather than
// codec.cu's bit moves (value / 256, four instructions per pair): 187.4 against 159.6 M docs/s
// on the H200 at one query (the run that cut the last session short; re-measured in
// BENCHMARKS.md).
template <int TAG>
__device__ __forceinline__ void cbk_decode(unsigned x, unsigned& b0, unsigned& b1) {
    if constexpr (TAG == INT8) {
        i8_to_f16x2(x, b0, b1);
    } else {
        asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %2; cvt.rn.f16x2.e4m3x2 %0, lo; cvt.rn.f16x2.e4m3x2 %1, hi; }"
            : "=r"(b0), "=r"(b1) : "r"(x));
    }
}
// D (16 f32 per thread: 64 token rows x 32 query columns) += A (4 registers) x B (descriptor).
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], const unsigned (&a)[4], unsigned long long desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
__device__ __forceinline__ void cbk_fence_acc(float (&d)[16]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// An f16 pair as two floats.
__device__ __forceinline__ void cbk_h2f(unsigned h, float& lo, float& hi) {
    asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
        : "=f"(lo), "=f"(hi) : "r"(h));
}

// Query block `q` (32 rows of D halves, zeros past its rows) into shared memory at `qs`, in the
// permuted k order and wgmma's swizzled layout: position k' = 16s + p (p = 8h + 2c + e) holds
// dimension c·D/4 + 4s + 2h + e. Pairs (e = 0, 1) move as words, every load issued before the
// first store. Every thread of the block takes part; the caller syncs.
template <int D>
__device__ __forceinline__ void cbk_stage_query(u16* qs, const u16* __restrict__ q) {
    constexpr int PER = 32 * D / 2 / CBK_THREADS;  // words per thread
    constexpr int BATCH = 8;                        // loads in flight before their stores
    const unsigned* src = (const unsigned*)q;
    unsigned* dst = (unsigned*)qs;
#pragma unroll
    for (int b = 0; b < PER; b += BATCH) {
        unsigned v[BATCH];
#pragma unroll
        for (int it = 0; it < BATCH; ++it) {
            const int i = threadIdx.x + (b + it) * CBK_THREADS;
            const int n = i / (D / 2), k = 2 * (i % (D / 2));
            const int s = k / 16, p = k % 16;
            v[it] = __ldg(src + (n * D + (p & 7) / 2 * (D / 4) + 4 * s + 2 * (p >> 3)) / 2);
        }
#pragma unroll
        for (int it = 0; it < BATCH; ++it) {
            const int i = threadIdx.x + (b + it) * CBK_THREADS;
            const int n = i / (D / 2), k = 2 * (i % (D / 2));
            const int chunk = (k % 64) / 8;
            dst[((k / 64) * (32 * 64) + n * 64 + ((chunk ^ (n & 7)) << 3) + (k & 7)) / 2] = v[it];
        }
    }
}

// This thread's quarter of a tile row's codes (PB bytes, 16-byte aligned pieces where PB is a
// multiple of 16) as words. At PB = 32 (8-bit codes, d = 128) the rows of g and g + 1 share
// banks, so odd g read their two chunks in the other order: each quarter warp's eight loads
// then cover all 32 banks once.
template <int PB>
__device__ __forceinline__ void cbk_row_words(unsigned (&w)[PB / 4], const unsigned char* p, int g) {
    if constexpr (PB == 32) {
        const int flip = g & 1;
        const V4 x = *(const V4*)(p + 16 * flip), y = *(const V4*)(p + 16 * (1 - flip));
        const V4 lo = flip ? y : x, hi = flip ? x : y;
        w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
        w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
    } else if constexpr (PB == 16) {
        const V4 x = *(const V4*)p;
        w[0] = x.x; w[1] = x.y; w[2] = x.z; w[3] = x.w;
    } else if constexpr (PB == 8) {
        const uint2 x = *(const uint2*)p;
        w[0] = x.x; w[1] = x.y;
    } else {
        static_assert(PB == 4, "a quarter row of 4, 8, 16 or 32 bytes");
        w[0] = *(const unsigned*)p;
    }
}

// Thread 0's side: its own walk over the block's tiles, `stages` tiles ahead of the consumers';
// tile t goes to stage t % stages as bulk copies completing on the stage's mbarrier: the tile's
// code rows (ROW bytes each), and its NW per-token word arrays from the 16-byte boundary at or
// before the first token.
template <int ROW, int NW, bool AHEAD>
struct CbkProducer {
    BulkWalk<CBK_TILE, AHEAD, false> walk;
    unsigned char* ring;
    unsigned* words;
    unsigned long long* bars;
    const unsigned char* codes;
    const unsigned* word_src[NW];
    const i64* d_offsets;
    const i64* doc_index;
    int num_docs;
    __device__ __forceinline__ void produce(int s) {
        const unsigned bar = smem_addr(&bars[s]);
        if (walk.done()) return;
        const int ntok = walk.ntok();
        if (ntok > 0) {
            const i64 at = walk.d0 + walk.tok;
            const i64 a0 = at & ~(i64)3;
            const unsigned n = ((unsigned)(at - a0) + (unsigned)ntok + 3u) & ~3u;
            mbar_expect_tx(bar, (unsigned)ntok * ROW + NW * n * 4u);
            bulk_load(smem_addr(ring + (i64)s * CBK_TILE * ROW), codes + at * ROW, (unsigned)ntok * ROW, bar);
#pragma unroll
            for (int k = 0; k < NW; ++k)
                bulk_load(smem_addr(words + (s * NW + k) * CBK_SCALES), word_src[k] + a0, n * 4u, bar);
        } else {
            mbar_arrive(bar);
        }
        walk.step(d_offsets, doc_index, num_docs);
    }
    __device__ __forceinline__ void start(int stages) {
        for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[s]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        walk.extent(d_offsets, doc_index, num_docs);
        for (int s = 0; s < stages; ++s) produce(s);
    }
};
#endif

// P: nbits for the residual codec, unused (0) for int8 and fp8. `aux`: the per-token words
// (residual ids, int8/fp8 scales); `inv_norm`, `cs`, `num_centroids`, `table`: the residual's
// inverse norms, centroid scores ([blocks][K][32] f16) and pair table (unused otherwise).
template <int TAG, int D, int P>
__device__ __forceinline__ void maxsim_codec_bulk_impl(
    const u16* __restrict__ qblocks, const int* __restrict__ qrows, int num_blocks,
    const unsigned char* __restrict__ codes, const unsigned* __restrict__ aux,
    const float* __restrict__ inv_norm, const u16* __restrict__ cs, int num_centroids,
    const unsigned* __restrict__ table, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr bool RES = TAG == RESIDUAL;
    constexpr int KS = D / 16;                           // k16 steps
    constexpr int ROW = RES ? D * P / 8 : D;             // code bytes a token
    constexpr int PB = ROW / 4;                          // a thread's quarter of a row
    constexpr int NW = RES ? 2 : 1;                      // per-token words: id and norm, or scale
    constexpr int KEYS = RES ? 1 << (2 * P) : 0;         // residual pair-table keys
    constexpr int STAGE = CBK_TILE * ROW;                // bytes
    constexpr unsigned QBYTES = 32 * D * 2;
    static_assert(ROW % 16 == 0, "bulk copies move multiples of 16 bytes");
    extern __shared__ __attribute__((aligned(1024))) unsigned char cbk_smem[];
    // The query block (1024-byte aligned for the swizzle), the ring, its per-token words, its
    // barriers, the maxima, the residual's tile of centroid scores; its pair table is static
    // (an address known at compile time: each lookup's address is then one LOP3).
    const unsigned raw0 = smem_addr(cbk_smem);
    unsigned char* base = cbk_smem + (((raw0 + 1023u) & ~1023u) - raw0);
    u16* qs = (u16*)base;
    unsigned char* ring = base + QBYTES;
    unsigned* words = (unsigned*)(ring + (i64)stages * STAGE);
    unsigned long long* bars = (unsigned long long*)(words + stages * NW * CBK_SCALES);
    float* red = (float*)(bars + stages);  // [2][4 warps][32]
    __shared__ unsigned tab[RES ? KEYS * 32 : 1];
    u16* cen = (u16*)(red + 2 * 4 * 32);  // [CBK_TILE][32]
    const unsigned q0 = smem_addr(qs);
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const i64 tasks = (i64)num_blocks * num_docs;
    const i64 first = (i64)blockIdx.x * group;

    CbkProducer<ROW, NW, RES> producer{BulkWalk<CBK_TILE, RES, false>(first, tasks, group, num_docs), ring, words, bars,
                                  codes, {}, d_offsets, doc_index, num_docs};
    producer.word_src[0] = aux;
    if constexpr (RES) producer.word_src[NW - 1] = (const unsigned*)inv_norm;
    if (threadIdx.x == 0) producer.start(stages);
    if constexpr (RES) {
        for (int i = threadIdx.x; i < KEYS * 32; i += CBK_THREADS) tab[i] = __ldg(table + (i >> 5));
    }
    BulkWalk<CBK_TILE, RES, false> w(first, tasks, group, num_docs);
    w.extent(d_offsets, doc_index, num_docs);
    __syncthreads();  // the barriers are initialized, the table is in

    int cur_q = -1, nq = 0, ndone = 0, slot = 0;
    unsigned phase = 0;  // the parity of the stages' current use
    const u16* cs_block = cs;
    float best[8];  // column 8j + 2c + e's running maximum at 2j + e
#pragma unroll
    for (int i = 0; i < 8; ++i) best[i] = NEG_INF;
    const int r0 = wib * 16 + g;  // this thread's token rows of an m-block: r0, r0 + 8
    while (!w.done()) {
        const int s = slot;
        if (w.qi != cur_q) {  // uniform: every thread walks the same tiles
            cur_q = w.qi;
            nq = qrows[cur_q];
            if constexpr (RES) cs_block = cs + (i64)cur_q * num_centroids * 32;
            cbk_stage_query<D>(qs, qblocks + (i64)cur_q * 32 * D);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the query to wgmma
            __syncthreads();
        }
        if (w.tok == 0) {
#pragma unroll
            for (int k = 0; k < 8; ++k) best[k] = NEG_INF;
        }
        const int ntok = w.ntok();
        mbar_wait(smem_addr(&bars[s]), phase);
        const int lead = (int)((w.d0 + w.tok) & 3);  // the first token's word in the arrays
        const unsigned* wd = words + s * NW * CBK_SCALES + lead;
        const unsigned char* tile = ring + (i64)s * STAGE;
        if constexpr (RES) {
            // The centroid scores of this thread's rows of the tile's m-blocks (its 16 bytes of
            // each), gathered into shared memory by cp.async while the codes decode: one group
            // an m-block, each waited for within the tile (so no copy of a tile is in flight
            // when the next tile's copies to the same rows start). Each thread reads back only
            // what it copied.
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (h * 64 < ntok) {  // uniform
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int row = h * 64 + r0 + 8 * e;
                        const unsigned id = row < ntok ? wd[row] : 0u;
                        cp_async16(smem_addr(cen + row * 32 + c * 8), cs_block + (i64)id * 32 + c * 8, 16);
                    }
                    cp_async_commit();
                }
            }
        }
        // The tile's m-blocks of 64 tokens, one after the other (uniform).
        for (int mb = 0; mb * 64 < ntok; ++mb) {
            const int row = mb * 64 + r0;
            const bool v0 = row < ntok, v1 = row + 8 < ntok;
            // Each row's scale (int8/fp8) or inverse norm (residual; then its centroid scores).
            const float sc0 = v0 ? __uint_as_float(wd[(NW - 1) * CBK_SCALES + row]) : 0.f;
            const float sc1 = v1 ? __uint_as_float(wd[(NW - 1) * CBK_SCALES + row + 8]) : 0.f;
            // This thread's code words of rows `row` and `row + 8` (rows past the tile's tokens
            // hold whatever the stage held: masked below).
            unsigned w0[PB / 4], w1[PB / 4];
            cbk_row_words<PB>(w0, tile + row * ROW + c * PB, g);
            cbk_row_words<PB>(w1, tile + (row + 8) * ROW + c * PB, g);
            unsigned a[KS][4];
#pragma unroll
            for (int k = 0; k < KS; ++k) {
                if constexpr (RES) {
                    a[k][0] = residual_pair<P>(w0, 2 * k, tab, lane);
                    a[k][2] = residual_pair<P>(w0, 2 * k + 1, tab, lane);
                    a[k][1] = residual_pair<P>(w1, 2 * k, tab, lane);
                    a[k][3] = residual_pair<P>(w1, 2 * k + 1, tab, lane);
                } else {
                    cbk_decode<TAG>(w0[k], a[k][0], a[k][2]);
                    cbk_decode<TAG>(w1[k], a[k][1], a[k][3]);
                }
            }
            float acc[16];
#pragma unroll
            for (int k = 0; k < 16; ++k) acc[k] = 0.f;
            cbk_fence_acc(acc);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int k = 0; k < KS; ++k)
                wgmma_m64n32k16(acc, a[k], wg_desc(q0 + (unsigned)(k >> 2) * (32u * 128u) + (unsigned)(k & 3) * 32u), k > 0);
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            cbk_fence_acc(acc);
            if constexpr (RES) {  // + the centroid's part: word j holds columns 8j + 2c, + 1
                if (mb == 0 && ntok > 64) cp_async_wait<1>(); else cp_async_wait<0>();
                const V4 cen0 = *(const V4*)(cen + row * 32 + c * 8);
                const V4 cen1 = *(const V4*)(cen + (row + 8) * 32 + c * 8);
                const unsigned h0[4] = {cen0.x, cen0.y, cen0.z, cen0.w};
                const unsigned h1[4] = {cen1.x, cen1.y, cen1.z, cen1.w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    float x0, x1, y0, y1;
                    cbk_h2f(h0[j], x0, x1);
                    cbk_h2f(h1[j], y0, y1);
                    acc[4 * j] += x0; acc[4 * j + 1] += x1;
                    acc[4 * j + 2] += y0; acc[4 * j + 3] += y1;
                }
            }
            if (mb * 64 + 64 <= ntok) {  // a whole m-block (uniform): no row masked
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        best[2 * j + e] = max_nan(best[2 * j + e], max_nan(acc[4 * j + e] * sc0, acc[4 * j + 2 + e] * sc1));
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float x0 = v0 ? acc[4 * j + e] * sc0 : NEG_INF;
                        const float x1 = v1 ? acc[4 * j + 2 + e] * sc1 : NEG_INF;
                        best[2 * j + e] = max_nan(best[2 * j + e], max_nan(x0, x1));
                    }
            }
        }
        const bool last = w.last();
        const int par = ndone & 1;
        if (last) {
            // The warp's column maxima over its 16 rows (the eight g of a c), to lanes 0-3.
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                float m = best[k];
                m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 4));
                m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 8));
                m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 16));
                if (g == 0) red[(par * 4 + wib) * 32 + 8 * (k >> 1) + 2 * c + (k & 1)] = m;
            }
        }
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the column maxima are in `red`
        if (threadIdx.x == 0) producer.produce(s);
        if (last) {
            if (wib == 0) bulk_document_score(red, par, nq, lane, out + task);  // task = block * num_docs + pair
            ++ndone;
        }
        if (++slot == stages) {
            slot = 0;
            phase ^= 1u;
        }
    }
#endif
}

#define INSTANTIATE_CODEC_BULK(NAME, TAG, D, P)                                                \
    extern "C" __global__ void __launch_bounds__(CBK_THREADS, CBK_MIN_BLOCKS) NAME(            \
        const u16* qblocks, const int* qrows, int num_blocks, const unsigned char* codes,      \
        const unsigned* aux, const float* inv_norm, const u16* cs, int num_centroids,          \
        const unsigned* table, const i64* d_offsets, const i64* doc_index, int num_docs,       \
        float* out, int stages, int group)                                                     \
    {                                                                                          \
        maxsim_codec_bulk_impl<TAG, D, P>(qblocks, qrows, num_blocks, codes, aux, inv_norm,    \
                                          cs, num_centroids, table, d_offsets, doc_index,      \
                                          num_docs, out, stages, group);                       \
    }

INSTANTIATE_CODEC_BULK(maxsim_codec_bk_int8_d64, INT8, 64, 0)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_int8_d128, INT8, 128, 0)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_fp8_d64, FP8, 64, 0)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_fp8_d128, FP8, 128, 0)
// The residual where a row is a multiple of 16 bytes (d · nbits / 8).
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_residual2_d64, RESIDUAL, 64, 2)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_residual4_d64, RESIDUAL, 64, 4)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_residual1_d128, RESIDUAL, 128, 1)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_residual2_d128, RESIDUAL, 128, 2)
INSTANTIATE_CODEC_BULK(maxsim_codec_bk_residual4_d128, RESIDUAL, 128, 4)
