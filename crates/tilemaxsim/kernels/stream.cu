// maxsim_stream (sm_80+; launched on sm_90+ in place of maxsim_span): one query against every
// document of a packed corpus at small d (16-byte rows, d ≤ 64), the documents streamed
// through registers with no shared-memory tiles and no barriers past the block's start.
//
// A block takes a run of `group` consecutive documents for one query (as maxsim_span); its
// warps (one, two or four: the launch's choice, one by default) split the run's tokens in equal
// parts, each taking the documents that start in its part, whole. A warp walks its documents
// by chunks of CH tokens from each document's first token (8-token tiles, the last chunk of a
// document partly empty): the next chunk's B fragments are loaded from global memory while the
// current one is multiplied, across document ends, so each warp keeps a chunk (2-4 KB) in
// flight (at d = 24, 40 and 48 also the tokens two chunks further, prefetched into L2:
// stream_prefetch_chunks; at d = 16 two chunks ahead in registers: stream_stages). A document's
// row maxima stay in registers from its first chunk to its last; then block_score, as
// maxsim_mma.
//
// Why: at small d maxsim_span's per-token costs (the block's barrier a tile, shared-memory
// atomics for the documents that cross its 32- to 128-token warp windows, range tests in every
// chunk a document boundary meets) set its pace: d = 16 issued on 66% of cycles at 47% of the
// read ceiling (BENCHMARKS.md, H200 tenth). Here a token costs its loads, its share of the
// chunk's products and one max a query row pair, and a document one masked tile and its score.
// D is a template constant, so each tile's load is one predicated LDG at a constant offset (with
// d a launch argument the 64-bit address and branches took about 18 instructions a tile).
// H200, f16 U[32,256] B = 100K, % of the read ceiling against maxsim_span, two rounds
// (bench/results/h200/2026-11-30d/call2.log): d = 16 72.4 / 72.8 against 49.3 / 49.2 (ncu:
// 51.3M instructions against 121.9M, 42.7% issue active, 69% of DRAM's peak), 32 83.7 / 83.6
// against 70.6 / 69.9, 48 82.1 / 82.7 against 79.5 / 79.5; d = 64 83.4 against 86.6, which keeps
// maxsim_span_f16_d64 (plan/span.rs: stream_by_default).
#include "common.cuh"
#include "mma_frag.cuh"
#include "any_frag.cuh"

// Threads a block at most (__launch_bounds__); a launch takes one, two or four warps a block
// (plan/span.rs: STREAM_WARPS), the run's tokens split between them.
#define STREAM_THREADS 128
#define STREAM_RUN_MAX 64  // documents per run at most (plan.rs: SPAN_RUN_MAX)

// Blocks an SM the registers are set for (two chunks of B fragments live): four (128
// registers); six at d ≤ 16, one k16 product a tile (80 registers, no spills; the wider d
// spill 150-240 bytes at six under NVRTC 13).
#ifndef STREAM_BLOCKS
#define STREAM_BLOCKS 4
#endif
#ifndef STREAM_D16_BLOCKS
#define STREAM_D16_BLOCKS 6
#endif
// 8-token tiles a chunk: 8 (64 tokens) at one 32-dimension chunk, 4 (32 tokens) at two;
// STREAM_D16_TILES at d ≤ 16, for experiments: more bytes in flight a warp at fewer warps
// (16 at four blocks and 12 at five compile without spills; 16 at four lost 9 points of the
// read ceiling at d = 16: bench/results/h200/2026-11-30e/call1.log).
#ifndef STREAM_D16_TILES
#define STREAM_D16_TILES 8
#endif
#define STREAM_BLOCKS_OF(D) ((D) <= 16 ? STREAM_D16_BLOCKS : STREAM_BLOCKS)
// L2 prefetch of the warp's tokens, from a cursor that only moves forward, this many chunks
// past the one being loaded (0: none; sm_90, one cp.async.bulk.prefetch.L2 from lane 0): bytes
// in flight at no register cost. Two at d = 24, 40 and 48, where it gained 5.3, 4.1 and 1.7
// points of the read ceiling (d = 48 at B = 10K: 7.7); none elsewhere: d = 16 moved 0.2, d = 32,
// 56 and 64 lost 1.4, 2.3 and 5.5. A line a lane (prefetch.global.L2) gained less at d = 24-48
// (H200, f16 U[32,256] B = 100K, two rounds; bench/results/h200/2026-11-30e/call1.log).
// STREAM_PREFETCH sets it for every d (experiments).
template <int D>
constexpr int stream_prefetch_chunks() {
#ifdef STREAM_PREFETCH
    return STREAM_PREFETCH;
#else
    return D == 24 || D == 40 || D == 48 ? 2 : 0;
#endif
}

