/* Attention over a list of KV blocks per (sequence, KV head), CPU reference.
 *
 * Each query (row, head) walks its KV head's block list in order with an online softmax
 * (running max and sum, rescaling the accumulator when the max grows), so a block list of
 * any length needs O(head_dim) scratch. The mask is causal by absolute position: a query at
 * position p reads key positions kp <= p that are below the sequence's KV length.
 *
 * One work item is a tile: consecutive rows of one sequence (as many as ATT_TILE_FLOATS and
 * ATT_TILE_Q allow: 64 rows at hd 64 and GQA 4) and one KV head, with every query head of its
 * GQA group. The tile walks the block list once and runs
 * each of its queries over a block while the block's keys and values are in cache, so a
 * prefill chunk reads the KV once a tile instead of once a (row, head): each query takes the
 * same float steps in the same order as when it was an item of its own, so the output does not
 * depend on the tiling (nor on which other rows share the step). */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

struct attn_tile {
    int32_t t0, n_rows, kvh;   /* rows t0 .. t0 + n_rows - 1 (one sequence), KV head */
};

struct attn_job {
    float *out;
    const float *q;
    const struct okv_bkv *kv;
    int layer;
    const struct okv_attn_blocks *blocks;
    const struct okv_step_meta *meta;
    int n_heads;
    float scale;
    const struct attn_tile *tiles;
};

/* a tile's queries: acc of ATT_TILE_FLOATS floats, at most ATT_TILE_Q queries */
#define ATT_TILE_FLOATS 16384
#define ATT_TILE_Q 256

/* one query over one block: the block's scores, the running max m and sum l, acc */
static void attn_block(const float *q, const float *kb, const float *vb, int n_valid, int hd, float scale, float *acc,
                       float *m, float *l)
{
    float sc[256];
    float bmax = -INFINITY;
    for (int i = 0; i < n_valid; i++) {
        sc[i] = okv_cpu_dot(q, kb + (size_t)i * hd, hd) * scale;
        if (sc[i] > bmax)
            bmax = sc[i];
    }
    if (bmax > *m) {
        float r = expf(*m - bmax);   /* 0 when m is -inf */
        for (int d = 0; d < hd; d++)
            acc[d] *= r;
        *l *= r;
        *m = bmax;
    }
    for (int i = 0; i < n_valid; i++) {
        float p = expf(sc[i] - *m);
        *l += p;
        okv_cpu_axpy(acc, p, vb + (size_t)i * hd, hd);
    }
}

static void attn_tile_item(void *vctx, int64_t item)
{
    const struct attn_job *j = vctx;
    const struct okv_bkv *kv = j->kv;
    const struct attn_tile *tl = &j->tiles[item];
    const int hd = kv->g.head_dim, bs = kv->g.block_size, n_kv = kv->g.n_kv_heads, group = j->n_heads / n_kv;
    const int s = j->meta->tok_seq[tl->t0], kv_len = j->meta->seq_kv_len[s], nq = tl->n_rows * group;
    float acc[ATT_TILE_FLOATS], m[ATT_TILE_Q], l[ATT_TILE_Q];
    OKV_ASSERT(nq <= ATT_TILE_Q && (size_t)nq * hd <= ATT_TILE_FLOATS && bs <= 256);
    memset(acc, 0, sizeof(float) * (size_t)nq * hd);
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    const int list = s * n_kv + tl->kvh;
    for (int b = j->blocks->blk_start[list]; b < j->blocks->blk_start[list + 1]; b++) {
        const int first = j->blocks->blk_index[b] * bs;
        const float *kb = cpu_kv_unit(kv, false, j->layer, j->blocks->blk_unit[b]);
        const float *vb = cpu_kv_unit(kv, true, j->layer, j->blocks->blk_unit[b]);
        for (int r = 0; r < tl->n_rows; r++) {
            const int t = tl->t0 + r, pos = j->meta->tok_pos[t];
            int n_valid = bs;
            if (first + n_valid > kv_len)
                n_valid = kv_len - first;
            if (first + n_valid > pos + 1)
                n_valid = pos + 1 - first;
            if (n_valid <= 0)
                continue;
            for (int g = 0; g < group; g++) {
                const int qi = r * group + g, h = tl->kvh * group + g;
                attn_block(j->q + ((size_t)t * j->n_heads + h) * hd, kb, vb, n_valid, hd, j->scale, acc + (size_t)qi * hd,
                           &m[qi], &l[qi]);
            }
        }
    }
    for (int r = 0; r < tl->n_rows; r++)
        for (int g = 0; g < group; g++) {
            const int qi = r * group + g, h = tl->kvh * group + g;
            float *o = j->out + ((size_t)(tl->t0 + r) * j->n_heads + h) * hd;
            const float inv = l[qi] > 0.0f ? 1.0f / l[qi] : 0.0f;
            for (int d = 0; d < hd; d++)
                o[d] = acc[(size_t)qi * hd + d] * inv;
        }
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
    /* tiles: runs of consecutive rows of one sequence, cut at the rows a tile holds */
    const int hd = kv->g.head_dim, n_kv = kv->g.n_kv_heads, group = n_heads / n_kv;
    if (group > ATT_TILE_Q || (size_t)group * hd > ATT_TILE_FLOATS || kv->g.block_size > 256) {
        okv_free(copy);
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cpu attention: %d query heads a KV head of dim %d (block %d) are too many",
                             group, hd, kv->g.block_size);
    }
    int max_rows = ATT_TILE_FLOATS / (group * hd);
    if (max_rows > ATT_TILE_Q / group)
        max_rows = ATT_TILE_Q / group;
    struct attn_tile *tiles = okv_malloc(sizeof *tiles * ((size_t)n * n_kv + 1), OKV_TAG_BACKEND);
    if (!tiles) {
        okv_free(copy);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu attention: out of memory");
    }
    int n_tiles = 0;
    for (int t0 = 0; t0 < n;) {
        int rows = 1;
        while (t0 + rows < n && rows < max_rows && c->meta.tok_seq[t0 + rows] == c->meta.tok_seq[t0])
            rows++;
        for (int kvh = 0; kvh < n_kv; kvh++)
            tiles[n_tiles++] = (struct attn_tile){t0, rows, kvh};
        t0 += rows;
    }
    struct attn_job j = {out->data, q->data, kv, layer, &filled, &c->meta, n_heads, scale, tiles};
    okv_parallel_for(c->pool, n_tiles, attn_tile_item, &j);
    okv_free(tiles);
    okv_free(copy);
    return OKV_OK;
}
