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
 *    row j of both and writes gate, up and silu(gate) * up).
 * Each output element is computed by the same instructions in every mode (a warp holds
 * two output columns; a column's sum does not depend on its partner), so a fused launch
 * gives bit for bit what the separate launches give (test_cuda_graph checks it).
 *
 * A warp owns two output columns and walks their weight rows in 16-byte chunks (8 bf16),
 * four chunks in flight per lane; the activations (at most 4 rows) come through the
 * read-only cache, shared by every warp. The sum over the lanes is a fixed xor butterfly. */
#include "backend/cuda/cuda_internal.h"

#include <stdint.h>

#define GEMV_WARPS 8
#define GEMV_UNROLL 4

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

template <int NR>
static __global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_k(const struct okv_cuda_gemv a)
{
    const int lane = threadIdx.x & 31;
    int item = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    int s0 = -1, s1, j0, j1;
    if (a.pair) {
        if (item >= a.s[0].m)
            return;
        s0 = 0;
        s1 = 1;
        j0 = j1 = item;
    } else {
        for (int s = 0; s < a.nseg; s++) {
            const int items = (a.s[s].m + 1) >> 1;
            if (item < items) {
                s0 = s;
                break;
            }
            item -= items;
        }
        if (s0 < 0)
            return;
        s1 = s0;
        j0 = 2 * item;
        j1 = j0 + 1 < a.s[s0].m ? j0 + 1 : j0;   /* an odd last column: computed twice, written once */
    }
    const int k = a.k, k8 = k >> 3;
    const uint4 *w0 = reinterpret_cast<const uint4 *>(a.s[s0].w + (size_t)j0 * k);
    const uint4 *w1 = reinterpret_cast<const uint4 *>(a.s[s1].w + (size_t)j1 * k);
    float acc0[NR], acc1[NR];
#pragma unroll
    for (int r = 0; r < NR; r++)
        acc0[r] = acc1[r] = 0.0f;
    int c = lane;
    for (; c + 32 * (GEMV_UNROLL - 1) < k8; c += 32 * GEMV_UNROLL) {
        uint4 u0[GEMV_UNROLL], u1[GEMV_UNROLL];
#pragma unroll
        for (int i = 0; i < GEMV_UNROLL; i++) {
            u0[i] = ld_stream(w0 + c + 32 * i);
            u1[i] = ld_stream(w1 + c + 32 * i);
        }
#pragma unroll
        for (int i = 0; i < GEMV_UNROLL; i++) {
            float f[8];
            bf16x8(u0[i], f);
            dot8<NR>(acc0, f, a.x, k, c + 32 * i);
            bf16x8(u1[i], f);
            dot8<NR>(acc1, f, a.x, k, c + 32 * i);
        }
    }
    for (; c < k8; c += 32) {
        float f[8];
        bf16x8(ld_stream(w0 + c), f);
        dot8<NR>(acc0, f, a.x, k, c);
        bf16x8(ld_stream(w1 + c), f);
        dot8<NR>(acc1, f, a.x, k, c);
    }
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            acc0[r] += __shfl_xor_sync(0xffffffffu, acc0[r], off);
            acc1[r] += __shfl_xor_sync(0xffffffffu, acc1[r], off);
        }
    if (lane >= NR)
        return;
    /* lane r writes row r (registers indexed by a compile-time r: a switch-free select) */
    float v0 = acc0[0], v1 = acc1[0];
#pragma unroll
    for (int r = 1; r < NR; r++)
        if (lane == r) {
            v0 = acc0[r];
            v1 = acc1[r];
        }
    const int r = lane;
    const struct okv_cuda_gemv_seg &S0 = a.s[s0], &S1 = a.s[s1];
    if (S0.bias)
        v0 = v0 + S0.bias[j0];
    if (S1.bias)
        v1 = v1 + S1.bias[j1];
    if (a.pair) {
        const size_t o = (size_t)r * S0.m + j0;
        /* the same expression as the SwiGLU kernel (cuda_kernels.cu) */
        const float y = v0 / (1.0f + expf(-v0)) * v1;
        if (S0.out != a.swi)
            S0.out[o] = v0;
        if (S1.out != a.swi)
            S1.out[o] = v1;
        a.swi[o] = y;
        return;
    }
    const size_t o0 = (size_t)r * S0.m + j0;
    S0.out[o0] = v0;
    if (S0.acc)
        S0.acc[o0] = S0.acc[o0] + v0;
    if (j1 != j0) {
        const size_t o1 = (size_t)r * S0.m + j1;
        S0.out[o1] = v1;
        if (S0.acc)
            S0.acc[o1] = S0.acc[o1] + v1;
    }
}

bool okv_cuda_gemv_fits(int n, int k, const void *x, const void *w)
{
    return n >= 1 && n <= OKV_GEMV_MAX_ROWS && k > 0 && (k & 7) == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)w & 15) == 0;
}

cudaError_t okv_cuda_gemv(cudaStream_t s, const struct okv_cuda_gemv *a)
{
    long long items = 0;
    if (a->pair)
        items = a->s[0].m;
    else
        for (int i = 0; i < a->nseg; i++)
            items += (a->s[i].m + 1) / 2;
    if (items <= 0)
        return cudaSuccess;
    const unsigned grid = (unsigned)((items + GEMV_WARPS - 1) / GEMV_WARPS);
    switch (a->n) {
    case 1: gemv_k<1><<<grid, GEMV_WARPS * 32, 0, s>>>(*a); break;
    case 2: gemv_k<2><<<grid, GEMV_WARPS * 32, 0, s>>>(*a); break;
    case 3: gemv_k<3><<<grid, GEMV_WARPS * 32, 0, s>>>(*a); break;
    case 4: gemv_k<4><<<grid, GEMV_WARPS * 32, 0, s>>>(*a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
