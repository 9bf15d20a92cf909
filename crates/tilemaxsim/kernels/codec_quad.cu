// maxsim_codec_q4_*: MaxSim of 32-row query blocks over every document of a residual corpus
// (nbits 1 or 2, d 64 or 128), sm_90a: four documents a warpgroup, one a warp. Each warp decodes
// 16 tokens of its own document into the A registers of a wgmma m64n32k16 (its 16 rows of the
// warpgroup's 64), and the query block is the B operand in shared memory, so one instruction a
// k16 step multiplies the four warps' tiles, where the one-warp kernels (codec.cu) issue eight
// mma.sync a step for 64 tokens and keep the query in 64 registers a thread.
//
// - Decoding as codec.cu's one-warp kernels: thread c of a quad owns the c-th quarter of each
//   of its two rows' dimensions (tokens g and g + 8 of its warp's 16) through the step table in
//   shared memory; the query sits in codec_bulk.cu's permuted k order and swizzled layout
//   (cbk_stage_query's). At nbits 2 (CQ4_PAIRED) a lookup's key holds one pair of each of the
//   two tokens, so one 8-byte load gives two A registers as wgmma takes them.
// - The centroid's part ⟨q_i, centroid[id]⟩: each thread's 16 bytes of its two tokens' rows of
//   the per-call table CS (`codec_centroid_scores`: columns 8j + 2c + e of the accumulator) are
//   two more k16 steps of A against an identity block stored after the query's dimensions
//   (B[d + n][n] = 1), so they are added on the tensor cores. They are gathered word by word
//   by cp.async into a per-warp stage in the order of the A registers, a tile ahead.
// - The product is scaled by each token's inverse norm, masked past the document's end, and
//   folded into per-thread column maxima; at a document's end a warp reduces them over its
//   eight rows of lanes by halving exchanges, sums the query's rows, and writes the score.
//
// The four warps must issue the same wgmma instructions (.sync.aligned), so a warpgroup walks
// four documents together for as many tiles as the longest takes; the host passes the
// documents in an order grouped by 16-token tiles (`order`, DeviceCodes::quad_order), so
// neighbours take the same tiles and little is wasted. Scores go to out[block][document] (the
// order is undone by the store). A row of blocks takes each query block (blockIdx.y, staged
// once a block); a warpgroup takes every (gridDim.x · CQ4_WGS)-th group of four, each warp
// loading its next tile's codes, ids and inverse norms while it multiplies the current one,
// and the next group's documents into L2 at a group's start. Rows of a query block past its
// rows are zero and left out of the sum.
#include "codec_bulk.cu"

// Warpgroups a block (sharing the query block and the step table) and blocks an SM the
// registers must allow: four and one, 16 warps an SM at 128 registers (d = 128 takes 124). The
// host reads the block's threads from the function's launch bound.
#ifndef CQ4_WGS
#define CQ4_WGS 4
#endif
#ifndef CQ4_MIN_BLOCKS
#define CQ4_MIN_BLOCKS 1
#endif
#define CQ4_THREADS (128 * CQ4_WGS)
// Whether nbits 2 looks its k16 steps up by the two tokens' interleaved codes (below).
#ifndef CQ4_PAIRED
#define CQ4_PAIRED 1
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// PB bytes at `p` (2, 4 or 8: a thread's quarter of a row of codes) into `w` where `ok`, else
// zeros: a predicated load (no branch), marked by `policy` in L2 (4 and 8 bytes).
template <int PB>
__device__ __forceinline__ void cq4_codes(unsigned (&w)[(PB + 3) / 4], const unsigned char* p, bool ok,
                                          unsigned long long policy) {
    static_assert(PB == 2 || PB == 4 || PB == 8, "a quarter row of 2, 4 or 8 bytes");
    w[0] = 0u;
    if constexpr (PB == 8) {
        w[1] = 0u;
        asm("{.reg .pred q; setp.ne.b32 q, %2, 0;\n"
            "@q ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%3], %4;}"
            : "+r"(w[0]), "+r"(w[1]) : "r"((unsigned)ok), "l"(p), "l"(policy));
    } else if constexpr (PB == 4) {
        asm("{.reg .pred q; setp.ne.b32 q, %1, 0;\n"
            "@q ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%2], %3;}"
            : "+r"(w[0]) : "r"((unsigned)ok), "l"(p), "l"(policy));
    } else {
        asm("{.reg .pred q; .reg .b16 h; setp.ne.b32 q, %1, 0;\n"
            "@q ld.global.nc.u16 h, [%2];\n@q cvt.u32.u16 %0, h;}"
            : "+r"(w[0]) : "r"((unsigned)ok), "l"(p));
    }
}
// The 4 bytes at `src` to shared address `dst` by cp.async, kept in L2 by `policy`.
__device__ __forceinline__ void cq4_copy4(unsigned dst, const void* src, unsigned long long policy) {
    asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "l"(policy) : "memory");
}
// A word at `p` where `ok`, else 0 (predicated).
__device__ __forceinline__ unsigned cq4_word(const void* p, bool ok) {
    unsigned v = 0u;
    asm("{.reg .pred q; setp.ne.b32 q, %1, 0;\n@q ld.global.nc.u32 %0, [%2];}" : "+r"(v) : "r"((unsigned)ok), "l"(p));
    return v;
}

