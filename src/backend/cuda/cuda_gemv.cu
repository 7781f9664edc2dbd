/* Small-batch projections: y = x W^T for 1 to OKV_GEMV_MAX_ROWS rows, straight from the
 * fp32 activations and the bf16 weights (no conversion kernel, no cuBLAS), fp32
 * accumulation, the bias added in the same kernel.
 *
 * At batch 1 to 4 a projection reads each weight once and does 1 to 4 FMAs with it: the
 * time is the weight bytes over HBM bandwidth, or, on a small model, the launch. The
 * cuBLAS path (cuda_backend.cu: convert the activations to bf16, GEMM, bias) spends two
 * or three kernels on it; this spends one, and one launch can serve several projections:
 *  - up to three projections of the same input (q, k and v), as segments;
 *  - a projection whose result is added to the residual next (o and down: out = x W^T,
 *    acc += out, both written);
 *  - the gate and up projections with the SwiGLU behind them (pair mode: a warp computes
 *    columns j.. of both and writes gate, up and silu(gate) * up).
 * Each output element is computed by the same instructions in every mode and variant (a
 * column's sum does not depend on the columns beside it), so a fused launch gives bit for
 * bit what the separate launches give (test_cuda_graph checks it).
 *
 * A warp owns four output columns (two on small models) and walks their weight rows in
 * 16-byte chunks (8 bf16), four chunks a column in flight per lane; the activations (at most 4
 * rows) come through the read-only cache, shared by every warp, and each activation load
 * serves all the warp's columns. The sum over the lanes is a fixed xor butterfly.
 * bench/RESULTS.md section 37: on the Llama-3-8B shapes two columns a warp streamed the
 * weights at 4.1 TB/s with 1 row but 2.9 TB/s with 4 (the activation loads, one per column and
 * row, bound it); four columns a warp keep 1 row and take 4 rows to 3.3 TB/s (3.5 with
 * programmatic dependent launch, the default). */
#include "backend/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdlib.h>

#define GEMV_WARPS 8