// Register buffers of B fragments a warp: S chunks (S - 1 of them loading while one is folded).
// 3 at d = 16 (80 registers, no spills at six blocks; d = 8 spills 8 bytes at 3), 2 elsewhere.
// Three doubles the bytes a warp has in flight: d = 16 gained 0.7 points of the read ceiling
// (72.6 / 72.7 → 73.3 / 73.4%; ncu 140.4 → 138.8 µs, long-scoreboard stalls 5.6 → 4.0 cycles
// an issue, so loads in flight were not what held it at 73%). Every wider d lost: 4.4-28.6
// points at four blocks an SM (spills at 24, 32, 56 and 64, 4 bytes at 40, none at 48) and
// 2.6-12.5 at three, which spill nowhere (H200, f16 U[32,256] B = 100K, two rounds:
// bench/results/h200/2026-11-30f/call1.log). STREAM_STAGES sets it for every d (experiments).
template <int D>
constexpr int stream_stages() {
#ifdef STREAM_STAGES
    return STREAM_STAGES;
#else
    return D == 16 ? 3 : 2;
#endif
}

// A step's buffer index as a type, so every index into the buffers is a constant.
template <int N>
struct Stage { static constexpr int value = N; };

// `bytes` bytes from `p` (16-byte aligned, a multiple of 16) into L2: a hint.
__device__ __forceinline__ void stream_prefetch(const u16* p, int bytes, int lane) {
#if __CUDA_ARCH__ >= 900
    if (lane == 0)
        asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %0; cp.async.bulk.prefetch.L2.global [g], %1; }"
                     :: "l"(p), "r"(bytes) : "memory");
#else
    (void)p, (void)bytes, (void)lane;
#endif
}

// The chunk's B fragments: tile t's token rows start + t * 8 + g, `row` pointing at this
// thread's first (start + g); only the rows before the document's end (`left` rows of it from
// `row` on; every row when the chunk is full), zeros past it and past d. D is known at compile
// time, so every load is `row`'s pointer plus a constant (plus the lane's column).
template <int D, int TPC, int KCH = (D + 31) / 32, bool HALF = (D - 1) % 32 < 16>
__device__ __forceinline__ void stream_load(V4 (&b)[TPC][KCH], const u16* row, int left, bool full, int c) {
#pragma unroll
    for (int ch = 0; ch < KCH; ++ch) {
        const bool half = HALF && ch == KCH - 1;
        const int k = ch * 32 + (half ? c * 4 : c * 8);
        const bool in_d = ch < KCH - 1 || k < D;  // the last chunk's columns past d: zeros
        const u16* p = row + k;
#pragma unroll
        for (int t = 0; t < TPC; ++t) {
            const bool in = in_d && (full || t * 8 < left);
            if (half) {
                unsigned long long x = 0;
                if (in) x = *(const unsigned long long*)(p + t * 8 * D);
                b[t][ch] = V4{(unsigned)x, (unsigned)(x >> 32), 0u, 0u};
            } else {
                V4 v{0u, 0u, 0u, 0u};
                if (in) v = *(const V4*)(p + t * 8 * D);
                b[t][ch] = v;
            }
        }
    }
}

