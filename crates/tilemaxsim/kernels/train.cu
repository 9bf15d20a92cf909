// Training kernels (f16/bf16/f32, d a multiple of 8 up to 128): the forward pass that writes each
// query token's best document token (its argmax, int32) beside the score, and the two backward
// passes that route a score's gradient through those tokens only:
//   maxsim_train_fwd: score[a, b] = sum_i max_j <q_ai, d_bj>, argmax[a, b, i] = that j;
//   maxsim_train_dq:  dQ[a, i] = sum_b g[a, b] * D[b, argmax[a, b, i]]      (gathers, no products);
//   maxsim_train_dd:  dD[b, j] = sum_{a, i: argmax[a, b, i] = j} g[a, b] * Q[a, i]
//                     (a block per document, its rows accumulated in shared memory).
// Pairing: group = 0 scores every query against every document (`[A, B]`, PyLate's in-batch
// matrix; the block's documents go through a ring in shared memory that its eight query chunks
// share, TRAIN_SMEM); group = K > 0 scores document b against query b / K only (`[B]`: pairs
// for K = 1, the distillation layout `[A, K, Ld, d]` for K candidates a query; each warp loads
// its own document's rows).
// Documents: `DocRows` (ablation.cu: packed rows by offsets, or a padded batch with lengths),
// `num_docs` of them. Queries: `[A, Lq, d]`, any strides whose
// rows are contiguous and 16-byte aligned; a warp takes 32 query rows at a time. The similarity
// is the exact product of the stored values summed in f32 on the tensor cores (m16n8k16),
// the same as the scoring kernels'. f32 (SPLIT): the documents are split once a call into f16
// planes (maxsim_train_split), each query row is scaled by a power of two and split into two
// f16 parts in registers, and three products a tile (hi·hi + lo·hi, hi·lo) carry the
// similarity to about 2^-22 of the row's largest, as maxsim_bulk_split does; the backward
// passes read and write f32. A document of no tokens scores -inf, its argmax is -1 and it gets
// no gradient.
#pragma once
#include "mma_frag.cuh"
#include "split.cuh"
#include "async_copy.cuh"

// The two 16-bit values of a word as f32 (the lower address first), and two f32 packed back.
template <bool BF> __device__ __forceinline__ float half_lo(unsigned w) {
    if constexpr (BF) return bf16_lo(w);
    float f;
    asm("{ .reg .b16 a, b; mov.b32 {a, b}, %1; cvt.f32.f16 %0, a; }" : "=f"(f) : "r"(w));
    return f;
}
template <bool BF> __device__ __forceinline__ float half_hi(unsigned w) {
    if constexpr (BF) return bf16_hi(w);
    float f;
    asm("{ .reg .b16 a, b; mov.b32 {a, b}, %1; cvt.f32.f16 %0, b; }" : "=f"(f) : "r"(w));
    return f;
}
template <bool BF> __device__ __forceinline__ unsigned pack2(float first, float second) {
    return BF ? bf16x2_of(first, second) : f16x2_of(first, second);
}

#define TRAIN_WARPS 8

// 32 query rows (row stride `rs` elements, the first `valid` real) as A fragments in the
// permuted k order of the direct 16-byte B loads (load_a_permuted's order), zeros past `dim`
// and past the valid rows.
template <int KCH>
__device__ __forceinline__ void train_load_a(unsigned (&a)[2][KCH][2][4], const u16* q, i64 rs, int valid, int dim,
                                             int g, int c) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mt * 16 + h * 8 + g;
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch) {
                const int k = ch * 32 + c * 8;
                V4 v = {0u, 0u, 0u, 0u};
                if (r < valid && k < dim) v = *(const V4*)(q + r * rs + k);
                a[mt][ch][0][h] = v.x;
                a[mt][ch][0][h + 2] = v.y;
                a[mt][ch][1][h] = v.z;
                a[mt][ch][1][h + 2] = v.w;
            }
        }
}

// float32 queries (the SPLIT forward): 32 query rows (row stride `rs` floats, the first
// `valid` real) each scaled by the power of two c that brings its largest |q| into [2^14, 2^15)
// (query_scale; an argmax is the same for any positive scale of its row, and `inv` = 1/c
// scales its maximum back), then split into f16 parts hi = f16(c q) and lo = f16(c q - hi), as
// maxsim_bulk_split splits its queries. Fragments in the order the documents' planes hold a
// 32-dimension chunk (`maxsim_train_split`: lane c's eight halves are dimensions c*4 .. +3 and
// 16 + c*4 .. +3); zeros past `dim` and past the valid rows.
template <int KCH>
__device__ __forceinline__ void train_load_a_split(unsigned (&hi)[2][KCH][2][4], unsigned (&lo)[2][KCH][2][4],
                                                   float (&inv)[2][2], const float* q, i64 rs, int valid, int dim,
                                                   int g, int c) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mt * 16 + h * 8 + g;
            float4 f[KCH][2];
            float m = 0.f;
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int k = ch * 32 + half * 16 + c * 4;
                    f[ch][half] = r < valid && k < dim ? *(const float4*)(q + r * rs + k) : make_float4(0.f, 0.f, 0.f, 0.f);
                    m = fmaxf(m, fmaxf(fmaxf(fabsf(f[ch][half].x), fabsf(f[ch][half].y)),
                                       fmaxf(fabsf(f[ch][half].z), fabsf(f[ch][half].w))));
                }
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            float s;
            query_scale(m, s, inv[mt][h]);
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const float4 y = make_float4(f[ch][half].x * s, f[ch][half].y * s, f[ch][half].z * s, f[ch][half].w * s);
                    const unsigned h01 = f16x2_of(y.x, y.y), h23 = f16x2_of(y.z, y.w);
                    float a0, a1, a2, a3;
                    f32_of_f16x2(h01, a0, a1);
                    f32_of_f16x2(h23, a2, a3);
                    hi[mt][ch][half][h] = h01;
                    hi[mt][ch][half][h + 2] = h23;
                    lo[mt][ch][half][h] = f16x2_of(y.x - a0, y.y - a1);
                    lo[mt][ch][half][h + 2] = f16x2_of(y.z - a2, y.w - a3);
                }
        }
}