static __device__ __forceinline__ uint4 ld_stream(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

static __device__ __forceinline__ void bf16x8(uint4 u, float f[8])
{
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

/* acc[r] += w[0..7] . x[r][8c .. 8c+7], in a fixed order */
template <int NR>
static __device__ __forceinline__ void dot8(float (&acc)[NR], const float f[8], const float *x, int k, int c)
{
#pragma unroll
    for (int r = 0; r < NR; r++) {
        const float4 *xr = reinterpret_cast<const float4 *>(x + (size_t)r * k) + 2 * c;
        const float4 a = __ldg(xr), b = __ldg(xr + 1);
        float s = acc[r];
        s = __fmaf_rn(f[0], a.x, s);
        s = __fmaf_rn(f[1], a.y, s);
        s = __fmaf_rn(f[2], a.z, s);
        s = __fmaf_rn(f[3], a.w, s);
        s = __fmaf_rn(f[4], b.x, s);
        s = __fmaf_rn(f[5], b.y, s);
        s = __fmaf_rn(f[6], b.z, s);
        s = __fmaf_rn(f[7], b.w, s);
        acc[r] = s;
    }
}

/* C columns a warp (2 or 4: more columns share each activation load), U chunks of 16 bytes a
 * column in flight per lane. In pair
 * mode a warp takes C / 2 columns of the gate and the same of the up projection. */
/* acc[i][r] += w_i[0..7] . x[r][8c .. 8c+7] for the C columns of chunk set j: each activation
 * load serves every column (the same sum, in the same order, as dot8 column by column) */
template <int NR, int C, int U>
static __device__ __forceinline__ void dotc(float (&acc)[C][NR], const uint4 (&u)[C][U], int j, const float *x, int k, int c)
{
    float f[C][8];
#pragma unroll
    for (int i = 0; i < C; i++)
        bf16x8(u[i][j], f[i]);
#pragma unroll
    for (int r = 0; r < NR; r++) {
        const float4 *xr = reinterpret_cast<const float4 *>(x + (size_t)r * k) + 2 * c;
        const float4 xa = __ldg(xr), xb = __ldg(xr + 1);
#pragma unroll
        for (int i = 0; i < C; i++) {
            float s = acc[i][r];
            s = __fmaf_rn(f[i][0], xa.x, s);
            s = __fmaf_rn(f[i][1], xa.y, s);
            s = __fmaf_rn(f[i][2], xa.z, s);
            s = __fmaf_rn(f[i][3], xa.w, s);
            s = __fmaf_rn(f[i][4], xb.x, s);
            s = __fmaf_rn(f[i][5], xb.y, s);
            s = __fmaf_rn(f[i][6], xb.z, s);
            s = __fmaf_rn(f[i][7], xb.w, s);
            acc[i][r] = s;
        }
    }
}

template <int NR, int C, int U>
static __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_k(const struct okv_cuda_gemv a)
{
    const int lane = threadIdx.x & 31;
    int item = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    int seg[C], col[C];
    if (a.pair) {
        constexpr int H = C / 2;
        if (item * H >= a.s[0].m)
            return;
#pragma unroll
        for (int i = 0; i < C; i++) {
            seg[i] = i < H ? 0 : 1;
            col[i] = min(item * H + (i % H), a.s[0].m - 1);
        }
    } else {
        int s0 = -1;
        for (int s = 0; s < a.nseg; s++) {
            const int items = (a.s[s].m + C - 1) / C;
            if (item < items) {
                s0 = s;
                break;
            }
            item -= items;
        }
        if (s0 < 0)
            return;
#pragma unroll
        for (int i = 0; i < C; i++) {
            seg[i] = s0;
            col[i] = min(item * C + i, a.s[s0].m - 1);   /* past the last column: computed again, written once */
        }
    }
    const int k = a.k, k8 = k >> 3;
    const uint4 *w[C];
#pragma unroll
    for (int i = 0; i < C; i++)
        w[i] = reinterpret_cast<const uint4 *>(a.s[seg[i]].w + (size_t)col[i] * k);
    float acc[C][NR];
#pragma unroll
    for (int i = 0; i < C; i++)
#pragma unroll
        for (int r = 0; r < NR; r++)
            acc[i][r] = 0.0f;
    int c = lane;
    bool full = c + 32 * (U - 1) < k8;
    /* the first U chunks of every column are loaded before waiting for the kernel before this
     * one (programmatic dependent launch, okv_cuda_gemv): the weights are constant, only the
     * activations depend on it */
    uint4 u[C][U];
    if (full)
#pragma unroll
        for (int j = 0; j < U; j++)
#pragma unroll
            for (int i = 0; i < C; i++)
                u[i][j] = ld_stream(w[i] + c + 32 * j);
    okv_pdl_wait();
    okv_pdl_trigger();
    while (full) {
#pragma unroll
        for (int j = 0; j < U; j++)
            dotc<NR, C>(acc, u, j, a.x, k, c + 32 * j);
        c += 32 * U;
        full = c + 32 * (U - 1) < k8;
        if (full)
#pragma unroll
            for (int j = 0; j < U; j++)
#pragma unroll
                for (int i = 0; i < C; i++)
                    u[i][j] = ld_stream(w[i] + c + 32 * j);
    }
    for (; c < k8; c += 32)
#pragma unroll
        for (int i = 0; i < C; i++) {
            float f[8];
            bf16x8(ld_stream(w[i] + c), f);
            dot8<NR>(acc[i], f, a.x, k, c);
        }
#pragma unroll
    for (int i = 0; i < C; i++)
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], off);
    if (lane >= NR)
        return;
    /* lane r writes row r (registers indexed by a compile-time r: a switch-free select) */
    float val[C];
#pragma unroll
    for (int i = 0; i < C; i++) {
        val[i] = acc[i][0];
#pragma unroll
        for (int r = 1; r < NR; r++)
            if (lane == r)
                val[i] = acc[i][r];
        if (a.s[seg[i]].bias)
            val[i] = val[i] + a.s[seg[i]].bias[col[i]];
    }
    const int r = lane;
    if (a.pair) {
        constexpr int H = C / 2;
        const struct okv_cuda_gemv_seg &G = a.s[0], &P = a.s[1];
#pragma unroll
        for (int i = 0; i < H; i++) {
            if (i > 0 && col[i] == col[i - 1])
                break;
            const size_t o = (size_t)r * G.m + col[i];
            const float g = val[i], up = val[H + i];
            /* the same expression as the SwiGLU kernel (cuda_kernels.cu) */
            const float y = g / (1.0f + expf(-g)) * up;
            if (G.out != a.swi)
                G.out[o] = g;
            if (P.out != a.swi)
                P.out[o] = up;
            a.swi[o] = y;
        }
        return;
    }
    const struct okv_cuda_gemv_seg &S = a.s[seg[0]];
#pragma unroll
    for (int i = 0; i < C; i++) {
        if (i > 0 && col[i] == col[i - 1])
            break;
        const size_t o = (size_t)r * S.m + col[i];
        S.out[o] = val[i];
        if (S.acc)
            S.acc[o] = S.acc[o] + val[i];
    }
}

