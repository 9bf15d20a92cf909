// maxsim_codec_*: MaxSim over compressed corpora, decoded on chip and multiplied on the tensor
// cores; decoded vectors never touch memory. One kernel per codec and d (d in {32, 64, 96,
// 128}), the shape of maxsim_mma: one warp scores one (32-row query block, document) pair at a
// time over a persistent grid, the query's A fragments in registers, each document's codes
// read once with streaming loads, marked evict-first in L2 (CODEC_L2_HINTS: the residual's
// centroid-score gathers evict-last, so the codes' stream does not push them out), and the
// next task's document prefetched into L2 at each task's start (CODEC_L2_AHEAD; neither for
// pq). Codes decode straight into B fragments in the k order of the A fragments: thread c of a
// quad owns dimensions c·d/4 .. (c+1)·d/4 of every token, and its k16 step s takes dimensions
// c·d/4 + 4s .. + 3 (the dot product is blind to the order).
//
// A warp walks its document a group of CODEC_TILES n-tiles at a time, two groups in turn, each
// loaded (one address per array, kept in registers) while the one before it is multiplied;
// a document's last group loads the next task's first (int8 and fp8 load each group where they
// multiply it: faster for them). Tasks come from a counter in runs of
// CODEC_CLAIM where a warp has many (one query at MS MARCO scale: 8.8M tasks).
//
// - residual (PLAID, nbits 1/2/4): token = normalize(centroid[id] + weights[buckets]). The
//   residual decodes through a table in shared memory: at nbits 1 and 2 from a k16 step's
//   4·nbits code bits to its two f16 pairs (one 8-byte load; a half warp's loads on distinct
//   banks; 32 copies at nbits 2 on sm_90+, so one PRMT makes the address, else 16), at nbits 4 from 2·nbits bits to one pair (one copy per lane); the
//   centroid's part ⟨q_i, centroid⟩ is not decoded but
//   read from a per-call table CS[id][32 rows] (f16, `codec_centroid_scores`; a group's rows
//   gathered when its product starts, from ids loaded a group before: CODEC_LATE_GATHER) and
//   added on the tensor cores as one more k16 step per m-tile against an identity A fragment; the product
//   is then scaled by the token's inverse norm (`residual_inv_norms`, once per upload).
// - pq (M sub-spaces, 256 centroids): the codebook in shared memory as f16; each code picks
//   its sub-space centroid's f16 pairs.
// - int8: codes widened to f16 exactly (byte permute, one subtraction), the per-token scale
//   applied to the products.
// - fp8 (e4m3): codes moved into f16 bits exactly (an e4m3 value / 256), the per-token scale
//   times 256 applied to the products.
// Rows of a block past the query's rows are zero; tokens past the document's end are masked.
#include "common.cuh"
#include "mma_frag.cuh"
#include "async_copy.cuh"

