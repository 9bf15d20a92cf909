// maxsim_bulk (sm_90+): maxsim_mma's tensor-core math on document tiles that the copy engine
// brings into shared memory (cp.async.bulk, completion on an mbarrier). One block of BULK_WARPS
// warps scores runs of `group` consecutive tasks (task = query * num_docs + pair). On a grid of
// all runs the hardware hands blocks out in order as others retire, so the documents in flight
// form one compact window of addresses, and blocks of short documents simply retire sooner (no
// schedule to balance). Measured on the H100 (bench/read_patterns.cu at 5d27f7b, `cta`): a
// block per 32 KB document reads 3188-3212 GB/s where persistent per-warp rings read 3150. On a
// grid of the blocks that fit at once (even document lengths, from 8 tasks a block: plan/bulk.rs,
// bulk_resident_grid) block b takes runs b, b + gridDim.x, ... of one task each, so the window
// stays compact, the block starts once, and its ring runs on across its runs (BulkWalk).
// A document goes through a ring of `stages` tiles of BULK_TILE tokens (a tile never spans two
// documents; one bulk copy per tile, issued by thread 0 `stages` tiles ahead across document
// boundaries); warp w multiplies tokens 32w .. 32w + 31 of each tile, the four warps' running
// maxima meet in shared memory at the document's end, and warp 0 sums them. Every thread walks
// the same tile sequence (BulkWalk), so no tile metadata goes through shared memory. Needs
// d_tokens 16-byte aligned (every row is 2d bytes, a multiple of 16).
#define BULK_WARPS 4
#define BULK_THREADS (BULK_WARPS * 32)
#define BULK_TILE (BULK_WARPS * 32)
// Wide d (maxsim_bulk_wide_impl): tokens per tile for KQ 128-wide quarters (so a stage stays
// 16-24 KB), and floats per column of a warp's partial tile (32 rows + 4: conflict-free).
#define BULK_WIDE_TOK(KQ) ((KQ) <= 4 ? 32 : 16)
#define BULK_WIDE_RS 36
// Wide d: 8-token tiles whose products are made before their partials are stored, forced for
// every kernel (an A/B switch; 0: each kernel's own, in maxsim_bulk_wide_impl).
#ifndef BULK_WIDE_GROUP
#define BULK_WIDE_GROUP 0
#endif
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"

// The tile sequence of a block's runs of `group` tasks from (query qi, pair): (first token,
// tokens, document length) stepped tile by tile, the task stepped without dividing within a
// run. Empty documents take one empty tile (their score is then the sum of nothing found, as in
// maxsim_mma). Block b takes runs b, b + gridDim.x, b + 2 gridDim.x, ...: a grid of every run
// gives each block one (the hardware hands blocks out as others retire), a grid of the blocks
// that fit the device at once keeps each block's ring going across its runs.
// AHEAD: the next task's extent is loaded one task ahead (`extent` and `step` then take
// num_docs), so stepping to it waits on no load (the codec bulk kernels' tiles are short).
// RUNS = false: one run a block, for kernels launched on a grid of every run (the codec bulk
// kernels: the next run's state would cost them registers), the default of an AHEAD walk.
// The next run's first task is stepped from the current run's (run_q, run_p) by the stride's
// quotient and remainder by num_docs, found once, so a run of one document divides nothing.
template <int TILE, bool AHEAD = false, bool RUNS = !AHEAD>
struct BulkWalk {
    int qi, pair, left, tok, nd, next_nd, group, run_q, run_p, stride_q, stride_p;
    i64 d0, next_d0, tasks;
    __device__ __forceinline__ BulkWalk(i64 first, i64 tasks, int group, int num_docs)
        : qi((int)(first / num_docs)), pair((int)(first % num_docs)),
          left((int)min((i64)group, tasks - first)), tok(0), nd(0), next_nd(0), group(group),
          run_q(qi), run_p(pair), stride_q((int)((i64)gridDim.x * group / num_docs)),
          stride_p((int)((i64)gridDim.x * group % num_docs)), d0(0), next_d0(0), tasks(tasks) {}
    __device__ __forceinline__ static void load(const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index,
                                                int p, i64& start, int& len) {
        const i64 doc = doc_index ? doc_index[p] : (i64)p;
        start = d_offsets[doc];
        len = (int)(d_offsets[doc + 1] - start);
    }
    __device__ __forceinline__ void extent(const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index,
                                           int num_docs = 0) {
        if (left > 0) load(d_offsets, doc_index, pair, d0, nd);
        if (AHEAD && left > 1) load(d_offsets, doc_index, pair + 1 == num_docs ? 0 : pair + 1, next_d0, next_nd);
    }
    __device__ __forceinline__ bool done() const { return left <= 0; }
    __device__ __forceinline__ int ntok() const { return min(TILE, nd - tok); }
    __device__ __forceinline__ bool last() const { return tok + TILE >= nd; }
    __device__ __forceinline__ void step(const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index,
                                         int num_docs) {
        tok += TILE;
        if (tok >= nd) {
            tok = 0;
            --left;
            if (RUNS && left == 0) {  // the block's next run, if any
                run_q += stride_q;
                run_p += stride_p;
                if (run_p >= num_docs) run_p -= num_docs, ++run_q;
                const i64 next = (i64)run_q * num_docs + run_p;
                if (next < tasks) {
                    qi = run_q;
                    pair = run_p;
                    left = (int)min((i64)group, tasks - next);
                    extent(d_offsets, doc_index, num_docs);
                }
                return;
            }
            if (++pair == num_docs) {
                pair = 0;
                ++qi;
            }
            if constexpr (AHEAD) {
                d0 = next_d0;
                nd = next_nd;
                if (left > 1) load(d_offsets, doc_index, pair + 1 == num_docs ? 0 : pair + 1, next_d0, next_nd);
            } else {
                extent(d_offsets, doc_index);
            }
        }
    }
};