// A task's query rows (`q` + `at` elements) as A fragments: 16-bit rows as they are, or f32
// rows scaled and split (SPLIT: `lo`, `inv` too).
template <int KCH, bool SPLIT>
__device__ __forceinline__ void train_load_query(unsigned (&hi)[2][KCH][2][4], unsigned (&lo)[2][KCH][2][4],
                                                 float (&inv)[2][2], const void* q, i64 at, i64 rs, int valid, int dim,
                                                 int g, int c) {
    if constexpr (SPLIT)
        train_load_a_split<KCH>(hi, lo, inv, (const float*)q + at, rs, valid, dim, g, c);
    else
        train_load_a<KCH>(hi, (const u16*)q + at, rs, valid, dim, g, c);
}

// One similarity into a row's running (max, argmax): the first of equal maxima is kept, and
// a NaN sticks (max.NaN), so the score carries it.
__device__ __forceinline__ void train_take(float& best, int& arg, float v, int col, int len) {
    if (col < len) {
        if (v > best) arg = col;
        best = max_nan(best, v);
    }
}

// A warp's running maxima (no token yet) and argmaxima (-1).
__device__ __forceinline__ void train_reset(float (&best)[2][2], int (&arg)[2][2]) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            best[mt][h] = NEG_INF;
            arg[mt][h] = -1;
        }
}

// A 16-row tile of a document (its rows n0 .. n0 + 15 as B fragments `v`, two 8-row halves)
// multiplied by a warp's 32 query rows and folded into their running maxima and argmaxima.
template <bool BF, int KCH>
__device__ __forceinline__ void train_fold(const unsigned (&a)[2][KCH][2][4], const V4 (&v)[2][KCH], int n0, int len,
                                           int c, float (&best)[2][2], int (&arg)[2][2]) {
    float acc[2][2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[t][mt][e] = 0.f;
        tile_products<BF, KCH>(acc[t], a, v[t]);
    }
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            const int col = n0 + t * 8 + 2 * c;
            train_take(best[mt][0], arg[mt][0], acc[t][mt][0], col, len);
            train_take(best[mt][0], arg[mt][0], acc[t][mt][1], col + 1, len);
            train_take(best[mt][1], arg[mt][1], acc[t][mt][2], col, len);
            train_take(best[mt][1], arg[mt][1], acc[t][mt][3], col + 1, len);
        }
}

// The SPLIT forward's documents are f16 planes (`maxsim_train_split`): each 32-dimension chunk
// of a token as 32 high parts, then 32 low parts scaled by 2^11 (SPLIT_SCALE), 64 halves a
// chunk. One 8-row half tile of them (this thread's row n0 + g: `vh` the high parts, `vl` the
// low, at its eight halves of each chunk) multiplied by a warp's 32 scaled query rows as
// maxsim_bulk_split multiplies its f32 corpora: hi·dhi + lo·dhi into one accumulator, hi·dlo
// into a second scaled back by 2^-11; folded into the running maxima and argmaxima.
template <int KCH>
__device__ __forceinline__ void train_fold_split(const unsigned (&hi)[2][KCH][2][4], const unsigned (&lo)[2][KCH][2][4],
                                                 const V4 (&vh)[KCH], const V4 (&vl)[KCH], int n0, int len, int c,
                                                 float (&best)[2][2], int (&arg)[2][2]) {
    float acc[2][4], low[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][e] = low[mt][e] = 0.f;
    tile_products<false, KCH>(acc, hi, vh);
    tile_products<false, KCH>(acc, lo, vh);
    tile_products<false, KCH>(low, hi, vl);
    const int col = n0 + 2 * c;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        train_take(best[mt][0], arg[mt][0], fmaf(low[mt][0], 1.f / SPLIT_SCALE, acc[mt][0]), col, len);
        train_take(best[mt][0], arg[mt][0], fmaf(low[mt][1], 1.f / SPLIT_SCALE, acc[mt][1]), col + 1, len);
        train_take(best[mt][1], arg[mt][1], fmaf(low[mt][2], 1.f / SPLIT_SCALE, acc[mt][2]), col, len);
        train_take(best[mt][1], arg[mt][1], fmaf(low[mt][3], 1.f / SPLIT_SCALE, acc[mt][3]), col + 1, len);
    }
}

// A planes row's B fragments (p: this thread's halves of the row's first chunk; zeros for a
// row past the document).
template <int KCH>
__device__ __forceinline__ void train_load_planes(V4 (&vh)[KCH], V4 (&vl)[KCH], const u16* p, bool row_in) {
#pragma unroll
    for (int ch = 0; ch < KCH; ++ch) {
        vh[ch] = row_in ? *(const V4*)(p + ch * 64) : V4{0u, 0u, 0u, 0u};
        vl[ch] = row_in ? *(const V4*)(p + ch * 64 + 32) : V4{0u, 0u, 0u, 0u};
    }
}

