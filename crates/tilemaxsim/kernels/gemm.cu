// maxsim_gemm: many query rows against the same documents, the compute-bound case (a batch of
// queries, or ColPali-style queries of hundreds of tokens), f16/bf16, d in {32, 64, 96, 128}.
//
// Queries come as blocks of 32 rows (a query of Nq tokens takes ceil(Nq / 32) blocks, zero
// rows past its end; `qblock_rows` says how many rows of each block are real). One block of
// GEMM_WARPS warps takes GEMM_WARPS query blocks (a "query tile") and one document at a time;
// each warp holds its query block's A fragments in registers, so a document tile of GEMM_BN
// tokens copied into shared memory once feeds all GEMM_WARPS warps (ldmatrix). Tiles go
// through a GEMM_STAGES-deep cp.async ring that runs ahead across document boundaries; rows
// are XOR-swizzled by 16-byte chunk so ldmatrix is free of bank conflicts. The grid is
// persistent and a multiple of the number of query tiles where it can be, so a block keeps
// its query tile (A is loaded once) and the blocks working on one document at the same time
// read it from HBM once, then from L2. Each warp writes its block's partial score
// (sum over its rows of the max over the document): out[qblock * num_docs + pair]; a query
// of one block is then final, longer ones are summed by sum_qblocks.
#define GEMM_WARPS 8
#define GEMM_THREADS (GEMM_WARPS * 32)
#define GEMM_BN 128
// Tiles in flight; document tokens a warp multiplies per pass over a tile (8-token n-tiles:
// NH / 8 of them, NH / 2 accumulators per thread); blocks per SM the registers are bounded for.
// Measured on the H100 (bench/results/gemm_tune.log): two blocks of 8 warps per SM (at the
// cost of a few spilled registers) beat one by 23% on 32 queries; NH and stages matter little.
#ifndef GEMM_STAGES
#define GEMM_STAGES 3
#endif
#ifndef GEMM_NH
#define GEMM_NH 16
#endif
#ifndef GEMM_MINB
#define GEMM_MINB 2
#endif
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"
#include "tile_producer.cuh"

template <bool BF, int KCH>
__device__ __forceinline__ void maxsim_gemm_impl(
    const u16* __restrict__ qpad, const int* __restrict__ qblock_rows, int num_qblocks,
    const u16* __restrict__ d_tokens, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out)
{
    constexpr int D = KCH * 32;
    constexpr int C = D / 8;                   // 16-byte chunks per token row
    constexpr int KS = D / 16;                 // k16 steps
    constexpr unsigned TILE_BYTES = GEMM_BN * D * 2;
    extern __shared__ __attribute__((aligned(128))) unsigned char gemm_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, wib = threadIdx.x >> 5;
    const int qtiles = (num_qblocks + GEMM_WARPS - 1) / GEMM_WARPS;
    const unsigned smem0 = smem_addr(gemm_smem);
    TileMeta* meta = (TileMeta*)(gemm_smem + GEMM_STAGES * TILE_BYTES);  // per stage

    TileProducer<D, GEMM_BN, GEMM_THREADS> producer(d_offsets, doc_index, num_docs, qtiles, threadIdx.x);
    auto issue = [&](int slot) {
        const TileMeta m =
            producer.issue(d_tokens, smem0 + (unsigned)slot * TILE_BYTES, [](int row, int ch) { return gemm_swz<C>(row, ch); });
        if (threadIdx.x == 0) meta[slot] = m;
    };
#pragma unroll
    for (int s = 0; s < GEMM_STAGES - 1; ++s) issue(s);

    unsigned a[2][KS][4];
    int cur_qtile = -1, rows = 0, qblock = 0, slot = 0;
    float best[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
    while (true) {
        cp_async_wait<GEMM_STAGES - 2>();
        __syncthreads();
        const TileMeta m = meta[slot];
        if (m.pair < 0) break;  // uniform across the block
        issue((slot + GEMM_STAGES - 1) % GEMM_STAGES);
        if (m.qtile != cur_qtile) {
            cur_qtile = m.qtile;
            qblock = m.qtile * GEMM_WARPS + wib;
            rows = qblock < num_qblocks ? qblock_rows[qblock] : 0;
            if (rows > 0) qblock_fragments<D>(a, qpad + (i64)qblock * 32 * D, g, c);
        }
        const int ntok = m.ntok;
        if (rows > 0) {
            const unsigned tile0 = smem0 + (unsigned)slot * TILE_BYTES;
            const int mi = lane >> 3, r = lane & 7;
            constexpr int NT = GEMM_NH / 8;
#pragma unroll
            for (int h = 0; h < GEMM_BN / GEMM_NH; ++h) {
                if (h * GEMM_NH >= ntok) break;  // uniform across the block
                float acc[2][NT][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
                        acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
#pragma unroll
                for (int kk = 0; kk < KS; ++kk) {
                    unsigned b[NT][2];
#pragma unroll
                    for (int np = 0; np < NT / 2; ++np) {
                        const int row = h * GEMM_NH + np * 16 + (mi >> 1) * 8 + r;
                        ldsm_x4(tile0 + gemm_swz<C>(row, 2 * kk + (mi & 1)), b[2 * np][0], b[2 * np][1],
                                b[2 * np + 1][0], b[2 * np + 1][1]);
                    }
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) Mma<BF>::run(acc[mt][nt], a[mt][kk], b[nt][0], b[nt][1]);
                }
                if ((h + 1) * GEMM_NH <= ntok) {  // every column a token: no masks
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            best[mt][0] = max_nan(best[mt][0], max_nan(acc[mt][nt][0], acc[mt][nt][1]));
                            best[mt][1] = max_nan(best[mt][1], max_nan(acc[mt][nt][2], acc[mt][nt][3]));
                        }
                } else {
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        const int col = h * GEMM_NH + nt * 8 + 2 * c;
#pragma unroll
                        for (int mt = 0; mt < 2; ++mt) {
                            fold_max(best[mt], acc[mt][nt], col, ntok);
                        }
                    }
                }
            }
        }
        if (m.last) {  // the document is done
            if (rows > 0) {
                const float s = block_score(best, rows, g);
                if (lane == 0) out[(i64)qblock * num_docs + m.pair] = s;
            }
            best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        }
        slot = (slot + 1) % GEMM_STAGES;
    }
    cp_async_wait<0>();
}

#define INSTANTIATE_GEMM(NAME, BF, KCH)                                                        \
    extern "C" __global__ void __launch_bounds__(GEMM_THREADS, GEMM_MINB) NAME(                       \
        const u16* qpad, const int* qblock_rows, int num_qblocks, const u16* d_tokens,         \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out)                  \
    {                                                                                          \
        maxsim_gemm_impl<BF, KCH>(qpad, qblock_rows, num_qblocks, d_tokens, d_offsets, doc_index, num_docs, out); \
    }

INSTANTIATE_GEMM(maxsim_gemm_f16_d32, false, 1)
INSTANTIATE_GEMM(maxsim_gemm_f16_d64, false, 2)
INSTANTIATE_GEMM(maxsim_gemm_f16_d96, false, 3)
INSTANTIATE_GEMM(maxsim_gemm_f16_d128, false, 4)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d32, true, 1)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d64, true, 2)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d96, true, 3)
INSTANTIATE_GEMM(maxsim_gemm_bf16_d128, true, 4)