// A block's first task and tasks a run from the launch's `group` argument: runs of
// `group & 0xff` tasks, except that the grid's last `group >> 8` blocks (the tail) take one task
// each, so the blocks the hardware hands out last are short and the SMs finish together
// (plan/bulk.rs: bulk_tail). A block on the resident grid (kernels walking runs strided by the
// grid) has no tail.
struct BulkRun {
    i64 first;
    int group;
    __device__ __forceinline__ explicit BulkRun(int code) {
        const int g = code & 0xff, head = (int)gridDim.x - (code >> 8);
        const int b = (int)blockIdx.x;
        first = b < head ? (i64)b * g : (i64)head * g + (b - head);
        group = b < head ? g : 1;
    }
};

// Thread 0's side of both maxsim_bulk kernels: its own walk over the block's tiles, running
// `stages` tiles ahead of the consumers' walk; tile t goes to stage t % stages (TILE rows of
// `row` halves) by one bulk copy, completing on the stage's mbarrier (an empty tile: an arrive).
template <int TILE, int ROW>
struct BulkProducer {
    BulkWalk<TILE> walk;
    u16* ring;
    unsigned long long* bars;
    const u16* d_tokens;
    const i64* d_offsets;
    const i64* doc_index;
    int num_docs;
    int row = ROW;  // halves per token in memory (maxsim_bulk_any: d, up to ROW)
    __device__ __forceinline__ void produce(int s) {
        const unsigned bar = smem_addr(&bars[s]);
        if (walk.done()) return;
        const int ntok = walk.ntok();
        if (ntok > 0) {
            const unsigned bytes = (unsigned)ntok * row * 2u;
            mbar_expect_tx(bar, bytes);
            bulk_load(smem_addr(ring + (i64)s * TILE * row), d_tokens + (walk.d0 + walk.tok) * row, bytes, bar);
        } else {
            mbar_arrive(bar);
        }
        walk.step(d_offsets, doc_index, num_docs);
    }
    // Initialize the stages' barriers and fill every stage (the block syncs after).
    __device__ __forceinline__ void start(int stages) {
        for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[s]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        walk.extent(d_offsets, doc_index);
        for (int s = 0; s < stages; ++s) produce(s);
    }
};

// Warp 0 of a maxsim_bulk block: a document's score from the PARTS maxima of row `lane` in
// red[par] (`red`: [2][PARTS][32]; a part a warp, or a token half in maxsim_bulk_rows), summed
// over the query's `nq` rows, stored at `out`.
template <int PARTS = BULK_WARPS>
__device__ __forceinline__ void bulk_document_score(const float* red, int par, int nq, int lane, float* out) {
    float m = red[par * PARTS * 32 + lane];
#pragma unroll
    for (int k = 1; k < PARTS; ++k) m = max_nan(m, red[(par * PARTS + k) * 32 + lane]);
    const float sum = warp_sum(lane < nq ? m : 0.f);
    if (lane == 0) *out = sum;
}

