/* cuda_copyengine: can the copy engines gather the host tier's scattered units without the
 * contention that the SM gather causes (bench/RESULTS.md sections 11, 12, 18)?
 *
 *   cuda_copyengine [--calls 20]
 *
 * Standalone (CUDA runtime and cuBLAS only, not the engine): a pinned host pool of 1 GiB
 * and a device pool; fetches of random host units (4 and 8 KiB: K+V of one block and KV
 * head at head_dim 64 and 128, 16-token blocks) into consecutive device units, by
 *   sm       a gather kernel (32 CTAs x 256 threads, 16-byte loads of mapped host memory,
 *            a warp a unit, two loads in flight a lane: the engine's kv_fetch);
 *   batch    one cudaMemcpyBatchAsync of every unit (CUDA 12.8+), source in stream order;
 *   batchov  the same with cudaMemcpyFlagPreferOverlapWithCompute;
 *   each     one cudaMemcpyAsync a unit;
 *   contig   one cudaMemcpyAsync of the same bytes, contiguous (the DMA ceiling).
 * Reported for fetches of 2 MiB (one layer of a reasoning-shape step) and 32 MiB: GB/s alone,
 * host microseconds to submit one fetch, then the time of compute ops on another stream with
 * fetches queued beside them: a bf16 GEMM 128x4096x4096 (weight-bandwidth-bound), and a
 * device copy of 256 MiB (HBM-bound). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

/* a warp a unit, 16 bytes a lane and load, two loads in flight */
__global__ void gather_k(const uint4 *__restrict__ host, uint4 *__restrict__ dev, const int32_t *__restrict__ src, int n,
                         int unit16)
{
    const int lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int nw = (gridDim.x * blockDim.x) >> 5;
    for (int u = warp; u < n; u += nw) {
        const uint4 *s = host + (size_t)src[u] * unit16;
        uint4 *d = dev + (size_t)u * unit16;
        int i = lane;
        for (; i + 32 < unit16; i += 64) {
            const uint4 a = s[i], b = s[i + 32];
            d[i] = a;
            d[i + 32] = b;
        }
        for (; i < unit16; i += 32)
            d[i] = s[i];
    }
}

/* one warp a CTA, registers capped so that it fits beside a CTA that holds nearly all of an
 * SM's register file (the GEMM's): 4 loads in flight a lane */
__global__ void __maxnreg__(32) gather_w_k(const uint4 *__restrict__ host, uint4 *__restrict__ dev,
                                                              const int32_t *__restrict__ src, int n, int unit16)
{
    const int lane = threadIdx.x;
    const long long total = (long long)n * unit16, stride = (long long)gridDim.x * 32;
    for (long long i0 = (long long)blockIdx.x * 32 + lane; i0 < total; i0 += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const long long i = i0 + u * stride;
            if (i < total)
                v[u] = host[(long long)src[i / unit16] * unit16 + i % unit16];
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const long long i = i0 + u * stride;
            if (i < total)
                dev[i] = v[u];
        }
    }
}

__global__ void dcopy_k(const float4 *__restrict__ a, float4 *__restrict__ b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b[i] = a[i];
}

enum mode { M_SM, M_W64, M_W132, M_W264, M_W528, M_BATCH, M_BATCHOV, M_EACH, M_CONTIG, M_N };
static const char *mname[M_N] = {"sm", "w32x64", "w32x132", "w32x264", "w32x528", "batch", "batchov", "each", "contig"};

struct pools {
    char *host;          /* pinned */
    char *dev;
    size_t host_bytes;
    int32_t *d_src;      /* [calls][n] */
    int32_t *h_src;
    void **dsts, **srcs; /* [n] per call, rebuilt per call (host side) */
    size_t *sizes;
};

static void fetch(struct pools *p, enum mode m, size_t unit, int n, int call, cudaStream_t s)
{
    const int32_t *src = p->h_src + (size_t)call * n;
    switch (m) {
    case M_SM:
        gather_k<<<32, 256, 0, s>>>((const uint4 *)p->host, (uint4 *)p->dev, p->d_src + (size_t)call * n, n, (int)(unit / 16));
        CK(cudaGetLastError());
        break;
    case M_W64:
    case M_W132:
    case M_W264:
    case M_W528: {
        const int g = m == M_W64 ? 64 : m == M_W132 ? 132 : m == M_W264 ? 264 : 528;
        gather_w_k<<<g, 32, 0, s>>>((const uint4 *)p->host, (uint4 *)p->dev, p->d_src + (size_t)call * n, n, (int)(unit / 16));
        CK(cudaGetLastError());
        break;
    }
    case M_BATCH:
    case M_BATCHOV: {
        for (int i = 0; i < n; i++) {
            p->srcs[i] = p->host + (size_t)src[i] * unit;
            p->dsts[i] = p->dev + (size_t)i * unit;
            p->sizes[i] = unit;
        }
        struct cudaMemcpyAttributes at;
        memset(&at, 0, sizeof at);
        at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        at.flags = m == M_BATCHOV ? cudaMemcpyFlagPreferOverlapWithCompute : 0;
        size_t idx = 0;
        CK(cudaMemcpyBatchAsync(p->dsts, (const void *const *)p->srcs, p->sizes, (size_t)n, &at, &idx, 1, s));
        break;
    }
    case M_EACH:
        for (int i = 0; i < n; i++)
            CK(cudaMemcpyAsync(p->dev + (size_t)i * unit, p->host + (size_t)src[i] * unit, unit, cudaMemcpyHostToDevice, s));
        break;
    case M_CONTIG:
        CK(cudaMemcpyAsync(p->dev, p->host + (size_t)(call % 8) * n * unit, (size_t)n * unit, cudaMemcpyHostToDevice, s));
        break;
    default:
        break;
    }
}

