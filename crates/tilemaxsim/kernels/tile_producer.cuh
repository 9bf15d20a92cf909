// What the many-row kernels (maxsim_gemm, maxsim_wgmma) share: the swizzled tile layout, a
// query block's A fragments, and the producer that copies document tiles (TileMeta, TileProducer).
#pragma once
#include "common.cuh"
#include "async_copy.cuh"

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
// The walk alone: the tiles of TOKENS tokens of each task in turn, as TileMetas (the
// decoding producer of kernels/codec_wgmma.cu fills the stages itself).
template <int TOKENS>
struct TileWalk {
    const i64* __restrict__ d_offsets;
    const i64* __restrict__ doc_index;
    i64 num_docs, pair, step_pair;  // (64-bit: a step past the last of 2^31 - 1 documents)
    int qtiles, qtile, step_q, tile = 0;
    i64 start = 0, end = 0;  // the current task's tokens (as loaded: used a call later)
    __device__ __forceinline__ TileWalk(const i64* offsets, const i64* index, int docs, int tiles)
        : d_offsets(offsets), doc_index(index), num_docs(docs), qtiles(tiles) {
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
    // The next tile's TileMeta ({0, 0, 0, -1} when the walk is over) and its first token.
    __device__ __forceinline__ TileMeta next(i64& first) {
        TileMeta m{0, 0, 0, -1};
        first = 0;
        if (pair < num_docs) {
            const int nd = (int)(end - start);
            const int tok0 = tile * TOKENS;
            first = start + tok0;
            m = TileMeta{min(TOKENS, nd - tok0), tok0 + TOKENS >= nd, qtile, (int)pair};
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
        return m;
    }
};

template <int D, int TOKENS, int NTHREADS>
struct TileProducer : TileWalk<TOKENS> {
    unsigned tid;  // this thread's index among the NTHREADS copying threads
    __device__ __forceinline__ TileProducer(const i64* offsets, const i64* index, int docs, int tiles, unsigned thread)
        : TileWalk<TOKENS>(offsets, index, docs, tiles), tid(thread) {}
    template <class Swz>
    __device__ __forceinline__ TileMeta issue(const u16* __restrict__ d_tokens, unsigned dst0, Swz swz) {
        constexpr int C = D / 8;  // 16-byte chunks per token row
        i64 first;
        const TileMeta m = this->next(first);
        if (m.pair >= 0) {
            const int ntok = m.ntok;
            const u16* base = d_tokens + first * D;
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
        }
        cp_async_commit();
        return m;
    }
};