// Query block `q` (32 rows of D halves) into the block's arrays at `qs` as cbk_stage_query lays
// it out (permuted k order, 128-byte swizzle, arrays of 64 dimensions by 32 rows), and the
// identity block after it: array D / 64 holds B[D + n][n] = 1 for the centroid steps. Every
// thread of the block takes part; the caller syncs.
template <int D>
__device__ __forceinline__ void cq4_stage_query(u16* qs, const u16* __restrict__ q, int tid) {
    const unsigned* src = (const unsigned*)q;
    unsigned* dst = (unsigned*)qs;
    constexpr int WORDS = 32 * D / 2;
#pragma unroll 4
    for (int i = tid; i < WORDS; i += CQ4_THREADS) {
        const int n = i / (D / 2), k = 2 * (i % (D / 2));
        const int s = k / 16, p = k % 16;
        const unsigned v = __ldg(src + (n * D + (p & 7) / 2 * (D / 4) + 4 * s + 2 * (p >> 3)) / 2);
        const int chunk = (k % 64) / 8;
        dst[((k / 64) * (32 * 64) + n * 64 + ((chunk ^ (n & 7)) << 3) + (k & 7)) / 2] = v;
    }
    // The identity array: words of (row n, positions 2m, 2m + 1), one at position n.
    unsigned* eye = dst + (D / 64) * (32 * 64) / 2;
#pragma unroll 4
    for (int i = tid; i < 32 * 64 / 2; i += CQ4_THREADS) {
        const int n = i / 32, k = 2 * (i % 32);
        const int chunk = k / 8;
        const unsigned v = k == (n & ~1) ? (n & 1 ? 0x3c000000u : 0x3c00u) : 0u;
        eye[(n * 64 + ((chunk ^ (n & 7)) << 3) + (k & 7)) / 2] = v;
    }
}
#endif