#define CODEC_THREADS 128
// pq's blocks are larger: its f16 codebooks (shared memory, up to 64 KB a block) allow only 3
// blocks per SM, so 8 warps a block instead of 4 keep more warps resident (the kernel is
// bound by its codebook lookups at low occupancy: BENCHMARKS.md, ncu of the pq miss).
#define CODEC_PQ_THREADS 256
// n-tiles (8 tokens) whose codes are loaded before the first is multiplied.
#ifndef CODEC_TILES
#define CODEC_TILES 2
#endif
// Blocks per SM the registers of the one-warp kernels (but pq's) must allow: 3 keeps the
// residual at nbits 4 and d = 128 there (176 registers unbounded, 168 and 24 bytes of spills
// bounded); the rest fit anyway.
#ifndef CODEC_MIN_BLOCKS
#define CODEC_MIN_BLOCKS 3
#endif
// Whether a group's two tiles are multiplied in turn, step by step (two chains of products a
// warp), where both are in the document; never for pq. Measured on the H200 at one query
// (BENCHMARKS.md, 2026-11-29 eighth): residual +2.5%, int8 +6%, fp8 +8%, pq -20%.
#ifndef CODEC_ILP
#define CODEC_ILP 1
#endif
// Not kept: each tile's products in two accumulator sets by k16 step (even, odd; the centroid
// step in the odd set), summed before the fold, four chains of products a tile instead of two,
// interleaved at both product sites in the SASS. H200, one query, 1M x U[8,124], K = 262,144,
// two rounds (M docs/s): residual nbits 2 350.5 -> 329.1, nbits 1 345.0 -> 329.8, nbits 4
// 281.4 -> 267.4; exhaustive search at 8.8M documents, batch 1, 41.1 -> 38.8 queries/s
// (bench/results/h200/2026-12-03d/call1.log). The chains' latency is not what holds the kernel;
// the 16 sums a group and the registers (168, 16 bytes of spills at nbits 2) cost more.
// Whether a residual group's load reads only its tokens' ids, nothing computed from them there,
// its centroid scores gathered when the group's product starts (and added at its end): the ids
// have the product before it to land before the gather's address needs them, and the group
// holds an id a tile until then instead of 16 bytes of scores. H200, one query, 1M x U[8,124],
// K = 262,144 (M docs/s, one round, bench/results/h200/2026-12-03d/call3.log): residual nbits 2
// 353.0 -> 380.6, nbits 1 345.0 -> 392.0, nbits 4 281.7 -> 297.3 (its 108 bytes of spills
// gone); exhaustive search at 8.8M documents, batch 1, 41.0 / 41.1 -> 44.6 / 44.4 queries/s, the
// same run file. (Its first form added the query block's row to each id in the load, and that
// add waited on the load: 23% of ncu's stall samples, +2% only; call2.log.)
// Not kept: each group's gather issued halfway through the product before it (its ids loaded
// just before that product): residual nbits 2 376.2 -> 345.7, nbits 1 397.4 -> 345.3, nbits 4
// 302.7 -> 290.7, the search 44.7 -> 40.2 queries/s (bench/results/h200/2026-12-03e/call1.log).
#ifndef CODEC_LATE_GATHER
#define CODEC_LATE_GATHER 1
#endif
// Whether a group's load is one call from a selected source (this document's next group, else
// the next task's first; ptxas then has no join of two loads' registers to copy at, about 20
// moves a group): 1 for the residual at nbits 4 only, 2 for every codec loaded ahead, 0 never.
// H200, one query, 1M x U[8,124], K = 262,144, with CODEC_LATE_GATHER (M docs/s, one round,
// bench/results/h200/2026-12-03d/call3.log), every codec against none: residual nbits 4 297.3
// -> 311.2, but nbits 2 380.6 -> 373.7, nbits 1 392.0 -> 379.1, and the search 44.5 -> 43.6
// queries/s. (Without the late gather, the thirteenth session's try, it had been 3% slower.)
#ifndef CODEC_ONE_LOAD
#define CODEC_ONE_LOAD 1
#endif
// Whether the next task's document is prefetched into L2 (prefetch_l2) at each task's start.
// Measured on the H200 with CODEC_L2_HINTS (BENCHMARKS.md, 2026-11-29 ninth): residual +5% at
// one query, int8 +2%, fp8 within 1%.
// Not kept (bench/results/h200/2026-12-03e/call2.log, same units as below): the prefetch issued
// after the task's first product rather than at its start (the prefetch's addresses had waited
// on the next task's offsets, 3% of ncu's stall samples): nbits 2 384.5 -> 382.6, nbits 4
// 313.6 -> 306.0, the search 45.3 / 45.5 -> 45.2 / 45.2 queries/s.
#ifndef CODEC_L2_AHEAD
#define CODEC_L2_AHEAD 1
#endif
// Whether the one-warp kernels mark their loads for L2: the codes evict-first (each byte is
// read once) and the residual's centroid-score gathers evict-last (a 16.8 MB table at 262,144
// centroids, read 64 bytes a token, that the codes' stream would otherwise push out of L2).
// Measured on the H200 at one query, 1M documents, K = 262,144 (BENCHMARKS.md, 2026-11-29
// ninth): DRAM bytes read 6.18 -> 2.71 GB (the codes, ids and norms are 2.64), L2 hits 12% ->
// 56%, the kernel 3.27 -> 2.88 ms.
#ifndef CODEC_L2_HINTS
#define CODEC_L2_HINTS 1
#endif
// Not kept: each group's load also loading the ids of the group after it (so that group's
// gathers need not wait on its ids; branch wip/codec-ids-ahead): residual nbits 2, 1M x
// U[8,124], 338.3 -> 332.1 M docs/s (24 bytes of spills at 168 registers), nbits 1 +0.7%,
// nbits 4 -3.4% (H200, BENCHMARKS.md 2026-11-29 tenth). ncu of the landed kernel there: issue
// 46% of cycles, the tensor pipe 37% busy, most stalls on fixed-latency dependencies at 12
// warps an SM.
// Whether the residual at nbits 2 looks its k16 steps up in a table of 32 copies, 256 bytes an
// entry (64 KB a block), so one PRMT makes the lookup's address (the key byte beside the lane's
// offset) where a PRMT and an IMAD did (16 copies, 128 bytes an entry). Measured on the H200
// (BENCHMARKS.md, 2026-11-30 thirteenth): exhaustive search at 8.8M documents, batch 1,
// 39.5 -> 40.0 and 40.4 -> 40.8 queries/s (two calls); one query, 1M x U[8,124], +1.4%.
// Not kept (same section): each group loaded by one call from a selected source, which took the
// register moves at the branches' join away (instructions -6.5%) but issued the loads later
// (2.66 -> 2.75 ms, nbits 1 -3.6%); the query's A fragments in shared memory for one query
// block (four blocks an SM at 128 registers: 38.5 against 40.9 queries/s; five, with spills,
// 33.9), whose issue rate stayed at 46% with a third more warps
// (bench/results/h200/2026-11-30c/q1_kernels.patch).
// On sm_90+ only (the host sizes the table by the device): below it an SM's shared memory
// (164 KB on sm_80, 100 KB on sm_86) would fit fewer blocks of 64 KB than the registers allow.
#ifndef CODEC_LUT256
#define CODEC_LUT256 1
#endif
#if CODEC_LUT256 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CODEC_WIDE_TABLE 1
#else
#define CODEC_WIDE_TABLE 0
#endif
// Consecutive tasks a warp claims at a time (one atomic per CODEC_CLAIM tasks). H200, one
// query, 1M x U[8,124], K = 262,144, eight against four (two rounds, M docs/s): residual nbits 2
// 350.5 / 349.4 against 344.3 / 348.6, nbits 1 347.3 / 347.3 against 344.7 / 344.9, int8
// 322.6 / 320.5 against 321.7 / 320.1; 100K x 32 level (bench/results/h200/2026-11-30g/call2.log).
// ncu's stall samples there had put 1.1% on the shuffle of the claim's atomic result.
// Not kept (same run): the next task's ids prefetched into L1 rather than L2 (prefetch.global.L1):
// the id loads' stalls before the centroid-score gathers (16% of the samples) did not move,
// and int8 lost 1%.
#ifndef CODEC_CLAIM
#define CODEC_CLAIM 8
#endif

