// maxsim_ring: one warp per (query, document), as maxsim_mma, for what maxsim_mma's registers
// cannot hold: wide embeddings (f16/bf16, d = 256..1024, walked in 128-wide steps: dimension
// tiling) and exact f32 (each element split into an f16 high part and an f16 low part scaled by
// 2^11; three tensor-core products per tile, hi*hi + hi*lo + lo*hi, the lo*lo term is below
// 2^-22 of the product). Also instantiated for f16/bf16 at d <= 128. On sm_90 the engine sends
// wide f16/bf16 to maxsim_bulk (its warps split d; 1.07x this kernel at d = 768, H100,
// bench/results/bulk_wide.log); this one keeps f32 and GPUs before sm_90.
//
// The block's query sits in shared memory in fragment order: the four A registers of lane l for
// k16 step j and m-tile mt are the 16 bytes at [j][mt][l], one conflict-free 128-bit load (the
// permuted-k order of maxsim_mma). The document streams through a ring of RING_STAGES stages per
// warp (RING_TILES * 8 tokens x STEP of d for f16/bf16, 8 tokens for f32: 4 KB at STEP = 128 and
// the default 2 tiles; ring_layout in src/cuda/plan.rs sizes them) by cp.async, RING_STAGES - 1
// stages ahead and across document boundaries. Each lane copies exactly the 16-byte pieces it
// later feeds the tensor cores as B fragments, into lane-major slots: no other lane reads them,
// so there is no barrier, no bank conflict and no register held by a load in flight.
// Blocks take (query, group of `warps` documents) tasks with a grid stride, so a change of
// query is block-uniform: the shared query is rewritten between two barriers.
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "split.cuh"

#ifndef RING_STAGES
#define RING_STAGES 4
#endif
// Most warps per block (the host launches as many as shared memory holds, up to this).
#ifndef RING_WARPS
#define RING_WARPS 8
#endif
// f16/bf16: 8-token tiles per stage, each query A fragment read from shared memory feeding that
// many tensor-core products (2: 2 bytes of query read per byte of document; 4 halves it).
#ifndef RING_TILES
#define RING_TILES 2
#endif
// f32 only. 1 permutes k by 4-float pieces (piece kb of lane c = floats kb*16 + c*4 .. +3 of the
// chunk), so the four lanes of a row copy 64 contiguous bytes (two whole 32-byte sectors) per
// instruction; 0 copies each lane's 8 consecutive floats as two 16-byte halves, four half
// sectors per instruction: half the speed (bench/results/tiles.log, H200: 29.4 against 59.7 M).
#ifndef SPLIT_SECTOR_PIECES
#define SPLIT_SECTOR_PIECES 1
#endif
// 1 (the default; sm_90+, f32 only): lane 0 fills each stage with cp.async.bulk copies (one per
// stage when a stage spans whole token rows, else one per row), completion on a per-stage
// mbarrier, as maxsim_bulk does; the stage holds its tokens row-major and each lane reads its B
// pieces from there (2-way bank conflicts where a row is a multiple of 128 bytes). Otherwise
// each lane copies its own pieces by cp.async into lane-major slots, conflict-free. On the H100
// (bench/results/ring_bulk.log) bulk copies read f32 at 3.06 TB/s against 2.91 (46.75 against
// 44.50 M docs/s at B = 100K), but f16 at d = 768 at 2.69 against 2.85 (one 256-byte copy per
// row), so f16/bf16 keep the per-lane copies. ptxas 12.9: 72 bytes of spills in
// maxsim_ring_f32_d64.
#ifndef RING_BULK
#define RING_BULK 1
#endif
#if RING_BULK && __CUDA_ARCH__ >= 900
#define RING_TMA_ARCH true
#else
#define RING_TMA_ARCH false
#endif

