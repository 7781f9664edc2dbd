/* Private state of the CPU backend, shared by its files. */
#ifndef OKV_BACKEND_CPU_INTERNAL_H
#define OKV_BACKEND_CPU_INTERNAL_H

#include "oasiskv/backend.h"
#include "util/threadpool.h"

#include <math.h>

struct okv_bmem {
    float *data;
    size_t n;          /* floats */
};

struct okv_bweight {
    float *data;       /* fp32 copy, row-major [rows][row_len] */
    int64_t rows;
    int64_t row_len;
    /* the stored format too (cpu_qgemv.c: decode-shaped projections read it), or NULL */
    uint8_t *q;
    enum okv_dtype qtype;
    size_t q_row_bytes;
};

/* Projections of 1..OKV_CPU_QGEMV_ROWS rows from a weight's stored format (cpu_qgemv.c):
 * whether a dtype is kept for them, and out[t * m + r] = x[t] . row r of w for r in
 * [r0, r1), t < n. */
#define OKV_CPU_QGEMV_ROWS 4
/* matmuls of up to this many rows take it (groups of OKV_CPU_QGEMV_ROWS, each a pass over
 * the weights; SmolLM2 Q4_1: batch 8 and 16 steps faster than sgemm over fp32) */
#define OKV_CPU_QGEMV_MAX_ROWS 16
bool okv_cpu_qgemv_type(enum okv_dtype t);
void okv_cpu_qgemv(const okv_bweight *w, const float *x, int n, int m, int r0, int r1, float *out);

struct cpu_fetcher;

struct okv_bkv {
    struct okv_kv_geometry g;
    size_t unit_floats;    /* block_size * head_dim */
    size_t *layer_units;   /* [n_layers]: n_group_slots * n_kv_heads + the layer's sparse units */
    size_t *layer_off;     /* [n_layers]: first unit of the layer in k and v */
    size_t total_units;
    int slot_ids;          /* group slot ids kv_write and kv_move may name: the group slots, then the whole
                              slots of the sparse region that every layer has (kv.h: lending) */
    float *k;              /* device tier: layer l's units [layer_units[l]][block_size][head_dim] at layer_off[l] */
    float *v;
    float *sk, *sv;        /* staging [2 * n_stage_units][block_size][head_dim] */
    float *hk;             /* host tier [n_layers][n_host_blocks][n_kv_heads][block_size][head_dim] */
    float *hv;
    uint8_t *hk8, *hv8;    /* the same in FP8 E4M3 when g.host_fp8 (hk, hv NULL) */
    float dec8[256];       /* e4m3 code -> float */
    float *scratch;        /* a unit of decoded keys (the driving thread's: summaries, codes), or NULL */
    float *summ;           /* [n_layers][n_host_blocks][n_kv_heads][2][head_dim]: kmin, kmax */
    uint8_t *codes;        /* [n_layers][n_host_blocks][n_kv_heads][okv_key_code_bytes]: per-token key codes, or NULL */
    struct cpu_fetcher *fetch;   /* background copy worker (host tier -> device units) */
    struct cpu_resid *resid;     /* residency held by the backend (cpu_resid.c), or NULL */
};

struct cpu_ctx {
    okv_threadpool *pool;
    int n_threads;
    bool qgemv;                  /* weights keep their stored format for decode rows (OKV_CPU_QGEMV=0: not) */
    struct okv_step_meta meta;   /* borrowed host arrays of the current step */
    int32_t *qids[2];            /* sample_queue's id buffers */
    int qids_cap[2], qids_n[2];
    float *qrows[2];             /* sample_queue's copied logit rows */
    size_t qrows_cap[2];         /* floats */
    int qrows_n[2], qrows_vocab[2];   /* rows, floats a row */
};

/* K (is_v false) or V of a device unit, staging units included. */
static inline float *cpu_kv_unit(const struct okv_bkv *kv, bool is_v, int layer, int64_t unit)
{
    if (unit & OKV_UNIT_STAGE)
        return (is_v ? kv->sv : kv->sk) + (size_t)(unit & ~(int64_t)OKV_UNIT_STAGE) * kv->unit_floats;
    return (is_v ? kv->v : kv->k) + (kv->layer_off[layer] + (size_t)unit) * kv->unit_floats;
}

