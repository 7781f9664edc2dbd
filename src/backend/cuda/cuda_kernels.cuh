/* Element-wise and row kernels of the CUDA backend: launchers that take a stream,
 * launch, and return the launch's status (cudaGetLastError). Shapes are checked by
 * the callers in cuda_backend.cu. */
#ifndef OKV_BACKEND_CUDA_KERNELS_CUH
#define OKV_BACKEND_CUDA_KERNELS_CUH

#include "backend/cuda/cuda_internal.h"

/* out[n][dim] = float(table[ids[i]]) (table bf16 [rows][dim]) */
/* embedding rows of ids; where prev (NULL: none) has prev[t] >= 0, of qids[prev[t]] instead
 * (overlapped decoding: a token sampled on the device) */
cudaError_t okv_cuda_embed(cudaStream_t s, float *out, const okv_bf16 *table, const int32_t *ids, const int32_t *prev,
                           const int32_t *qids, int n, int dim);
/* out[n][dim] = x / rms(x) * w (w fp32 [dim]); out may equal x */
cudaError_t okv_cuda_rmsnorm(cudaStream_t s, float *out, const float *x, const float *w, int n, int dim, float eps);
/* in place over rows of hd: x[n*heads][hd] */
cudaError_t okv_cuda_head_rmsnorm(cudaStream_t s, float *x, const float *w, int rows, int hd, float eps);
/* in place RoPE with cs[n][hd/2][2] */
cudaError_t okv_cuda_rope(cudaStream_t s, float *x, const float *cs, int n, int heads, int hd, bool half_pairing);
cudaError_t okv_cuda_swiglu(cudaStream_t s, float *out, const float *gate, const float *up, size_t count);
cudaError_t okv_cuda_add(cudaStream_t s, float *x, const float *y, size_t count);
/* out[i][:] = x[rows[i]][:] (rows device); out must not overlap x */
cudaError_t okv_cuda_gather_rows(cudaStream_t s, float *out, const float *x, const int32_t *rows, int n_rows, int width);
/* out[t][m] += bias[m] */
cudaError_t okv_cuda_bias(cudaStream_t s, float *out, const float *bias, int n, int m);
/* dst[i] = bf16(src[i]) */
cudaError_t okv_cuda_f32_to_bf16(cudaStream_t s, okv_bf16 *dst, const float *src, size_t count);
cudaError_t okv_cuda_fill_f32(cudaStream_t s, float *dst, float v, size_t count);

#endif