enum CodecTag { RESIDUAL = 0, PQ = 1, INT8 = 2, FP8 = 3 };

// The code bytes a thread reads per token, and per row.
template <int TAG, int D, int P> struct CodecShape {
    // P: nbits (residual), M (pq); unused for int8/fp8.
    static constexpr int ROW = TAG == RESIDUAL ? D * P / 8 : TAG == PQ ? P : D;
    static constexpr int PB = ROW / 4;
    static constexpr int WORDS = (PB + 3) / 4;
};

// L2 cache policies (createpolicy, sm_80+) for loads that are read once, and for loads that
// should stay.
__device__ __forceinline__ unsigned long long l2_evict_first() {
    unsigned long long p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ unsigned long long l2_evict_last() {
    unsigned long long p;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}
// 16 bytes at p (read-only, not kept in L1), kept in L2 by `policy`.
__device__ __forceinline__ U4 ld_stream_hint(const void* p, unsigned long long policy) {
    U4 v;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
    return v;
}

// PB bytes at p into words (little-endian), with the widest loads the alignment allows: the
// row is 4·PB bytes and the thread's piece starts at c·PB, so p is aligned to PB's largest
// power-of-two factor (codes start 256-byte aligned).
template <int PB, bool HINT>
__device__ __forceinline__ void load_codes(unsigned (&w)[(PB + 3) / 4], const unsigned char* p) {
    if constexpr (PB % 16 == 0) {
#pragma unroll
        for (int i = 0; i < PB / 16; ++i) {
            const U4 v = HINT ? ld_stream_hint(p + 16 * i, l2_evict_first()) : ld_stream(p + 16 * i);
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
    } else if constexpr (PB % 8 == 0) {
#pragma unroll
        for (int i = 0; i < PB / 8; ++i) {
            if constexpr (HINT)
                asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;"
                    : "=r"(w[2 * i]), "=r"(w[2 * i + 1]) : "l"(p + 8 * i), "l"(l2_evict_first()));
            else
                asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(w[2 * i]), "=r"(w[2 * i + 1]) : "l"(p + 8 * i));
        }
    } else if constexpr (PB % 4 == 0) {
#pragma unroll
        for (int i = 0; i < PB / 4; ++i) asm("ld.global.nc.u32 %0, [%1];" : "=r"(w[i]) : "l"(p + 4 * i));
    } else {
#pragma unroll
        for (int i = 0; i < (PB + 3) / 4; ++i) w[i] = 0u;
#pragma unroll
        for (int i = 0; i < PB; ++i) w[i / 4] |= (unsigned)__ldg(p + i) << (8 * (i % 4));
    }
}

// Byte b of the loaded words.
template <int N>
__device__ __forceinline__ unsigned code_byte(const unsigned (&w)[N], int b) {
    return (w[b / 4] >> (8 * (b % 4))) & 0xffu;
}

// int8 → f16 pairs: bytes (lo, hi) of `x` (signed) as two exact halves.
__device__ __forceinline__ void i8_to_f16x2(unsigned x, unsigned& b0, unsigned& b1) {
    const unsigned u = x ^ 0x80808080u;  // x + 128 as unsigned bytes
    unsigned lo, hi;
    asm("prmt.b32 %0, %1, %2, 0x7170;" : "=r"(lo) : "r"(u), "r"(0x64646464u));  // 1024 + u0, 1024 + u1
    asm("prmt.b32 %0, %1, %2, 0x7372;" : "=r"(hi) : "r"(u), "r"(0x64646464u));
    const unsigned bias = 0x64806480u;  // 1152 = 1024 + 128
    asm("sub.f16x2 %0, %1, %2;" : "=r"(b0) : "r"(lo), "r"(bias));
    asm("sub.f16x2 %0, %1, %2;" : "=r"(b1) : "r"(hi), "r"(bias));
}

// e4m3 → f16 pairs, exactly value / 256: the sign to bit 15, exponent and mantissa shifted by 7.
__device__ __forceinline__ void e4m3_to_f16x2(unsigned x, unsigned& b0, unsigned& b1) {
    unsigned s0, s1;
    asm("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(s0) : "r"(x));  // bytes 0, 1 to the high bytes of each half
    asm("prmt.b32 %0, %1, 0, 0x3424;" : "=r"(s1) : "r"(x));  // bytes 2, 3
    b0 = (s0 & 0x80008000u) | ((s0 >> 1) & 0x3f803f80u);
    b1 = (s1 & 0x80008000u) | ((s1 >> 1) & 0x3f803f80u);
}

// Pair p of a thread's residual dimensions from its code words (2·NB bits a pair, the first
// dimension's bits highest: PLAID's packbits order) as an f16 pair, through the pair table in
// shared memory, one copy per lane (`table[key]` at tab[key * 32 + lane]: no bank conflicts).
// With p known at compile time, a shift and a mask give the key's byte offset (key · 128, its
// 32 lanes' words) straight from the word, and the lane's word is or-ed in: 3 instructions a
// lookup where key << 5 | lane took 5.
template <int NB, int N>
__device__ __forceinline__ unsigned residual_pair(const unsigned (&raw)[N], int p, const unsigned* tab, int lane) {
    constexpr int BITS = 2 * NB;
    const int bit = p * BITS, byte = bit / 8, off = bit % 8;
    const int sh = 8 * (byte % 4) + 8 - off - BITS;  // the key's lowest bit in its word
    const unsigned w = raw[byte / 4];
    const unsigned shifted = sh >= 7 ? w >> (sh - 7) : w << (7 - sh);
    unsigned at;  // (shifted & mask) | lane · 4 in one LOP3 (the compiler made it LOP3 + IADD)
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(at) : "r"(shifted), "r"(((1u << BITS) - 1u) << 7), "r"((unsigned)lane << 2));
    return *(const unsigned*)((const char*)tab + at);
}