// The maxima of a warp's split rows scaled back by 1/c (each row's `inv`).
__device__ __forceinline__ void train_unscale(float (&best)[2][2], const float (&inv)[2][2]) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) best[mt][h] *= inv[mt][h];
}

// Rows n0 + g and n0 + 8 + g of a document (p: row n0 + g, at this thread's 8 dimensions of the
// first 32) as B fragments in the permuted k order; zeros past `len` rows and past `dim`.
template <int KCH>
__device__ __forceinline__ void train_load_b(V4 (&v)[2][KCH], const u16* p, int n0, int len, int dim, int g, int c,
                                             i64 tile) {
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        const bool row_in = n0 + t * 8 + g < len;
#pragma unroll
        for (int ch = 0; ch < KCH; ++ch) {
            v[t][ch] = V4{0u, 0u, 0u, 0u};
            if (row_in && ch * 32 + c * 8 < dim) {
                const U4 u = ld_stream(p + t * tile + ch * 32);
                v[t][ch] = V4{u.x, u.y, u.z, u.w};
            }
        }
    }
}

// TRAIN_PREFETCH 1: the next tile's loads are issued before this tile's products (32 registers
// more at d = 128); 0: after them.
#ifndef TRAIN_PREFETCH
#define TRAIN_PREFETCH 1
#endif

// The running maxima and argmaxima of a warp's 32 query rows over one document's `len` rows.
template <bool BF, int KCH>
__device__ __forceinline__ void train_doc(const unsigned (&a)[2][KCH][2][4], const u16* doc, i64 rs, int len, int dim,
                                          int g, int c, float (&best)[2][2], int (&arg)[2][2]) {
    train_reset(best, arg);
    const i64 tile = 8 * rs;
    const u16* p = doc + g * rs + c * 8;  // this thread's row of the first 8-row tile
    V4 v[2][KCH];
    train_load_b<KCH>(v, p, 0, len, dim, g, c, tile);
    for (int n0 = 0; n0 < len; n0 += 16) {
#if TRAIN_PREFETCH
        // The next 16 rows' loads go out before this tile's products.
        V4 nv[2][KCH];
        train_load_b<KCH>(nv, p + (n0 + 16) / 8 * tile, n0 + 16, len, dim, g, c, tile);
#endif
        train_fold<BF, KCH>(a, v, n0, len, c, best, arg);
#if TRAIN_PREFETCH
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch) v[t][ch] = nv[t][ch];
#else
        train_load_b<KCH>(v, p + (n0 + 16) / 8 * tile, n0 + 16, len, dim, g, c, tile);
#endif
    }
}

// train_doc for the SPLIT forward: a document's planes rows (`rs` halves apart), 8 at a time.
template <int KCH>
__device__ __forceinline__ void train_doc_split(const unsigned (&hi)[2][KCH][2][4], const unsigned (&lo)[2][KCH][2][4],
                                                const u16* doc, i64 rs, int len, int g, int c, float (&best)[2][2],
                                                int (&arg)[2][2]) {
    train_reset(best, arg);
    for (int n0 = 0; n0 < len; n0 += 8) {
        V4 vh[KCH], vl[KCH];
        train_load_planes<KCH>(vh, vl, doc + (n0 + g) * rs + c * 8, n0 + g < len);
        train_fold_split<KCH>(hi, lo, vh, vl, n0, len, c, best, arg);
    }
}

// TRAIN_SMEM 1: every query against every document (group = 0) reads the block's documents
// through shared memory, TRAIN_TILE rows a stage in a ring of TRAIN_STAGES (cp.async, all 256
// threads), which the block's TRAIN_WARPS query chunks all multiply: each document row leaves
// L2 once a block instead of once a warp. 0: every warp loads its B fragments from global
// memory itself (train_doc), as the pairs and distillation layouts (group > 0) always do.
#ifndef TRAIN_SMEM
#define TRAIN_SMEM 1
#endif
#ifndef TRAIN_TILE
#define TRAIN_TILE 64
#endif
#ifndef TRAIN_STAGES
#define TRAIN_STAGES 3
#endif
// The ring's rows the host sizes a block's shared memory for (src/cuda/train.rs: FWD_RING_ROWS),
// within TRAIN_SMEM_BUDGET bytes, the shared memory a block may opt into on the architecture
// compiled for: 99 KB on sm_86, sm_89 and sm_120+, 163 KB on sm_80 and sm_87, more on sm_90+
// (train.rs: `fwd_smem_budget`, the same rule by compute capability).
#define TRAIN_RING_ROWS 192
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
#define TRAIN_SMEM_BUDGET 101376
#else
#define TRAIN_SMEM_BUDGET 166912
#endif
static_assert(TRAIN_TILE % 16 == 0 && TRAIN_TILE * TRAIN_STAGES <= TRAIN_RING_ROWS, "the ring outgrows its shared memory");
// Blocks a SM the forward's registers must leave room for (__launch_bounds__'s second argument):
// two hold it to 128 registers, 16 warps a SM. H200, PyLate's in-batch step (64 queries × 512
// documents, Lq 32, Ld 180, d 128), the forward with its argmax alone, ms (two rounds,
// bench/results/h200/2026-12-02c/call3.log): bf16 0.218 / 0.236 with two, 0.292 / 0.274 with
// one, 0.411 / 0.387 for each warp loading its own rows from L2 (TRAIN_SMEM=0); f16 0.217 /
// 0.227, 0.282 / 0.281, 0.404 / 0.421. Not kept: two stages of 96 rows (0.276-0.294) and six
// of 32 (0.283-0.303), at one block a SM.
#ifndef TRAIN_FWD_MIN_BLOCKS
#define TRAIN_FWD_MIN_BLOCKS 2
#endif