template <int D, int NB>
__device__ __forceinline__ void maxsim_codec_quad_impl(
    const u16* __restrict__ qblocks, const int* __restrict__ qrows, int num_blocks,
    const unsigned char* __restrict__ codes, const unsigned* __restrict__ aux,
    const float* __restrict__ inv_norm, const u16* __restrict__ cs, int num_centroids,
    const unsigned* __restrict__ table, const i64* __restrict__ d_offsets,
    const i64* __restrict__ order, int num_docs, float* __restrict__ out)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Lut = StepLut<NB>;
    static_assert(Lut::ON, "the step table: nbits 1 and 2");
    constexpr int KS = D / 16;           // k16 steps of the residual
    constexpr int ROW = D * NB / 8;      // code bytes a token
    constexpr int PB = ROW / 4;          // a thread's quarter of a row
    constexpr int W = (PB + 3) / 4;      // its words
    constexpr int QARR = D / 64 + 1;     // 4 KB arrays: the query's, the identity
    constexpr unsigned QBYTES = QARR * 4096;
    extern __shared__ __attribute__((aligned(1024))) unsigned char cq4_smem[];
    const unsigned raw0 = smem_addr(cq4_smem);
    unsigned char* base = cq4_smem + (((raw0 + 1023u) & ~1023u) - raw0);
    const int wg = threadIdx.x >> 7, wib = (threadIdx.x >> 5) & 3;
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int qb = blockIdx.y;  // the block's query block
    u16* qs = (u16*)base;
    unsigned* lut = (unsigned*)(base + QBYTES);
    // Each warp's two stages of centroid scores (the A operands of the two centroid steps,
    // a 16-byte quad a lane each, 1 KB a stage), after the step table.
    constexpr int LUT_BYTES = Lut::ENTRIES * Lut::STRIDE;
    const unsigned stage0 = smem_addr(base + QBYTES + LUT_BYTES + (threadIdx.x >> 5) * 2048) + 16u * (unsigned)lane;
    cq4_stage_query<D>(qs, qblocks + (i64)qb * 32 * D, threadIdx.x);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the block to wgmma
    // nbits 2 with the wide table (32 copies): each lookup's key is one pair's four code bits
    // of each of the thread's two tokens (token g's low, token g + 8's high), so one 8-byte
    // load gives a0, a1 (or a2, a3) as the wgmma's A operand holds them, where a step's two
    // pairs of one token (step_pairs) leave two register moves a step.
    constexpr bool PAIRED = CQ4_PAIRED && NB == 2 && Lut::WIDE;
    {
        // The step table: word i is entry i / (2 · COPIES), slot (i / 2) % COPIES, half i % 2:
        // the step's first pair in the low half (its key's high bits), or, PAIRED, token g's
        // pair (the key's low bits).
        constexpr int KB = 2 * NB, WORDS = 2 * Lut::COPIES, MASK = (1 << KB) - 1;
        for (int i = threadIdx.x; i < Lut::ENTRIES * WORDS; i += CQ4_THREADS) {
            const int key = i / WORDS;
            const bool first = (i & 1) == 0;
            lut[i] = table[first == PAIRED ? key & MASK : key >> KB];
        }
    }
    __syncthreads();
    const unsigned tab = smem_addr(lut), q0 = smem_addr(qs);
    const unsigned long long d0 = wg_desc(q0);  // step s's array at + ((s / 4) · 4096 + (s % 4) · 32) / 16
    const unsigned lanebase = Lut::WIDE ? 8u * (unsigned)lane : tab + 8u * (unsigned)(lane & 15);

    const int nq = qrows[qb];
    const u16* csb = cs + (i64)qb * num_centroids * 32 + c * 8;  // this thread's 16 bytes a row
    const i64 tasks = ((i64)num_docs + 3) / 4;  // groups of four documents
    const i64 stride = (i64)gridDim.x * CQ4_WGS;
    // A group's task: this warp's document (-1 past the end), its first token and length, and
    // the group's tiles (the most of its four documents; uniform). Past the last task: no
    // document, no tiles.
    struct Task { int doc; i64 start; int len; int tiles; };
    auto task_of = [&](i64 t, Task& k) {
        const bool any = t < tasks;  // uniform
        const i64 pos = t * 4 + c;  // lane c of every quad takes document c of the group
        int doc = -1, len = 0;
        i64 start = 0;
        if (any && pos < num_docs) {
            doc = order ? (int)__ldg(order + pos) : (int)pos;
            start = __ldg(d_offsets + doc);
            len = (int)(__ldg(d_offsets + doc + 1) - start);
        }
        int tiles = (len + 15) >> 4;
        tiles = max(tiles, __shfl_xor_sync(0xffffffffu, tiles, 1));
        tiles = max(tiles, __shfl_xor_sync(0xffffffffu, tiles, 2));
        k.tiles = tiles;
        k.doc = __shfl_sync(0xffffffffu, doc, wib);
        k.start = __shfl_sync(0xffffffffu, start, wib);
        k.len = __shfl_sync(0xffffffffu, len, wib);
    };
    // One tile's operands for this thread: its two tokens' codes, centroid scores and inverse
    // norms (zeros past the document: those rows are masked).
    struct Tile { unsigned raw0[W], raw1[W]; unsigned id0, id1; float n0, n1; };
    const unsigned long long first_out = l2_evict_first(), keep = l2_evict_last();
    auto load_tile = [&](Tile& X, i64 start, int len, int tile) {
        const int r = tile * 16 + g;
        const bool v0 = r < len, v1 = r + 8 < len;
        const i64 at = start + r;
        const unsigned char* cp = codes + at * ROW + c * PB;
        cq4_codes<PB>(X.raw0, cp, v0, first_out);
        cq4_codes<PB>(X.raw1, cp + 8 * ROW, v1, first_out);
        X.id0 = cq4_word(aux + at, v0);
        X.id1 = cq4_word(aux + at + 8, v1);
        X.n0 = __uint_as_float(cq4_word(inv_norm + at, v0));
        X.n1 = __uint_as_float(cq4_word(inv_norm + at + 8, v1));
    };
    // The tile's centroid scores (this thread's 16 bytes of its two tokens' rows) into `stage`
    // by word, as the centroid steps' A operands: quad 0 (a0..a3) = words 0 of the rows of g
    // and g + 8, then words 1; quad 1 the same of words 2 and 3. Issued a tile ahead, after the
    // tile's ids have had a tile's work to arrive.
    auto gather = [&](const Tile& X, unsigned stage) {
        const u16* r0 = csb + (size_t)X.id0 * 32;
        const u16* r1 = csb + (size_t)X.id1 * 32;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const unsigned d = stage + 512u * q;
            cq4_copy4(d, r0 + 4 * q, keep);
            cq4_copy4(d + 4, r1 + 4 * q, keep);
            cq4_copy4(d + 8, r0 + 4 * q + 2, keep);
            cq4_copy4(d + 12, r1 + 4 * q + 2, keep);
        }
        cp_async_commit();
    };
    auto prefetch_task = [&](const Task& k) {
        if (k.doc >= 0) {
            prefetch_l2<ROW>(codes + k.start * ROW, k.len, lane);
            prefetch_l2<4>(aux + k.start, k.len, lane);
            prefetch_l2<4>(inv_norm + k.start, k.len, lane);
        }
    };

    float best[8];  // column 8j + 2c + e's running maximum at 2j + e