// Whether a residual kernel at nbits NB looks a k16 step's two f16 pairs up at once (nbits 1
// and 2: 16 or 256 entries of 8 bytes, 16 copies; at nbits 4 the 65,536 entries would not fit),
// and the table's entries (the step's 4·NB code bits).
template <int NB> struct StepLut {
    static constexpr bool ON = NB == 1 || NB == 2;
    static constexpr int ENTRIES = ON ? 1 << (4 * NB) : 0;
    // Copies of each entry (one a lane, or one a half warp's lane) and bytes an entry.
    static constexpr bool WIDE = NB == 2 && CODEC_WIDE_TABLE;
    static constexpr int COPIES = WIDE ? 32 : 16;
    static constexpr int STRIDE = 8 * COPIES;
};

// The two f16 pairs of k16 step s (pairs 2s and 2s + 1, whose 4·NB code bits are adjacent, the
// first pair's highest) from the step table: entry `key` for lane slot l at byte key·STRIDE + 8l.
// 16 copies (`lanebase`: the table's shared address plus 8 · (lane % 16); a half warp's 8-byte
// loads fall on distinct banks): the key, then key · 128 + lanebase. 32 copies (nbits 2 on
// sm_90+, CODEC_WIDE_TABLE; `lanebase` is 8 · lane, `tab` the table's shared address): one PRMT puts the key
// byte above the lane's offset byte, key · 256 + 8 · lane.
template <int NB, bool WIDE, int N>
__device__ __forceinline__ void step_pairs(const unsigned (&raw)[N], int s, unsigned lanebase, unsigned tab, unsigned& b0, unsigned& b1) {
    constexpr int BITS = 4 * NB;
    const int bit = s * BITS, byte = bit / 8, off = bit % 8;
    const int sh = 8 * (byte % 4) + 8 - off - BITS;
    unsigned at;
    if constexpr (WIDE) {
        asm("prmt.b32 %0, %1, %2, %3;" : "=r"(at) : "r"(raw[byte / 4]), "r"(lanebase), "r"(0x5504u | ((unsigned)(byte % 4) << 4)));
        at += tab;
    } else {
        unsigned key;
        if constexpr (BITS == 8) {  // a byte: one PRMT (the compiler made it SHF + LOP3)
            asm("prmt.b32 %0, %1, 0, %2;" : "=r"(key) : "r"(raw[byte / 4]), "r"(0x4440u | (unsigned)(byte % 4)));
        } else {
            key = (raw[byte / 4] >> sh) & ((1u << BITS) - 1u);
        }
        at = key * 128u + lanebase;
    }
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(at));
}

// The first 32 128-byte lines of `len` items of SIZE bytes from `p` into L2, a line a lane (a
// hint: each address lies inside the range, so none is past an allocation; a longer range's
// rest is left). In 32 bits: the lines past the first 32 are never asked for.
template <int SIZE>
__device__ __forceinline__ void prefetch_l2(const void* p, int len, int lane) {
    const int bytes = min(len, 4096) * SIZE;
    const int at = max(lane * 128 - (int)((unsigned)(size_t)p & 127u), 0);  // lane 0's: p
    if (at < bytes) asm volatile("prefetch.global.L2 [%0];" :: "l"((const char*)p + at));
}

// `p` as a value the compiler cannot see into, so it keeps it in registers.
template <typename T>
__device__ __forceinline__ T* opaque(T* p) {
    asm("" : "+l"(p));
    return p;
}