// A stage's row pitch in halves: KCH 32-wide chunks, odd in 64-byte units, so that the two rows
// of an 8-lane phase of the 16-byte fragment loads (rows g and g + 1, 64 bytes each) fall on
// the two halves of the banks. src/cuda/train.rs (`fwd_smem`) sizes the ring alike.
template <int KCH> struct TrainPitch {
    static constexpr int HALVES = (KCH | 1) * 32;
};

// The ring's stages at CH 32-half chunks a row: TRAIN_STAGES where they fit TRAIN_SMEM_BUDGET,
// else as many as fit (on the 99 KB architectures the f32 forward at d > 96, whose 8-chunk
// planes rows would take 108 KB in three stages, runs two: 72 KB). src/cuda/train.rs
// (`fwd_smem`) sizes the ring alike.
template <int CH> struct TrainRing {
    static constexpr int STAGE = TRAIN_TILE * TrainPitch<CH>::HALVES;  // halves a stage
    static constexpr int FIT = TRAIN_SMEM_BUDGET / (STAGE * 2);
    static constexpr int STAGES = TRAIN_STAGES < FIT ? TRAIN_STAGES : FIT;
    static_assert(STAGES >= 2, "the ring needs two stages");
};

// The documents b0 .. b1 as a sequence of TRAIN_TILE-row tiles (documents of no rows give none),
// copied into the ring one tile at a time by every thread of the block.
struct TrainTiles {
    int b, b1, n0, len;
    i64 base;
    __device__ __forceinline__ TrainTiles(const DocRows& docs, int first, int end) : b(first), b1(end), n0(0), len(0), base(0) {
        if (b < b1) docs.extent(b, base, len);
    }
    // Copies the next tile (if any is left) into `stage`: rows n0 .. of document b, d elements
    // each (16-byte pieces past d are not copied: the fragment loads zero them).
    template <int KCH>
    __device__ __forceinline__ void copy_next(const DocRows& docs, u16* stage, int dim) {
        while (b < b1 && n0 >= len) {
            if (++b < b1) docs.extent(b, base, len);
            n0 = 0;
        }
        if (b >= b1) return;
        const int rows = min(TRAIN_TILE, len - n0);
        const u16* src = (const u16*)docs.tokens + base + (i64)n0 * docs.row_stride;
        constexpr int PIECES = KCH * 4;  // 16-byte pieces of a row's KCH chunks
        for (int e = threadIdx.x; e < TRAIN_TILE * PIECES; e += TRAIN_WARPS * 32) {
            const int r = e / PIECES, k = e % PIECES;
            if (r < rows && k * 8 < dim)
                cp_async16(smem_addr(stage + r * TrainPitch<KCH>::HALVES + k * 8), src + (i64)r * docs.row_stride + k * 8, 16);
        }
        n0 += TRAIN_TILE;
    }
};

// The running maxima and argmaxima of a warp's 32 query rows over one tile of a document in
// the ring (its rows n0 .. of `len`; `stage` holds rows n0 .. n0 + TRAIN_TILE - 1), as
// train_doc takes them from global memory: the same fragments, so the same bits.
template <bool BF, int KCH>
__device__ __forceinline__ void train_tile(const unsigned (&a)[2][KCH][2][4], const u16* stage, int n0, int len, int dim,
                                           int g, int c, float (&best)[2][2], int (&arg)[2][2]) {
#pragma unroll
    for (int s = 0; s < TRAIN_TILE / 16; ++s) {
        const int n = n0 + s * 16;
        if (n >= len) break;
        V4 v[2][KCH];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            const bool row_in = n + t * 8 + g < len;
            const u16* p = stage + (s * 16 + t * 8 + g) * TrainPitch<KCH>::HALVES + c * 8;
#pragma unroll
            for (int ch = 0; ch < KCH; ++ch)
                v[t][ch] = row_in && ch * 32 + c * 8 < dim ? *(const V4*)(p + ch * 32) : V4{0u, 0u, 0u, 0u};
        }
        train_fold<BF, KCH>(a, v, n, len, c, best, arg);
    }
}

// train_tile for the SPLIT forward: a stage of planes rows (TrainPitch<2 KCH>), 8 at a time.
template <int KCH>
__device__ __forceinline__ void train_tile_split(const unsigned (&hi)[2][KCH][2][4], const unsigned (&lo)[2][KCH][2][4],
                                                 const u16* stage, int n0, int len, int g, int c, float (&best)[2][2],
                                                 int (&arg)[2][2]) {
#pragma unroll
    for (int s = 0; s < TRAIN_TILE / 8; ++s) {
        const int n = n0 + s * 8;
        if (n >= len) break;
        V4 vh[KCH], vl[KCH];
        train_load_planes<KCH>(vh, vl, stage + (s * 8 + g) * TrainPitch<2 * KCH>::HALVES + c * 8, n + g < len);
        train_fold_split<KCH>(hi, lo, vh, vl, n, len, c, best, arg);
    }
}

