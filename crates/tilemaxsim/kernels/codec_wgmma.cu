// maxsim_codec_wg_*: MaxSim over compressed corpora for many query rows at once (a batch of
// queries), sm_90a, d in {64, 128}: maxsim_wgmma's consumers (two warpgroups, a query tile of
// WG_QBLOCKS 32-row blocks in registers, wgmma m64n64k16 against each 128-token tile in shared
// memory) fed by a producer warpgroup that decodes the codes into the ring instead of copying
// tokens. A tile is decoded once and multiplied against 256 query rows, where maxsim_codec_*
// (codec.cu) decodes each document again for every 32-row block. Decoded values live only in
// shared memory.
// maxsim_codec_wgp_*: the same over runs of consecutive documents cut into 128-token tiles
// across their boundaries (RunWalk, kernels/tile_producer.cuh), so short documents fill their
// tiles (MS MARCO passages, 66 tokens on average, half-fill their own); the producer leaves each
// tile's document end columns beside it, the consumers fold across them (wg_fold_segs). Per
// tile it costs more than maxsim_codec_wg_* (the H200, Nd = 128, 32 queries: residual nbits 2
// 258 against 310 M pairs/s), so the host takes it where documents leave their own tiles part
// empty enough (`pack_pays`, src/cuda/codec_kernels.rs).
//
// Each producer thread decodes 16-byte chunks (8 dimensions) of the tile's token rows: thread p
// takes chunk p % (d / 8) of rows p / (d / 8), + 128 / (d / 8), ... (the residual codec: four
// threads a row, each a quarter of its chunks); then it fences its stores to the async proxy
// and arrives on the stage's full barrier (128 arrivals).
// - residual (PLAID, nbits 1/2/4): normalize(centroid[id] + weights[buckets]), computed in f32
//   (the weights looked up a 4-bit nibble of codes at a time: ResidualNibbles;
//   each token's norm summed over the four threads of its row by shuffles, so no inverse
//   norms need exist beforehand) and rounded once to f16, as PLAID's decompression (and LIK)
//   round the reconstruction to f16. The centroid chunks are gathered by cp.async into a
//   staging tile (two, in turn) a tile ahead of their decoding, from ids loaded a tile before
//   that, so neither gather waits on the other.
// - pq: the sub-space centroids' f16 values, copied from the codebook in shared memory.
// - int8 / fp8: the codes as exact f16 (int8 as integers, e4m3 as value / 256); the per-token
//   scale (times 256 for fp8) goes to the stage's column scales, applied to the products in
//   the fold (SCALED), as maxsim_codec_* applies it.
// Rows past the tile's tokens are zero (their columns are masked in the fold anyway).
#include "codec.cu"
#include "wgmma.cu"