template <int TAG, int D, int P>
__device__ __forceinline__ void maxsim_codec_impl(
    const u16* __restrict__ qblocks, const int* __restrict__ qrows, int num_blocks,
    const unsigned char* __restrict__ codes, const unsigned* __restrict__ aux,
    const float* __restrict__ inv_norm, const u16* __restrict__ cs, int num_centroids,
    const unsigned* __restrict__ table, const i64* __restrict__ d_offsets,
    const i64* __restrict__ doc_index, int num_docs, float* __restrict__ out,
    unsigned long long* __restrict__ next_task)
{
    using Shape = CodecShape<TAG, D, P>;
    constexpr int S = D / 16;              // k16 steps per thread-quarter of d
    constexpr int PB = Shape::PB;
    constexpr int ROW = Shape::ROW;
    constexpr int NB = TAG == RESIDUAL ? P : 8;
    constexpr int KEYS = TAG == RESIDUAL ? 1 << (2 * NB) : 0;  // residual table keys
    constexpr int DSUB = TAG == PQ ? D / P : 1;
    // Whether a group's codes are loaded one group ahead, across documents too.
    constexpr bool AHEAD = TAG == PQ || TAG == RESIDUAL;
    // Whether the codes are marked evict-first, and the next task's document prefetched into
    // L2: not for pq (not measured with them; it has no per-token words to prefetch).
    constexpr bool HINTS = CODEC_L2_HINTS && TAG != PQ;
    constexpr bool L2_AHEAD = CODEC_L2_AHEAD && TAG != PQ;
    constexpr bool LATE = CODEC_LATE_GATHER && TAG == RESIDUAL;
    constexpr bool ONE_LOAD = CODEC_ONE_LOAD == 2 || (CODEC_ONE_LOAD == 1 && TAG == RESIDUAL && P == 4);
    extern __shared__ unsigned smem[];

    // Tables into shared memory: the residual's step table (nbits 1, 2: step_pairs) or pair
    // table, one copy per lane (`table[key]` at smem[key * 32 + lane]); the pq codebook as f16
    // [M][256][dsub].
    using Lut = StepLut<NB>;
    constexpr bool STEP = TAG == RESIDUAL && Lut::ON;
    if constexpr (STEP) {
        // Word i: entry i / (2 · COPIES), slot (i / 2) % COPIES, half i % 2 (the first pair in
        // the low word).
        constexpr int KB = 2 * NB, WORDS = 2 * Lut::COPIES;
        for (int i = threadIdx.x; i < Lut::ENTRIES * WORDS; i += blockDim.x) {
            const int key = i / WORDS;
            smem[i] = table[(i & 1) ? key & ((1 << KB) - 1) : key >> KB];
        }
    } else if constexpr (TAG == RESIDUAL) {
        for (int i = threadIdx.x; i < KEYS * 32; i += blockDim.x) smem[i] = table[i >> 5];
    } else if constexpr (TAG == PQ) {
        for (int i = threadIdx.x; i < D * 256 / 2; i += blockDim.x) smem[i] = table[i];
    }
    __syncthreads();

    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const unsigned tab = smem_addr(smem);
    const unsigned lanebase = Lut::WIDE ? 8u * (unsigned)lane : tab + 8u * (unsigned)(lane & 15);
    const unsigned warp = (unsigned)(((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const unsigned nwarps = (unsigned)(((i64)gridDim.x * blockDim.x) >> 5);
    const unsigned tasks = (unsigned)num_blocks * (unsigned)num_docs;

    // The identity A fragments of the centroid step: row r of an m-tile takes k = r.
    unsigned eye[4];
    {
        const unsigned one = 0x3c00u;
        unsigned e = (g == 2 * c ? one : 0u) | (g == 2 * c + 1 ? one << 16 : 0u);
        // Opaque to the compiler, so it keeps the fragment rather than rebuilding it every tile.
        asm volatile("mov.b32 %0, %0;" : "+r"(e));
        eye[0] = e; eye[1] = 0u; eye[2] = 0u; eye[3] = e;
    }

    unsigned a[2][S][4];
    int cur_q = -1, nq = 0;
    // Task t's query block, its pair (the output's column) and its document's first token and
    // length (tasks < 2^31: the host checks, so task indices are 32-bit, and so are the claims'
    // runs, which pass the last task by under nwarps · 2 · CODEC_CLAIM).
    // (One query block, the batch-1 search's case, skips the division.)
    auto extent = [&](unsigned t, int& qb, int& pair, i64& start, int& len) {
        const unsigned p = num_blocks == 1 ? t : t % (unsigned)num_docs;
        qb = num_blocks == 1 ? 0 : (int)(t / (unsigned)num_docs);
        pair = (int)p;
        const i64 doc = doc_index ? doc_index[p] : (i64)p;
        start = d_offsets[doc];
        len = (int)(d_offsets[doc + 1] - start);
    };
    // The warp's claimed run of tasks [run, run_end): with the counter (many tasks a warp)
    // runs of CODEC_CLAIM, the first at warp·CODEC_CLAIM, then one atomic a run; without it
    // (a few tasks a warp, where runs would leave warps idle) every nwarps-th task.
    const unsigned chunk = next_task ? CODEC_CLAIM : 1;
    unsigned run = warp * chunk, run_end = run + chunk;
    auto claim = [&]() -> unsigned {
        if (run == run_end) {
            unsigned r = run_end - chunk + nwarps * chunk;
            if (next_task) {
                unsigned long long t = 0;
                if (lane == 0) t = atomicAdd(next_task, 1ull);
                r = (nwarps + (unsigned)__shfl_sync(0xffffffffu, t, 0)) * chunk;
            }
            run = r;
            run_end = r + chunk;
        }
        const unsigned t = run++;
        return t < tasks ? t : tasks;
    };
    // One group of CODEC_TILES n-tiles: the codes of each tile's token g (this thread's part),
    // the residual's centroid scores of that token (or its row of them, until gathered), the
    // scales of columns 2c, 2c + 1.
    struct Group {
        unsigned raw[CODEC_TILES][Shape::WORDS];
        U4 cen[CODEC_TILES];
        unsigned id[CODEC_TILES];  // CODEC_LATE_GATHER: the tokens' ids, not yet gathered,
        unsigned qrow;             // and their query block's first row of CS
        float sc[CODEC_TILES][2];
    };
    // Where a document's arrays start for this thread: its codes (token g's part), ids or
    // scales, inverse norms, and (residual) its query block's centroid scores.
    struct Src {
        const unsigned char* cp;
        const unsigned* ap;
        const float* np;
        const u16* csb;
        // CODEC_LATE_GATHER: the query block's first row of CS (under 2^32: CS holds 64 bytes a
        // row on the device, so its rows fit in far less than 2^32 · 64 bytes)
        unsigned qrow;
    };
    auto source = [&](i64 first, int qb) {
        Src r;
        r.cp = codes + first * ROW + (g * ROW + c * PB);
        r.ap = aux + first;
        r.np = inv_norm + first;
        r.csb = TAG == RESIDUAL ? opaque(cs + (i64)qb * num_centroids * 32 + c * 8) : nullptr;
        r.qrow = (unsigned)qb * (unsigned)num_centroids;
        return r;
    };
    // The group of a document from its token t1 on, `rem` (> 0 but for an empty document)
    // tokens of it left: one address per array, the tiles and columns at fixed offsets from
    // it. Tokens past the document are not loaded (their codes zero, their id 0); a group
    // whole inside it takes loads of its own, with no bound compared and no register zeroed
    // (H200, one query, 1M x U[8,124], K = 262,144, M docs/s, against the predicated loads
    // alone: residual nbits 2 374.9 -> 384.5, nbits 1 396.5 -> 400.7, nbits 4 301.4 -> 313.6;
    // exhaustive search at 8.8M documents, batch 1, 45.0 / 45.0 -> 45.3 / 45.5 queries/s, the same
    // run file; bench/results/h200/2026-12-03e/call2.log).
    // (The addresses pass through `opaque`: else the compiler rebuilds each load's address
    // from the kernel's parameters under its predicate, four instructions a load.)
    auto load_group = [&](Group& G, const Src& src, int t1, int rem) {
        const unsigned char* cp = opaque(src.cp + (i64)t1 * ROW);
        const unsigned* ip = opaque(src.ap + t1 + g);       // residual ids
        const unsigned* sp = opaque(src.ap + t1 + 2 * c);   // int8 / fp8 scales
        const float* np = opaque(src.np + t1 + 2 * c);      // residual inverse norms
        if constexpr (LATE) G.qrow = src.qrow;
        auto tiles = [&](auto full) {  // Flag<true>: every token of the group is in the document
            constexpr bool FULL = decltype(full)::value;
#pragma unroll
            for (int tt = 0; tt < CODEC_TILES; ++tt) {
                const int tok = tt * 8 + g;
                if constexpr (!FULL) {
#pragma unroll
                    for (int i = 0; i < Shape::WORDS; ++i) G.raw[tt][i] = 0u;
                }
                if (FULL || tok < rem) load_codes<PB, HINTS>(G.raw[tt], cp + tt * 8 * ROW);
                if constexpr (TAG == RESIDUAL) {
                    const unsigned id = FULL || tok < rem ? __ldg(ip + tt * 8) : 0u;
                    if constexpr (LATE) {
                        G.id[tt] = id;  // nothing computed from it here: that would wait on the load
                    } else {
                        const u16* row = src.csb + (size_t)id * 32;
                        G.cen[tt] = HINTS ? ld_stream_hint(row, l2_evict_last()) : ld_stream(row);
                    }
                }
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    float v = 0.f;
                    if (FULL || tt * 8 + 2 * c + j < rem) {
                        if constexpr (TAG == RESIDUAL) v = __ldg(np + tt * 8 + j);
                        else if constexpr (TAG == INT8) v = __uint_as_float(__ldg(sp + tt * 8 + j));
                        else if constexpr (TAG == FP8) v = __uint_as_float(__ldg(sp + tt * 8 + j)) * 256.f;
                    }
                    G.sc[tt][j] = v;
                }
            }
        };
        if (rem >= 8 * CODEC_TILES) tiles(Flag<true>{});
        else tiles(Flag<false>{});
    };
    // k16 step s of a tile's B fragment from its codes.
    auto decode_step = [&](const unsigned (&raw)[Shape::WORDS], int s, unsigned& b0, unsigned& b1) {
        if constexpr (STEP) {
            step_pairs<NB, Lut::WIDE>(raw, s, lanebase, tab, b0, b1);
        } else if constexpr (TAG == RESIDUAL) {
            b0 = residual_pair<NB>(raw, 2 * s, smem, lane);
            b1 = residual_pair<NB>(raw, 2 * s + 1, smem, lane);
        } else if constexpr (TAG == PQ) {
            const u16* cb = (const u16*)smem;
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int x = 4 * s + 2 * j;             // dimension within the thread's quarter
                const int m = x / DSUB, off = x % DSUB;  // sub-space within the quarter
                const unsigned code = code_byte(raw, m);
                const int mg = c * (P / 4) + m;
                const unsigned v = *(const unsigned*)(cb + ((mg * 256 + (int)code) * DSUB + off));
                if (j == 0) b0 = v; else b1 = v;
            }
        } else if constexpr (TAG == INT8) {
            i8_to_f16x2(raw[s], b0, b1);
        } else {
            e4m3_to_f16x2(raw[s], b0, b1);
        }
    };
    float best[2][2];
    // Query block qb's A fragments into registers.
    auto load_query = [&](int qb) {
        cur_q = qb;
        nq = qrows[qb];
        const unsigned* q = (const unsigned*)(qblocks + (i64)qb * 32 * D);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int s = 0; s < S; ++s) {
                const int w = (c * (D / 4) + 4 * s) / 2;
                const unsigned* r0 = q + (mt * 16 + g) * (D / 2);
                const unsigned* r8 = q + (mt * 16 + g + 8) * (D / 2);
                a[mt][s][0] = r0[w];
                a[mt][s][1] = r8[w];
                a[mt][s][2] = r0[w + 1];
                a[mt][s][3] = r8[w + 1];
            }
    };
    // k16 step s of tile tt's product.
    auto step = [&](const Group& G, int tt, int s, float (&acc)[2][4]) {
        unsigned b0, b1;
        decode_step(G.raw[tt], s, b0, b1);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) Mma<false>::run(acc[mt], a[mt][s], b0, b1);
    };
    // Tile tt's product finished (the centroid scores added, the scales applied) and folded
    // into `best`: columns col, col + 1 of a document of nd tokens.
    auto finish = [&](const Group& G, int tt, float (&acc)[2][4], int col, int nd) {
        if constexpr (TAG == RESIDUAL) {
            Mma<false>::run(acc[0], eye, G.cen[tt].x, G.cen[tt].y);
            Mma<false>::run(acc[1], eye, G.cen[tt].z, G.cen[tt].w);
        }
        if constexpr (TAG != PQ) {
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                acc[mt][0] *= G.sc[tt][0]; acc[mt][1] *= G.sc[tt][1];
                acc[mt][2] *= G.sc[tt][0]; acc[mt][3] *= G.sc[tt][1];
            }
        }
        if (col - 2 * c + 8 <= nd) {  // a full tile: no column is past the end
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                best[mt][0] = max_nan(best[mt][0], max_nan(acc[mt][0], acc[mt][1]));
                best[mt][1] = max_nan(best[mt][1], max_nan(acc[mt][2], acc[mt][3]));
            }
        } else {
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) fold_max(best[mt], acc[mt], col, nd);
        }
    };
    // CODEC_LATE_GATHER: the group's centroid-score rows gathered (at its product's start).
    const u16* cs_lane = opaque(cs + c * 8);
    auto gather = [&](Group& G) {
        if constexpr (LATE) {
#pragma unroll
            for (int tt = 0; tt < CODEC_TILES; ++tt) {
                const u16* row = cs_lane + (size_t)(G.qrow + G.id[tt]) * 32;  // under 2^32 (Src::qrow)
                G.cen[tt] = HINTS ? ld_stream_hint(row, l2_evict_last()) : ld_stream(row);
            }
        }
    };
    // The group of tokens t0 .. t0 + 8·CODEC_TILES of a document of nd tokens into `best`.
    auto multiply = [&](const Group& G, int t0, int nd) {
        if constexpr (CODEC_ILP && CODEC_TILES == 2 && TAG != PQ) {
            // Both tiles' steps in turn: two independent chains of products a warp.
            if (t0 + 8 < nd) {
                float acc[2][2][4] = {};
#pragma unroll
                for (int s = 0; s < S; ++s) {
                    step(G, 0, s, acc[0]);
                    step(G, 1, s, acc[1]);
                }
                finish(G, 0, acc[0], t0 + 2 * c, nd);
                finish(G, 1, acc[1], t0 + 8 + 2 * c, nd);
                return;
            }
        }
#pragma unroll
        for (int tt = 0; tt < CODEC_TILES; ++tt) {
            if (t0 + tt * 8 < nd) {  // uniform across the warp
                float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
                for (int s = 0; s < S; ++s) step(G, tt, s, acc);
                finish(G, tt, acc, t0 + tt * 8 + 2 * c, nd);
            }
        }
    };
    constexpr int GT = 8 * CODEC_TILES;  // tokens a group
    // The next task's document into L2 (CODEC_L2_AHEAD): its groups' loads and its ids'
    // centroid-score gathers then wait on L2, not on DRAM and L2 in turn.
    auto prefetch_next = [&](unsigned nxt, i64 start, int len) {
        if (nxt < tasks) {
            prefetch_l2<ROW>(codes + start * ROW, len, lane);
            prefetch_l2<4>(aux + start, len, lane);
            if constexpr (TAG == RESIDUAL) prefetch_l2<4>(inv_norm + start, len, lane);
        }
    };
    Group g0, g1;

    int qi = 0, nqi = 0, pair = 0, npair = 0;
    i64 d0 = 0, nd0 = 0;
    int nd = 0, nnd = 0;
    const unsigned first = claim();
    if (first < tasks) extent(first, qi, pair, d0, nd);
    unsigned next = first < tasks ? claim() : tasks;
    if (AHEAD && first < tasks) load_group(g0, source(d0, qi), 0, nd);
    for (unsigned task = first; task < tasks;) {
        if (next < tasks) extent(next, nqi, npair, nd0, nnd);
        if constexpr (L2_AHEAD) prefetch_next(next, nd0, nnd);
        const unsigned after = next < tasks ? claim() : tasks;
        if (qi != cur_q) load_query(qi);
        best[0][0] = best[0][1] = best[1][0] = best[1][1] = NEG_INF;
        const Src src = source(d0, qi);
        if constexpr (AHEAD) {
            // Two groups in turn (g0, then g1), each loaded one group ahead of its product, the
            // document's last group loading the next task's first (so their latency hides behind
            // the work); no group is copied but, where a document ends on g0, its successor's.
            // (Measured on the H200: PQ +28%, residual +2%, int8 and fp8 5-8% slower ahead, so
            // those two load each group where they multiply it.)
            // Not kept: the next document started on g1 by a flag where this one ends on g0,
            // instead of the copy (its SASS had both products' tiles interleaved, where the copy
            // leaves one site's two tiles in turn). H200, one query, 1M x U[8,124], K = 262,144,
            // three rounds: residual nbits 2 352.5 -> 321.4 M docs/s, nbits 1 346.3 -> 301.9,
            // nbits 4 282.0 -> 265.9, pq 519.7 -> 414.8; exhaustive search at 8.8M documents,
            // batch 1, 41.3 -> 38.0 queries/s (bench/results/h200/2026-12-01/call1.log).
            auto ahead = [&](Group& G, int t1) {
                if constexpr (ONE_LOAD) {
                    // One load from a selected source (no join of two loads' registers): this
                    // document's group, else the next task's first, else nothing (rem 0).
                    const bool same = t1 < nd;
                    const Src nsrc = source(nd0, nqi);
                    Src from;
                    from.cp = same ? src.cp : nsrc.cp;
                    from.ap = same ? src.ap : nsrc.ap;
                    from.np = same ? src.np : nsrc.np;
                    from.csb = same ? src.csb : nsrc.csb;
                    from.qrow = same ? src.qrow : nsrc.qrow;
                    load_group(G, from, same ? t1 : 0, same ? nd - t1 : next < tasks ? nnd : 0);
                } else {
                    if (t1 < nd) load_group(G, src, t1, nd - t1);
                    else if (next < tasks) load_group(G, source(nd0, nqi), 0, nnd);
                }
            };
            for (int t0 = 0;; ) {
                gather(g0);
                ahead(g1, t0 + GT);
                multiply(g0, t0, nd);
                t0 += GT;
                if (t0 >= nd) { g0 = g1; break; }
                gather(g1);
                ahead(g0, t0 + GT);
                multiply(g1, t0, nd);
                t0 += GT;
                if (t0 >= nd) break;
            }
        } else {
            for (int t0 = 0; t0 < nd; t0 += GT) {
                load_group(g0, src, t0, nd - t0);
                multiply(g0, t0, nd);
            }
        }
        const float s = block_score(best, nq, g);
        if (lane == 0) out[(i64)qi * num_docs + pair] = s;
        qi = nqi;
        pair = npair;
        d0 = nd0;
        nd = nnd;
        task = next;
        next = after;
    }
}