// The quad's (max, argmax) of each row (ties: the lower index), the score of the first `valid`
// rows, and their argmax written to `arg_out` (null: not kept).
__device__ __forceinline__ float train_finish(float (&best)[2][2], int (&arg)[2][2], int valid, int g, int c,
                                              int* arg_out) {
    float s = 0.f;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float v = best[mt][h];
            int i = arg[mt][h];
#pragma unroll
            for (int o = 1; o < 4; o <<= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, v, o);
                const int oi = __shfl_xor_sync(0xffffffffu, i, o);
                // The better of the two (-1, no token, as the largest index); a NaN wins.
                if (v == v && (ov != ov || ov > v || (ov == v && (unsigned)oi < (unsigned)i))) {
                    v = ov;
                    i = oi;
                }
            }
            const int r = mt * 16 + h * 8 + g;
            if (c == 0 && r < valid) {
                s += v;
                if (arg_out) arg_out[r] = i;
            }
        }
    return warp_sum(s);
}

// The score (and argmax) of one (query, 32-row chunk) task from its warp's running maxima, into
// `out` (added where the query has more than one chunk) and `argmax`.
__device__ __forceinline__ void train_store(float (&best)[2][2], int (&arg)[2][2], int valid, int g, int c, int lane,
                                            i64 pair, int lq, int chunk, int chunks, int len, float* out, int* argmax) {
    int* arg_out = argmax ? argmax + pair * lq + chunk * 32 : nullptr;
    const float s = train_finish(best, arg, valid, g, c, arg_out);
    if (lane == 0) {
        const float v = len > 0 ? s : NEG_INF;
        if (chunks == 1)
            out[pair] = v;
        else
            atomicAdd(out + pair, v);
    }
}

// group = 0 through shared memory (TRAIN_SMEM): the block's documents b0 .. b1 in tiles
// through a ring (TrainRing: three stages; two for the f32 forward past d = 96 on 99 KB GPUs),
// each tile copied once and multiplied by every warp's query chunk (task `task`; a warp past
// the last task copies and waits only). SPLIT: f32 queries, the documents as f16 planes rows
// of 2 KCH chunks (`docs` describes the planes).
template <bool BF, int KCH, bool SPLIT>
__device__ __forceinline__ void maxsim_train_fwd_ring(const void* q, i64 q_batch, i64 q_row, int num_q, int lq,
                                                      DocRows docs, int num_docs, int dim, int b0, int b1, i64 task,
                                                      float* out, int* argmax) {
    extern __shared__ __align__(16) u16 train_ring[];
    constexpr int CH = SPLIT ? 2 * KCH : KCH;  // 32-half chunks a ring row
    constexpr int STAGE = TrainRing<CH>::STAGE, STAGES = TrainRing<CH>::STAGES;
    const int copy = SPLIT ? CH * 32 : dim;  // halves of a row copied
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2, c = lane & 3;
    const int chunks = (lq + 31) >> 5;
    const bool active = task < (i64)num_q * chunks;
    const int qi = active ? (int)(task / chunks) : 0, chunk = active ? (int)(task % chunks) : 0;
    const int valid = min(32, lq - chunk * 32);
    unsigned a[2][KCH][2][4], al[2][KCH][2][4];  // al, inv: the SPLIT query's low parts and 1/c
    float inv[2][2];
    if (active) train_load_query<KCH, SPLIT>(a, al, inv, q, qi * q_batch + (i64)chunk * 32 * q_row, q_row, valid, dim, g, c);
    TrainTiles tiles(docs, b0, b1);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        tiles.copy_next<CH>(docs, train_ring + s * STAGE, copy);
        cp_async_commit();
    }
    int stage = 0;
    for (int b = b0; b < b1; ++b) {
        i64 base;
        int len;
        docs.extent(b, base, len);
        float best[2][2];
        int arg[2][2];
        train_reset(best, arg);
        for (int n0 = 0; n0 < len; n0 += TRAIN_TILE) {
            // The stage refilled here was multiplied in the last round (the barrier below).
            const int fill = stage + STAGES - 1 < STAGES ? stage + STAGES - 1 : stage - 1;
            tiles.copy_next<CH>(docs, train_ring + fill * STAGE, copy);
            cp_async_commit();
            cp_async_wait<STAGES - 1>();
            __syncthreads();
            if (active) {
                if constexpr (SPLIT)
                    train_tile_split<KCH>(a, al, train_ring + stage * STAGE, n0, len, g, c, best, arg);
                else
                    train_tile<BF, KCH>(a, train_ring + stage * STAGE, n0, len, dim, g, c, best, arg);
            }
            __syncthreads();
            stage = stage + 1 < STAGES ? stage + 1 : 0;
        }
        if (active) {
            if constexpr (SPLIT) train_unscale(best, inv);
            train_store(best, arg, valid, g, c, lane, (i64)qi * num_docs + b, lq, chunk, chunks, len, out, argmax);
        }
    }
    cp_async_wait<0>();
}

