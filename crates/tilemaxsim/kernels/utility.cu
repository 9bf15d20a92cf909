// The small utility kernels: score_raw's query gather (pack_queries_*), a dense batch's offsets
// (iota_offsets), the device's streaming read ceilings (read_ceiling: 16-byte loads;
// read_ceiling_bulk: the copy engine, as maxsim_bulk reads) and the sum of a long
// query's per-block partial scores (sum_qblocks, after maxsim_gemm / maxsim_wgmma), and rows
// copied to a wider pitch with zeros past their end (repitch_rows: padded corpora and queries).
#include "common.cuh"
#include "async_copy.cuh"

// Queries from device memory the engine borrows (`CudaScorer::score_raw`): query q's rows start
// at element src_start[q] of `src`, row_stride apart, d contiguous; they are copied, widened to
// f32, to rows dst_offsets[q] .. dst_offsets[q + 1] of `f32_out` (d wide, contiguous) and,
// where `blocks_out` is not null (16-bit types), as their raw bits into the 32-row blocks of
// the tensor-core kernels from block dst_block[q] on, zeros past the query's end. Block
// (q, y) copies rows y, y + gridDim.y, … of query q, its threads along d.
template <typename E>
__device__ __forceinline__ void pack_queries_impl(
    const typename E::T* __restrict__ src, const i64* __restrict__ src_start, i64 row_stride,
    const i64* __restrict__ dst_offsets, const int* __restrict__ dst_block, int dim,
    float* __restrict__ f32_out, u16* __restrict__ blocks_out)
{
    const int q = blockIdx.x;
    const i64 r0 = dst_offsets[q];
    const int rows = (int)(dst_offsets[q + 1] - r0);
    const int padded = blocks_out ? (rows + 31) / 32 * 32 : rows;
    u16* blocks = blocks_out ? blocks_out + (i64)dst_block[q] * 32 * dim : nullptr;
    for (int r = blockIdx.y; r < padded; r += gridDim.y) {
        const typename E::T* p = src + src_start[q] + r * row_stride;
        for (int c = threadIdx.x; c < dim; c += blockDim.x) {
            if (r < rows) {
                f32_out[(r0 + r) * dim + c] = E::load(p + c);
                if (sizeof(typename E::T) == 2 && blocks) blocks[(i64)r * dim + c] = *(const u16*)(p + c);
            } else {
                blocks[(i64)r * dim + c] = 0;
            }
        }
    }
}

#define INSTANTIATE_PACK(NAME, E)                                                              \
    extern "C" __global__ void __launch_bounds__(128) NAME(                                    \
        const E::T* src, const i64* src_start, i64 row_stride, const i64* dst_offsets,         \
        const int* dst_block, int dim, float* f32_out, u16* blocks_out)                        \
    {                                                                                          \
        pack_queries_impl<E>(src, src_start, row_stride, dst_offsets, dst_block, dim, f32_out, blocks_out); \
    }

INSTANTIATE_PACK(pack_queries_f32, F32)
INSTANTIATE_PACK(pack_queries_f16, F16)
INSTANTIATE_PACK(pack_queries_bf16, BF16)

// `rows` rows of `from` 16-bit units at `src` copied to `rows` rows of `to` ≥ `from` units at
// `dst`, zeros past `from` (an f32 is two units). Grid-stride, a thread a unit of the output.
// A padded corpus's rows after its upload (`pitch::pad_corpus`), a streamed chunk's as it comes
// in, and queries re-pitched to a padded corpus (`pitch::queries_at`).
extern "C" __global__ void repitch_rows(const u16* __restrict__ src, u16* __restrict__ dst, i64 rows,
                                        int from, int to)
{
    const i64 n = rows * to;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const i64 r = i / to;
        const int c = (int)(i - r * to);
        dst[i] = c < from ? src[r * from + c] : (u16)0;
    }
}

// out[i] = i * step for i in 0 ..= count: the offsets of a dense batch of `count` documents of
// `step` rows each (so the packed-corpus kernels can score it in place).
extern "C" __global__ void iota_offsets(i64* __restrict__ out, i64 count, i64 step)
{
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i <= count; i += (i64)gridDim.x * blockDim.x)
        out[i] = i * step;
}

// The device's streaming read ceiling: 16-byte loads, grid-stride, nothing written unless the
// impossible happens (so the compiler keeps every load).
extern "C" __global__ void read_ceiling(const uint4* __restrict__ p, i64 n, unsigned* __restrict__ sink)
{
    unsigned x = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const uint4 v = __ldg(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u) sink[0] = x;
}

// The streaming read ceiling of the copy engine: one thread a block brings `chunks` chunks of
// `chunk_bytes` (a multiple of 16) into a ring of `stages` shared-memory stages by bulk copies
// (completion on one mbarrier a stage), grid-stride, and reads one word of each; the bulk
// kernels read this way, and faster than 16-byte loads (H200: 103% of read_ceiling).
extern "C" __global__ void read_ceiling_bulk(const unsigned char* __restrict__ p, i64 chunks, int chunk_bytes,
                                             int stages, unsigned* __restrict__ sink)
{
#if __CUDA_ARCH__ >= 900
    extern __shared__ __attribute__((aligned(128))) unsigned char rc_smem[];
    unsigned long long* bars = (unsigned long long*)(rc_smem + (i64)stages * chunk_bytes);
    if (threadIdx.x != 0) return;
    for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[s]));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    i64 next = blockIdx.x;
    auto issue = [&](int s) {
        if (next < chunks) {
            const unsigned bar = smem_addr(&bars[s]);
            mbar_expect_tx(bar, (unsigned)chunk_bytes);
            bulk_load(smem_addr(rc_smem + (i64)s * chunk_bytes), p + next * chunk_bytes, (unsigned)chunk_bytes, bar);
        }
        next += gridDim.x;
    };
    for (int s = 0; s < stages; ++s) issue(s);
    unsigned x = 0;
    int i = 0;
    for (i64 c = blockIdx.x; c < chunks; c += gridDim.x, ++i) {
        const int s = i % stages;
        mbar_wait(smem_addr(&bars[s]), (unsigned)(i / stages) & 1u);
        x ^= *(const volatile unsigned*)(rc_smem + (i64)s * chunk_bytes);
        issue(s);
    }
    if (x == 0x9e3779b9u) sink[0] = x;
#endif
}

// The scores of queries longer than one 32-row block: out[q * num_docs + p] is the sum, in
// block order, of the partial scores of the query's blocks qblock_start[q] .. qblock_start[q+1].
extern "C" __global__ void sum_qblocks(const float* __restrict__ partial, const int* __restrict__ qblock_start,
                                       int num_queries, int num_docs, float* __restrict__ out)
{
    const i64 n = (i64)num_queries * num_docs;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const int q = (int)(i / num_docs), p = (int)(i % num_docs);
        float s = 0.f;
        for (int b = qblock_start[q]; b < qblock_start[q + 1]; ++b) s += partial[(i64)b * num_docs + p];
        out[i] = s;
    }
}