int main(int argc, char **argv)
{
    int calls = 20;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
    struct pools p;
    memset(&p, 0, sizeof p);
    p.host_bytes = (size_t)1 << 30;
    const size_t dev_bytes = (size_t)64 << 20;
    CK(cudaHostAlloc((void **)&p.host, p.host_bytes, cudaHostAllocMapped));
    memset(p.host, 1, p.host_bytes);
    CK(cudaMalloc((void **)&p.dev, dev_bytes));
    const int max_n = (int)((32u << 20) / 4096);
    CK(cudaMalloc((void **)&p.d_src, sizeof(int32_t) * (size_t)max_n * calls));
    p.h_src = (int32_t *)malloc(sizeof(int32_t) * (size_t)max_n * calls);
    p.dsts = (void **)malloc(sizeof(void *) * max_n);
    p.srcs = (void **)malloc(sizeof(void *) * max_n);
    p.sizes = (size_t *)malloc(sizeof(size_t) * max_n);
    cudaStream_t sc, sf;
    CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sf, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    cublasHandle_t cb;
    if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    cublasSetStream(cb, sc);
    const int M = 128, K = 4096, N = 4096;
    __nv_bfloat16 *A, *W, *C;
    CK(cudaMalloc((void **)&A, sizeof(__nv_bfloat16) * M * K));
    CK(cudaMalloc((void **)&W, sizeof(__nv_bfloat16) * (size_t)K * N));
    CK(cudaMalloc((void **)&C, sizeof(__nv_bfloat16) * M * N));
    CK(cudaMemset(A, 0, sizeof(__nv_bfloat16) * M * K));
    CK(cudaMemset(W, 0, sizeof(__nv_bfloat16) * (size_t)K * N));
    const size_t ncp = ((size_t)256 << 20) / 16;
    float4 *ca, *cbuf;
    CK(cudaMalloc((void **)&ca, ncp * 16));
    CK(cudaMalloc((void **)&cbuf, ncp * 16));
    const float one = 1.0f, zero = 0.0f;

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, async engines %d\n", prop.name, prop.multiProcessorCount, prop.asyncEngineCount);

    for (int ui = 0; ui < 2; ui++) {
        const size_t unit = ui ? 8192 : 4096;
        const int host_units = (int)(p.host_bytes / unit);
        const size_t sizes_b[2] = {(size_t)2 << 20, (size_t)32 << 20};
        for (int si = 0; si < 2; si++) {
            const int n = (int)(sizes_b[si] / unit);
            for (int i = 0; i < n * calls; i++)
                p.h_src[i] = (int32_t)(rnd() % (uint32_t)host_units);
            CK(cudaMemcpy(p.d_src, p.h_src, sizeof(int32_t) * (size_t)n * calls, cudaMemcpyHostToDevice));
            printf("\nunit %zu KiB, fetch %zu MiB (%d units), %d fetches a run\n", unit >> 10, sizes_b[si] >> 20, n, calls);
            printf("%-8s %-9s %-11s %-14s %-14s %-14s %-14s\n", "mode", "GB/s", "submit us", "GEMM alone us", "GEMM beside",
                   "copy alone us", "copy beside");
            for (int m = 0; m < M_N; m++) {
                if ((m == M_EACH && n > 1024) || ((m == M_BATCH || m == M_BATCHOV) && n > 1024))
                    continue;
                /* alone */
                fetch(&p, (enum mode)m, unit, n, 0, sf);
                CK(cudaStreamSynchronize(sf));
                double ts = 0;
                const double t0 = now();
                for (int c = 0; c < calls; c++) {
                    const double a = now();
                    fetch(&p, (enum mode)m, unit, n, c, sf);
                    ts += now() - a;
                }
                CK(cudaStreamSynchronize(sf));
                const double gbs = (double)n * unit * calls / (now() - t0) / 1e9;
                /* compute beside: enough fetches queued to outlast the loop */
                float res[4];
                for (int w = 0; w < 2; w++) {
                    const int reps = w == 0 ? 100 : 10;
                    for (int beside = 0; beside < 2; beside++) {
                        if (beside) {
                            const int nb = (size_t)calls * n * unit < ((size_t)256 << 20) ? (int)(((size_t)256 << 20) / ((size_t)n * unit)) : calls;
                            for (int c = 0; c < nb; c++)
                                fetch(&p, (enum mode)m, unit, n, c % calls, sf);
                        }
                        CK(cudaEventRecord(e0, sc));
                        for (int r = 0; r < reps; r++) {
                            if (w == 0) {
                                if (cublasGemmEx(cb, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, W, CUDA_R_16BF, N, A, CUDA_R_16BF, K,
                                                 &zero, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                                                 CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
                                    fprintf(stderr, "gemm failed\n");
                                    return 1;
                                }
                            } else {
                                dcopy_k<<<prop.multiProcessorCount * 4, 256, 0, sc>>>(ca, cbuf, ncp);
                            }
                        }
                        CK(cudaEventRecord(e1, sc));
                        CK(cudaEventSynchronize(e1));
                        float ms;
                        CK(cudaEventElapsedTime(&ms, e0, e1));
                        res[2 * w + beside] = ms * 1000.0f / reps;
                        CK(cudaStreamSynchronize(sf));
                    }
                }
                printf("%-8s %-9.1f %-11.1f %-14.1f %-14.1f %-14.1f %-14.1f\n", mname[m], gbs, ts / calls * 1e6, res[0], res[1],
                       res[2], res[3]);
            }
        }
    }
    cublasDestroy(cb);
    return 0;
}
