// maxsim_wgmma: maxsim_gemm's work (many query rows against the same documents: a batch of
// queries, or ColPali-style long queries) on Hopper's warpgroup tensor-core instruction
// (wgmma.mma_async, sm_90a), f16/bf16, d in {64, 128}. The engine picks it over maxsim_gemm on
// documents that mostly fill their 128-token tiles (choose_kernel in src/cuda/plan.rs).
//
// Same queries, tasks and output as maxsim_gemm (32-row query blocks; each block's partial
// score to out[qblock * num_docs + pair]); one block per SM takes a query tile of
// WG_QBLOCKS = 8 blocks (256 rows: each 128-token document tile read from L2 feeds 8.4 MFLOP)
// and one document at a time, tiles of WG_BN tokens through a WG_STAGES-deep ring across
// document boundaries. The block is warp-specialized: a producer warp copies the tiles
// (cp.async; a "full" mbarrier per stage completes when its copies land and its TileMeta is
// stored) and two consumer warpgroups multiply, each handing a stage back through an "empty"
// mbarrier when its chains are done. No __syncthreads ties the warpgroups together per tile,
// so one folds, scores and takes its next tile while the other's chains run.
// Consumer warp w holds query block 8 * tile + w whole, as the A fragments (in registers) of
// two 64-row wgmma operands: rows 0-15 of the block are its warp's rows of the warpgroup's
// "m-block 0", rows 16-31 those of "m-block 1" (a warp of a warpgroup owns rows 16i .. 16i + 15
// of each m64 operand, the layout of mma.m16n8k16's A), so a block's maxima never leave its
// warp. Each tile is four chains of d / 16 wgmma m64n64k16 (m-block x 64-token half, 32 f32
// accumulators per thread each, the m16n8 layout per 8 columns) into two accumulator sets used
// in turn: a chain is issued, then the one before it is waited for and folded into the rows'
// maxima on the CUDA cores while the tensor cores work on the next.
// H100, TFLOP/s (bench/results/ws.log, wgmma_meta.log, race_ws.log): 32 queries x 100K
// documents of 128 tokens 561-562 (maxsim_gemm 418; the same kernel with every thread copying
// and a __syncthreads per tile 485-489), ColPali 603-607 (gemm 431-433; 596-602), U[32,256] x
// 16 queries 401 (gemm 386), d = 64 bf16 449 (gemm 364). Not better (earlier versions, wgmma_v4.log):
//  - folding a tile's last chain during the next tile, after its first chain is issued;
//  - keeping that chain in flight across the loop's back edge: ptxas then serializes every
//    wgmma (C7514), as it does for waits or accumulator reads on a divergent path (C7518).
// All four chains run on a part-empty tile (maxsim_gemm skips empty 8-token n-tiles), so on
// short documents gemm wins.
// The tile sits in shared memory as wgmma's 128-byte-swizzled K-major layout: per 64 dims
// (128 bytes) an array of WG_BN rows of 128 bytes, 16-byte chunk j of row r at chunk
// j ^ (r % 8), arrays 1024-byte aligned; the descriptor of k16 step kk starts kk % 4 * 32 bytes
// into array kk / 4 (leading offset unused, stride 1024 bytes between 8-row groups).
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "tile_producer.cuh"

