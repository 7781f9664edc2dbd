/* The forward pass of the Llama family over a flat batch, on the backend interface.
 *
 * Per layer: h = rmsnorm(x); q,k,v = h W{q,k,v}^T (+bias); q/k head norm (Qwen3);
 * RoPE; K/V stored into the paged cache; attention over each sequence's blocks;
 * x += att Wo^T; h = rmsnorm(x); x += (silu(h Wg^T) * h Wu^T) Wd^T.
 * Finally the rows that want logits are gathered, normed and projected. */
#include "oasiskv/engine.h"

#include <math.h>
#include <string.h>

struct layer_w {
    okv_bweight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm;
    okv_bweight *ffn_norm, *w_gate, *w_up, *w_down;
};

struct okv_engine {
    struct okv_model_config cfg;
    okv_backend *be;
    okv_kv_cache *kv;
    int max_ctx;
    int max_batch;
    size_t weight_bytes;

    okv_bweight *tok_embd, *output_norm, *output;   /* output may alias tok_embd */
    struct layer_w *layers;

    float *inv_freq;            /* [head_dim/2] */

    /* activations, [max_batch][...] */
    okv_bmem *x, *h, *q, *k, *v, *att, *tmp, *gate, *up, *rows, *logits;
    int logits_rows_cap;

    /* per-step host metadata */
    int32_t *tok_seq, *tok_pos, *tok_slot, *rows_idx;
    float *rope_cs;             /* [max_batch][head_dim/2][2] */
    int32_t *bseq_id;           /* [max_batch] engine sequence of each batch-local sequence */
    int32_t *bseq_len;          /* [max_batch] KV length after the step */
    int32_t *blk_start, *blk_unit, *blk_index;
    int blk_cap;
};

static enum okv_status load_w(struct okv_engine *e, const struct okv_tensor_view *t, okv_bweight **out)
{
    *out = NULL;
    if (!t->data)
        return OKV_OK;
    enum okv_status st = e->be->ops->weight_load(e->be, t, out);
    if (st == OKV_OK)
        e->weight_bytes += e->be->ops->weight_bytes(*out);
    return st;
}

