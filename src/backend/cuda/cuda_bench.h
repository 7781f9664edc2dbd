/* Tuning hooks of the CUDA backend for bench/ (not part of the public interface). */
#ifndef OKV_BACKEND_CUDA_BENCH_H
#define OKV_BACKEND_CUDA_BENCH_H

#include "oasiskv/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CTAs of the kv_fetch gather kernel: ctas > 0 forces that many, 0 restores the policy. */
void okv_cuda_set_fetch_ctas(okv_backend *be, int ctas);
/* CTAs the last kv_fetch launched. */
int okv_cuda_fetch_ctas_last(const okv_backend *be);

#ifdef __cplusplus
}
#endif
#endif
