/* The backend interface: every operation of the forward pass, behind a table of
 * function pointers. The engine calls these and never branches on the backend.
 *
 * Memory model: a backend hands out opaque handles.
 *  - okv_bmem: a buffer of activations in the backend's memory, float32 elements.
 *  - okv_bweight: a weight converted to the backend's working precision (CPU: fp32;
 *    CUDA: bf16), built from a file's tensor view.
 *  - okv_bkv: the device tier's KV storage for all layers: per layer, n_slots blocks
 *    of K and V, each block laid out [n_kv_heads][block_size][head_dim] so that one
 *    (block, KV head) is contiguous (the unit that selection and prefetch move).
 * Activation tensors are row-major with the token as the outer dimension.
 *
 * Step metadata (positions, slot mappings, block lists) is given as host arrays in
 * struct okv_step_meta; a backend copies what it needs to its memory in
 * okv_backend_ops.step_begin, before any op of the step.
 *
 * Thread safety: one thread drives a backend at a time. */
#ifndef OASISKV_BACKEND_H
#define OASISKV_BACKEND_H

#include "oasiskv/common.h"
#include "oasiskv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_backend okv_backend;
typedef struct okv_bmem okv_bmem;
typedef struct okv_bweight okv_bweight;
typedef struct okv_bkv okv_bkv;

struct okv_kv_geometry {
    int n_layers;
    int n_slots;       /* blocks per layer in the pool */
    int block_size;    /* tokens per block */
    int n_kv_heads;
    int head_dim;
};

/* One step's metadata, host arrays; valid from step_begin until the next step_begin. */
struct okv_step_meta {
    int n_tokens;                 /* rows of the flat batch */
    int n_seqs;
    const int32_t *tok_seq;       /* [n_tokens] batch-local sequence index of each row */
    const int32_t *tok_pos;       /* [n_tokens] absolute position of each row */
    const int32_t *tok_slot;      /* [n_tokens] where its K/V goes: slot*block_size + offset */
    const float *rope_cos_sin;    /* [n_tokens][head_dim/2][2] cos, sin of each row's angles */
    const int32_t *seq_kv_len;    /* [n_seqs] valid KV tokens of each sequence after this step */
};

/* The blocks attention reads for one layer: one list per (sequence, KV head).
 * List (s, h) is blk_slot[blk_start[s*n_kv_heads+h] .. blk_start[s*n_kv_heads+h+1]);
 * blk_index gives each block's logical number (its tokens are positions
 * blk_index*block_size ...). A query at position p reads key positions kp with
 * kp <= p and kp < seq_kv_len[s]. */
struct okv_attn_blocks {
    const int32_t *blk_start;     /* [n_seqs*n_kv_heads + 1] */
    const int32_t *blk_slot;      /* slot in this layer's pool */
    const int32_t *blk_index;     /* logical block number */
};

struct okv_backend_ops {
    const char *name;
    void (*destroy)(okv_backend *be);

    /* memory */
    enum okv_status (*mem_alloc)(okv_backend *be, size_t n_floats, okv_bmem **out);
    void (*mem_free)(okv_backend *be, okv_bmem *m);
    enum okv_status (*mem_write)(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n);
    enum okv_status (*mem_read)(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n);
    enum okv_status (*weight_load)(okv_backend *be, const struct okv_tensor_view *t, okv_bweight **out);
    void (*weight_free)(okv_backend *be, okv_bweight *w);
    size_t (*weight_bytes)(const okv_bweight *w);
    enum okv_status (*kv_alloc)(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out);
    void (*kv_free)(okv_backend *be, okv_bkv *kv);
    size_t (*kv_bytes_per_block)(const okv_bkv *kv);   /* K+V of one block, one layer, all heads */
    /* Read or write one block of one layer (K and V, [n_kv_heads][block_size][head_dim]
     * each, float32 on the host side): the path of the host tier and of tests. */
    enum okv_status (*kv_block_read)(okv_backend *be, const okv_bkv *kv, int layer, int slot, float *k, float *v);
    enum okv_status (*kv_block_write)(okv_backend *be, okv_bkv *kv, int layer, int slot, const float *k, const float *v);

    /* step */
    enum okv_status (*step_begin)(okv_backend *be, const struct okv_step_meta *meta);

    /* ops on the current step's rows (n = meta->n_tokens unless stated) */
    /* out[n][dim] = embedding rows of ids[n] (host array) */
    enum okv_status (*embed)(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids, int n, int dim);
    /* out[n][dim] = x / rms(x) * w; out may equal x */
    enum okv_status (*rmsnorm)(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, int n, int dim, float eps);
    /* out[n][m] = x[n][k] . W[m][k]^T (+ bias[m] when bias is not NULL) */
    enum okv_status (*matmul)(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, const okv_bweight *bias, int n, int k, int m);
    /* In place RMSNorm of each head vector x[n][heads][hd] with weight w[hd] (q/k norm) */
    enum okv_status (*head_rmsnorm)(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int heads, int hd, float eps);
    /* In place RoPE of x[n][heads][hd] with the step's cos/sin table; half_pairing
     * pairs (i, i+hd/2), else (2i, 2i+1) */
    enum okv_status (*rope)(okv_backend *be, okv_bmem *x, int n, int heads, int hd, bool half_pairing);
    /* out[n][f] = silu(gate) * up */
    enum okv_status (*swiglu)(okv_backend *be, okv_bmem *out, const okv_bmem *gate, const okv_bmem *up, int n, int f);
    /* x[i] += y[i] for i < count */
    enum okv_status (*add)(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t count);
    /* out[i][:] = x[rows[i]][:] for i < n_rows (rows: host array) */
    enum okv_status (*gather_rows)(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows, int width);
    /* Store k[n][n_kv_heads][hd], v[...] of the step's rows into layer's pool at tok_slot. */
    enum okv_status (*kv_write)(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v);
    /* out[n][n_heads][hd] = softmax(q k^T * scale) v over the given blocks, causal by position. */
    enum okv_status (*attention)(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                 const struct okv_attn_blocks *blocks, int n_heads, float scale);
    /* Wait for all queued work (no-op on the CPU). */
    enum okv_status (*sync)(okv_backend *be);
};

struct okv_backend {
    const struct okv_backend_ops *ops;
    void *ctx;
};

struct okv_backend_params {
    int n_threads;      /* CPU threads; <= 0: all cores */
};

/* Create the CPU backend (threads + OpenBLAS). The caller owns *out (okv_backend_free). */
enum okv_status okv_backend_cpu_create(const struct okv_backend_params *p, okv_backend **out);
/* Create a backend by name ("cpu", "cuda"); OKV_ERR_UNSUPPORTED when not built in. */
enum okv_status okv_backend_create(const char *name, const struct okv_backend_params *p, okv_backend **out);
void okv_backend_free(okv_backend *be);   /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
