// ---------------------------------------------------------------------------------------------
// topk_select: the k best of each row of a [Q][n] score matrix, in the library's order (score
// descending, -0 == +0, ties to the lower index, NaN last). One block per query row.
//
// Each score maps to an order-preserving 32-bit key (NaN to 0, the lowest). A radix select of
// four 8-bit passes finds T, the k-th largest key, and `take`, how many keys equal to T belong
// in the top k. A last pass writes every key above T (there are k - take of them) to slots
// [0, k - take) in any order, and the first `take` keys equal to T in index order (a block-wide
// ordered count) to [k - take, k), each with its score. The host sorts the k hits. Needs 1 <= k <= n.
#define TOPK_THREADS 1024

__device__ __forceinline__ unsigned topk_key(float f) {
    unsigned b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;  // NaN: after every number
    if (b == 0x80000000u) b = 0u;                     // -0 ties with +0
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

extern "C" __global__ void __launch_bounds__(TOPK_THREADS) topk_select(
    const float* __restrict__ scores, int n, int k, int* __restrict__ out_index,
    float* __restrict__ out_score)
{
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix, s_take, s_gt, s_eq_taken;
    __shared__ unsigned warp_count[TOPK_THREADS / 32];
    const float* row = scores + (i64)blockIdx.x * n;
    int* out = out_index + (i64)blockIdx.x * k;
    float* out_s = out_score + (i64)blockIdx.x * k;
    const int tid = threadIdx.x;

    unsigned prefix = 0u, mask = 0u, take = (unsigned)k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += TOPK_THREADS) hist[i] = 0u;
        __syncthreads();
        for (int i = tid; i < n; i += TOPK_THREADS) {
            const unsigned key = topk_key(row[i]);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (tid == 0) {
            // The digit of the k-th key: walk the bins from the top until `take` is reached.
            unsigned above = 0u, digit = 0u;
            for (int b = 255; b >= 0; --b) {
                if (above + hist[b] >= take) { digit = (unsigned)b; break; }
                above += hist[b];
            }
            s_prefix = prefix | (digit << shift);
            s_take = take - above;
        }
        __syncthreads();
        prefix = s_prefix;
        take = s_take;
        mask |= 255u << shift;
    }
    // prefix is T; `take` keys equal to T join the k - take keys above it.
    const unsigned above = (unsigned)k - take;
    if (tid == 0) { s_gt = 0u; s_eq_taken = 0u; }
    __syncthreads();
    const int lane = tid & 31, warp = tid >> 5;
    for (int base = 0; base < n; base += TOPK_THREADS) {
        const int i = base + tid;
        const unsigned key = i < n ? topk_key(row[i]) : 0u;
        const bool gt = i < n && key > prefix;
        const bool eq = i < n && key == prefix;
        if (gt) {
            const unsigned slot = atomicAdd(&s_gt, 1u);
            out[slot] = i;
            out_s[slot] = row[i];
        }
        const unsigned ballot = __ballot_sync(0xffffffffu, eq);
        if (lane == 0) warp_count[warp] = __popc(ballot);
        __syncthreads();
        unsigned before = s_eq_taken + __popc(ballot & ((1u << lane) - 1u));
        unsigned total = 0u;
        for (int w = 0; w < TOPK_THREADS / 32; ++w) {
            if (w < warp) before += warp_count[w];
            total += warp_count[w];
        }
        if (eq && before < take) {
            out[above + before] = i;
            out_s[above + before] = row[i];
        }
        __syncthreads();
        if (tid == 0) s_eq_taken += total;
        __syncthreads();
    }
}
