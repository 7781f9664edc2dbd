/* Attention over a list of KV blocks per (sequence, KV head), CPU reference.
 *
 * One work item is one (query row, query head). The item walks its KV head's block
 * list in order with an online softmax (running max and sum, rescaling the
 * accumulator when the max grows), so a block list of any length needs O(head_dim)
 * scratch. The mask is causal by absolute position: a query at position p reads
 * key positions kp <= p that are below the sequence's KV length. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

struct attn_job {
    float *out;
    const float *q;
    const struct okv_bkv *kv;
    int layer;
    const struct okv_attn_blocks *blocks;
    const struct okv_step_meta *meta;
    int n_heads;
    float scale;
};

static void attn_item(void *vctx, int64_t item)
{
    const struct attn_job *j = vctx;
    const struct okv_bkv *kv = j->kv;
    const int hd = kv->g.head_dim, bs = kv->g.block_size, n_kv = kv->g.n_kv_heads;
    const int t = (int)(item / j->n_heads), h = (int)(item % j->n_heads);
    const int kvh = h / (j->n_heads / n_kv);
    const int s = j->meta->tok_seq[t];
    const int pos = j->meta->tok_pos[t];
    const int kv_len = j->meta->seq_kv_len[s];
    const float *q = j->q + ((size_t)t * j->n_heads + h) * hd;
    float *o = j->out + ((size_t)t * j->n_heads + h) * hd;

    float acc[512];
    OKV_ASSERT(hd <= 512);
    memset(acc, 0, sizeof(float) * (size_t)hd);
    float m = -INFINITY, l = 0.0f;
    float sc[256];
    OKV_ASSERT(bs <= 256);

    const int list = s * n_kv + kvh;
    for (int b = j->blocks->blk_start[list]; b < j->blocks->blk_start[list + 1]; b++) {
        const int unit = j->blocks->blk_unit[b];
        const int first = j->blocks->blk_index[b] * bs;
        int n_valid = bs;
        if (first + n_valid > kv_len)
            n_valid = kv_len - first;
        if (first + n_valid > pos + 1)
            n_valid = pos + 1 - first;
        if (n_valid <= 0)
            continue;
        const float *kb = cpu_kv_unit(kv, false, j->layer, unit);
        const float *vb = cpu_kv_unit(kv, true, j->layer, unit);
        float bmax = -INFINITY;
        for (int i = 0; i < n_valid; i++) {
            sc[i] = okv_cpu_dot(q, kb + (size_t)i * hd, hd) * j->scale;
            if (sc[i] > bmax)
                bmax = sc[i];
        }
        if (bmax > m) {
            float r = expf(m - bmax);   /* 0 when m is -inf */
            for (int d = 0; d < hd; d++)
                acc[d] *= r;
            l *= r;
            m = bmax;
        }
        for (int i = 0; i < n_valid; i++) {
            float p = expf(sc[i] - m);
            l += p;
            okv_cpu_axpy(acc, p, vb + (size_t)i * hd, hd);
        }
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = 0; d < hd; d++)
        o[d] = acc[d] * inv;
}

enum okv_status okv_cpu_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                  const struct okv_attn_blocks *blocks, int n_heads, float scale)
{
    struct cpu_ctx *c = be->ctx;
    const int n = c->meta.n_tokens;
    const size_t need = (size_t)n * n_heads * kv->g.head_dim;
    if (out->n < need || q->n < need || n_heads % kv->g.n_kv_heads != 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu attention: bad shapes (%d rows, %d heads)", n, n_heads);
    struct okv_attn_blocks filled = *blocks;
    int32_t *copy = NULL;
    if (blocks->sel_fill) {   /* residency held by the backend: the selection replaces the placeholders */
        const int n_lists = c->meta.n_seqs * kv->g.n_kv_heads, n_blocks = blocks->blk_start[n_lists];
        copy = okv_malloc(sizeof(int32_t) * (2 * (size_t)n_blocks + 1), OKV_TAG_BACKEND);
        if (!copy)
            return okv_set_error(OKV_ERR_NO_MEMORY, "cpu attention: out of memory");
        memcpy(copy, blocks->blk_unit, sizeof(int32_t) * (size_t)n_blocks);
        memcpy(copy + n_blocks, blocks->blk_index, sizeof(int32_t) * (size_t)n_blocks);
        enum okv_status st = okv_cpu_resid_fill(kv, layer, blocks, n_lists, copy, copy + n_blocks);
        if (st != OKV_OK) {
            okv_free(copy);
            return st;
        }
        filled.blk_unit = copy;
        filled.blk_index = copy + n_blocks;
    }
    struct attn_job j = {out->data, q->data, kv, layer, &filled, &c->meta, n_heads, scale};
    okv_parallel_for(c->pool, (int64_t)n * n_heads, attn_item, &j);
    okv_free(copy);
    return OKV_OK;
}