#define CWG_PRODUCERS 128
#define CWG_BLOCK_THREADS (WG_THREADS + CWG_PRODUCERS)
// Not kept: the one-warp kernels' L2 hints here (the residual codes evict-first, the centroid
// gathers evict-last; branch wip/codec-wg-l2-hints): 32 queries x 1M x U[8,124] 515.9 / 520.4 ->
// 509.2 / 509.0 M pairs/s, and 52.4 -> 51.9 queries/s at 8.8M documents (H200, BENCHMARKS.md
// 2026-11-29 tenth). Its centroid table (67 MB at K = 262,144) does not fit L2 anyway.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Eight f32 values as four f16 pairs (round to nearest even), the first value in the low half.
__device__ __forceinline__ U4 pack8_f16(const float (&v)[8]) {
    unsigned h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h[i]) : "f"(v[2 * i + 1]), "f"(v[2 * i]));
    return U4{h[0], h[1], h[2], h[3]};
}
__device__ __forceinline__ U4 lds128(unsigned addr) {
    U4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ void st_shared_v4(unsigned addr, const U4& v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ float f16_lo(unsigned x) {
    float f;
    asm("{ .reg .f16 t, u; mov.b32 {t, u}, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "r"(x));
    return f;
}
__device__ __forceinline__ float f16_hi(unsigned x) {
    float f;
    asm("{ .reg .f16 t, u; mov.b32 {u, t}, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "r"(x));
    return f;
}

// The residual codec's bucket weights by 4-bit nibble of the code stream: entry n holds the
// weights of the VPN = 4 / nbits fields of nibble n, its first field (highest bits) first, so a
// nibble's fields take one shared load (nbits 2: 8 bytes, 16 entries over the 32 banks, never a
// conflict) where a lookup a field took a shift, a mask, an address and a load each. A field's
// bits are the bucket's reversed: its first bit is the bucket's bit 0.
template <int P> struct ResidualNibbles {
    static constexpr int VPN = 4 / P;
    static constexpr int LOG_BYTES = P == 1 ? 4 : P == 2 ? 3 : 2;  // log2(VPN * 4)
    __device__ __forceinline__ static void build(float* ntab, unsigned n, const float* __restrict__ values) {
#pragma unroll
        for (int i = 0; i < VPN; ++i) {
            const unsigned field = (n >> (4 - P * (i + 1))) & ((1u << P) - 1u);
            unsigned b = 0u;
#pragma unroll
            for (int k = 0; k < P; ++k) b |= ((field >> (P - 1 - k)) & 1u) << k;
            ntab[n * VPN + i] = values[b];
        }
    }
    // The weights of nibble q of a chunk's code word `w` (8 fields, field 0 highest: nibble q
    // is bits 8P - 4(q + 1) ..), its byte offset in the table taken by one shift and one mask.
    // `ntab`: the table's shared address.
    __device__ __forceinline__ static void weights(unsigned ntab, unsigned w, int q, float (&t)[VPN]) {
        const int s = 8 * P - 4 * (q + 1) - LOG_BYTES;
        const unsigned e = ntab | ((s >= 0 ? w >> s : w << -s) & (15u << LOG_BYTES));  // (ntab 256-byte aligned)
        if constexpr (VPN == 4) {
            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(t[0]), "=f"(t[1]), "=f"(t[2]), "=f"(t[3]) : "r"(e));
        } else if constexpr (VPN == 2) {
            asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(t[0]), "=f"(t[1]) : "r"(e));
        } else {
            asm volatile("ld.shared.f32 %0, [%1];" : "=f"(t[0]) : "r"(e));
        }
    }
};

// What a producer thread loads of a tile from global memory before decoding it, one tile
// ahead (its latency hides behind the decoding of the tile before): per chunk the code bits
// and a word (residual: the centroid id; int8/fp8: the scale; pq: unused).
template <int TAG, int ITEMS> struct CodecRaw {
    static constexpr int W = (TAG == INT8 || TAG == FP8) ? 2 : 1;
    unsigned bits[ITEMS][W];
    unsigned word[ITEMS];
};

// The producer warpgroup: every tile of the walk decoded into the ring. `pt`: the thread's
// index among the producers; `ntab` (residual): per 4-bit nibble of the code stream, the bucket
// weights of its 4 / nbits fields, first field first (ResidualNibbles); `book` (pq): the f16 codebooks [M][256][d / M].
// The walk of the batched kernels: runs of documents cut into tiles across their boundaries
// (PACKED: RunWalk), or each document in tiles of its own (TileWalk).
template <bool PACKED> struct CodecWalk { using T = RunWalk<WG_BN>; };
template <> struct CodecWalk<false> { using T = TileWalk<WG_BN>; };

template <int TAG, int D, int P, int S, bool PACKED>
__device__ __forceinline__ void codec_wg_produce(
    const WgRing& ring, unsigned char* ends, i64* run_ends, int pt, const unsigned char* __restrict__ codes, const unsigned* __restrict__ aux,
    const u16* __restrict__ centroids, const float* ntab, const u16* book, unsigned stage,
    const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index, int num_docs, int qtiles, int run_docs)
{
    constexpr int C = D / 8;                  // chunks per row
    constexpr int RSTEP = CWG_PRODUCERS / C;  // rows per pass
    constexpr int ITEMS = WG_BN / RSTEP;      // chunks per thread per tile
    constexpr unsigned TILE_BYTES = WG_BN * D * 2;
    constexpr int ROW = CodecShape<TAG, D, P>::ROW;  // code bytes per token
    constexpr int DSUB = TAG == PQ ? D / P : 8;
    constexpr int NC = DSUB >= 8 ? 1 : 8 / DSUB;    // pq: code bytes per chunk
    using Raw = CodecRaw<TAG, ITEMS>;
    const int ch = pt % C, r0 = pt / C;
    constexpr int VPN = ResidualNibbles<TAG == RESIDUAL ? P : 4>::VPN;
    const unsigned ntab_at = smem_addr(ntab);
    // The residual codec lays its chunks out otherwise: TPR threads a row (so a row's norm takes
    // two shuffles), each CPT chunks of it (q, q + TPR, ...: conflict-free shared loads), item
    // i = row step i / CPT, chunk i % CPT.
    constexpr int TPR = 4, CPT = C / TPR, RRSTEP = CWG_PRODUCERS / TPR;
    auto item_row = [&](int i) { return TAG == RESIDUAL ? pt / TPR + (i / CPT) * RRSTEP : r0 + i * RSTEP; };
    auto item_ch = [&](int i) { return TAG == RESIDUAL ? pt % TPR + TPR * (i % CPT) : ch; };
    // A chunk's place in a gather tile: rows 64 bytes apart beyond their values, so the two rows
    // of a quarter-warp's 16-byte accesses fall in different banks.
    constexpr unsigned SROW = D * 2 + 64;
    auto stage_off = [&](int row, int chunk) { return (unsigned)row * SROW + (unsigned)chunk * 16u; };

    auto load = [&](Raw& r, i64 first, int ntok) {
        const unsigned char* cp = codes + first * ROW;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int row = item_row(i);
            const bool ok = row < ntok;
            unsigned b = 0u, b1 = 0u, w = 0u;
            if (ok) {
                if constexpr (TAG == RESIDUAL) {
                    const unsigned char* p = cp + (i64)row * ROW + item_ch(i) * P;
                    if constexpr (P == 1) b = __ldg(p);
                    else if constexpr (P == 2) b = __ldg((const unsigned short*)p);
                    else b = __ldg((const unsigned*)p);
                    if (i % CPT == 0) w = __ldg(aux + first + row);  // the row's id, once
                } else if constexpr (TAG == PQ) {
                    const unsigned char* p = cp + (i64)row * ROW + (ch * 8) / DSUB;
                    if constexpr (NC == 1) b = __ldg(p);
                    else if constexpr (NC == 2) b = __ldg((const unsigned short*)p);
                    else b = __ldg((const unsigned*)p);
                } else {
                    const uint2 v = __ldg((const uint2*)(cp + (i64)row * ROW + ch * 8));
                    b = v.x;
                    b1 = v.y;
                    if (ch == 0) w = __ldg(aux + first + row);
                }
            }
            r.bits[i][0] = b;
            if constexpr (Raw::W == 2) r.bits[i][1] = b1;
            r.word[i] = w;
        }
    };

    auto decode = [&](const Raw& r, unsigned tile0, float* sc, int ntok, unsigned gather) {
        if constexpr (TAG == RESIDUAL) {
            // A row at a time: its CPT chunks' values and squared norm, the norm summed over the
            // row's TPR threads, then the values scaled and stored.
#pragma unroll
            for (int rr = 0; rr < ITEMS / CPT; ++rr) {
                const int row = item_row(rr * CPT);
                U4 cv[CPT];
#pragma unroll
                for (int j = 0; j < CPT; ++j) cv[j] = lds128(gather + stage_off(row, item_ch(j)));
                float e[CPT][8], ss = 0.f;
#pragma unroll
                for (int j = 0; j < CPT; ++j) {
                    // The P bytes with the first byte highest: field k (dimension chunk * 8 + k)
                    // is bits 8P - P(k + 1) .. of it.
                    unsigned w = r.bits[rr * CPT + j][0];
                    if constexpr (P == 2) w = __byte_perm(w, 0u, 0x3201u);
                    else if constexpr (P == 4) w = __byte_perm(w, 0u, 0x0123u);
                    const unsigned h[4] = {cv[j].x, cv[j].y, cv[j].z, cv[j].w};
#pragma unroll
                    for (int q = 0; q < 8 / VPN; ++q) {  // nibble q: fields q * VPN ..
                        float t[VPN];
                        ResidualNibbles<P>::weights(ntab_at, w, q, t);
#pragma unroll
                        for (int i = 0; i < VPN; ++i) {
                            const int k = q * VPN + i;
                            const float c = (k & 1) ? f16_hi(h[k / 2]) : f16_lo(h[k / 2]);
                            e[j][k] = c + t[i];
                            ss = fmaf(e[j][k], e[j][k], ss);
                        }
                    }
                }
#pragma unroll
                for (int o = 1; o < TPR; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
                const float inv = row < ntok ? 1.f / fmaxf(sqrtf(ss), 1e-12f) : 0.f;
#pragma unroll
                for (int j = 0; j < CPT; ++j) {
#pragma unroll
                    for (int k = 0; k < 8; ++k) e[j][k] *= inv;
                    st_shared_v4(tile0 + wg_swz(row, item_ch(j)), pack8_f16(e[j]));
                }
            }
        } else if constexpr (TAG == PQ) {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int row = r0 + i * RSTEP;
                U4 v{0u, 0u, 0u, 0u};
                if (row < ntok) {
                    if constexpr (DSUB >= 8) {
                        const int m = (ch * 8) / DSUB, off = (ch * 8) % DSUB;
                        v = *(const U4*)(book + ((m * 256 + (int)r.bits[i][0]) * DSUB + off));
                    } else {
                        unsigned o[4];
                        const int m0 = (ch * 8) / DSUB;
#pragma unroll
                        for (int j = 0; j < 4; ++j) {  // f16 pair j: dimensions 2j, 2j + 1 of the chunk
                            const int sub = (2 * j) / DSUB, off = (2 * j) % DSUB;
                            const unsigned code = (r.bits[i][0] >> (8 * sub)) & 0xffu;
                            o[j] = *(const unsigned*)(book + (((m0 + sub) * 256 + (int)code) * DSUB + off));
                        }
                        v = U4{o[0], o[1], o[2], o[3]};
                    }
                }
                st_shared_v4(tile0 + wg_swz(row, ch), v);
            }
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int row = r0 + i * RSTEP;
                if (ch == 0) sc[row] = __uint_as_float(r.word[i]) * (TAG == FP8 ? 256.f : 1.f);
                U4 v;
                if constexpr (TAG == INT8) {
                    i8_to_f16x2(r.bits[i][0], v.x, v.y);
                    i8_to_f16x2(r.bits[i][1], v.z, v.w);
                } else {
                    e4m3_to_f16x2(r.bits[i][0], v.x, v.y);
                    e4m3_to_f16x2(r.bits[i][1], v.z, v.w);
                }
                st_shared_v4(tile0 + wg_swz(row, ch), v);
            }
        }
    };

    // Residual: each tile's centroid chunks gathered by cp.async into one of two buffers of
    // `stage` (a tile each, row-major: this thread's chunks only, so no barrier), issued a tile
    // ahead of its decoding from ids loaded a tile before that.
    auto gather = [&](const Raw& r, unsigned buf, int ntok) {
        if constexpr (TAG == RESIDUAL) {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int row = item_row(i), chunk = item_ch(i);
                const bool ok = row < ntok;
                const unsigned id = r.word[i - i % CPT];
                cp_async16(buf + stage_off(row, chunk), ok ? (const void*)(centroids + (i64)id * D + chunk * 8) : (const void*)centroids,
                           ok ? 16u : 0u);
            }
            cp_async_commit();
        }
    };
    constexpr unsigned STAGE_BYTES = WG_BN * SROW;

    typename CodecWalk<PACKED>::T walk(d_offsets, doc_index, num_docs, qtiles, run_docs, run_ends, (unsigned)pt, CWG_PRODUCERS);
    // `mine`: the end column of the tile's document `pt` (RunWalk), kept with the tile's words.
    auto fetch = [&](TileMeta& m, Raw& r, int& mine) {
        i64 first = 0;
        m = walk.next(first, mine, pt);
        if (m.pair >= 0) load(r, first, m.ntok);
    };
    // The stage's tile (decoded into `slot` unless the walk is over) and the end columns of its
    // documents, then its TileMeta and the arrival: the generic-proxy stores fenced to the async
    // proxy (wgmma), the arrival a release.
    auto publish = [&](int n, int slot, const TileMeta& m, const Raw& r, unsigned buf, int mine) {
        if (n >= S) mbar_wait(ring.empty0 + 8u * slot, (unsigned)(n / S - 1) & 1u);  // its last use read
        if (m.pair >= 0) {
            if constexpr (TAG == RESIDUAL) cp_async_wait<1>();  // the tile's centroids landed
            float* sc = (TAG == INT8 || TAG == FP8) ? ring.scales + slot * WG_BN : nullptr;
            decode(r, ring.tiles + (unsigned)slot * TILE_BYTES, sc, m.ntok, buf);
            if (PACKED && pt < m.last) ends[slot * WG_BN + pt] = (unsigned char)mine;
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (pt == 0) ring.meta[slot] = m;
        mbar_arrive(ring.full0 + 8u * slot);
    };
    TileMeta m, mn{0, 0, 0, -1};
    Raw cur, nxt;
    int e = 0, en = 0;  // `mine` of tiles n and n + 1
    fetch(m, cur, e);
    if constexpr (TAG == RESIDUAL) {
        // Tiles n (cur: words loaded, centroids in flight), n + 1 (nxt: words loaded), n + 2.
        if (m.pair >= 0) fetch(mn, nxt, en);
        gather(cur, stage, m.pair >= 0 ? m.ntok : 0);
        for (int n = 0, slot = 0;; ++n) {
            gather(nxt, stage + (unsigned)((n + 1) & 1) * STAGE_BYTES, mn.pair >= 0 ? mn.ntok : 0);
            TileMeta m2{0, 0, 0, -1};
            Raw nxt2;
            int e2 = 0;
            if (mn.pair >= 0) fetch(m2, nxt2, e2);
            publish(n, slot, m, cur, stage + (unsigned)(n & 1) * STAGE_BYTES, e);
            if (m.pair < 0) break;
            slot = slot + 1 == S ? 0 : slot + 1;
            m = mn;
            mn = m2;
            cur = nxt;
            nxt = nxt2;
            e = en;
            en = e2;
        }
        cp_async_wait<0>();
    } else {
        // Tiles n (cur) and n + 1 (nxt), its words loaded before tile n is decoded.
        for (int n = 0, slot = 0;; ++n) {
            mn = TileMeta{0, 0, 0, -1};
            if (m.pair >= 0) fetch(mn, nxt, en);
            publish(n, slot, m, cur, 0u, e);
            if (m.pair < 0) break;
            slot = slot + 1 == S ? 0 : slot + 1;
            m = mn;
            cur = nxt;
            e = en;
        }
    }
}
#endif