// A warp's row maxima of a finished document (the max over each quad of its C-fragment maxima:
// rows g, g + 8, 16 + g, 24 + g) into red[par][wib] (`red`: [2][BULK_WARPS][32]).
__device__ __forceinline__ void bulk_store_maxima(const float (&best)[2][2], float* red, int par, int wib, int g,
                                                  int c) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        const float m0 = warp_max_xor(best[mt][0], 2);
        const float m8 = warp_max_xor(best[mt][1], 2);
        if (c == 0) {
            red[(par * BULK_WARPS + wib) * 32 + mt * 16 + g] = m0;
            red[(par * BULK_WARPS + wib) * 32 + mt * 16 + g + 8] = m8;
        }
    }
}

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_bulk_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group)
{
#if __CUDA_ARCH__ >= 900
    constexpr int D = KCH * 32;
    constexpr int STAGE = BULK_TILE * D;  // halves
    extern __shared__ __attribute__((aligned(128))) unsigned char bulk_smem[];
    u16* ring = (u16*)bulk_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    float* red = (float*)(bars + stages);  // [2][BULK_WARPS][32]: row maxima per warp, two documents
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const i64 tasks = (i64)num_queries * num_docs;
    const BulkRun run(group);

    BulkProducer<BULK_TILE, D> producer{BulkWalk<BULK_TILE>(run.first, tasks, run.group, num_docs), ring, bars,
                                        d_tokens, d_offsets, doc_index, num_docs};
    if (threadIdx.x == 0) producer.start(stages);
    BulkWalk<BULK_TILE> w(run.first, tasks, run.group, num_docs);
    w.extent(d_offsets, doc_index);
    __syncthreads();  // the barriers are initialized

    unsigned a[2][KCH][2][4];
    int cur_q = -1, nq = 0, ndone = 0;
    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
    int s = 0;           // this tile's stage
    unsigned phase = 0;  // its barrier's phase
    while (!w.done()) {
        if (w.qi != cur_q) {
            cur_q = w.qi;
            nq = (int)(q_offsets[cur_q + 1] - q_offsets[cur_q]);
            load_a_permuted<KCH>(a, qpad + (i64)cur_q * 32 * D, g, c);
        }
        if (w.tok == 0) best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        const int mine = w.ntok() - wib * 32;  // this warp's tokens of the tile (uniform)
        mbar_wait(smem_addr(&bars[s]), phase);
        if (mine > 0) {
            const u16* buf = ring + (i64)s * STAGE + wib * 32 * D;
            // All four 8-token tiles, loaded before the first MMA; columns past `mine` hold
            // whatever the stage held before and are masked out of the maxima.
            V4 b[4][KCH];
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch)
                    b[t][ch] = *(const V4*)(buf + (t * 8 + g) * D + ch * 32 + c * 8);
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
                tile_products<BF, KCH>(acc, a, b[t]);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) fold_max(best[mt], acc[mt], t * 8 + 2 * c, mine);
            }
        }
        const bool last = w.last();
        const int par = ndone & 1;
        if (last) bulk_store_maxima(best, red, par, wib, g, c);
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the row maxima are in `red`
        if (threadIdx.x == 0) producer.produce(s);
        if (last) {
            if (wib == 0) bulk_document_score(red, par, nq, lane, out + task);  // task = query * num_docs + pair
            ++ndone;  // the next document's maxima go to the other half of `red`
        }
        if (++s == stages) s = 0, phase ^= 1u;
    }
#endif
}