#define WG_QBLOCKS 8
#define WG_THREADS 256
#define WG_BN 128
#ifndef WG_STAGES
#define WG_STAGES 4
#endif
#define WG_BLOCK_THREADS (WG_THREADS + 32)  // the consumers, then the producer warp

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The descriptor of the swizzled array at shared address `addr`: start address >> 4 in the low
// 14 bits, leading offset 1 (unused), stride 1024 bytes, 128-byte swizzle. Built from 32-bit
// halves so a tile's descriptors are one register plus constants (no carry can reach bit 32:
// shared addresses are below 2^18).
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr) {
    return ((unsigned long long)((64u) | (1u << 30)) << 32) | (unsigned long long)(((addr & 0x3FFFF) >> 4) | (1u << 16));
}
// D (32 f32 per thread: 64 rows x 64 token columns) += A (4 registers) x B (the descriptor's
// 64-token half tile); scale_d = 0: D = A x B.
#define WGMMA_M64N64K16(TY)                                                                                       \
    asm volatile(                                                                                                 \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                              \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                                              \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                          \
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"                                                          \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])  \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
template <bool BF> struct Wgmma;
template <> struct Wgmma<false> {
    __device__ __forceinline__ static void run(float (&d)[32], const unsigned (&a)[4], unsigned long long desc, int scale_d) {
        WGMMA_M64N64K16("f16")
    }
};
template <> struct Wgmma<true> {
    __device__ __forceinline__ static void run(float (&d)[32], const unsigned (&a)[4], unsigned long long desc, int scale_d) {
        WGMMA_M64N64K16("bf16")
    }
};
// Keeps the compiler from moving accesses of the accumulators across the asynchronous MMA.
__device__ __forceinline__ void wg_fence_acc(float (&d)[32]) {
#pragma unroll
    for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Fold a half tile's accumulators (this thread: rows g and g + 8 of its warp's 16, columns
// col0 + 8j + 2c and + 1 for j < 8) into the two rows' running maxima; columns at or past
// `limit` do not count. A whole half takes the unmasked path (one FMNMX per value).
__device__ __forceinline__ void wg_fold_half(float (&best)[2], const float (&d)[32], int col0, int limit, int c) {
    if (col0 + 64 <= limit) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            best[0] = max_nan(best[0], max_nan(d[4 * j], d[4 * j + 1]));
            best[1] = max_nan(best[1], max_nan(d[4 * j + 2], d[4 * j + 3]));
        }
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float acc[4] = {d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]};
            fold_max(best, acc, col0 + 8 * j + 2 * c, limit);
        }
    }
}