// After the ring (PACKED): each stage's end columns (WG_BN bytes: RunWalk), the consumer warps'
// stashes (WG_BN floats each: wg_consume's PACKED), the run's document ends (WG_BN i64:
// RunWalk's staged); then the pq codebooks, or the residual's two
// gather tiles; `values`: the residual's 2^nbits bucket weights (f32), `table`: the pq codebooks as f16
// pairs ([M][256][d / M]). PACKED: tiles cut from runs of `run_docs` documents (RunWalk; 1
// where `doc_index` is given) and folded across their documents' ends; else each document in
// tiles of its own (`run_docs` unused), shared memory laid out as before runs existed.
template <int TAG, int D, int P, bool PACKED>
__device__ __forceinline__ void maxsim_codec_wg_impl(
    const u16* __restrict__ qblocks, const int* __restrict__ qrows, int num_blocks,
    const unsigned char* __restrict__ codes, const unsigned* __restrict__ aux,
    const u16* __restrict__ centroids, const float* __restrict__ values, const unsigned* __restrict__ table,
    const i64* __restrict__ d_offsets, const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out,
    int run_docs)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int S = WG_STAGES;
    constexpr bool SCALED = TAG == INT8 || TAG == FP8;
    extern __shared__ __attribute__((aligned(1024))) unsigned char cwg_smem[];
    __shared__ __align__(256) float ntab[64];  // (aligned: a nibble's entry address is an OR)
    // The ring's layout is known before its barriers exist: tables go after it, then one
    // __syncthreads (inside wg_ring) covers both.
    const unsigned raw0 = smem_addr(cwg_smem);
    unsigned char* ends = cwg_smem + (((raw0 + 1023u) & ~1023u) - raw0) + S * (WG_BN * D * 2 + sizeof(TileMeta) + 16) +
                          (SCALED ? S * WG_BN * 4 : 0);
    float* stash = (float*)(ends + S * WG_BN);
    i64* run_ends = (i64*)(stash + (WG_THREADS / 32) * WG_BN);  // (PACKED: RunWalk's staged ends)
    unsigned char* tables = PACKED ? (unsigned char*)(run_ends + WG_BN) : ends;
    if constexpr (TAG == RESIDUAL) {
        if (threadIdx.x < 16u) ResidualNibbles<P>::build(ntab, threadIdx.x, values);
    } else if constexpr (TAG == PQ) {
        for (int i = threadIdx.x; i < D * 256 / 2; i += blockDim.x) ((unsigned*)tables)[i] = table[i];
    }
    const int qtiles = (num_blocks + WG_QBLOCKS - 1) / WG_QBLOCKS;
    const WgRing ring = wg_ring<D, S>(cwg_smem, CWG_PRODUCERS, SCALED);
    if (threadIdx.x >= WG_THREADS) {
        // After the pq codebooks: the residual's two gather buffers.
        codec_wg_produce<TAG, D, P, S, PACKED>(ring, ends, run_ends, threadIdx.x - WG_THREADS, codes, aux, centroids, ntab,
                                               (const u16*)tables, smem_addr(tables), d_offsets, doc_index, num_docs, qtiles,
                                               run_docs);
        return;
    }
    wg_consume<false, D / 32, S, SCALED, PACKED, true>(ring, qblocks, qrows, num_blocks, num_docs, out);