// Both maxsim_bulk kernels take the same arguments: IMPL is maxsim_bulk_impl (K: 32-wide chunks
// of d) or maxsim_bulk_wide_impl (K: 128-wide quarters of d); BOUNDS: __launch_bounds__'s
// arguments. d = 64 is held to the six blocks an SM its shared memory allows (80 registers, no
// spills, as before BulkWalk's next-run state took it to 95 and five blocks; not timed either way:
// BULK_D64_MIN_BLOCKS=5 gives 96 registers for bench/resident_check.sh's A/B).
#ifndef BULK_D64_MIN_BLOCKS
#define BULK_D64_MIN_BLOCKS 6
#endif
#define BULK_BOUNDS (BULK_THREADS)
#define BULK_D64_BOUNDS (BULK_THREADS, BULK_D64_MIN_BLOCKS)
#define INSTANTIATE_BULK(NAME, IMPL, BF, K, BOUNDS)                                            \
    extern "C" __global__ void __launch_bounds__ BOUNDS NAME(                                 \
        const u16* qpad, const i64* q_offsets, int num_queries, const u16* d_tokens,           \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int stages,      \
        int group)                                                                             \
    {                                                                                          \
        IMPL<BF, K>(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out, stages, group); \
    }

INSTANTIATE_BULK(maxsim_bulk_f16_d32, maxsim_bulk_impl, false, 1, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d64, maxsim_bulk_impl, false, 2, BULK_D64_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d96, maxsim_bulk_impl, false, 3, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d128, maxsim_bulk_impl, false, 4, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d32, maxsim_bulk_impl, true, 1, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d64, maxsim_bulk_impl, true, 2, BULK_D64_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d96, maxsim_bulk_impl, true, 3, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d128, maxsim_bulk_impl, true, 4, BULK_BOUNDS)