// Grid: group = 0: x over document ranges of `per_block` documents, y over sets of TRAIN_WARPS
// (query, 32-row chunk) tasks, a warp per task walking the block's documents; group > 0: x over
// sets of TRAIN_WARPS (document, chunk) tasks. `out`: [A, B] or [B] f32, pre-zeroed where
// Lq > 32 (the chunks add into it); `argmax`: [A, B, Lq] or [B, Lq] int32, or null.
template <bool BF, int KCH, bool SPLIT>
__device__ __forceinline__ void maxsim_train_fwd_impl(const void* q, i64 q_batch, i64 q_row, int num_q, int lq,
                                                      DocRows docs, int num_docs, int dim, int group, int per_block, float* out,
                                                      int* argmax) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int chunks = (lq + 31) >> 5;
    int qi, chunk, b0, b1;
    const i64 task = (i64)(group ? blockIdx.x : blockIdx.y) * TRAIN_WARPS + warp;
    if (group) {
        if (task >= (i64)num_docs * chunks) return;
        b0 = (int)(task / chunks);
        chunk = (int)(task % chunks);
        b1 = b0 + 1;
        qi = b0 / group;
    } else {
        b0 = blockIdx.x * per_block;
        b1 = min(num_docs, b0 + per_block);
#if TRAIN_SMEM
        // Every warp of the block copies and waits, those past the last task included.
        maxsim_train_fwd_ring<BF, KCH, SPLIT>(q, q_batch, q_row, num_q, lq, docs, num_docs, dim, b0, b1, task, out, argmax);
        return;
#endif
        if (task >= (i64)num_q * chunks) return;
        qi = (int)(task / chunks);
        chunk = (int)(task % chunks);
    }
    if (qi >= num_q) return;
    const int valid = min(32, lq - chunk * 32);
    unsigned a[2][KCH][2][4], al[2][KCH][2][4];
    float inv[2][2];
    train_load_query<KCH, SPLIT>(a, al, inv, q, qi * q_batch + (i64)chunk * 32 * q_row, q_row, valid, dim, g, c);
    for (int b = b0; b < b1; ++b) {
        i64 base;
        int len;
        docs.extent(b, base, len);
        float best[2][2];
        int arg[2][2];
        if constexpr (SPLIT) {
            train_doc_split<KCH>(a, al, (const u16*)docs.tokens + base, docs.row_stride, len, g, c, best, arg);
            train_unscale(best, inv);
        } else {
            train_doc<BF, KCH>(a, (const u16*)docs.tokens + base, docs.row_stride, len, dim, g, c, best, arg);
        }
        const i64 pair = group ? (i64)b : (i64)qi * num_docs + b;
        train_store(best, arg, valid, g, c, lane, pair, lq, chunk, chunks, len, out, argmax);
    }
}

// The backward passes' element types: E 0 f16, 1 bf16 (16-bit, four values a uint2), 2 f32
// (a float4): loads of four values, their f32 values, and stores of f32 results.
template <int E> struct TrainEl {
    using T = u16;
    using Raw = uint2;
    static __device__ __forceinline__ Raw load(const T* p) { return __ldg((const uint2*)p); }
    static __device__ __forceinline__ Raw zero() { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ float4 f4(Raw u) {
        return make_float4(half_lo<E == 1>(u.x), half_hi<E == 1>(u.x), half_lo<E == 1>(u.y), half_hi<E == 1>(u.y));
    }
    static __device__ __forceinline__ void store4(T* p, float4 v) {
        *(uint2*)p = make_uint2(pack2<E == 1>(v.x, v.y), pack2<E == 1>(v.z, v.w));
    }
    static __device__ __forceinline__ void store2(T* p, float a, float b) { *(unsigned*)p = pack2<E == 1>(a, b); }
};
template <> struct TrainEl<2> {
    using T = float;
    using Raw = float4;
    static __device__ __forceinline__ Raw load(const T* p) { return __ldg((const float4*)p); }
    static __device__ __forceinline__ Raw zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
    static __device__ __forceinline__ float4 f4(Raw u) { return u; }
    static __device__ __forceinline__ void store4(T* p, float4 v) { *(float4*)p = v; }
    static __device__ __forceinline__ void store2(T* p, float a, float b) { *(float2*)p = make_float2(a, b); }
};

// dQ: a warp per query row (a, i), its lanes over d (four values each); `g`: the scores'
// gradient, f32 laid out as `out`; `dq`: [A, Lq, d] contiguous, every element written. The
// rows of 32 documents are gathered eight at a time (independent loads in flight).
template <int E>
__device__ __forceinline__ void maxsim_train_dq_impl(DocRows docs, int num_docs, int dim, int group, int num_q, int lq,
                                                     const int* argmax, const float* grad, typename TrainEl<E>::T* dq) {
    using El = TrainEl<E>;
    using T = typename El::T;
    const int lane = threadIdx.x & 31;
    const i64 row = (i64)blockIdx.x * TRAIN_WARPS + (threadIdx.x >> 5);
    if (row >= (i64)num_q * lq) return;
    const int qi = (int)(row / lq), i = (int)(row % lq);
    const int first = group ? qi * group : 0;
    const int last = group ? min(num_docs, first + group) : num_docs;
    const int k0 = lane * 4;
    const bool lane_in = k0 < dim;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int b0 = first; b0 < last; b0 += 32) {
        const int b = b0 + lane;
        float gb = 0.f;
        const T* src = (const T*)docs.tokens;  // lane b's best row (any valid address where none)
        if (b < last) {
            const i64 pair = group ? (i64)b : (i64)qi * num_docs + b;
            i64 base;
            int len;
            docs.extent(b, base, len);
            const int j = argmax[pair * lq + i];
            if (j >= 0) {
                gb = grad[pair];
                src = (const T*)docs.tokens + base + j * docs.row_stride;
            }
        }
        const int n = min(32, last - b0);
        for (int t0 = 0; t0 < n; t0 += 8) {
            typename El::Raw u[8];
            float gt[8];
#pragma unroll
            for (int s = 0; s < 8; ++s) {
                const int t = (t0 + s) & 31;
                gt[s] = __shfl_sync(0xffffffffu, gb, t);
                const T* p = (const T*)__shfl_sync(0xffffffffu, (unsigned long long)src, t);
                const bool ok = t0 + s < n && gt[s] != 0.f && lane_in;
                u[s] = ok ? El::load(p + k0) : El::zero();
            }
#pragma unroll
            for (int s = 0; s < 8; ++s) {
                const float4 x = El::f4(u[s]);
                acc[0] += gt[s] * x.x;
                acc[1] += gt[s] * x.y;
                acc[2] += gt[s] * x.z;
                acc[3] += gt[s] * x.w;
            }
        }
    }
    if (lane_in) El::store4(dq + row * dim + k0, make_float4(acc[0], acc[1], acc[2], acc[3]));
}