// Fold the chunk's products into the rows' maxima: `n` of its tokens belong to the document
// (every tile when n ≥ CH; else the tiles before n, only the one holding the end masked).
template <bool BF, int TPC, int KCH, bool HALF>
__device__ __forceinline__ void stream_fold(float (&best)[2][2], const unsigned (&a)[2][KCH][2][4],
                                            const V4 (&b)[TPC][KCH], int n, int c) {
    auto tile = [&](int t, bool masked) {
        float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        tile_products<BF, KCH, HALF>(acc, a, b[t]);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            if (masked) {
                fold_max(best[mt], acc[mt], t * 8 + 2 * c, n);
            } else {
                best[mt][0] = max_nan(best[mt][0], max_nan(acc[mt][0], acc[mt][1]));
                best[mt][1] = max_nan(best[mt][1], max_nan(acc[mt][2], acc[mt][3]));
            }
        }
    };
    if (n >= TPC * 8) {
#pragma unroll
        for (int t = 0; t < TPC; ++t) tile(t, false);
    } else {
#pragma unroll
        for (int t = 0; t < TPC; ++t) {
            if (t * 8 + 8 <= n)  // uniform
                tile(t, false);
            else if (t * 8 < n)
                tile(t, true);
        }
    }
}

template <bool BF, int D>
__device__ __forceinline__ void maxsim_stream_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, const u16* __restrict__ d_tokens,
    const i64* __restrict__ d_offsets, int num_docs, float* __restrict__ out, int group)
{
    constexpr int KCH = (D + 31) / 32;
    constexpr bool HALF = (D - 1) % 32 < 16;  // the last chunk's second k16 product skipped
    constexpr int TPC = D <= 16 ? STREAM_D16_TILES : KCH == 1 ? 8 : 4;  // 8-token tiles a chunk
    constexpr int CH = TPC * 8;
    constexpr int S = stream_stages<D>();
    __shared__ int offs[STREAM_RUN_MAX + 1];  // the run's offsets from its first token
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    const int runs = (num_docs + group - 1) / group;
    const int qi = blockIdx.x / runs;
    const int p0 = (blockIdx.x % runs) * group, p1 = min(p0 + group, num_docs), n = p1 - p0;
    const i64 t0 = d_offsets[p0];
    float* q_out = out + (i64)qi * num_docs + p0;
    for (int i = threadIdx.x; i <= n; i += blockDim.x) offs[i] = (int)(d_offsets[p0 + i] - t0);
    __syncthreads();  // the only barrier
    // Warp wib's documents [da, db): those whose first token lies in its part of the run's
    // tokens (the last warp's also those starting at its end: empty documents there).
    const int T = offs[n];
    auto first_at = [&](int w) {  // documents starting before part w
        if (w == warps) return n;
        const int lo = (int)((i64)T * w / warps);
        int count = 0;
        for (int i0 = 0; i0 < n; i0 += 32) {
            const int i = i0 + lane;
            count += __popc(__ballot_sync(0xffffffffu, i < n && offs[i] < lo));
        }
        return count;
    };
    const int da = first_at(wib), db = first_at(wib + 1);
    if (da >= db) return;

    const int nq = (int)(q_offsets[qi + 1] - q_offsets[qi]);
    unsigned a[2][KCH][2][4];
    load_a_any<KCH, HALF>(a, qpad + (i64)qi * 32 * D, D, g, c);
    // This thread's row of a chunk's first tile: the run's token t0 + pos + g.
    const u16* base = d_tokens + (t0 + g) * D;

    // The chunk at token `pos` of document `doc` (which ends at `end`); doc == db: none left.
    // Empty documents score the sum of nothing found (-inf), as maxsim_bulk's.
    int doc = da, pos = offs[da], end = offs[da + 1];
    auto skip_empty = [&](int& d, int& p, int& e) {
        while (d < db && e == p) {
            if (lane == 0) q_out[d] = NEG_INF;
            ++d;
            if (d < db) p = e, e = offs[d + 1];
        }
    };
    skip_empty(doc, pos, end);
    if (doc >= db) return;

    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
    // A chunk: token `pos` of document `doc`, which ends at `end` (doc == db: none left).
    struct Chunk { int doc, pos, end; };
    // The chunk after x, past any empty documents (x.doc < db, or past the last at S > 2).
    auto after = [&](Chunk x) -> Chunk {
        if (S > 2 && x.doc >= db) return x;
        x.pos += CH;
        if (x.pos >= x.end) {
            ++x.doc;
            x.pos = x.end;
            if (x.doc < db) x.end = offs[x.doc + 1];
            skip_empty(x.doc, x.pos, x.end);
        }
        return x;
    };
    auto load = [&](V4 (&to)[TPC][KCH], const Chunk& x) {
        if (x.doc < db) stream_load<D, TPC>(to, base + (i64)x.pos * D, x.end - x.pos - g, x.end - x.pos >= CH, c);
    };
    // S register buffers: chunk i is folded from b[i % S] while chunks i + 1 .. i + S - 1 load.
    V4 b[S][TPC][KCH];
    Chunk k[S];
    k[0] = Chunk{doc, pos, end};
    load(b[0], k[0]);
#pragma unroll
    for (int s = 1; s < S - 1; ++s) {
        k[s] = after(k[s - 1]);
        load(b[s], k[s]);
    }
    // Tokens before `ahead` (from the run's first) are loaded or prefetched; the warp's end.
    constexpr int PF = stream_prefetch_chunks<D>();
    const u16* run = d_tokens + t0 * D;
    const int last = offs[db];
    int ahead = pos + S * CH;
    // Step i (s = i % S): chunk i + S - 1 (the one after chunk i + S - 2) loaded into its
    // buffer, then chunk i's products; false at the warp's last chunk.
    auto step = [&](auto stage) -> bool {
        constexpr int s = decltype(stage)::value;
        constexpr int into = (s + S - 1) % S;
        k[into] = after(k[(s + S - 2) % S]);
        load(b[into], k[into]);
        if (PF > 0) {
            const int target = min(k[into].pos + (PF + 1) * CH, last);
            if (target > ahead) {  // uniform
                stream_prefetch(run + (i64)ahead * D, (target - ahead) * D * 2, lane);
                ahead = target;
            }
        }
        const int left = k[s].end - k[s].pos;
        stream_fold<BF, TPC, KCH, HALF>(best, a, b[s], left, c);
        if (left <= CH) {
            const float sc = block_score(best, nq, g);
            if (lane == 0) q_out[k[s].doc] = sc;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) best[mt][0] = best[mt][1] = NEG_INF;
        }
        return k[(s + 1) % S].doc < db;
    };
    // S steps an iteration (at most 4), so the buffers rotate without register copies.
    static_assert(S >= 2 && S <= 4, "STREAM_STAGES: 2 to 4");
    for (;;) {
        if (!step(Stage<0>{}) || !step(Stage<1>{})) return;
        if (S > 2 && !step(Stage<2 % S>{})) return;
        if (S > 3 && !step(Stage<3 % S>{})) return;
    }
}

