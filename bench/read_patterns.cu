// Which way of streaming memory reads HBM fastest on this device? The peers read 3.16-3.21 TB/s
// on the H100 while our read_ceiling kernel (16-byte loads, grid-stride) measures 3.09; this
// times the candidate patterns on one 4 GiB buffer (far past L2), CUDA events, median of 15
// after 3 warm-ups. On the device: nvcc -O3 -std=c++17 -arch=sm_90a -o rp read_patterns.cu && ./rp
// (./rp small: only the B = 1K / 10K rotated reads and the empty kernel).
//   ldg       16-byte loads, grid-stride, U independent loads in flight per thread
//   ldg256    the same with the .L2::256B prefetch hint
//   doc       one warp per 32 KB "document" (as maxsim_mma), docs by warp stride
//   bulk      per-warp cp.async.bulk ring (as maxsim_bulk): S stages of T bytes, lane 0 issues
//   bulk_ef   the same with an L2 evict_first cache policy
//   cta       one block of 128 threads per 32 KB document, a grid of all documents (as
//             flash-maxsim's Triton kernel launches): cta_cpasync copies it with cp.async (16 bytes
//             a thread, 16 per thread), cta_bulk with two 16 KB cp.async.bulk copies on one
//             mbarrier; extra dynamic shared memory sets the blocks per SM
// (./rp cta: only the cta patterns.)
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

struct U4 { unsigned x, y, z, w; };
template <bool HINT> __device__ __forceinline__ U4 ld(const void* p) {
    U4 v;
    if (HINT)
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

template <int U, bool HINT>
__global__ void ldg(const U4* __restrict__ p, long long n, unsigned* sink) {
    unsigned x = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i + (U - 1) * stride < n; i += U * stride) {
        U4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = ld<HINT>(p + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride) { U4 v = ld<HINT>(p + i); x ^= v.x ^ v.y ^ v.z ^ v.w; }
    if (x == 0x9e3779b9u) sink[0] = x;
}

// One warp per document of DOC bytes, U loads of 512 bytes per warp in flight.
template <int U, bool HINT>
__global__ void doc(const U4* __restrict__ p, long long ndocs, int doc16, unsigned* sink) {
    unsigned x = 0;
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long d = warp; d < ndocs; d += nw) {
        const U4* q = p + d * doc16 + lane;
        for (int j = 0; j < doc16 / 32; j += U) {
            U4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = ld<HINT>(q + (j + u) * 32);
#pragma unroll
            for (int u = 0; u < U; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    }
    if (x == 0x9e3779b9u) sink[0] = x;
}

__device__ __forceinline__ unsigned saddr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// Per-warp ring of S stages of T bytes; lane 0 keeps it full (chunks by warp stride), the warp
// waits on each stage's mbarrier and touches one word (so the data is "used").
template <bool EF>
__global__ void bulk(const char* __restrict__ p, long long nchunks, int T, int S, unsigned* sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    unsigned char* ring = sm + (size_t)wib * S * T;
    unsigned long long* bars = (unsigned long long*)(sm + (size_t)wpb * S * T) + wib * S;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
    unsigned long long pol = 0;
    if (EF) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    long long next = warp;
    auto issue = [&](int s) {
        const unsigned bar = saddr(&bars[s]);
        if (next < nchunks) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(T) : "memory");
            if (EF)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                             :: "r"(saddr(ring + (size_t)s * T)), "l"(p + next * T), "r"(T), "r"(bar), "l"(pol) : "memory");
            else
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             :: "r"(saddr(ring + (size_t)s * T)), "l"(p + next * T), "r"(T), "r"(bar) : "memory");
            next += nw;
        } else {
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
        }
    };
    if (lane == 0) {
        for (int s = 0; s < S; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(saddr(&bars[s])) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    const long long mine = warp < nchunks ? (nchunks - warp + nw - 1) / nw : 0;
    if (lane == 0) for (int s = 0; s < S; ++s) issue(s);
    __syncwarp();
    unsigned x = 0;
    for (long long i = 0; i < mine; ++i) {
        const int s = (int)(i % S);
        const unsigned bar = saddr(&bars[s]);
        unsigned done = 0, par = (unsigned)(i / S) & 1u;
        do {
            asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                         : "=r"(done) : "r"(bar), "r"(par) : "memory");
        } while (!done);
        x ^= ((const unsigned*)(ring + (size_t)s * T))[lane];
        __syncwarp();
        if (lane == 0) issue(s);
        __syncwarp();
    }
    if (x == 0x9e3779b9u) sink[0] = x;
}