// dD: a block per document, its rows in chunks of `rows_smem` accumulated in shared memory
// (f32). Warp w owns the chunk's rows j with j % TRAIN_WARPS = w: it scans every (query, token)
// item of the document, 128 at a time, and adds g[a, b] * Q[a, i] into its own rows for the
// items whose argmax falls there, sixteen query rows gathered at once. No atomics, and the sum
// runs in item order, so dD is deterministic. `dd`: the documents' shape, contiguous: every row
// of a padded document written (zeros past its length), a packed document's rows only.
#define DD_BATCH 16
template <int E>
__device__ __forceinline__ void maxsim_train_dd_impl(const typename TrainEl<E>::T* q, i64 q_batch, i64 q_row, int num_q,
                                                     int lq, DocRows docs, int num_docs, int dim, int group,
                                                     const int* argmax, const float* grad, typename TrainEl<E>::T* dd,
                                                     int rows_smem) {
    using El = TrainEl<E>;
    extern __shared__ float acc[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int b = blockIdx.x;
    i64 base;
    int len;
    docs.extent(b, base, len);
    const i64 out_base = docs.offsets ? docs.offsets[b] * dim : (i64)b * docs.max_len * dim;
    const int rows_out = docs.offsets ? len : (int)docs.max_len;
    const int qa = group ? b / group : 0;
    const int nq = group ? (qa < num_q ? 1 : 0) : num_q;
    const int items = nq * lq;
    const int k0 = lane * 4;
    const bool lane_in = k0 < dim;
    for (int j0 = 0; j0 < rows_out; j0 += rows_smem) {
        const int rows = min(rows_smem, rows_out - j0);
        for (int e = threadIdx.x; e < rows * dim; e += blockDim.x) acc[e] = 0.f;
        __syncthreads();
        for (int it0 = 0; it0 < (j0 < len ? items : 0); it0 += 128) {
            // Four items a lane: their rows in this chunk that this warp owns, and their weights.
            int jr[4];
            float gw[4];
            i64 qo[4];  // the item's query row, elements from q
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int it = it0 + u * 32 + lane;
                jr[u] = -1;
                gw[u] = 0.f;
                qo[u] = 0;
                if (it < items) {
                    const int qi = qa + it / lq, i = it % lq;
                    const i64 pair = group ? (i64)b : (i64)qi * num_docs + b;
                    const int j = argmax[pair * lq + i] - j0;
                    if (j >= 0 && j < rows && j % TRAIN_WARPS == warp) {
                        jr[u] = j;
                        gw[u] = grad[pair];
                        qo[u] = qi * q_batch + i * q_row;
                    }
                }
            }
            unsigned mask[4];
            int left = 0;
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                mask[u] = __ballot_sync(0xffffffffu, jr[u] >= 0 && gw[u] != 0.f);
                left += __popc(mask[u]);
            }
            // The window's items for this warp, DD_BATCH at a time, in item order: their query
            // rows loaded first, then added to their rows (float4 in shared memory).
            while (left > 0) {
                typename El::Raw v[DD_BATCH];
                int jb[DD_BATCH];
                float wb[DD_BATCH];
#pragma unroll
                for (int s = 0; s < DD_BATCH; ++s) {
                    const int u = mask[0] ? 0 : mask[1] ? 1 : mask[2] ? 2 : mask[3] ? 3 : -1;
                    const unsigned m = u == 0 ? mask[0] : u == 1 ? mask[1] : u == 2 ? mask[2] : mask[3];
                    const int src = u < 0 ? 0 : __ffs(m) - 1;
                    if (u == 0) mask[0] &= mask[0] - 1;
                    if (u == 1) mask[1] &= mask[1] - 1;
                    if (u == 2) mask[2] &= mask[2] - 1;
                    if (u == 3) mask[3] &= mask[3] - 1;
                    const int jl = u == 0 ? jr[0] : u == 1 ? jr[1] : u == 2 ? jr[2] : jr[3];
                    const float wl = u == 0 ? gw[0] : u == 1 ? gw[1] : u == 2 ? gw[2] : gw[3];
                    const i64 ol = u == 0 ? qo[0] : u == 1 ? qo[1] : u == 2 ? qo[2] : qo[3];
                    jb[s] = u < 0 ? -1 : __shfl_sync(0xffffffffu, jl, src);
                    wb[s] = __shfl_sync(0xffffffffu, wl, src);
                    const i64 off = __shfl_sync(0xffffffffu, ol, src);
                    v[s] = u >= 0 && lane_in ? El::load(q + off + k0) : El::zero();
                }
                left -= DD_BATCH;
#pragma unroll
                for (int s = 0; s < DD_BATCH; ++s) {
                    if (jb[s] < 0) break;
                    if (lane_in) {
                        float4* r = (float4*)(acc + jb[s] * dim + k0);
                        float4 a = *r;
                        const float4 x = El::f4(v[s]);
                        a.x += wb[s] * x.x;
                        a.y += wb[s] * x.y;
                        a.z += wb[s] * x.z;
                        a.w += wb[s] * x.w;
                        *r = a;
                    }
                }
            }
        }
        __syncthreads();
        typename El::T* o = dd + out_base + (i64)j0 * dim;
        for (int e = threadIdx.x * 2; e < rows * dim; e += blockDim.x * 2) El::store2(o + e, acc[e], acc[e + 1]);
        __syncthreads();
    }
}