#endif
}

// Each kernel twice: maxsim_codec_wg_* (a document's own tiles) and maxsim_codec_wgp_* (runs).
#define INSTANTIATE_CODEC_WG1(NAME, TAG, D, P, PACKED)                                         \
    extern "C" __global__ void __launch_bounds__(CWG_BLOCK_THREADS, 1) NAME(                   \
        const u16* qblocks, const int* qrows, int num_blocks, const unsigned char* codes,      \
        const unsigned* aux, const u16* centroids, const float* values, const unsigned* table, \
        const i64* d_offsets, const i64* doc_index, int num_docs, float* out, int run_docs)    \
    {                                                                                          \
        maxsim_codec_wg_impl<TAG, D, P, PACKED>(qblocks, qrows, num_blocks, codes, aux,        \
                                                centroids, values, table, d_offsets,           \
                                                doc_index, num_docs, out, run_docs);           \
    }
#define INSTANTIATE_CODEC_WG(SUFFIX, TAG, D, P)                          \
    INSTANTIATE_CODEC_WG1(maxsim_codec_wg_##SUFFIX, TAG, D, P, false)    \
    INSTANTIATE_CODEC_WG1(maxsim_codec_wgp_##SUFFIX, TAG, D, P, true)
#define INSTANTIATE_CODEC_WG_DIMS(CODEC, TAG, P)      \
    INSTANTIATE_CODEC_WG(CODEC##_d64, TAG, 64, P)     \
    INSTANTIATE_CODEC_WG(CODEC##_d128, TAG, 128, P)

INSTANTIATE_CODEC_WG_DIMS(residual1, RESIDUAL, 1)
INSTANTIATE_CODEC_WG_DIMS(residual2, RESIDUAL, 2)
INSTANTIATE_CODEC_WG_DIMS(residual4, RESIDUAL, 4)
INSTANTIATE_CODEC_WG_DIMS(int8, INT8, 0)
INSTANTIATE_CODEC_WG_DIMS(fp8, FP8, 0)
INSTANTIATE_CODEC_WG(pq8_d64, PQ, 64, 8)
INSTANTIATE_CODEC_WG(pq16_d64, PQ, 64, 16)
INSTANTIATE_CODEC_WG(pq32_d64, PQ, 64, 32)
INSTANTIATE_CODEC_WG(pq8_d128, PQ, 128, 8)
INSTANTIATE_CODEC_WG(pq16_d128, PQ, 128, 16)
INSTANTIATE_CODEC_WG(pq32_d128, PQ, 128, 32)
INSTANTIATE_CODEC_WG(pq64_d128, PQ, 128, 64)
