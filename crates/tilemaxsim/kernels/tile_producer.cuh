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
// The walk alone: the tiles of TOKENS tokens of each task in turn, as TileMetas (TileProducer's;
// the decoding producer of kernels/codec_wgmma.cu walks runs of documents: RunWalk).
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
    // RunWalk's shape, for the producers that take either: runs of one document, no end columns,
    // nothing staged.
    __device__ __forceinline__ TileWalk(const i64* offsets, const i64* index, int docs, int tiles, int, i64*, unsigned, unsigned)
        : TileWalk(offsets, index, docs, tiles) {}
    __device__ __forceinline__ TileMeta next(i64& first, int&, int) { return next(first); }
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

// The walk of the batched codec kernels (kernels/codec_wgmma.cu): (run, query tile) tasks with
// a grid stride as TileWalk's, a run being `run_docs` consecutive documents whose tokens lie
// back to back (`doc_index` null; a run is one document where `doc_index` is given), walked in
// tiles of TOKENS consecutive tokens that cross the run's document boundaries, so short
// documents fill their tiles. A TileMeta's `pair` is the document holding the tile's first token
// and `last` the number of documents that end in the tile (the first of them at `pair`, empty
// ones too); the end column of the k-th (1..TOKENS) is returned to the producer thread whose
// index is k (`mine`), which leaves it in shared memory for the consumers. run_docs ≤ TOKENS,
// so at most TOKENS documents end in a tile.
template <int TOKENS>
struct RunWalk {
    const i64* __restrict__ d_offsets;
    const i64* __restrict__ doc_index;
    i64 task, tasks;  // task = run * qtiles + query tile, a grid stride apart
    int run_docs, num_docs, qtiles, qtile;
    int doc = 0, doc_stop = 0, run0 = 0;  // the document holding `pos`; the run's last + 1; its first
    i64 pos = 0, end = 0, doc_end = 0;    // the task's next token and its end; the document's end
    // The run's document ends, staged in shared memory once a task by the `walkers` threads that
    // walk in step (named barrier 1; this one is `walker` among them), so a tile's walk from one
    // document's end to the next waits on a shared load, not on a global one.
    i64* staged;
    unsigned walker, walkers;
    __device__ __forceinline__ RunWalk(const i64* offsets, const i64* index, int docs, int tiles, int per_run, i64* stage,
                                       unsigned me, unsigned n)
        : d_offsets(offsets), doc_index(index), task(blockIdx.x), num_docs(docs), qtiles(tiles), staged(stage), walker(me),
          walkers(n) {
        run_docs = index ? 1 : max(1, min(per_run, TOKENS));
        tasks = (((i64)docs + run_docs - 1) / run_docs) * (i64)max(tiles, 0);
        load();
    }
    __device__ __forceinline__ void load() {  // (a division a task: a task is many tiles)
        if (task < tasks) {
            const i64 run = task / qtiles;
            qtile = (int)(task - run * qtiles);
            doc = run0 = (int)(run * run_docs);
            doc_stop = (int)min((i64)doc + run_docs, (i64)num_docs);
            if (doc_index) {
                const i64 d = doc_index[doc];
                pos = d_offsets[d];
                end = d_offsets[d + 1];
                doc_end = end;
            } else {
                pos = d_offsets[doc];
                end = d_offsets[doc_stop];
                // Every walker is done with the last run's ends before they are replaced.
                asm volatile("bar.sync 1, %0;" :: "r"(walkers) : "memory");
                for (int i = (int)walker; i < doc_stop - doc; i += (int)walkers) staged[i] = d_offsets[doc + 1 + i];
                asm volatile("bar.sync 1, %0;" :: "r"(walkers) : "memory");
                doc_end = staged[0];
            }
        }
    }
    // The next tile's TileMeta ({0, 0, 0, -1} when the walk is over), its first token, and the
    // end column of its document `pt` (for producer thread `pt`, when that many end in it).
    __device__ __forceinline__ TileMeta next(i64& first, int& mine, int pt) {
        TileMeta m{0, 0, 0, -1};
        first = 0;
        if (task < tasks) {
            first = pos;
            const int ntok = (int)min((i64)TOKENS, end - pos);
            const i64 tile_end = pos + ntok;
            const int pair = doc;
            int k = 0;
            while (doc_end <= tile_end) {  // the document ends in this tile
                if (k == pt) mine = (int)(doc_end - first);
                ++k;
                if (++doc >= doc_stop) break;
                doc_end = staged[doc - run0];  // (doc_index: one document a run, never here)
            }
            m = TileMeta{ntok, k, qtile, pair};
            pos = tile_end;
            if (doc >= doc_stop) {  // the task is done
                task += gridDim.x;
                load();
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