static inline bool cpu_kv_unit_valid(const struct okv_bkv *kv, int layer, int64_t unit)
{
    if (unit & OKV_UNIT_STAGE)
        return (unit & ~(int64_t)OKV_UNIT_STAGE) < 2 * (int64_t)kv->g.n_stage_units;
    return unit >= 0 && (size_t)unit < kv->layer_units[layer];
}

/* host tier: unit of (host block, head) */
/* a host tier exists (float or fp8) */
static inline bool cpu_kv_has_host(const struct okv_bkv *kv) { return kv->hk || kv->hk8; }

/* K or V of a host unit stored in fp8 */
static inline uint8_t *cpu_kv_host8(const struct okv_bkv *kv, uint8_t *base, int layer, int64_t host_block, int head)
{
    return base + (((size_t)layer * (size_t)kv->g.n_host_blocks + (size_t)host_block) * (size_t)kv->g.n_kv_heads + (size_t)head) *
                      kv->unit_floats;
}

static inline float *cpu_kv_host(const struct okv_bkv *kv, float *base, int layer, int64_t host_block, int head)
{
    return base + (((size_t)layer * (size_t)kv->g.n_host_blocks + (size_t)host_block) * (size_t)kv->g.n_kv_heads + (size_t)head) *
                      kv->unit_floats;
}

static inline float *cpu_kv_summary(const struct okv_bkv *kv, int layer, int64_t host_block, int head)
{
    return kv->summ + (((size_t)layer * (size_t)kv->g.n_host_blocks + (size_t)host_block) * (size_t)kv->g.n_kv_heads + (size_t)head) *
                          2 * (size_t)kv->g.head_dim;
}

static inline uint8_t *cpu_kv_codes(const struct okv_bkv *kv, int layer, int64_t host_block, int head)
{
    return kv->codes + (((size_t)layer * (size_t)kv->g.n_host_blocks + (size_t)host_block) * (size_t)kv->g.n_kv_heads +
                        (size_t)head) * okv_key_code_bytes(&kv->g);
}

/* a key channel's code: one of top + 1 levels of the block's [lo, lo + span] (backend.h) */
static inline int cpu_key_quantize(float k, float lo, float span, int top)
{
    const int code = span > 0 ? (int)rintf((k - lo) / span * (float)top) : 0;
    return code < 0 ? 0 : code > top ? top : code;
}

/* the code of channel d of key t (backend.h: B bits each, t-major, low bits first) */
static inline int cpu_key_code(const uint8_t *codes, int bits, size_t i /* t * head_dim + d */)
{
    return (codes[i * (size_t)bits / 8] >> ((i * (size_t)bits) % 8)) & ((1 << bits) - 1);
}

float okv_cpu_dot(const float *a, const float *b, int n);
void okv_cpu_axpy(float *y, float a, const float *x, int n);   /* y += a*x */

enum okv_status okv_cpu_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                      const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores);
/* KV storage and the fetch worker (cpu_kv.c) */
enum okv_status okv_cpu_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out);
void okv_cpu_kv_free(okv_backend *be, okv_bkv *kv);
extern const struct okv_backend_ops okv_cpu_kv_ops_template;
void okv_cpu_fill_kv_ops(struct okv_backend_ops *ops);
/* residency (cpu_resid.c) */
void okv_cpu_fill_resid_ops(struct okv_backend_ops *ops);
void okv_cpu_resid_free(okv_bkv *kv);
/* attention lists: the placeholders of b->sel_fill replaced in unit / index (copies of
 * the lists) */
enum okv_status okv_cpu_resid_fill(const okv_bkv *kv, int layer, const struct okv_attn_blocks *b, int n_lists, int32_t *unit,
                                   int32_t *index);

enum okv_status okv_cpu_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                  const struct okv_attn_blocks *blocks, int n_heads, float scale);

#endif