// (The engine runs maxsim_bulk_rows, bulk_rows.cu, in place of these at d = 232..376, 256
// among them: there the warps split rows and tokens, not d.)
// maxsim_bulk for wide embeddings (f16/bf16, d = 128 * KQ, 256 .. 1024; with ANY, any d in
// 129 .. 128 * KQ that is a multiple of 8, maxsim_bulk_any: rows d wide in memory and in the
// stage, the query's A fragments and the document's B fragments zero past d): the same grid of
// blocks, walk, ring and bulk copies, but the four warps split a tile's d instead of its tokens.
// A tile is TOK tokens of the whole row (one contiguous copy: 24 KB at d = 768); warp w
// multiplies every token of it by its quarter of d (its query slice's A fragments, KQ 32-wide
// chunks, stay in registers), and leaves the 32 x TOK partial dot products in shared memory
// (column-major, 36 floats a column: the C-fragment stores and the row-per-lane reads are both
// conflict-free). After the tile's barrier, warp w sums the four partials of its TOK / 4 columns
// for row `lane` and keeps the running maximum; at a document's end the warps' row maxima meet
// in shared memory as in maxsim_bulk, and warp 0 sums them after the next barrier (the block's
// next tile, or the end). Partials and maxima are double-buffered, so one barrier a tile orders
// them all.
// HALF (ANY only, d ≤ 128·KQ − 64): each warp takes 32·KQ − 16 dimensions, the last 16 of them
// one k16 product (lane c's dimensions c·4 .. + 3 of that piece, an 8-byte load), so at d = 320
// the four warps multiply 80 dimensions each, not 96 (three of them) and 32. H200, f16
// U[32,256] B = 10K, % of the read ceiling against whole chunks (BULK_ANY_HALF=0), two rounds:
// d = 264 70.8 / 71.3 against 69.5 / 68.9, 320 72.6 / 73.4 against 70.7 / 70.9 (B = 100K 77.1
// against 75.2, bf16 73.3 against 70.7), 392 76.3 / 75.6 against 73.4 / 74.3, 448 83.9 / 83.4
// against 82.1 / 81.4, 648 79.4 / 81.3 against 78.2 / 79.0 (bench/results/h200/2026-11-30g/
// call3.log). Less than the sixth of the products saved: the tile's barrier and partial sums,
// not its products, hold these d.
// A tile's instructions (2026-12-01, bench/results/h200/2026-12-01/): at d = 320 ncu counted
// 400 warp instructions a 32-token tile, 40 of them HMMA. Now the stage and barrier phase are
// stepped, not divided out of the tile count (about 35 instructions a tile); the partials go to
// constant offsets from one address a lane; where every lane's slice lies inside d (`full`) the
// loads go untested (no zeroing); and TG 8-token tiles are multiplied before their partials are
// stored, since a store to shared memory orders the next loads after it and left two dependent
// HMMA chains (13% of the stall samples on their NOPs). 609M warp instructions a launch at d = 320
// (796M before). H200, f16 U[32,256] B = 10K, % of the read ceiling, against main at bda6aec (the
// first three, calls 2-3) or against one tile at a time (call 5, same run): d = 256 79.4 -> 81.6,
// 320 75.9 -> 77.5 (calls 2-3: 73.0 / 75.1 / 72.2 / 75.1 -> 77.0 / 76.6 / 77.4 / 75.9 without
// TG), 448 83.6 -> 87.2, 512 89.2 -> 91.2, 1024 95.9 -> 97.4, 392 73.9 -> 76.9; d = 768 at
// Nd = 128 96.7 -> 97.1 (calls 2-5).
template <bool BF, int KQ, bool ANY = false, bool HALF = false>
__device__ __forceinline__ void maxsim_bulk_wide_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int stages, int group,
    int dim = KQ * 128)
{
#if __CUDA_ARCH__ >= 900
    constexpr int D = KQ * 128;          // the embedding dimension (ANY: its bound)
    const int RD = ANY ? dim : D;        // halves per row, in memory and in the stage
    static_assert(ANY || !HALF, "HALF slices are for maxsim_bulk_any");
    constexpr int DW = KQ * 32 - (HALF ? 16 : 0);  // dimensions per warp
    constexpr int TOK = BULK_WIDE_TOK(KQ);
    constexpr int NT = TOK / 8;          // 8-token tiles per tile
    constexpr int CW = TOK / BULK_WARPS; // columns each warp reduces
    constexpr int RS = BULK_WIDE_RS;     // floats per partial column
    // A stage in halves: TOK rows of RD (a multiple of 8: 128-byte multiples), so ANY's blocks
    // take no shared memory for the bound's width past d (d = 136: four blocks an SM, not three).
    const int STAGE = TOK * RD;
    extern __shared__ __attribute__((aligned(128))) unsigned char bulk_smem[];
    u16* ring = (u16*)bulk_smem;
    unsigned long long* bars = (unsigned long long*)(ring + (i64)stages * STAGE);
    float* part = (float*)(bars + stages);          // [2][BULK_WARPS][TOK][RS]
    float* red = part + 2 * BULK_WARPS * TOK * RS;  // [2][BULK_WARPS][32]
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const i64 tasks = (i64)num_queries * num_docs;
    const BulkRun run(group);

    BulkProducer<TOK, D> producer{BulkWalk<TOK>(run.first, tasks, run.group, num_docs), ring, bars,
                                  d_tokens, d_offsets, doc_index, num_docs, RD};
    if (threadIdx.x == 0) producer.start(stages);
    BulkWalk<TOK> w(run.first, tasks, run.group, num_docs);
    w.extent(d_offsets, doc_index);
    __syncthreads();  // the barriers are initialized

    // Warp 0 sums the row maxima of a finished document once a barrier has ordered them.
    bool pending = false;
    i64 p_task = 0;
    int p_nq = 0, p_par = 0;
    auto finish = [&]() {
        if (pending && wib == 0) bulk_document_score(red, p_par, p_nq, lane, out + p_task);
        pending = false;
    };

    unsigned a[2][KQ][2][4];
    int cur_q = -1, nq = 0, ndone = 0;
    float best = NEG_INF;  // row `lane`'s running maximum over this warp's columns
    // Whether every lane's every piece lies inside d, so the tile's loads go unpredicated: the
    // built widths, and HALF kernels at d = 4 · DW (d = 320, 448, ..., 960). A whole-chunk ANY
    // kernel never is (d = 128 · KQ is a built width), nor compiles the unpredicated copy (at
    // KQ = 8 both copies spilled 12 bytes, and d = 1016 fell from 84% of the read ceiling to 78%).
    const bool full = !ANY || (HALF && dim == BULK_WARPS * DW);
    // This lane's first partial (column 2c, row g) of its warp's half of `part`; the tile's
    // stores are constant offsets from it.
    float* const lane_part = part + wib * TOK * RS + 2 * c * RS + g;
    int s = 0, par_i = 0;  // this tile's stage, and which half of `part` it takes
    unsigned phase = 0;    // the stage's barrier phase
    while (!w.done()) {
        if (w.qi != cur_q) {
            cur_q = w.qi;
            nq = (int)(q_offsets[cur_q + 1] - q_offsets[cur_q]);
            if constexpr (ANY)
                load_a_slice<KQ, HALF>(a, qpad + (i64)cur_q * 32 * dim, dim, wib * DW, g, c);
            else
                load_a_permuted<KQ, D>(a, qpad + (i64)cur_q * 32 * D + wib * DW, g, c);
        }
        if (w.tok == 0) best = NEG_INF;
        const int ntok = w.ntok();
        mbar_wait(smem_addr(&bars[s]), phase);
        const u16* buf = ring + (i64)s * STAGE + wib * DW + g * RD;  // this lane's row of the tile
        float* pw = lane_part + par_i * BULK_WARPS * TOK * RS;
        // ANY: this lane's 8-dimension pieces past d are zeros, not read: past the row lies
        // the next row, and past the last stage's last row the barriers and the partials other
        // warps write (compute-sanitizer racecheck flagged those reads, 2026-11-27). Where no
        // piece is past d (`full`), the same products without the tests.
        auto multiply = [&](auto whole) {
            // 8-token tiles multiplied at once, as measured (bench/results/h200/2026-12-01/
            // call4.log, call5.log): every tile of the built widths; in maxsim_bulk_any two at
            // KQ = 4 (four spilled), one past it (two lost 2 points at d = 648), and at KQ ≤ 3
            // all four where the loads go untested, else two (four lost 3 points at d = 264).
            constexpr int TG_OWN = !ANY ? NT : KQ > 4 ? 1 : KQ == 4 || !decltype(whole)::value ? 2 : NT;
            constexpr int TG = BULK_WIDE_GROUP > 0 ? (BULK_WIDE_GROUP < NT ? BULK_WIDE_GROUP : NT) : TG_OWN;
#pragma unroll
            for (int t0 = 0; t0 < NT; t0 += TG) {
                // TG tiles' products before their partials are stored (a store to shared
                // memory orders the loads after it, so storing each tile's partials at once
                // kept its products one chain a m-tile). Rows past the tile's tokens hold
                // whatever the stage held; their columns are not reduced below.
                float acc[TG][2][4];
#pragma unroll
                for (int u = 0; u < TG; ++u)
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) acc[u][mt][0] = acc[u][mt][1] = acc[u][mt][2] = acc[u][mt][3] = 0.f;
#pragma unroll
                for (int ch = 0; ch < KQ; ++ch)
#pragma unroll
                    for (int u = 0; u < TG; ++u) {
                        const u16* bt = buf + (t0 + u) * 8 * RD;
                        if (HALF && ch == KQ - 1) {  // the last 16 dimensions: one k16 product
                            const bool in_d = decltype(whole)::value || wib * DW + ch * 32 + c * 4 < dim;
                            const uint2 b = in_d ? *(const uint2*)(bt + ch * 32 + c * 4) : uint2{0u, 0u};
#pragma unroll
                            for (int mt = 0; mt < 2; ++mt) Mma<BF>::run(acc[u][mt], a[mt][ch][0], b.x, b.y);
                            continue;
                        }
                        const bool in_d = decltype(whole)::value || wib * DW + ch * 32 + c * 8 < dim;
                        const V4 b = in_d ? *(const V4*)(bt + ch * 32 + c * 8) : V4{0u, 0u, 0u, 0u};
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            Mma<BF>::run(acc[u][mt], a[mt][ch][0], b.x, b.y);
                            Mma<BF>::run(acc[u][mt], a[mt][ch][1], b.z, b.w);
                        }
                    }
                // Columns t·8 + 2c and + 1, rows mt·16 + g and + 8.
#pragma unroll
                for (int u = 0; u < TG; ++u)
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        const int t = t0 + u;
                        pw[t * 8 * RS + mt * 16] = acc[u][mt][0];
                        pw[(t * 8 + 1) * RS + mt * 16] = acc[u][mt][1];
                        pw[t * 8 * RS + mt * 16 + 8] = acc[u][mt][2];
                        pw[(t * 8 + 1) * RS + mt * 16 + 8] = acc[u][mt][3];
                    }
            }
        };
        if (full) multiply(Flag<true>{});
        else multiply(Flag<false>{});
        const bool last = w.last();
        const i64 task = (i64)w.qi * num_docs + w.pair;
        w.step(d_offsets, doc_index, num_docs);
        __syncthreads();  // stage s is read by every warp; the partials and row maxima are in place
        if (threadIdx.x == 0) producer.produce(s);
        finish();
        const float* pt = part + par_i * BULK_WARPS * TOK * RS;