// Fold columns lo .. hi - 1 (lo < hi, within col0 .. col0 + 63) of a half tile's accumulators
// into the two rows' running maxima: one unsigned compare a column pair, shared by both rows.
__device__ __forceinline__ void wg_fold_range(float (&best)[2], const float (&d)[32], int col0, int lo, int hi, int c) {
    const unsigned base = (unsigned)(col0 + 2 * c - lo), span = (unsigned)(hi - lo);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const bool in0 = base + 8u * j < span, in1 = base + 8u * j + 1u < span;
        best[0] = max_nan(best[0], max_nan(in0 ? d[4 * j] : NEG_INF, in1 ? d[4 * j + 1] : NEG_INF));
        best[1] = max_nan(best[1], max_nan(in0 ? d[4 * j + 2] : NEG_INF, in1 ? d[4 * j + 3] : NEG_INF));
    }
}
// What the packed consumers (PACKED wg_consume) know of a tile: its tokens, the documents that
// end in it (`nend`, their end columns in `ends`), where their scores go (`out` + the tile's
// first document), and the warp's stash of m-block 0's parts of them (m-block 1 folds a
// column after m-block 0, so it adds them and stores the score).
struct WgSegs {
    unsigned ends, stash;  // shared addresses: every stage's end columns, every warp's stash
    float* out;            // out[qblock * num_docs + pair]: the scores (the kernel's argument)
    int num_docs, qblock, slot, pair, ntok, nend, rows;
    __device__ __forceinline__ int end(int k) const {
        unsigned v;
        asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(ends + (unsigned)(slot * WG_BN + k)) : "memory");
        return (int)v;
    }
};
// Document k's part of the score, finished: m-block MB's part from its rows' maxima `best`
// (reset after), stashed by m-block 0 and added to it and stored by m-block 1.
template <int MB>
__device__ __forceinline__ void wg_emit(float (&best)[2], int k, const WgSegs& s) {
    const float part = mblock_score(best, MB, s.rows, (threadIdx.x & 31) >> 2);
    if ((threadIdx.x & 31) == 0) {
        const unsigned at = s.stash + 4u * (unsigned)((threadIdx.x >> 5) * WG_BN + k);
        if (MB == 0) {
            asm volatile("st.shared.f32 [%0], %1;" :: "r"(at), "f"(part) : "memory");
        } else if (s.rows > 0) {
            float p0;
            asm volatile("ld.shared.f32 %0, [%1];" : "=f"(p0) : "r"(at) : "memory");
            s.out[(i64)s.qblock * s.num_docs + s.pair + k] = p0 + part;
        }
    }
    best[0] = best[1] = NEG_INF;
}
// A full half's columns split at one document end e inside it, in one pass: the columns before e
// into `best`, the rest into `nb`, unmasked but in e's 8-column group J (the caller's switch on
// J makes it a constant). r = e - col0 - 2c: this lane's column 8j + t (t = 0, 1) is before e
// where 8j + t < r.
template <int J>
__device__ __forceinline__ void wg_fold_split(float (&best)[2], float (&nb)[2], const float (&d)[32], int r) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (j < J) {
            best[0] = max_nan(best[0], max_nan(d[4 * j], d[4 * j + 1]));
            best[1] = max_nan(best[1], max_nan(d[4 * j + 2], d[4 * j + 3]));
        } else if (j > J) {
            nb[0] = max_nan(nb[0], max_nan(d[4 * j], d[4 * j + 1]));
            nb[1] = max_nan(nb[1], max_nan(d[4 * j + 2], d[4 * j + 3]));
        } else {
            const bool b0 = 8 * J < r, b1 = 8 * J + 1 < r;
            best[0] = max_nan(best[0], max_nan(b0 ? d[4 * j] : NEG_INF, b1 ? d[4 * j + 1] : NEG_INF));
            best[1] = max_nan(best[1], max_nan(b0 ? d[4 * j + 2] : NEG_INF, b1 ? d[4 * j + 3] : NEG_INF));
            nb[0] = max_nan(nb[0], max_nan(b0 ? NEG_INF : d[4 * j], b1 ? NEG_INF : d[4 * j + 1]));
            nb[1] = max_nan(nb[1], max_nan(b0 ? NEG_INF : d[4 * j + 2], b1 ? NEG_INF : d[4 * j + 3]));
        }
    }
}
// Fold half `col0` of m-block MB's accumulators across the documents that end in it (in order,
// from the tile's k-th): each one's part of the score finished at its end column.
// - A full half where exactly one document ends inside it (the common case at MS MARCO's
//   lengths) takes one pass split at that end (wg_fold_split).
// - Otherwise each segment takes a pass of its own: one that starts the half takes
//   wg_fold_half (unmasked where it fills the half), others wg_fold_range.
template <int MB>
__device__ __forceinline__ void wg_fold_segs(float (&best)[2], const float (&d)[32], int col0, int c, int& k, const WgSegs& s) {
    int e = k < s.nend ? s.end(k) : 1 << 20;
    if (e > col0 && e < col0 + 64 && s.ntok >= col0 + 64 && (k + 1 >= s.nend || s.end(k + 1) > col0 + 64)) {
        float nb[2] = {NEG_INF, NEG_INF};
        const int r = e - col0 - 2 * c;
        switch ((e - col0) >> 3) {  // uniform across the warp
            case 0: wg_fold_split<0>(best, nb, d, r); break;
            case 1: wg_fold_split<1>(best, nb, d, r); break;
            case 2: wg_fold_split<2>(best, nb, d, r); break;
            case 3: wg_fold_split<3>(best, nb, d, r); break;
            case 4: wg_fold_split<4>(best, nb, d, r); break;
            case 5: wg_fold_split<5>(best, nb, d, r); break;
            case 6: wg_fold_split<6>(best, nb, d, r); break;
            default: wg_fold_split<7>(best, nb, d, r); break;
        }
        wg_emit<MB>(best, k, s);
        ++k;
        best[0] = nb[0];
        best[1] = nb[1];
        return;
    }
    int lo = col0;
    while (e <= col0 + 64) {  // uniform across the warp: document k ends in this half
        if (lo == col0) wg_fold_half(best, d, col0, e, c);  // (all 64 columns unmasked when e ends the half)
        else if (e > lo) wg_fold_range(best, d, col0, lo, e, c);
        wg_emit<MB>(best, k, s);
        lo = max(lo, e);
        ++k;
        e = k < s.nend ? s.end(k) : 1 << 20;
    }
    // The columns after the last end: the document that goes on into the next tile.
    const int hi = min(col0 + 64, s.ntok);
    if (lo == col0) wg_fold_half(best, d, col0, hi, c);
    else if (hi > lo) wg_fold_range(best, d, col0, lo, hi, c);
}