// The f32 forward (SPLIT) holds both parts of its query rows (128 registers at d = 128): one
// block a SM.
#ifndef TRAIN_FWD_SPLIT_MIN_BLOCKS
#define TRAIN_FWD_SPLIT_MIN_BLOCKS 1
#endif

#define INSTANTIATE_TRAIN_FWD(NAME, T, BF, KCH, SPLIT, MIN_BLOCKS)                              \
    extern "C" __global__ void __launch_bounds__(TRAIN_WARPS * 32, MIN_BLOCKS) NAME(            \
        const T* q, i64 q_batch, i64 q_row, int num_q, int lq, DocRows docs, int num_docs, int dim,         \
        int group, int per_block, float* out, int* argmax)                                      \
    {                                                                                           \
        maxsim_train_fwd_impl<BF, KCH, SPLIT>(q, q_batch, q_row, num_q, lq, docs, num_docs, dim, group, per_block, out, argmax); \
    }

INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f16_k1, u16, false, 1, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f16_k2, u16, false, 2, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f16_k3, u16, false, 3, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f16_k4, u16, false, 4, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_bf16_k1, u16, true, 1, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_bf16_k2, u16, true, 2, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_bf16_k3, u16, true, 3, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_bf16_k4, u16, true, 4, false, TRAIN_FWD_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f32_k1, float, false, 1, true, TRAIN_FWD_SPLIT_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f32_k2, float, false, 2, true, TRAIN_FWD_SPLIT_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f32_k3, float, false, 3, true, TRAIN_FWD_SPLIT_MIN_BLOCKS)
INSTANTIATE_TRAIN_FWD(maxsim_train_fwd_f32_k4, float, false, 4, true, TRAIN_FWD_SPLIT_MIN_BLOCKS)

// The f32 forward's documents as f16 planes (see train_fold_split): a block a document, its
// `len` rows (DocRows `docs` of f32 tokens) written at `planes` rows of 64 kch halves laid out
// as `planes_docs` (the same layout, planes strides). Dimensions past `dim` are zeros.
extern "C" __global__ void __launch_bounds__(256) maxsim_train_split(DocRows docs, int num_docs, int dim, int kch,
                                                                     DocRows planes_docs, u16* planes) {
    const int b = blockIdx.x;
    if (b >= num_docs) return;
    i64 base, out;
    int len, len2;
    docs.extent(b, base, len);
    planes_docs.extent(b, out, len2);
    const float* src = (const float*)docs.tokens + base;
    const int width = kch * 32;
    for (int e = threadIdx.x; e < len * width; e += blockDim.x) {
        const int r = e / width, k = e % width;
        const float x = k < dim ? src[(i64)r * docs.row_stride + k] : 0.f;
        unsigned h, l;
        split_f32x2(x, 0.f, h, l);  // the low halves: x's parts
        // Dimension k of chunk k / 32 at lane c = (k % 16) / 4's halves: c * 8 + (k % 32) / 16 * 4 + k % 4.
        const int p = (k >> 5) * 64 + ((k & 15) >> 2) * 8 + ((k & 31) >> 4) * 4 + (k & 3);
        u16* row = planes + out + (i64)r * planes_docs.row_stride;
        row[p] = (u16)(h & 0xffffu);
        row[p + 32] = (u16)(l & 0xffffu);
    }
}

#define INSTANTIATE_TRAIN_BWD(SUFFIX, E)                                                        \
    extern "C" __global__ void __launch_bounds__(TRAIN_WARPS * 32) maxsim_train_dq_##SUFFIX(    \
        DocRows docs, int num_docs, int dim, int group, int num_q, int lq, const int* argmax,               \
        const float* grad, TrainEl<E>::T* dq)                                                   \
    {                                                                                           \
        maxsim_train_dq_impl<E>(docs, num_docs, dim, group, num_q, lq, argmax, grad, dq);                 \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(TRAIN_WARPS * 32) maxsim_train_dd_##SUFFIX(    \
        const TrainEl<E>::T* q, i64 q_batch, i64 q_row, int num_q, int lq, DocRows docs, int num_docs,      \
        int dim, int group, const int* argmax, const float* grad, TrainEl<E>::T* dd, int rows_smem) \
    {                                                                                           \
        maxsim_train_dd_impl<E>(q, q_batch, q_row, num_q, lq, docs, num_docs, dim, group, argmax, grad, dd, rows_smem); \
    }

INSTANTIATE_TRAIN_BWD(f16, 0)
INSTANTIATE_TRAIN_BWD(bf16, 1)
INSTANTIATE_TRAIN_BWD(f32, 2)