#pragma unroll
    for (int i = 0; i < 8; ++i) best[i] = NEG_INF;
    int tile = 0;
    i64 t = (i64)blockIdx.x * CQ4_WGS + wg;
    Task cur, nxt;
    task_of(t, cur);
    task_of(t + stride, nxt);
    prefetch_task(nxt);
    // Tile X of the current task: its next tile's operands into Y (this document's next, or
    // the next group's first), X multiplied and folded; at the group's last tile the score
    // is written and the next group taken. Whether the warpgroup's tasks are done.
    auto step = [&](Tile& X, Tile& Y, unsigned sx, unsigned sy) -> bool {
        const bool last = tile + 1 >= cur.tiles;
        {
            const i64 start = last ? nxt.start : cur.start;
            const int len = last ? nxt.len : cur.len;  // 0 past the last task: nothing loaded
            load_tile(Y, start, len, last ? 0 : tile + 1);
        }
        unsigned a[KS + 2][4];
        if constexpr (PAIRED) {
            // Byte s of `lo` holds pair 2s of both tokens (the high nibbles of their byte s),
            // of `hi` pair 2s + 1 (the low nibbles); token g's bits lowest.
            unsigned lo[W], hi[W];
#pragma unroll
            for (int i = 0; i < W; ++i) {
                lo[i] = ((X.raw0[i] >> 4) & 0x0F0F0F0Fu) | (X.raw1[i] & 0xF0F0F0F0u);
                hi[i] = (X.raw0[i] & 0x0F0F0F0Fu) | ((X.raw1[i] << 4) & 0xF0F0F0F0u);
            }
#pragma unroll
            for (int s = 0; s < KS; ++s) {
                const unsigned sel = 0x5504u | ((unsigned)(s % 4) << 4);
                unsigned at0, at1;
                asm("prmt.b32 %0, %1, %2, %3;" : "=r"(at0) : "r"(lo[s / 4]), "r"(lanebase), "r"(sel));
                asm("prmt.b32 %0, %1, %2, %3;" : "=r"(at1) : "r"(hi[s / 4]), "r"(lanebase), "r"(sel));
                asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a[s][0]), "=r"(a[s][1]) : "r"(at0 + tab));
                asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a[s][2]), "=r"(a[s][3]) : "r"(at1 + tab));
            }
        } else {
#pragma unroll
            for (int s = 0; s < KS; ++s) {
                step_pairs<NB, Lut::WIDE>(X.raw0, s, lanebase, tab, a[s][0], a[s][2]);
                step_pairs<NB, Lut::WIDE>(X.raw1, s, lanebase, tab, a[s][1], a[s][3]);
            }
        }
        cp_async_wait<0>();  // X's centroid scores
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a[KS][0]), "=r"(a[KS][1]), "=r"(a[KS][2]), "=r"(a[KS][3]) : "r"(sx) : "memory");
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a[KS + 1][0]), "=r"(a[KS + 1][1]), "=r"(a[KS + 1][2]), "=r"(a[KS + 1][3]) : "r"(sx + 512u) : "memory");
        float acc[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) acc[i] = 0.f;
        cbk_fence_acc(acc);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int s = 0; s < KS + 2; ++s)
            wgmma_m64n32k16(acc, a[s], d0 + (((unsigned)(s >> 2) * 4096u + (unsigned)(s & 3) * 32u) >> 4), s > 0);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        cbk_fence_acc(acc);
        const int r = tile * 16 + g;
        if (tile * 16 + 16 <= cur.len) {  // a whole tile of the document: no row masked
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    best[2 * j + e] = max_nan(best[2 * j + e], max_nan(acc[4 * j + e] * X.n0, acc[4 * j + 2 + e] * X.n1));
        } else {
            const bool v0 = r < cur.len, v1 = r + 8 < cur.len;
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float x0 = v0 ? acc[4 * j + e] * X.n0 : NEG_INF;
                    const float x1 = v1 ? acc[4 * j + 2 + e] * X.n1 : NEG_INF;
                    best[2 * j + e] = max_nan(best[2 * j + e], max_nan(x0, x1));
                }
        }
        gather(Y, sy);  // Y's ids have had this tile's work to arrive
        if (!last) {
            ++tile;
            return false;
        }
        // The column maxima over the warp's 16 rows by halving exchanges across the eight g
        // (lane bits 4, 3, 2): each round a lane keeps half its values and takes its partner's
        // maxima of them; lane (g, c) ends with column 8(g >> 1) + 2c + (g & 1).
        float m4[4], m2[2];
        const bool b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float keep = b4 ? best[i + 4] : best[i], give = b4 ? best[i] : best[i + 4];
            m4[i] = max_nan(keep, __shfl_xor_sync(0xffffffffu, give, 16));
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const float keep = b3 ? m4[i + 2] : m4[i], give = b3 ? m4[i] : m4[i + 2];
            m2[i] = max_nan(keep, __shfl_xor_sync(0xffffffffu, give, 8));
        }
        const float keep = b2 ? m2[1] : m2[0], give = b2 ? m2[0] : m2[1];
        const float m = max_nan(keep, __shfl_xor_sync(0xffffffffu, give, 4));
        const int col = 8 * (g >> 1) + 2 * c + (g & 1);
        float sum = col < nq ? m : 0.f;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0 && cur.doc >= 0) out[(i64)qb * num_docs + cur.doc] = sum;
