/* Element-wise and row kernels: embedding, RMSNorm (rows and heads), RoPE with
 * both pairings, SwiGLU, add, row gather, bias, conversion to bf16.
 * Row reductions accumulate in fp32 (the CPU reference accumulates the sum of
 * squares in double: differences stay far below bf16 rounding). */
#include "backend/cuda/cuda_kernels.cuh"

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static unsigned grid_for(size_t count, int threads)
{
    size_t g = (count + (size_t)threads - 1) / (size_t)threads;
    if (g > 65535u * 16u)
        g = 65535u * 16u;   /* grid-stride loops cover the rest */
    return (unsigned)(g ? g : 1);
}

/* ---- embedding ---- */
/* row t: the table row of ids[t], or, where prev[t] >= 0 (overlapped decoding), of qids[prev[t]] */
static __global__ void embed_k(float *out, const okv_bf16 *table, const int32_t *ids, const int32_t *prev,
                               const int32_t *qids, int dim)
{
    const int t = blockIdx.x, p = prev ? prev[t] : -1;
    const okv_bf16 *row = table + (size_t)(p >= 0 ? qids[p] : ids[t]) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        out[(size_t)t * dim + i] = __bfloat162float(row[i]);
}

cudaError_t okv_cuda_embed(cudaStream_t s, float *out, const okv_bf16 *table, const int32_t *ids, const int32_t *prev,
                           const int32_t *qids, int n, int dim)
{
    embed_k<<<n, 256, 0, s>>>(out, table, ids, prev, qids, dim);
    return cudaGetLastError();
}

/* ---- RMSNorm: one CTA per row ---- */
static __global__ void rmsnorm_k(float *out, const float *x, const float *w, int dim, float eps)
{
    __shared__ float red[32];
    okv_pdl_trigger();   /* a projection follows: it may start loading its weights */
    const size_t base = (size_t)blockIdx.x * dim;
    float ss = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = x[base + i];
        ss += v * v;
    }
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.f;
        v = warp_sum(v);
        if (threadIdx.x == 0)
            red[0] = v;
    }
    __syncthreads();
    const float inv = rsqrtf(red[0] / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        out[base + i] = x[base + i] * inv * w[i];
}

cudaError_t okv_cuda_rmsnorm(cudaStream_t s, float *out, const float *x, const float *w, int n, int dim, float eps)
{
    int threads = dim >= 1024 ? 1024 : ((dim + 31) / 32) * 32;
    rmsnorm_k<<<n, threads, 0, s>>>(out, x, w, dim, eps);
    return cudaGetLastError();
}

/* ---- head RMSNorm: one warp per head vector ---- */
static __global__ void head_rmsnorm_k(float *x, const float *w, int rows, int hd, float eps)
{
    const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    float *v = x + (size_t)r * hd;
    float ss = 0.f;
    for (int i = lane; i < hd; i += 32)
        ss += v[i] * v[i];
    ss = warp_sum(ss);
    const float inv = rsqrtf(ss / (float)hd + eps);
    for (int i = lane; i < hd; i += 32)
        v[i] = v[i] * inv * w[i];
}

cudaError_t okv_cuda_head_rmsnorm(cudaStream_t s, float *x, const float *w, int rows, int hd, float eps)
{
    head_rmsnorm_k<<<(rows + 7) / 8, 256, 0, s>>>(x, w, rows, hd, eps);
    return cudaGetLastError();
}

/* ---- RoPE: one thread per pair ---- */
static __global__ void rope_k(float *x, const float *cs, int n, int heads, int hd, int half_pairing)
{
    const int half = hd / 2;
    const size_t total = (size_t)n * heads * half;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int p = (int)(i % half);
        const size_t th = i / half;   /* token * heads + head */
        const int t = (int)(th / heads);
        const float c = cs[(size_t)t * hd + 2 * p], sn = cs[(size_t)t * hd + 2 * p + 1];
        float *v = x + th * hd;
        const int a = half_pairing ? p : 2 * p, b = half_pairing ? p + half : 2 * p + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * sn;
        v[b] = x0 * sn + x1 * c;
    }
}

cudaError_t okv_cuda_rope(cudaStream_t s, float *x, const float *cs, int n, int heads, int hd, bool half_pairing)
{
    size_t total = (size_t)n * heads * (hd / 2);
    rope_k<<<grid_for(total, 256), 256, 0, s>>>(x, cs, n, heads, hd, half_pairing ? 1 : 0);
    return cudaGetLastError();
}

/* ---- element-wise ---- */
static __global__ void swiglu_k(float *out, const float *gate, const float *up, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

cudaError_t okv_cuda_swiglu(cudaStream_t s, float *out, const float *gate, const float *up, size_t count)
{
    swiglu_k<<<grid_for(count, 256), 256, 0, s>>>(out, gate, up, count);
    return cudaGetLastError();
}

static __global__ void add_k(float *x, const float *y, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

cudaError_t okv_cuda_add(cudaStream_t s, float *x, const float *y, size_t count)
{
    add_k<<<grid_for(count, 256), 256, 0, s>>>(x, y, count);
    return cudaGetLastError();
}

static __global__ void gather_rows_k(float *out, const float *x, const int32_t *rows, int width)
{
    const int i = blockIdx.x;
    const float *src = x + (size_t)rows[i] * width;
    for (int j = threadIdx.x; j < width; j += blockDim.x)
        out[(size_t)i * width + j] = src[j];
}

cudaError_t okv_cuda_gather_rows(cudaStream_t s, float *out, const float *x, const int32_t *rows, int n_rows, int width)
{
    gather_rows_k<<<n_rows, 256, 0, s>>>(out, x, rows, width);
    return cudaGetLastError();
}

static __global__ void bias_k(float *out, const float *bias, int m, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        out[i] += bias[i % m];
}

cudaError_t okv_cuda_bias(cudaStream_t s, float *out, const float *bias, int n, int m)
{
    size_t count = (size_t)n * m;
    bias_k<<<grid_for(count, 256), 256, 0, s>>>(out, bias, m, count);
    return cudaGetLastError();
}

static __global__ void to_bf16_k(okv_bf16 *dst, const float *src, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

cudaError_t okv_cuda_f32_to_bf16(cudaStream_t s, okv_bf16 *dst, const float *src, size_t count)
{
    to_bf16_k<<<grid_for(count, 256), 256, 0, s>>>(dst, src, count);
    return cudaGetLastError();
}

static __global__ void fill_k(float *dst, float v, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

cudaError_t okv_cuda_fill_f32(cudaStream_t s, float *dst, float v, size_t count)
{
    fill_k<<<grid_for(count, 256), 256, 0, s>>>(dst, v, count);
    return cudaGetLastError();
}