// KIND 0: f16, 1: bf16, 2: f32 split. STEP = KCH * 32 dimensions per stage; d a multiple of it.
template <int KIND, int KCH>
__device__ __forceinline__ void maxsim_ring_impl(
    const u16* __restrict__ qpad, const i64* __restrict__ q_offsets, int num_queries,
    const void* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out, int dim)
{
    constexpr bool SPLIT = KIND == 2;
    constexpr int EB = SPLIT ? 4 : 2;          // bytes per stored element
    constexpr int PIECES = EB / 2;             // 16-byte pieces per lane per (tile, chunk)
    constexpr int TT = SPLIT ? 1 : RING_TILES; // 8-token tiles per stage
    constexpr int TOK = TT * 8;
    constexpr int STEP = KCH * 32;
    constexpr int CPL = TT * KCH * PIECES;     // 16-byte pieces per lane per stage
    constexpr int S = RING_STAGES;
    extern __shared__ __attribute__((aligned(16))) V4 ring_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int nw = blockDim.x >> 5;
    const int kj = dim / 16;                   // k16 steps
    const int ks_per_tok = dim / STEP;
    V4* qa = ring_smem;                                         // [SPLIT + 1][kj][2][32]
    V4* wring = ring_smem + (SPLIT ? 2 : 1) * kj * 64 + (i64)wib * S * CPL * 32;  // this warp's ring
    V4* ring = wring + lane;                                    // per-lane copies: its lane-major slots
    // Bulk copies: the stages' mbarriers, and a token's bytes in one stage.
    constexpr bool TMA = RING_TMA_ARCH && SPLIT;
    constexpr unsigned ROW_BYTES = STEP * EB;
    unsigned long long* bars =
        (unsigned long long*)(ring_smem + (SPLIT ? 2 : 1) * kj * 64 + (i64)nw * S * CPL * 32) + wib * S;
    if (TMA) {
        if (lane == 0) {
            for (int s = 0; s < S; ++s) mbar_init(smem_addr(&bars[s]));
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
    }
    const int groups = (num_docs + nw - 1) / nw;
    const i64 tasks = (i64)num_queries * groups;
    const char* tok_bytes = (const char*)d_tokens;

    // The extent of this warp's document of task t (nd = 0: none).
    auto extent = [&](i64 t, i64& d0, int& nd) {
        const int pair = (int)(t % groups) * nw + wib;
        nd = 0;
        if (pair < num_docs) {
            const i64 doc = doc_index ? doc_index[pair] : (i64)pair;
            d0 = d_offsets[doc];
            nd = (int)(d_offsets[doc + 1] - d0);
        }
    };
    // Producer cursor: task, first token of the stage, d step; runs S - 1 stages ahead.
    i64 pt = blockIdx.x, pd0 = 0;
    int pnd = 0, ptok = 0, pks = 0;
    auto p_seek = [&]() {
        for (; pt < tasks; pt += gridDim.x) {
            extent(pt, pd0, pnd);
            if (pnd > 0) return;
        }
    };
    auto produce = [&](int slot) {
        if (pt < tasks) {
            const char* doc = tok_bytes + pd0 * dim * EB;
            if constexpr (TMA) {
                if (lane == 0) {
                    const int rows = min(TOK, pnd - ptok);
                    const unsigned bar = smem_addr(&bars[slot]), dst = smem_addr(wring + slot * CPL * 32);
                    const char* src = doc + (i64)ptok * dim * EB + pks * STEP * EB;
                    mbar_expect_tx(bar, (unsigned)rows * ROW_BYTES);
                    if (ks_per_tok == 1)  // whole rows: one contiguous copy
                        bulk_load(dst, src, (unsigned)rows * ROW_BYTES, bar);
                    else
                        for (int r = 0; r < rows; ++r)
                            bulk_load(dst + r * ROW_BYTES, src + (i64)r * dim * EB, ROW_BYTES, bar);
                }
            } else {
                const unsigned dst = smem_addr(ring + slot * CPL * 32);
#pragma unroll
                for (int tt = 0; tt < TT; ++tt) {
                    const int tok = ptok + tt * 8 + g;
                    const bool ok = tok < pnd;
                    const char* row = doc + (i64)(ok ? tok : 0) * dim * EB + pks * STEP * EB;
#pragma unroll
                    for (int ch = 0; ch < KCH; ++ch)
#pragma unroll
                        for (int h = 0; h < PIECES; ++h)
                            cp_async16(dst + ((tt * KCH + ch) * PIECES + h) * 512u,
                                       row + ch * 32 * EB + (SPLIT && SPLIT_SECTOR_PIECES ? h * 64 + c * 16 : c * 8 * EB + h * 16),
                                       ok ? 16u : 0u);
                }
            }
            if (++pks == ks_per_tok) {
                pks = 0;
                ptok += TOK;
                if (ptok >= pnd) { ptok = 0; pt += gridDim.x; p_seek(); }
            }
        }
        if (!TMA) cp_async_commit();
    };
    // Piece h of 16 bytes of chunk ch of 8-token tile tt in stage `slot`: this lane's B
    // fragment elements (see produce) for its token row g.
    auto piece = [&](int slot, int tt, int ch, int h) -> V4 {
        if constexpr (TMA)
            return *(const V4*)((const char*)(wring + slot * CPL * 32) + (tt * 8 + g) * ROW_BYTES + ch * 32 * EB +
                                (SPLIT && SPLIT_SECTOR_PIECES ? h * 64 + c * 16 : c * 8 * EB + h * 16));
        else
            return ring[(slot * CPL + (tt * KCH + ch) * PIECES + h) * 32];
    };
    p_seek();
#pragma unroll
    for (int s = 0; s < S - 1; ++s) produce(s);

    int stage = 0, cur_q = -1, nq = 0;
    for (i64 t = blockIdx.x; t < tasks; t += gridDim.x) {
        const int qi = (int)(t / groups);
        if (qi != cur_q) {  // uniform across the block
            __syncthreads();
            const unsigned* q = (const unsigned*)(qpad + (i64)qi * (SPLIT ? 2 : 1) * 32 * dim);
            const int half_row = dim / 2;
            for (int e = threadIdx.x; e < kj * 64; e += blockDim.x) {
                const int j = e >> 6, mt = (e >> 5) & 1, l = e & 31;
                // Lane c holds elements c*8 .. c*8+7 of each 32-wide chunk (k16 step kb: the
                // four from kb*4), or with SPLIT_SECTOR_PIECES (f32) elements kb*16 + c*4 .. +3.
                const int w = ((j >> 1) * 32 + (SPLIT && SPLIT_SECTOR_PIECES ? (j & 1) * 16 + (l & 3) * 4
                                                                              : (l & 3) * 8 + (j & 1) * 4)) / 2;
                const int r0 = (mt * 16 + (l >> 2)) * half_row + w, r8 = r0 + 8 * half_row;
                qa[e] = V4{q[r0], q[r8], q[r0 + 1], q[r8 + 1]};
                if (SPLIT) {
                    const unsigned* ql = q + 32 * half_row;
                    qa[kj * 64 + e] = V4{ql[r0], ql[r8], ql[r0 + 1], ql[r8 + 1]};
                }
            }
            __syncthreads();
            cur_q = qi;
            nq = (int)(q_offsets[qi + 1] - q_offsets[qi]);
        }
        i64 d0;
        int nd;
        extent(t, d0, nd);
        if (nd == 0) continue;  // uniform across the warp; the producer skipped it too
        const int pair = (int)(t % groups) * nw + wib;
        float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
        for (int tok0 = 0; tok0 < nd; tok0 += TOK) {
            float acc[TT][2][4], cor[TT][2][4];
#pragma unroll
            for (int tt = 0; tt < TT; ++tt)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) acc[tt][mt][r] = cor[tt][mt][r] = 0.f;
            for (int ks = 0; ks < ks_per_tok; ++ks, ++stage) {
                if constexpr (TMA) {
                    __syncwarp();  // every lane is done with the slot produce() refills
                    produce((stage + S - 1) % S);
                    mbar_wait(smem_addr(&bars[stage % S]), (unsigned)(stage / S) & 1u);
                } else {
                    cp_async_wait<S - 2>();
                    produce((stage + S - 1) % S);
                }
                const int slot = stage % S;
#pragma unroll
                for (int ch = 0; ch < KCH; ++ch) {
                    unsigned bh[TT][4], bl[TT][4];
#pragma unroll
                    for (int tt = 0; tt < TT; ++tt) {
                        if (SPLIT) {
                            const V4 v0 = piece(slot, tt, ch, 0), v1 = piece(slot, tt, ch, 1);
                            split_f32x2(__uint_as_float(v0.x), __uint_as_float(v0.y), bh[tt][0], bl[tt][0]);
                            split_f32x2(__uint_as_float(v0.z), __uint_as_float(v0.w), bh[tt][1], bl[tt][1]);
                            split_f32x2(__uint_as_float(v1.x), __uint_as_float(v1.y), bh[tt][2], bl[tt][2]);
                            split_f32x2(__uint_as_float(v1.z), __uint_as_float(v1.w), bh[tt][3], bl[tt][3]);
                        } else {
                            const V4 v = piece(slot, tt, ch, 0);
                            bh[tt][0] = v.x; bh[tt][1] = v.y; bh[tt][2] = v.z; bh[tt][3] = v.w;
                        }
                    }
#pragma unroll
                    for (int kb = 0; kb < 2; ++kb) {
                        const int j = (ks * KCH + ch) * 2 + kb;
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            const V4 av = qa[(j * 2 + mt) * 32 + lane];
                            const unsigned a[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
                            for (int tt = 0; tt < TT; ++tt) {
                                if (tok0 + tt * 8 >= nd) continue;  // uniform across the warp
                                Mma<KIND == 1>::run(acc[tt][mt], a, bh[tt][2 * kb], bh[tt][2 * kb + 1]);
                                if (SPLIT) {
                                    const V4 lv = qa[kj * 64 + (j * 2 + mt) * 32 + lane];
                                    const unsigned al[4] = {lv.x, lv.y, lv.z, lv.w};
                                    Mma<false>::run(cor[tt][mt], a, bl[tt][2 * kb], bl[tt][2 * kb + 1]);
                                    Mma<false>::run(cor[tt][mt], al, bh[tt][2 * kb], bh[tt][2 * kb + 1]);
                                }
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int tt = 0; tt < TT; ++tt) {
                const int col = tok0 + tt * 8 + 2 * c;
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    if (SPLIT)
#pragma unroll
                        for (int r = 0; r < 4; ++r) acc[tt][mt][r] += cor[tt][mt][r] * (1.0f / SPLIT_SCALE);
                    fold_max(best[mt], acc[tt][mt], col, nd);
                }
            }
        }
        const float score = block_score(best, nq, g);
        if (lane == 0) out[(i64)qi * num_docs + pair] = score;
    }
    cp_async_wait<0>();
}

#define INSTANTIATE_RING(NAME, KIND, KCH)                                                      \
    extern "C" __global__ void __launch_bounds__(RING_WARPS * 32) NAME(                      \
        const u16* qpad, const i64* q_offsets, int num_queries, const void* d_tokens,          \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int dim)         \
    {                                                                                          \
        maxsim_ring_impl<KIND, KCH>(qpad, q_offsets, num_queries, d_tokens, d_offsets, doc_index, num_docs, out, dim); \
    }

INSTANTIATE_RING(maxsim_ring_f16_d32, 0, 1)
INSTANTIATE_RING(maxsim_ring_f16_d64, 0, 2)
INSTANTIATE_RING(maxsim_ring_f16_d96, 0, 3)
INSTANTIATE_RING(maxsim_ring_f16_d128, 0, 4)
INSTANTIATE_RING(maxsim_ring_bf16_d32, 1, 1)
INSTANTIATE_RING(maxsim_ring_bf16_d64, 1, 2)
INSTANTIATE_RING(maxsim_ring_bf16_d96, 1, 3)
INSTANTIATE_RING(maxsim_ring_bf16_d128, 1, 4)
INSTANTIATE_RING(maxsim_ring_f32_d32, 2, 1)
INSTANTIATE_RING(maxsim_ring_f32_d64, 2, 2)
INSTANTIATE_RING(maxsim_ring_f32_d96, 2, 3)
INSTANTIATE_RING(maxsim_ring_f32_d128, 2, 4)