#pragma unroll
        for (int k = 0; k < CW; ++k) {
            const int col = wib * CW + k;
            float v = pt[col * RS + lane];
#pragma unroll
            for (int ww = 1; ww < BULK_WARPS; ++ww) v += pt[(ww * TOK + col) * RS + lane];
            if (col < ntok) best = max_nan(best, v);
        }
        if (last) {
            const int par = ndone & 1;
            red[(par * BULK_WARPS + wib) * 32 + lane] = best;
            pending = true;
            p_task = task;
            p_nq = nq;
            p_par = par;
            ++ndone;
        }
        par_i ^= 1;
        if (++s == stages) s = 0, phase ^= 1u;
    }
    __syncthreads();
    finish();
#endif
}

INSTANTIATE_BULK(maxsim_bulk_f16_d256, maxsim_bulk_wide_impl, false, 2, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d384, maxsim_bulk_wide_impl, false, 3, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d512, maxsim_bulk_wide_impl, false, 4, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d640, maxsim_bulk_wide_impl, false, 5, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d768, maxsim_bulk_wide_impl, false, 6, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d896, maxsim_bulk_wide_impl, false, 7, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_f16_d1024, maxsim_bulk_wide_impl, false, 8, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d256, maxsim_bulk_wide_impl, true, 2, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d384, maxsim_bulk_wide_impl, true, 3, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d512, maxsim_bulk_wide_impl, true, 4, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d640, maxsim_bulk_wide_impl, true, 5, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d768, maxsim_bulk_wide_impl, true, 6, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d896, maxsim_bulk_wide_impl, true, 7, BULK_BOUNDS)
INSTANTIATE_BULK(maxsim_bulk_bf16_d1024, maxsim_bulk_wide_impl, true, 8, BULK_BOUNDS)