// One chain: D = a warp's m-block rows (A fragments `a`) x 64-token half `h` of the tile at
// shared address `tile0`, d / 16 wgmma issued and committed as one group.
template <bool BF, int KS>
__device__ __forceinline__ void wg_chain(float (&d)[32], const unsigned (&a)[KS][4], unsigned tile0, int h) {
    constexpr unsigned ATOM_BYTES = WG_BN * 128;
    constexpr unsigned HALF_BYTES = WG_BN / 2 * 128;  // token row 64 of an array (a multiple of 1024)
    wg_fence_acc(d);  // the last reads of d (its fold) stay before the fence (as CUTLASS)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
        Wgmma<BF>::run(d, a[kk], wg_desc(tile0 + (unsigned)(kk >> 2) * ATOM_BYTES + (unsigned)h * HALF_BYTES +
                                          (unsigned)(kk & 3) * 32u), kk > 0);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wg_wait(float (&d)[32]) {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
    wg_fence_acc(d);  // d is read only after the wait
}
#endif

// The ring of the warp-specialized kernels (maxsim_wgmma, maxsim_codec_wg, kmeans_assign_wgmma)
// in dynamic shared memory: S stages of a WG_BN × D tile (1024-byte aligned: the host allocates
// 1 KB more), a TileMeta per stage, S "full" mbarriers (`full_arrivals` arrivals each: the
// producer's), S "empty" ones (each consumer thread's arrival), then, for kernels that scale
// their columns (SCALED), WG_BN f32 column scales per stage. Thread 0 initializes the barriers;
// every thread of the block must call it (it ends with __syncthreads).
struct WgRing {
    unsigned tiles;   // shared address of stage 0
    unsigned full0, empty0;
    TileMeta* meta;
    float* scales;    // WG_BN per stage (SCALED), else null
    unsigned char* end;  // the first byte past the ring
};
template <int D, int S>
__device__ __forceinline__ WgRing wg_ring(unsigned char* smem, unsigned full_arrivals, bool scaled) {
    constexpr unsigned TILE_BYTES = WG_BN * D * 2;
    const unsigned raw0 = smem_addr(smem);
    const unsigned smem0 = (raw0 + 1023u) & ~1023u;
    unsigned char* base = smem + (smem0 - raw0);
    WgRing r;
    r.tiles = smem0;
    r.meta = (TileMeta*)(base + S * TILE_BYTES);
    r.full0 = smem0 + S * TILE_BYTES + S * (unsigned)sizeof(TileMeta);
    r.empty0 = r.full0 + 8u * S;
    unsigned char* after = base + S * TILE_BYTES + S * sizeof(TileMeta) + 16u * S;
    r.scales = scaled ? (float*)after : nullptr;
    r.end = after + (scaled ? S * WG_BN * 4u : 0u);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(r.full0 + 8u * s, full_arrivals);
            mbar_init(r.empty0 + 8u * s, WG_THREADS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#endif
    __syncthreads();
    return r;
}
// The byte offset of 16-byte chunk `ch` of token row `row` in a stage (wgmma's layout above).
__device__ __forceinline__ unsigned wg_swz(int row, int ch) {
    return (unsigned)(ch >> 3) * (WG_BN * 128u) + (unsigned)row * 128u + (unsigned)(((ch & 7) ^ (row & 7)) << 4);
}

// The producer warp of the copying kernels (maxsim_wgmma, kmeans_assign_wgmma): every tile of
// the walk copied into the ring by cp.async (a full barrier of 33 arrivals: the 32 lanes'
// copies and lane 0's after its TileMeta store), then the end-of-walk TileMeta.
template <int D, int S>
__device__ __forceinline__ void wg_copy_tiles(const WgRing& ring, const u16* __restrict__ tokens,
                                              const i64* __restrict__ offsets, const i64* __restrict__ doc_index,
                                              int num_docs, int qtiles, int lane)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr unsigned TILE_BYTES = WG_BN * D * 2;
    TileProducer<D, WG_BN, 32> producer(offsets, doc_index, num_docs, qtiles, (unsigned)lane);
    for (int n = 0, slot = 0;; ++n) {
        if (n >= S) mbar_wait(ring.empty0 + 8u * slot, (unsigned)(n / S - 1) & 1u);  // its last use read
        const TileMeta m = producer.issue(tokens, ring.tiles + (unsigned)slot * TILE_BYTES,
                                          [](int row, int ch) { return wg_swz(row, ch); });
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(ring.full0 + 8u * slot) : "memory");
        if (lane == 0) {
            ring.meta[slot] = m;
            mbar_arrive(ring.full0 + 8u * slot);  // release: the TileMeta store before it
        }
        if (m.pair < 0) break;
        slot = slot + 1 == S ? 0 : slot + 1;
    }
    cp_async_wait<0>();
#endif
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A half tile's accumulators times their columns' scales (columns col0 + 8j + 2c and + 1).
__device__ __forceinline__ void wg_scale_half(float (&d)[32], const float* sc, int col0, int c) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float2 s = *(const float2*)(sc + col0 + 8 * j + 2 * c);
        d[4 * j] *= s.x;
        d[4 * j + 1] *= s.y;
        d[4 * j + 2] *= s.x;
        d[4 * j + 3] *= s.y;
    }
}
#endif

