/* Private state of the CPU backend, shared by its files. */
#ifndef OKV_BACKEND_CPU_INTERNAL_H
#define OKV_BACKEND_CPU_INTERNAL_H

#include "oasiskv/backend.h"
#include "util/threadpool.h"

struct okv_bmem {
    float *data;
    size_t n;          /* floats */
};

struct okv_bweight {
    float *data;       /* fp32 copy, row-major [rows][row_len] */
    int64_t rows;
    int64_t row_len;
};

struct okv_bkv {
    struct okv_kv_geometry g;
    size_t block_floats;   /* n_kv_heads * block_size * head_dim */
    float *k;              /* [n_layers][n_slots][n_kv_heads][block_size][head_dim] */
    float *v;
};

struct cpu_ctx {
    okv_threadpool *pool;
    int n_threads;
    struct okv_step_meta meta;   /* borrowed host arrays of the current step */
};

static inline float *cpu_kv_block(const struct okv_bkv *kv, float *base, int layer, int slot)
{
    return base + ((size_t)layer * (size_t)kv->g.n_slots + (size_t)slot) * kv->block_floats;
}

float okv_cpu_dot(const float *a, const float *b, int n);
void okv_cpu_axpy(float *y, float a, const float *x, int n);   /* y += a*x */

enum okv_status okv_cpu_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                  const struct okv_attn_blocks *blocks, int n_heads, float scale);

#endif