#define INSTANTIATE_STREAM(T, BF, D)                                                               \
    extern "C" __global__ void __launch_bounds__(STREAM_THREADS, STREAM_BLOCKS_OF(D)) maxsim_stream_##T##_d##D( \
        const u16* qpad, const i64* q_offsets, const u16* d_tokens, const i64* d_offsets,        \
        int num_docs, float* out, int stages, int group, int dim)                                 \
    {                                                                                             \
        (void)stages, (void)dim;                                                                  \
        maxsim_stream_impl<BF, D>(qpad, q_offsets, d_tokens, d_offsets, num_docs, out, group);    \
    }

// Every multiple of 8 up to 64 (plan.rs: STREAM_DIMS).
#define INSTANTIATE_STREAM_ALL(T, BF) \
    INSTANTIATE_STREAM(T, BF, 8)      \
    INSTANTIATE_STREAM(T, BF, 16)     \
    INSTANTIATE_STREAM(T, BF, 24)     \
    INSTANTIATE_STREAM(T, BF, 32)     \
    INSTANTIATE_STREAM(T, BF, 40)     \
    INSTANTIATE_STREAM(T, BF, 48)     \
    INSTANTIATE_STREAM(T, BF, 56)     \
    INSTANTIATE_STREAM(T, BF, 64)
INSTANTIATE_STREAM_ALL(f16, false)
INSTANTIATE_STREAM_ALL(bf16, true)