// One block per 32 KB document (blockIdx.x), the whole document into shared memory, then one
// word of it touched per thread. BULK: thread 0 issues two 16 KB bulk copies on one mbarrier.
template <bool BULK>
__global__ void cta(const char* __restrict__ p, unsigned* sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    const char* src = p + (long long)blockIdx.x * 32768;
    __shared__ __align__(8) unsigned long long bar;
    if (BULK) {
        const unsigned b = saddr(&bar);
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(32768) : "memory");
            for (int h = 0; h < 2; ++h)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             :: "r"(saddr(sm + h * 16384)), "l"(src + h * 16384), "r"(16384), "r"(b) : "memory");
        }
        __syncthreads();
        unsigned done = 0;
        do {
            asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                         : "=r"(done) : "r"(b), "r"(0u) : "memory");
        } while (!done);
    } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int off = (i * 128 + threadIdx.x) * 16;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(saddr(sm + off)), "l"(src + off) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        __syncthreads();
    }
    const unsigned x = ((const unsigned*)sm)[threadIdx.x * 33 % 8192];
    if (x == 0x9e3779b9u) sink[0] = x;
}

int main(int argc, char** argv) {
    const bool cta_only = argc > 1 && argv[1][0] == 'c';  // "cta": only the one-block-per-document reads
    const bool small_only = argc > 1;  // any other argument: only the small rotated reads
    const long long bytes = 4ll << 30;
    char* buf; unsigned* sink;
    CK(cudaMalloc(&buf, bytes)); CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(buf, 1, bytes));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("%s, %d SMs, L2 %d MB, 4 GiB buffer\n", prop.name, sms, prop.l2CacheSize >> 20);
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    auto time = [&](const char* name, auto launch) {
        std::vector<float> ms;
        for (int r = 0; r < 18; ++r) {
            CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
            float t; CK(cudaEventElapsedTime(&t, a, b)); if (r >= 3) ms.push_back(t);
        }
        CK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        const float med = ms[ms.size() / 2];
        printf("%-34s %8.3f ms  %7.1f GB/s\n", name, med, bytes / (med * 1e6));
    };
    const long long n16 = bytes / 16;
    char name[96];
    if (cta_only) {
        for (int rep = 0; rep < 2; ++rep) {
            for (int bpsm : {1, 4}) {  // maxsim_bulk's pattern (1) and the best persistent one (4)
                const int T = bpsm == 1 ? 16384 : 4096;
                const size_t smem = (size_t)4 * 2 * T + 4 * 2 * 8;
                CK(cudaFuncSetAttribute(bulk<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
                snprintf(name, sizeof name, "bulk T%dK S2 %dx4w/SM", T / 1024, bpsm);
                time(name, [&] { bulk<false><<<sms * bpsm, 128, smem>>>(buf, bytes / T, T, 2, sink); });
            }
            for (int smemk : {32, 40, 56, 72, 110}) {
                const int smem = smemk * 1024;
                for (int bulkp = 0; bulkp < 2; ++bulkp) {
                    auto k = bulkp ? cta<true> : cta<false>;
                    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
                    int per_sm = 0;
                    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 128, smem));
                    snprintf(name, sizeof name, "cta_%s 32K doc/block, %d/SM", bulkp ? "bulk" : "cpasync", per_sm);
                    time(name, [&] { k<<<(unsigned)(bytes / 32768), 128, smem>>>(buf, sink); });
                }
            }
        }
        return 0;
    }
    if (!small_only) {
    for (int bpsm : {4, 8, 16}) for (int thr : {256, 512}) {
        if (bpsm * thr > 2048) continue;
        snprintf(name, sizeof name, "ldg U1 %dx%d/SM", bpsm, thr);
        time(name, [&] { ldg<1, false><<<sms * bpsm, thr>>>((const U4*)buf, n16, sink); });
        snprintf(name, sizeof name, "ldg U4 %dx%d/SM", bpsm, thr);
        time(name, [&] { ldg<4, false><<<sms * bpsm, thr>>>((const U4*)buf, n16, sink); });
        snprintf(name, sizeof name, "ldg256 U4 %dx%d/SM", bpsm, thr);
        time(name, [&] { ldg<4, true><<<sms * bpsm, thr>>>((const U4*)buf, n16, sink); });
    }
    for (int docb : {32768, 16384}) for (int bpsm : {4, 8, 16}) {
        const long long nd = bytes / docb;
        snprintf(name, sizeof name, "doc%dK U8 %dx128/SM", docb / 1024, bpsm);
        time(name, [&] { doc<8, false><<<sms * bpsm, 128>>>((const U4*)buf, nd, docb / 16, sink); });
        snprintf(name, sizeof name, "doc%dK U8 256B %dx128/SM", docb / 1024, bpsm);
        time(name, [&] { doc<8, true><<<sms * bpsm, 128>>>((const U4*)buf, nd, docb / 16, sink); });
    }
    for (int T : {4096, 8192, 16384, 32768}) for (int S : {2, 3, 4}) for (int bpsm : {1, 2, 4}) {
        const size_t smem = (size_t)4 * S * T + 4 * S * 8;
        if (smem * bpsm > 220 * 1024) continue;
        for (int ef = 0; ef < 2; ++ef) {
            snprintf(name, sizeof name, "bulk%s T%dK S%d %dx4w/SM", ef ? "_ef" : "", T / 1024, S, bpsm);
            auto k = ef ? bulk<true> : bulk<false>;
            CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            time(name, [&] { k<<<sms * bpsm, 128, smem>>>(buf, bytes / T, T, S, sink); });
        }
    }
    }
    // Small reads as the B = 1K and 10K cases make them (32 KB documents, 16 or 4 buffers
    // rotated so none is in L2), each launch timed alone as `tilemaxsim bench` does: the best a
    // kernel that only reads the documents can do, launch included; and an empty kernel.
    for (long long docs : {1000ll, 10000ll}) {
        const long long sz = docs * 32768, rot = docs == 1000 ? 16 : 4;
        for (int pat = 0; pat < 3; ++pat) {
            std::vector<float> ms;
            for (int r = 0; r < 48 + 8; ++r) {
                const char* base = buf + (r % rot) * sz;
                CK(cudaEventRecord(a));
                if (pat == 0) ldg<4, false><<<sms * 4, 512>>>((const U4*)base, sz / 16, sink);
                else if (pat == 1) doc<8, false><<<sms * 4, 128>>>((const U4*)base, docs, 2048, sink);
                else {
                    const size_t smem = (size_t)4 * 2 * 16384 + 64;
                    CK(cudaFuncSetAttribute(bulk<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
                    bulk<false><<<sms, 128, smem>>>(base, sz / 16384, 16384, 2, sink);
                }
                CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
                float t; CK(cudaEventElapsedTime(&t, a, b)); if (r >= 8) ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            const float med = ms[ms.size() / 2];
            printf("B=%lldK read only, %s, rotated x%lld  %7.1f us  %6.1f GB/s  %6.1f M docs/s\n", docs / 1000,
                   pat == 0 ? "ldg U4 4x512" : pat == 1 ? "doc32K U8 4x128" : "bulk T16K S2", rot, med * 1e3,
                   sz / (med * 1e6), docs / (med * 1e3));
        }
    }
    {
        std::vector<float> ms;
        for (int r = 0; r < 56; ++r) {
            CK(cudaEventRecord(a)); ldg<1, false><<<sms, 128>>>((const U4*)buf, 0, sink); CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b)); float t; CK(cudaEventElapsedTime(&t, a, b)); if (r >= 8) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        printf("empty kernel (%d blocks), events around it: %.1f us\n", sms, ms[ms.size() / 2] * 1e3);
    }
    time("cudaMemcpy D2D 2 GiB (read+write)", [&] { CK(cudaMemcpyAsync(buf, buf + bytes / 2, bytes / 2, cudaMemcpyDeviceToDevice)); });
    return 0;
}