#pragma unroll
        for (int i = 0; i < 8; ++i) best[i] = NEG_INF;
        t += stride;
        cur = nxt;
        task_of(t + stride, nxt);
        prefetch_task(nxt);
        tile = 0;
        return t >= tasks;
    };
    Tile X, Y;
    load_tile(X, cur.start, cur.len, 0);
    gather(X, stage0);
    if (t < tasks) {
        // Two tiles in turn (and two stages of centroid scores), so neither is copied.
        while (!step(X, Y, stage0, stage0 + 1024u) && !step(Y, X, stage0 + 1024u, stage0)) {}
    }
#endif
}

#define INSTANTIATE_CODEC_QUAD(NAME, D, NB)                                                    \
    extern "C" __global__ void __launch_bounds__(CQ4_THREADS, CQ4_MIN_BLOCKS) NAME(            \
        const u16* qblocks, const int* qrows, int num_blocks, const unsigned char* codes,      \
        const unsigned* aux, const float* inv_norm, const u16* cs, int num_centroids,          \
        const unsigned* table, const i64* d_offsets, const i64* order, int num_docs,           \
        float* out)                                                                            \
    {                                                                                          \
        maxsim_codec_quad_impl<D, NB>(qblocks, qrows, num_blocks, codes, aux, inv_norm, cs,    \
                                      num_centroids, table, d_offsets, order, num_docs, out);  \
    }

INSTANTIATE_CODEC_QUAD(maxsim_codec_q4_residual1_d64, 64, 1)
INSTANTIATE_CODEC_QUAD(maxsim_codec_q4_residual2_d64, 64, 2)
INSTANTIATE_CODEC_QUAD(maxsim_codec_q4_residual1_d128, 128, 1)
INSTANTIATE_CODEC_QUAD(maxsim_codec_q4_residual2_d128, 128, 2)