#define INSTANTIATE_CODEC(NAME, TAG, D, P)                                                     \
    extern "C" __global__ void __launch_bounds__(TAG == PQ ? CODEC_PQ_THREADS : CODEC_THREADS, TAG == PQ ? 1 : CODEC_MIN_BLOCKS) NAME( \
        const u16* qblocks, const int* qrows, int num_blocks, const unsigned char* codes,      \
        const unsigned* aux, const float* inv_norm, const u16* cs, int num_centroids,          \
        const unsigned* table, const i64* d_offsets, const i64* doc_index, int num_docs,       \
        float* out, unsigned long long* next_task)                                             \
    {                                                                                          \
        maxsim_codec_impl<TAG, D, P>(qblocks, qrows, num_blocks, codes, aux, inv_norm, cs,     \
                                     num_centroids, table, d_offsets, doc_index, num_docs,     \
                                     out, next_task);                                          \
    }

#define INSTANTIATE_CODEC_DIMS(PREFIX, TAG, P)          \
    INSTANTIATE_CODEC(PREFIX##_d32, TAG, 32, P)         \
    INSTANTIATE_CODEC(PREFIX##_d64, TAG, 64, P)         \
    INSTANTIATE_CODEC(PREFIX##_d96, TAG, 96, P)         \
    INSTANTIATE_CODEC(PREFIX##_d128, TAG, 128, P)

INSTANTIATE_CODEC_DIMS(maxsim_codec_residual1, RESIDUAL, 1)
INSTANTIATE_CODEC_DIMS(maxsim_codec_residual2, RESIDUAL, 2)
INSTANTIATE_CODEC_DIMS(maxsim_codec_residual4, RESIDUAL, 4)
INSTANTIATE_CODEC_DIMS(maxsim_codec_int8, INT8, 0)
INSTANTIATE_CODEC_DIMS(maxsim_codec_fp8, FP8, 0)
// pq: M sub-spaces of an even width (d / M), M a multiple of 4.
INSTANTIATE_CODEC(maxsim_codec_pq8_d32, PQ, 32, 8)
INSTANTIATE_CODEC(maxsim_codec_pq16_d32, PQ, 32, 16)
INSTANTIATE_CODEC(maxsim_codec_pq8_d64, PQ, 64, 8)
INSTANTIATE_CODEC(maxsim_codec_pq16_d64, PQ, 64, 16)
INSTANTIATE_CODEC(maxsim_codec_pq32_d64, PQ, 64, 32)
INSTANTIATE_CODEC(maxsim_codec_pq8_d96, PQ, 96, 8)
INSTANTIATE_CODEC(maxsim_codec_pq16_d96, PQ, 96, 16)
INSTANTIATE_CODEC(maxsim_codec_pq8_d128, PQ, 128, 8)
INSTANTIATE_CODEC(maxsim_codec_pq16_d128, PQ, 128, 16)
INSTANTIATE_CODEC(maxsim_codec_pq32_d128, PQ, 128, 32)
INSTANTIATE_CODEC(maxsim_codec_pq64_d128, PQ, 128, 64)