// The consumers of the MaxSim kernels (warps 0-7, two warpgroups): each warp's query block from
// `qpad` as A fragments, every tile of the ring multiplied and folded into its rows' maxima,
// each document's block score to out[qblock * num_docs + pair]. SCALED: each column's product
// is multiplied by the stage's column scale first. PACKED: tiles of RunWalk, whose documents
// end at the columns the producer leaves right after the ring (WG_BN bytes a stage), followed by
// the consumer warps' stashes (WG_BN floats each). SPLIT: a document's score summed as PACKED
// sums it (block_score_split), so the two score alike.
template <bool BF, int KCH, int S, bool SCALED, bool PACKED = false, bool SPLIT = false>
__device__ __forceinline__ void wg_consume(const WgRing& ring, const u16* __restrict__ qpad,
                                           const int* __restrict__ qblock_rows, int num_qblocks,
                                           int num_docs, float* __restrict__ out)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int D = KCH * 32;
    constexpr int KS = D / 16;                 // k16 steps
    constexpr unsigned TILE_BYTES = WG_BN * D * 2;
    // PACKED: the end columns and stashes after the ring (compile-time offsets from its tiles).
    constexpr unsigned ENDS = S * (TILE_BYTES + (unsigned)sizeof(TileMeta) + 16u) + (SCALED ? S * WG_BN * 4u : 0u);
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, warp = threadIdx.x >> 5;
    unsigned a[2][KS][4];   // the warp's query block: m-block 0 (rows 0-15), m-block 1 (16-31)
    float acc0[32], acc1[32];  // chains 0 and 2 of a tile into acc0, 1 and 3 into acc1
    float best[2][2];          // per m-block: the maxima of rows g and g + 8