static void compute_inv_freq(const struct okv_model_config *c, float *inv_freq)
{
    const int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        /* as transformers does: base ** (arange(0, d, 2) / d) in float32 */
        float expo = (float)(2 * i) / (float)c->head_dim;
        double f = 1.0 / pow((double)c->rope_theta, (double)expo);
        if (c->rope_scaling == OKV_ROPE_SCALING_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_scaling == OKV_ROPE_SCALING_LLAMA3) {
            double orig = c->rope_orig_max_ctx;
            double low_wl = orig / c->rope_low_freq_factor, high_wl = orig / c->rope_high_freq_factor;
            double wl = 2.0 * M_PI / f;
            if (wl > low_wl) {
                f = f / c->rope_factor;
            } else if (wl >= high_wl) {
                double smooth = (orig / wl - c->rope_low_freq_factor) / (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        inv_freq[i] = (float)f;
    }
}

#define ALLOC_MEM(field, n) \
    do { if ((st = be->ops->mem_alloc(be, (size_t)(n), &e->field)) != OKV_OK) goto fail; } while (0)
#define ALLOC_HOST(field, n) \
    do { if (!(e->field = okv_calloc((size_t)(n), sizeof *e->field, OKV_TAG_ENGINE))) { st = okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory"); goto fail; } } while (0)

enum okv_status okv_engine_create(const struct okv_model *m, okv_backend *be, const struct okv_engine_params *p,
                                  okv_engine **out)
{
    *out = NULL;
    enum okv_status st;
    const struct okv_model_config *c = &m->cfg;
    struct okv_engine_params prm = p ? *p : (struct okv_engine_params){0};
    if (prm.block_size <= 0)
        prm.block_size = 16;
    if (prm.max_batch_tokens <= 0)
        prm.max_batch_tokens = 512;
    if (prm.max_seqs <= 0)
        prm.max_seqs = 1;
    if (prm.max_ctx <= 0)
        prm.max_ctx = c->max_ctx > 0 ? c->max_ctx : 4096;
    if (prm.block_size > 256 || (prm.block_size & (prm.block_size - 1)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "block size %d: must be a power of two up to 256", prm.block_size);
    if (c->head_dim % 2 || c->head_dim > 512 || c->n_heads % c->n_kv_heads)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "model: head_dim %d / heads %d / kv heads %d not supported",
                             c->head_dim, c->n_heads, c->n_kv_heads);

    struct okv_engine *e = okv_calloc(1, sizeof *e, OKV_TAG_ENGINE);
    if (!e)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    e->cfg = *c;
    e->be = be;
    e->max_ctx = prm.max_ctx;
    e->max_batch = prm.max_batch_tokens;

    if ((st = load_w(e, &m->tok_embd, &e->tok_embd)) != OKV_OK || (st = load_w(e, &m->output_norm, &e->output_norm)) != OKV_OK)
        goto fail;
    if (m->output.data && m->output.data != m->tok_embd.data) {
        if ((st = load_w(e, &m->output, &e->output)) != OKV_OK)
            goto fail;
    } else {
        e->output = e->tok_embd;
    }
    ALLOC_HOST(layers, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        const struct okv_layer_weights *lw = &m->layers[l];
        struct layer_w *w = &e->layers[l];
        const struct { const struct okv_tensor_view *t; okv_bweight **w; } list[] = {
            {&lw->attn_norm, &w->attn_norm}, {&lw->wq, &w->wq}, {&lw->wk, &w->wk}, {&lw->wv, &w->wv},
            {&lw->wo, &w->wo}, {&lw->bq, &w->bq}, {&lw->bk, &w->bk}, {&lw->bv, &w->bv},
            {&lw->q_norm, &w->q_norm}, {&lw->k_norm, &w->k_norm}, {&lw->ffn_norm, &w->ffn_norm},
            {&lw->w_gate, &w->w_gate}, {&lw->w_up, &w->w_up}, {&lw->w_down, &w->w_down},
        };
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
            if ((st = load_w(e, list[i].t, list[i].w)) != OKV_OK)
                goto fail;
    }

    ALLOC_HOST(inv_freq, c->head_dim / 2);
    compute_inv_freq(c, e->inv_freq);

    int slots = prm.kv_slots;
    if (slots <= 0)
        slots = prm.max_seqs * ((prm.max_ctx + prm.block_size - 1) / prm.block_size);
    struct okv_kv_geometry g = {.n_layers = c->n_layers, .n_group_slots = slots, .block_size = prm.block_size,
                               .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim};
    if ((st = okv_kv_cache_create(be, &g, &e->kv)) != OKV_OK)
        goto fail;

    const int T = e->max_batch, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    ALLOC_MEM(x, T * c->dim);
    ALLOC_MEM(h, T * c->dim);
    ALLOC_MEM(q, T * qd);
    ALLOC_MEM(k, T * kvd);
    ALLOC_MEM(v, T * kvd);
    ALLOC_MEM(att, T * qd);
    ALLOC_MEM(tmp, T * c->dim);
    ALLOC_MEM(gate, T * c->ffn_dim);
    ALLOC_MEM(up, T * c->ffn_dim);
    ALLOC_MEM(rows, T * c->dim);
    ALLOC_HOST(tok_seq, T);
    ALLOC_HOST(tok_pos, T);
    ALLOC_HOST(tok_slot, T);
    ALLOC_HOST(rows_idx, T);
    ALLOC_HOST(rope_cs, (size_t)T * c->head_dim);
    ALLOC_HOST(bseq_id, T);
    ALLOC_HOST(bseq_len, T);
    ALLOC_HOST(blk_start, (size_t)T * c->n_kv_heads + 1);
    *out = e;
    return OKV_OK;
fail:
    okv_engine_free(e);
    return st;
}

void okv_engine_free(okv_engine *e)
{
    if (!e)
        return;
    okv_backend *be = e->be;
    if (e->output != e->tok_embd)
        be->ops->weight_free(be, e->output);
    be->ops->weight_free(be, e->tok_embd);
    be->ops->weight_free(be, e->output_norm);
    if (e->layers) {
        for (int l = 0; l < e->cfg.n_layers; l++) {
            struct layer_w *w = &e->layers[l];
            okv_bweight *all[] = {w->attn_norm, w->wq, w->wk, w->wv, w->wo, w->bq, w->bk, w->bv,
                                  w->q_norm, w->k_norm, w->ffn_norm, w->w_gate, w->w_up, w->w_down};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                if (all[i])
                    be->ops->weight_free(be, all[i]);
        }
    }
    okv_free(e->layers);
    okv_kv_cache_free(e->kv);
    okv_bmem *mems[] = {e->x, e->h, e->q, e->k, e->v, e->att, e->tmp, e->gate, e->up, e->rows, e->logits};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            be->ops->mem_free(be, mems[i]);
    okv_free(e->inv_freq);
    okv_free(e->tok_seq);
    okv_free(e->tok_pos);
    okv_free(e->tok_slot);
    okv_free(e->rows_idx);
    okv_free(e->rope_cs);
    okv_free(e->bseq_id);
    okv_free(e->bseq_len);
    okv_free(e->blk_start);
    okv_free(e->blk_unit);
    okv_free(e->blk_index);
    okv_free(e);
}

const struct okv_model_config *okv_engine_model_config(const okv_engine *e) { return &e->cfg; }
int okv_engine_max_ctx(const okv_engine *e) { return e->max_ctx; }
int okv_engine_max_batch_tokens(const okv_engine *e) { return e->max_batch; }
okv_kv_cache *okv_engine_kv(okv_engine *e) { return e->kv; }
size_t okv_engine_weight_bytes(const okv_engine *e) { return e->weight_bytes; }

int okv_engine_block_size(const okv_engine *e) { return okv_kv_geometry(e->kv)->block_size; }
int okv_engine_blocks_total(const okv_engine *e) { return okv_kv_geometry(e->kv)->n_group_slots; }
int okv_engine_blocks_needed(const okv_engine *e, int n_tokens)
{
    int bs = okv_kv_geometry(e->kv)->block_size;
    return (n_tokens + bs - 1) / bs;
}

enum okv_status okv_engine_seq_create(okv_engine *e, int *seq) { return okv_kv_seq_create(e->kv, seq); }
void okv_engine_seq_free(okv_engine *e, int seq) { okv_kv_seq_free(e->kv, seq); }
int okv_engine_seq_len(const okv_engine *e, int seq) { return okv_kv_seq_len(e->kv, seq); }
void okv_engine_seq_truncate(okv_engine *e, int seq, int len) { okv_kv_seq_truncate(e->kv, seq, len); }

/* Validate the batch, reserve KV space for every sequence in it (all or nothing)
 * and fill the step's host metadata. Returns the number of batch-local sequences. */
static enum okv_status plan_step(okv_engine *e, const struct okv_batch *b, int *n_seqs_out)
{
    const int n = b->n_tokens;
    int n_seqs = 0;
    for (int t = 0; t < n; t++) {
        int s = b->seq[t];
        if (t == 0 || s != b->seq[t - 1]) {
            for (int j = 0; j < n_seqs; j++)
                if (e->bseq_id[j] == s)
                    return okv_set_error(OKV_ERR_INVALID_ARG, "batch: rows of sequence %d are not contiguous", s);
            if (!okv_kv_seq_valid(e->kv, s))
                return okv_set_error(OKV_ERR_INVALID_ARG, "batch: unknown sequence %d", s);
            e->bseq_id[n_seqs] = s;
            e->bseq_len[n_seqs] = okv_kv_seq_len(e->kv, s);
            n_seqs++;
        }
        int bs = n_seqs - 1;
        e->tok_seq[t] = bs;
        e->tok_pos[t] = e->bseq_len[bs]++;
        if (b->tokens[t] < 0 || b->tokens[t] >= e->cfg.vocab_size)
            return okv_set_error(OKV_ERR_INVALID_ARG, "batch: token id %d out of range [0, %d)", b->tokens[t], e->cfg.vocab_size);
    }
    for (int j = 0; j < n_seqs; j++)
        if (e->bseq_len[j] > e->max_ctx)
            return okv_set_error(OKV_ERR_CONTEXT, "sequence %d: %d tokens exceed the context length %d",
                                 e->bseq_id[j], e->bseq_len[j], e->max_ctx);
    for (int j = 0; j < n_seqs; j++) {
        int s = e->bseq_id[j];
        int len = okv_kv_seq_len(e->kv, s);
        enum okv_status st = okv_kv_seq_reserve(e->kv, s, e->bseq_len[j] - len);
        if (st != OKV_OK) {
            for (int i = 0; i < j; i++)
                okv_kv_seq_truncate(e->kv, e->bseq_id[i], okv_kv_seq_len(e->kv, e->bseq_id[i]));
            return st;
        }
    }
    for (int t = 0; t < n; t++)
        e->tok_slot[t] = okv_kv_seq_slot(e->kv, e->bseq_id[e->tok_seq[t]], e->tok_pos[t]);

    /* dense block lists: every block of the sequence, for every KV head */
    const int nkv = e->cfg.n_kv_heads, bsz = okv_kv_geometry(e->kv)->block_size;
    int total = 0;
    for (int j = 0; j < n_seqs; j++)
        total += nkv * ((e->bseq_len[j] + bsz - 1) / bsz);
    if (total > e->blk_cap) {
        int cap = total * 2;
        int32_t *a = okv_realloc(e->blk_unit, sizeof(int32_t) * (size_t)cap, OKV_TAG_ENGINE);
        if (a)
            e->blk_unit = a;
        int32_t *c = okv_realloc(e->blk_index, sizeof(int32_t) * (size_t)cap, OKV_TAG_ENGINE);
        if (c)
            e->blk_index = c;
        if (!a || !c) {
            for (int i = 0; i < n_seqs; i++)
                okv_kv_seq_truncate(e->kv, e->bseq_id[i], okv_kv_seq_len(e->kv, e->bseq_id[i]));
            return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
        }
        e->blk_cap = cap;
    }
    int at = 0;
    for (int j = 0; j < n_seqs; j++) {
        int nb;
        const int32_t *tbl = okv_kv_seq_blocks(e->kv, e->bseq_id[j], &nb);
        int used = (e->bseq_len[j] + bsz - 1) / bsz;
        OKV_ASSERT(used <= nb);
        for (int h = 0; h < nkv; h++) {
            e->blk_start[j * nkv + h] = at;
            for (int i = 0; i < used; i++) {
                e->blk_unit[at] = tbl[i] * nkv + h;
                e->blk_index[at] = i;
                at++;
            }
        }
    }
    e->blk_start[n_seqs * nkv] = at;

    /* RoPE angles: position times inverse frequency, in float32 as the reference does */
    const int half = e->cfg.head_dim / 2;
    for (int t = 0; t < n; t++) {
        float *row = e->rope_cs + (size_t)t * e->cfg.head_dim;
        for (int i = 0; i < half; i++) {
            float ang = (float)e->tok_pos[t] * e->inv_freq[i];
            row[2 * i] = (float)cos((double)ang);
            row[2 * i + 1] = (float)sin((double)ang);
        }
    }
    *n_seqs_out = n_seqs;
    return OKV_OK;
}

#define CK(call) do { if ((st = (call)) != OKV_OK) goto fail; } while (0)

enum okv_status okv_engine_forward(okv_engine *e, const struct okv_batch *b, float *logits)
{
    enum okv_status st;
    const int n = b->n_tokens;
    if (n <= 0 || n > e->max_batch)
        return okv_set_error(OKV_ERR_INVALID_ARG, "batch: %d rows (1 to %d allowed)", n, e->max_batch);
    int n_seqs = 0;
    if ((st = plan_step(e, b, &n_seqs)) != OKV_OK)
        return st;

    okv_backend *be = e->be;
    const struct okv_backend_ops *o = be->ops;
    const struct okv_model_config *c = &e->cfg;
    const int dim = c->dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    const bool half = c->rope_pairing == OKV_ROPE_PAIRING_HALF;
    const float scale = 1.0f / sqrtf((float)hd);

    struct okv_step_meta meta = {n, n_seqs, e->tok_seq, e->tok_pos, e->tok_slot, NULL, e->rope_cs, e->bseq_len};
    struct okv_attn_blocks blocks = {e->blk_start, e->blk_unit, e->blk_index};
    okv_bkv *kvs = okv_kv_storage(e->kv);

    CK(o->step_begin(be, &meta));
    CK(o->embed(be, e->x, e->tok_embd, b->tokens, n, dim));
    for (int l = 0; l < c->n_layers; l++) {
        const struct layer_w *w = &e->layers[l];
        CK(o->rmsnorm(be, e->h, e->x, w->attn_norm, n, dim, c->rms_eps));
        CK(o->matmul(be, e->q, e->h, w->wq, w->bq, n, dim, qd));
        CK(o->matmul(be, e->k, e->h, w->wk, w->bk, n, dim, kvd));
        CK(o->matmul(be, e->v, e->h, w->wv, w->bv, n, dim, kvd));
        if (w->q_norm) {
            CK(o->head_rmsnorm(be, e->q, w->q_norm, n, c->n_heads, hd, c->rms_eps));
            CK(o->head_rmsnorm(be, e->k, w->k_norm, n, c->n_kv_heads, hd, c->rms_eps));
        }
        CK(o->rope(be, e->q, n, c->n_heads, hd, half));
        CK(o->rope(be, e->k, n, c->n_kv_heads, hd, half));
        CK(o->kv_write(be, kvs, l, e->k, e->v));
        CK(o->attention(be, e->att, e->q, kvs, l, &blocks, c->n_heads, scale));
        CK(o->matmul(be, e->tmp, e->att, w->wo, NULL, n, qd, dim));
        CK(o->add(be, e->x, e->tmp, (size_t)n * dim));
        CK(o->rmsnorm(be, e->h, e->x, w->ffn_norm, n, dim, c->rms_eps));
        CK(o->matmul(be, e->gate, e->h, w->w_gate, NULL, n, dim, c->ffn_dim));
        CK(o->matmul(be, e->up, e->h, w->w_up, NULL, n, dim, c->ffn_dim));
        CK(o->swiglu(be, e->gate, e->gate, e->up, n, c->ffn_dim));
        CK(o->matmul(be, e->tmp, e->gate, w->w_down, NULL, n, c->ffn_dim, dim));
        CK(o->add(be, e->x, e->tmp, (size_t)n * dim));
    }

    int n_rows = 0;
    for (int t = 0; t < n; t++)
        if (b->want_logits && b->want_logits[t])
            e->rows_idx[n_rows++] = t;
    if (n_rows > 0) {
        if (n_rows > e->logits_rows_cap) {
            if (e->logits)
                o->mem_free(be, e->logits);
            e->logits = NULL;
            e->logits_rows_cap = 0;
            CK(o->mem_alloc(be, (size_t)n_rows * c->vocab_size, &e->logits));
            e->logits_rows_cap = n_rows;
        }
        CK(o->gather_rows(be, e->rows, e->x, e->rows_idx, n_rows, dim));
        CK(o->rmsnorm(be, e->rows, e->rows, e->output_norm, n_rows, dim, c->rms_eps));
        CK(o->matmul(be, e->logits, e->rows, e->output, NULL, n_rows, dim, c->vocab_size));
        CK(o->mem_read(be, e->logits, 0, logits, (size_t)n_rows * c->vocab_size));
    }
    CK(o->sync(be));
    for (int j = 0; j < n_seqs; j++)
        okv_kv_seq_commit(e->kv, e->bseq_id[j], e->bseq_len[j] - okv_kv_seq_len(e->kv, e->bseq_id[j]));
    return OKV_OK;
fail:
    for (int j = 0; j < n_seqs; j++)
        okv_kv_seq_truncate(e->kv, e->bseq_id[j], okv_kv_seq_len(e->kv, e->bseq_id[j]));
    return st;
}