// maxsim_bulk_any: maxsim_bulk_wide_impl at any d in 129..1024 that is a multiple of 8, for
// KQ = ceil(d / 128) (the instantiation's bound), and _h (HALF) where d ≤ 128·KQ − 64; the query
// blocks are 32 rows of d. Up to KQ = 4 bounded to three blocks a SM (168 registers, no spills
// with ptxas 13), as many as shared memory holds there; past it two (shared memory allows no
// more; KQ = 6 takes 253 registers, where maxsim_bulk_f16_d768 takes 162, and spills 136 bytes
// at 168).
#define INSTANTIATE_BULK_ANY_ONE(NAME, BF, KQ, HALF)                                           \
    extern "C" __global__ void __launch_bounds__(BULK_THREADS, (KQ) <= 4 ? 3 : 2) NAME(           \
        const u16* qpad, const i64* q_offsets, int num_queries, const u16* d_tokens,           \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int stages,      \
        int group, int dim)                                                                    \
    {                                                                                          \
        maxsim_bulk_wide_impl<BF, KQ, true, HALF>(qpad, q_offsets, num_queries, d_tokens, d_offsets, \
                                                  doc_index, num_docs, out, stages, group, dim); \
    }
// BULK_ANY_HALF=0 (experiments): the _h kernels multiply whole chunks, as the others do.
#ifndef BULK_ANY_HALF
#define BULK_ANY_HALF 1
#endif
#define INSTANTIATE_BULK_ANY(NAME, BF, KQ)           \
    INSTANTIATE_BULK_ANY_ONE(NAME, BF, KQ, false)    \
    INSTANTIATE_BULK_ANY_ONE(NAME##h, BF, KQ, BULK_ANY_HALF)

INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k2, false, 2)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k3, false, 3)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k4, false, 4)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k5, false, 5)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k6, false, 6)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k7, false, 7)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_f16_k8, false, 8)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k2, true, 2)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k3, true, 3)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k4, true, 4)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k5, true, 5)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k6, true, 6)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k7, true, 7)
INSTANTIATE_BULK_ANY(maxsim_bulk_any_bf16_k8, true, 8)