#pragma unroll
    for (int i = 0; i < 32; ++i) acc0[i] = acc1[i] = 0.f;
    best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
    int cur_qtile = -1, rows = 0, qblock = 0, slot = 0;
    unsigned phase = 0;                        // the parity of the stages' current use
    bool live = false;                         // the warpgroup has a real query block
    while (true) {
        mbar_wait(ring.full0 + 8u * slot, phase);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the stage's data to wgmma
        const TileMeta m = ring.meta[slot];
        if (m.pair < 0) break;  // uniform across the consumers
        if (m.qtile != cur_qtile) {  // uniform across the consumers
            cur_qtile = m.qtile;
            qblock = m.qtile * WG_QBLOCKS + warp;
            rows = qblock < num_qblocks ? qblock_rows[qblock] : 0;
            live = m.qtile * WG_QBLOCKS + (warp & ~3) < num_qblocks;
            if (rows > 0) {
                qblock_fragments<D>(a, qpad + (i64)qblock * 32 * D, g, c);
            } else {  // zeros, so a warp past the last block multiplies nothing undefined
#pragma unroll
                for (int mb = 0; mb < 2; ++mb)
#pragma unroll
                    for (int kk = 0; kk < KS; ++kk) a[mb][kk][0] = a[mb][kk][1] = a[mb][kk][2] = a[mb][kk][3] = 0u;
            }
        }
        const int ntok = m.ntok;
        // Chains (m-block, half): (0, 0) -> acc0, (1, 0) -> acc1, (0, 1) -> acc0, (1, 1) -> acc1;
        // each waited for and folded after the next is issued. (The second half runs even when
        // the tile has no token past 64, masked in the fold: a branch around wgmma makes ptxas
        // serialize them.)
        if (live) {  // uniform across the warpgroup
            const unsigned tile0 = ring.tiles + (unsigned)slot * TILE_BYTES;
            const float* sc = SCALED ? ring.scales + slot * WG_BN : nullptr;
            // PACKED: each m-block's next document to end in the tile.
            const WgSegs segs{ring.tiles + ENDS, ring.tiles + ENDS + S * WG_BN, out, num_docs, qblock, slot,
                              m.pair, ntok, m.last, rows};
            int k0 = 0, k1 = 0;
            wg_chain<BF, KS>(acc0, a[0], tile0, 0);
            wg_chain<BF, KS>(acc1, a[1], tile0, 0);
            wg_wait<1>(acc0);
            if constexpr (SCALED) wg_scale_half(acc0, sc, 0, c);
            if constexpr (PACKED) wg_fold_segs<0>(best[0], acc0, 0, c, k0, segs);
            else wg_fold_half(best[0], acc0, 0, ntok, c);
            wg_chain<BF, KS>(acc0, a[0], tile0, 1);
            wg_wait<1>(acc1);
            if constexpr (SCALED) wg_scale_half(acc1, sc, 0, c);
            if constexpr (PACKED) wg_fold_segs<1>(best[1], acc1, 0, c, k1, segs);
            else wg_fold_half(best[1], acc1, 0, ntok, c);
            wg_chain<BF, KS>(acc1, a[1], tile0, 1);
            wg_wait<1>(acc0);
            if constexpr (SCALED) wg_scale_half(acc0, sc, WG_BN / 2, c);
            if constexpr (PACKED) wg_fold_segs<0>(best[0], acc0, WG_BN / 2, c, k0, segs);
            else wg_fold_half(best[0], acc0, WG_BN / 2, ntok, c);
            wg_wait<0>(acc1);
            if constexpr (SCALED) wg_scale_half(acc1, sc, WG_BN / 2, c);
            if constexpr (PACKED) wg_fold_segs<1>(best[1], acc1, WG_BN / 2, c, k1, segs);
            else wg_fold_half(best[1], acc1, WG_BN / 2, ntok, c);
        }
        // Every consumer thread arrives: an arrive releases its own thread's reads (of the
        // TileMeta) only; and the warp's chains, waited for above, are done with the stage.
        mbar_arrive(ring.empty0 + 8u * slot);
        if (!PACKED && m.last) {  // the document is done: its score for the warp's block
            const float sum = SPLIT ? block_score_split(best, rows, g) : block_score(best, rows, g);
            if (lane == 0 && rows > 0) out[(i64)qblock * num_docs + m.pair] = sum;
            best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        }
        if (++slot == S) {
            slot = 0;
            phase ^= 1u;
        }
    }
#endif
}

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_wgmma_impl(
    const u16* __restrict__ qpad, const int* __restrict__ qblock_rows, int num_qblocks,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int D = KCH * 32;
    constexpr int S = WG_STAGES;
    extern __shared__ __attribute__((aligned(1024))) unsigned char wg_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int qtiles = (num_qblocks + WG_QBLOCKS - 1) / WG_QBLOCKS;
    // Full: the 32 copying lanes' cp.async arrivals and lane 0's after its TileMeta store.
    const WgRing ring = wg_ring<D, S>(wg_smem, 33, false);
    if (warp == WG_THREADS / 32) {  // the producer warp
        wg_copy_tiles<D, S>(ring, d_tokens, d_offsets, doc_index, num_docs, qtiles, lane);
        return;
    }
    wg_consume<BF, KCH, S, false>(ring, qpad, qblock_rows, num_qblocks, num_docs, out);
#endif
}

#define INSTANTIATE_WGMMA(NAME, BF, KCH)                                                       \
    extern "C" __global__ void __launch_bounds__(WG_BLOCK_THREADS, 1) NAME(                    \
        const u16* qpad, const int* qblock_rows, int num_qblocks, const u16* d_tokens,         \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out)                  \
    {                                                                                          \
        maxsim_wgmma_impl<BF, KCH>(qpad, qblock_rows, num_qblocks, d_tokens, d_offsets, doc_index, num_docs, out); \
    }

INSTANTIATE_WGMMA(maxsim_wgmma_f16_d64, false, 2)
INSTANTIATE_WGMMA(maxsim_wgmma_f16_d128, false, 4)
INSTANTIATE_WGMMA(maxsim_wgmma_bf16_d64, true, 2)
INSTANTIATE_WGMMA(maxsim_wgmma_bf16_d128, true, 4)