bool okv_cuda_gemv_fits(int n, int k, const void *x, const void *w)
{
    return n >= 1 && n <= OKV_GEMV_MAX_ROWS && k > 0 && (k & 7) == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)w & 15) == 0;
}

/* The launch's switches, read once: OKV_GEMV_COLS=2 or 4 forces the columns a warp (default:
 * 4 where the launch has at least GEMV_COLS4_MIN output columns, else 2: on small models
 * four columns a warp leave too few warps to spread the weights over the SMs),
 * OKV_GEMV_UNROLL (4, the default, or 8 chunks of 16 bytes a column in flight per lane) and
 * OKV_PDL=0
 * (programmatic dependent launch off: by default the kernel may start, and load its first
 * weights, while the kernel before it finishes). bench/RESULTS.md section 37. */
#define GEMV_COLS4_MIN 2048
struct gemv_cfg {
    int cols, unroll;   /* cols 0: by the launch's columns */
    bool pdl;
};
static struct gemv_cfg gemv_cfg_get(void)
{
    static struct gemv_cfg cfg = {-1, 0, false};
    if (cfg.cols < 0) {
        const char *u = getenv("OKV_GEMV_UNROLL"), *d = getenv("OKV_PDL");
        const char *cc = getenv("OKV_GEMV_COLS");
        cfg.pdl = !(d && atoi(d) == 0);
        cfg.unroll = u && atoi(u) == 8 ? 8 : 4;
        cfg.cols = cc && (atoi(cc) == 2 || atoi(cc) == 4) ? atoi(cc) : 0;
    }
    return cfg;
}

template <int NR, int C>
static void (*gemv_pick(struct gemv_cfg cfg))(const struct okv_cuda_gemv)
{
    return cfg.unroll == 8 ? gemv_k<NR, C, 8> : gemv_k<NR, C, 4>;
}

template <int NR>
static cudaError_t gemv_launch(cudaStream_t s, const struct okv_cuda_gemv *a, struct gemv_cfg cfg)
{
    if (!cfg.cols) {
        long long cols = 0;
        for (int i = 0; i < (a->pair ? 2 : a->nseg); i++)
            cols += a->s[i].m;
        cfg.cols = cols >= GEMV_COLS4_MIN ? 4 : 2;
    }
    long long items = 0;
    if (a->pair)
        items = (a->s[0].m + cfg.cols / 2 - 1) / (cfg.cols / 2);
    else
        for (int i = 0; i < a->nseg; i++)
            items += (a->s[i].m + cfg.cols - 1) / cfg.cols;
    if (items <= 0)
        return cudaSuccess;
    void (*fn)(const struct okv_cuda_gemv) = cfg.cols == 4 ? gemv_pick<NR, 4>(cfg) : gemv_pick<NR, 2>(cfg);
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3((unsigned)((items + GEMV_WARPS - 1) / GEMV_WARPS));
    lc.blockDim = dim3(GEMV_WARPS * 32);
    lc.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = at;
    lc.numAttrs = cfg.pdl ? 1 : 0;
    return cudaLaunchKernelEx(&lc, fn, *a);
}

cudaError_t okv_cuda_gemv(cudaStream_t s, const struct okv_cuda_gemv *a)
{
    const struct gemv_cfg cfg = gemv_cfg_get();
    cudaError_t e;
    switch (a->n) {
    case 1: e = gemv_launch<1>(s, a, cfg); break;
    case 2: e = gemv_launch<2>(s, a, cfg); break;
    case 3: e = gemv_launch<3>(s, a, cfg); break;
    case 4: e = gemv_launch<4>(s, a, cfg); break;
    default: return cudaErrorInvalidValue;
    }
    return e != cudaSuccess ? e : cudaGetLastError();
}
