/* The forward pass of the Llama family over a flat batch, on the backend interface,
 * and the OasisKV selection around it.
 *
 * Per layer: h = rmsnorm(x); q,k,v = h W{q,k,v}^T (+bias); q/k head norm (Qwen3);
 * RoPE; K/V written to the device group slots (and through to the host tier);
 * attention over each (sequence, KV head)'s block list; x += att Wo^T;
 * h = rmsnorm(x); x += (silu(h Wg^T) * h Wu^T) Wd^T. Finally the rows that want
 * logits are gathered, normed and projected.
 *
 * Sparse mode, for a sequence past its budget: blocks [sink, cand_end) live in the
 * host tier alone and are reached through the selection of the step; sink blocks
 * and the window [cand_end, n_blocks) keep group slots. Right after layer l's
 * attention of step t the queries of step t (its token, or its token and drafted
 * lookahead tokens) score every candidate block of layer l; the top blocks become
 * S(t+1, l) and the ones not resident are fetched in the background while the
 * remaining layers compute. Step t+1 waits at layer l for layer l's fetches only.
 * A prefill chunk of a sequence whose older blocks left the device reads them
 * from a staging buffer, fetched one layer ahead. Lists are in block order, so a
 * selection of every block gives bit for bit the dense result. The selection itself
 * lives in sparse.c. */
#include "engine_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static _Atomic uint64_t lists_versions;

static void rollback(okv_engine *e, int n_seqs)
{
    for (int j = 0; j < n_seqs; j++)
        okv_kv_seq_truncate(e->kv, e->bs[j].id, okv_kv_seq_len(e->kv, e->bs[j].id));
}

/* Validate the batch, reserve KV space for every sequence in it (all or nothing),
 * decide each sequence's attention mode and fill the step's host metadata. */
static enum okv_status plan_step(okv_engine *e, const struct okv_batch *b, const int32_t *prev, int *n_seqs_out)
{
    const int n = b->n_tokens;
    int n_seqs = 0;
    for (int t = 0; t < n; t++) {
        int s = b->seq[t];
        if (t == 0 || s != b->seq[t - 1]) {
            for (int j = 0; j < n_seqs; j++)
                if (e->bs[j].id == s)
                    return okv_set_error(OKV_ERR_INVALID_ARG, "batch: rows of sequence %d are not contiguous", s);
            if (!okv_kv_seq_valid(e->kv, s))
                return okv_set_error(OKV_ERR_INVALID_ARG, "batch: unknown sequence %d", s);
            struct bseq *bs = &e->bs[n_seqs];
            memset(bs, 0, sizeof *bs);
            bs->id = s;
            bs->r0 = t;
            bs->len0 = bs->len = okv_kv_seq_len(e->kv, s);
            n_seqs++;
        }
        struct bseq *bs = &e->bs[n_seqs - 1];
        bs->r1 = t + 1;
        e->tok_seq[t] = n_seqs - 1;
        e->tok_pos[t] = bs->len++;
        if ((!prev || prev[t] < 0) && (b->tokens[t] < 0 || b->tokens[t] >= e->cfg.vocab_size))
            return okv_set_error(OKV_ERR_INVALID_ARG, "batch: token id %d out of range [0, %d)", b->tokens[t], e->cfg.vocab_size);
    }
    for (int j = 0; j < n_seqs; j++)
        if (e->bs[j].len > e->max_ctx)
            return okv_set_error(OKV_ERR_CONTEXT, "sequence %d: %d tokens exceed the context length %d", e->bs[j].id,
                                 e->bs[j].len, e->max_ctx);
    const int bsz = okv_kv_geometry(e->kv)->block_size;
    if (e->lend) {
        /* dense while room: the new blocks of the step, made free by demotions if need be */
        int need = 0;
        for (int j = 0; j < n_seqs; j++) {
            int nb;
            okv_kv_seq_blocks(e->kv, e->bs[j].id, &nb);
            const int want = (e->bs[j].len + bsz - 1) / bsz;
            need += want > nb ? want - nb : 0;
        }
        for (int j = 0; j < n_seqs; j++)
            e->seqs[e->bs[j].id].prefilling_now = !e->seqs[e->bs[j].id].decode;
        enum okv_status st = okv_engine_make_room(e, need);
        for (int j = 0; j < n_seqs; j++)
            e->seqs[e->bs[j].id].prefilling_now = false;
        if (st != OKV_OK) {
            rollback(e, n_seqs);
            return st;
        }
    }
    for (int j = 0; j < n_seqs; j++) {
        enum okv_status st = okv_kv_seq_reserve(e->kv, e->bs[j].id, e->bs[j].len - e->bs[j].len0);
        if (st != OKV_OK) {
            rollback(e, j);
            return st;
        }
    }
    const bool host = e->resid != NULL;
    for (int t = 0; t < n; t++) {
        int id = e->bs[e->tok_seq[t]].id;
        e->tok_slot[t] = okv_kv_seq_slot(e->kv, id, e->tok_pos[t]);
        e->tok_host[t] = host ? okv_kv_seq_host_slot(e->kv, id, e->tok_pos[t]) : -1;
    }

    const int sink = e->prm.sink_blocks, win = e->prm.window_blocks;
    for (int j = 0; j < n_seqs; j++) {
        struct bseq *bs = &e->bs[j];
        struct eseq *es = &e->seqs[bs->id];
        const int budget = okv_engine_seq_dense_upto(e, es);
        bs->nb = (bs->len + bsz - 1) / bsz;
        e->bseq_len[j] = bs->len;
        bs->ends_prefill = !es->decode && b->want_logits && b->want_logits[bs->r1 - 1] == 1;
        es->rows_stale = false;
        if (e->streaming) {
            bs->sel = es->cand_end > sink;
            bs->cand_end = es->cand_end;
            continue;
        }
        if (!e->resid)
            continue;
        /* blocks already released (drafted rows that were later rejected can have
         * pushed cand_end past n_blocks - window) stay behind the selection */
        int cand_end = bs->nb - win > es->cand_end ? bs->nb - win : es->cand_end;
        if (e->prm.predict == OKV_PREDICT_ORACLE || e->prm.predict == OKV_PREDICT_LAYER_AHEAD) {
            bs->sel = bs->inline_sel = es->decode && bs->len > budget && cand_end > sink;
            bs->cand_end = cand_end;
            /* layer-ahead with a step-ahead prefetch: each layer's blocks also predicted from this
             * step's queries, so that most of what the next step's estimate chooses is resident
             * before it; the attention reads the estimate's choice alone */
            bs->predict = e->la_prefetch && bs->sel;
            bs->pred_cand_end = cand_end;
        } else {
            /* a decode step without a prediction (the first after a failed step, or
             * after okv_engine_seq_fill_random) selects with its own queries */
            bs->sel = es->decode && (es->sparse || es->cand_end > sink);
            /* ... and so does a verify step when asked (okv_engine_params.verify_inline): its drafted
             * rows (a sequence's rows end with them) stand past the queries that predicted its set */
            const bool verify = e->verify_inline && b->is_draft && b->is_draft[bs->r1 - 1];
            bs->inline_sel = bs->sel && (!es->sparse || verify);
            es->rows_stale = bs->sel && !bs->inline_sel && bs->r1 - bs->r0 > 1;
            bs->cand_end = es->cand_end;
            /* the prompt's last token predicts only when asked to: otherwise the first
             * decode step has no prediction and selects inline with its own queries */
            bs->predict = (es->decode || (bs->ends_prefill && e->prm.predict_from_prompt)) && bs->len > budget &&
                          cand_end > sink;
            bs->pred_cand_end = cand_end;
        }
        e->stats.inline_selections += bs->inline_sel;
    }

    /* RoPE angles: position times inverse frequency, in float32 as the reference does; YaRN
     * scales cos and sin by its attention factor */
    const int half = e->cfg.head_dim / 2;
    const float scale = e->cfg.rope_scaling == OKV_ROPE_SCALING_YARN && e->cfg.rope_attn_factor > 0 ? e->cfg.rope_attn_factor
                                                                                                     : 1.0f;
    for (int t = 0; t < n; t++) {
        float *row = e->rope_cs + (size_t)t * e->cfg.head_dim;
        for (int i = 0; i < half; i++) {
            float ang = (float)e->tok_pos[t] * e->inv_freq[i];
            row[2 * i] = (float)cos((double)ang) * scale;
            row[2 * i + 1] = (float)sin((double)ang) * scale;
        }
    }
    *n_seqs_out = n_seqs;
    return OKV_OK;
}

/* After a successful step: lengths, phases, and blocks leaving the window give
 * their group slots back (their KV is in the host tier). */
static void finish_step(okv_engine *e, int n_seqs)
{
    const int sink = e->prm.sink_blocks, win = e->prm.window_blocks;
    for (int j = 0; j < n_seqs; j++) {
        struct bseq *bs = &e->bs[j];
        struct eseq *es = &e->seqs[bs->id];
        okv_kv_seq_commit(e->kv, bs->id, bs->len - bs->len0);
        if (bs->ends_prefill)
            es->decode = true;
        if (e->streaming) {
            int keep_from = bs->nb - win;
            if (bs->len > e->dense_upto && keep_from > sink) {
                for (int blk = sink; blk < keep_from; blk++)
                    okv_kv_seq_drop_group(e->kv, bs->id, blk);
                if (keep_from > es->cand_end)
                    es->cand_end = keep_from;
            }
            continue;
        }
        if (!e->resid)
            continue;
        if (bs->predict) {
            es->sparse = true;
            es->cand_end = bs->pred_cand_end;
        }
        if (bs->len > okv_engine_seq_dense_upto(e, es) && bs->nb - win > sink) {
            int rel_end = bs->nb - win;
            for (int blk = sink; blk < rel_end; blk++)
                okv_kv_seq_release_group(e->kv, bs->id, blk);
            if (rel_end > es->cand_end)
                es->cand_end = rel_end;
        }
    }
    okv_engine_update_mem_stats(e);
    e->stats.steps++;
}

/* The units the device's installs gathered since the last call, into the stats. */
static enum okv_status take_fetch_stats(okv_engine *e)
{
    int64_t units = 0;
    okv_bkv *kvs = okv_kv_storage(e->kv);
    enum okv_status st = e->be->ops->resid_take_stats(e->be, kvs, &units);
    e->stats.units_fetched += units;
    e->stats.fetch_bytes += units * (int64_t)okv_backend_host_unit_bytes(e->be, kvs);
    return st;
}

#define CK(call) do { if ((st = (call)) != OKV_OK) goto fail; } while (0)

/* q_slot >= 0: overlapped decoding (okv_engine_forward_queue): sampled into that backend
 * slot, no final sync; prev as there */
/* room for rows x vocab floats in the backend buffer *m (*cap rows now); a smaller one is
 * replaced, not copied */
static enum okv_status grow_rows(okv_engine *e, okv_bmem **m, int *cap, int rows)
{
    if (rows <= *cap)
        return OKV_OK;
    if (*m)
        e->be->ops->mem_free(e->be, *m);
    *m = NULL;
    *cap = 0;
    enum okv_status st = e->be->ops->mem_alloc(e->be, (size_t)rows * e->cfg.vocab_size, m);
    if (st == OKV_OK)
        *cap = rows;
    return st;
}

/* q = rope(qnorm(rmsnorm(x; w's attention norm) W_q^T + b_q)): layer w's queries of the current
 * residual e->x (e->h as scratch), the layer's own computation of them */
static enum okv_status layer_queries(okv_engine *e, const struct layer_w *w, okv_bmem *q, int n, bool half)
{
    const struct okv_model_config *c = &e->cfg;
    const struct okv_backend_ops *o = e->be->ops;
    enum okv_status st = o->rmsnorm(e->be, e->h, e->x, w->attn_norm, n, c->dim, c->rms_eps);
    if (st == OKV_OK)
        st = o->matmul(e->be, q, e->h, w->wq, w->bq, n, c->dim, c->n_heads * c->head_dim);
    if (st == OKV_OK && w->q_norm)
        st = o->head_rmsnorm(e->be, q, w->q_norm, n, c->n_heads, c->head_dim, c->rms_eps);
    if (st == OKV_OK)
        st = o->rope(e->be, q, n, c->n_heads, c->head_dim, half);
    return st;
}

/* Layer-ahead: layer nl's queries estimated from the residual as it stands (into dst) and nl's
 * blocks chosen with them, their fetches started (okv_sparse_select_inline). */
static enum okv_status select_ahead(okv_engine *e, int n_seqs, int nl, okv_bmem *dst, int n, bool half)
{
    enum okv_status st = layer_queries(e, &e->layers[nl], dst, n, half);
    if (st != OKV_OK)
        return st;
    e->sel_q = dst;
    const double t0 = okv_now();
    st = okv_sparse_select_inline(e, n_seqs, nl, &e->ahead_units[nl & 1]);
    e->stats.host_sparse_s += okv_now() - t0;
    e->sel_q = e->q;
    return st;
}

static enum okv_status forward(okv_engine *e, const struct okv_batch *b, float *logits, const struct okv_sampling *params,
                               const double *u, int32_t *tokens, const int32_t *prev, int q_slot, const int32_t *copy_rows,
                               int n_copy)
{
    enum okv_status st;
    const int n = b->n_tokens;
    if (n <= 0 || n > e->max_batch)
        return okv_set_error(OKV_ERR_INVALID_ARG, "batch: %d rows (1 to %d allowed)", n, e->max_batch);
    int n_seqs = 0;
    if ((st = plan_step(e, b, prev, &n_seqs)) != OKV_OK)
        return st;
    int32_t *stage_base = okv_malloc(sizeof(int32_t) * (size_t)n_seqs, OKV_TAG_ENGINE);
    if (!stage_base) {
        rollback(e, n_seqs);
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    }

    okv_backend *be = e->be;
    const struct okv_backend_ops *o = be->ops;
    const struct okv_model_config *c = &e->cfg;
    const int dim = c->dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    const double t_start = okv_now();
    const double blocked0 = o->host_blocked_s ? o->host_blocked_s(be) : 0;
    double t_mark;
/* host time of one engine call into a stats accumulator */
#define TIMED(acc, call)                    \
    do {                                    \
        t_mark = okv_now();                 \
        enum okv_status st_ = (call);       \
        (acc) += okv_now() - t_mark;        \
        if (st_ != OKV_OK) {                \
            st = st_;                       \
            goto fail;                      \
        }                                   \
    } while (0)
    const bool half = c->rope_pairing == OKV_ROPE_PAIRING_HALF;
    const float scale = 1.0f / sqrtf((float)hd);
    okv_bkv *kvs = okv_kv_storage(e->kv);
    int staged = okv_sparse_stage_plan(e, n_seqs, stage_base);
    if (staged < 0) {
        st = okv_set_error(OKV_ERR_NO_KV_SPACE, "batch: the prefill chunks of this step need more staging than %d units",
                           okv_kv_geometry(e->kv)->n_stage_units);
        goto fail;
    }

    struct okv_step_meta meta = {n, n_seqs, e->tok_seq, e->tok_pos, e->tok_slot, e->resid ? e->tok_host : NULL,
                                 e->rope_cs, e->bseq_len};

    /* without selection or staging every layer reads the same lists: built once */
    bool any_sel = false;
    for (int j = 0; j < n_seqs && !any_sel; j++)
        any_sel = e->bs[j].sel;
    const bool lists_static = staged == 0 && !any_sel;
    /* residency held by the backend: it fills the selections into the lists */
    const bool fill = e->dev_resid && any_sel;

    CK(o->step_begin(be, &meta));
    if (staged)
        TIMED(e->stats.host_sparse_s, okv_sparse_stage_fetch(e, n_seqs, stage_base, 0));
    if (prev)
        CK(o->embed_prev(be, e->x, e->tok_embd, b->tokens, prev, e->q_last_slot, n, dim));
    else
        CK(o->embed(be, e->x, e->tok_embd, b->tokens, n, dim));
    /* layer-ahead: at each layer's start the next layer's queries are estimated from this
     * layer's input (layer 0's from its own: exact) and the next layer's blocks chosen with them,
     * so that their fetches run while this layer computes; its attention waits for them. After
     * attention (la_mid): estimated and chosen once this layer's attention output is added */
    const bool la = e->prm.predict == OKV_PREDICT_LAYER_AHEAD && e->qla[0] && any_sel;
    for (int l = 0; l < c->n_layers; l++) {
        const struct layer_w *w = &e->layers[l];
        const bool q_ready = la && l == 0;   /* layer 0's own queries, computed for its selection (exact) */
        if (q_ready)
            CK(select_ahead(e, n_seqs, 0, e->q, n, half));
        if (la && (!e->la_mid || e->la_early) && l + 1 < c->n_layers)   /* la_early: fetched early, chosen again below */
            CK(select_ahead(e, n_seqs, l + 1, e->qla[(l + 1) & 1], n, half));
        CK(o->rmsnorm(be, e->h, e->x, w->attn_norm, n, dim, c->rms_eps));
        if (!q_ready)
            CK(o->matmul(be, e->q, e->h, w->wq, w->bq, n, dim, qd));
        CK(o->matmul(be, e->k, e->h, w->wk, w->bk, n, dim, kvd));
        CK(o->matmul(be, e->v, e->h, w->wv, w->bv, n, dim, kvd));
        if (w->q_norm) {
            if (!q_ready)
                CK(o->head_rmsnorm(be, e->q, w->q_norm, n, c->n_heads, hd, c->rms_eps));
            CK(o->head_rmsnorm(be, e->k, w->k_norm, n, c->n_kv_heads, hd, c->rms_eps));
        }
        if (!q_ready)
            CK(o->rope(be, e->q, n, c->n_heads, hd, half));
        CK(o->rope(be, e->k, n, c->n_kv_heads, hd, half));
        CK(o->kv_write(be, kvs, l, e->k, e->v));
        if (e->resid)
            TIMED(e->stats.host_sparse_s, okv_sparse_before_attention(e, n_seqs, l, staged > 0));
        if (l == 0 || !lists_static) {
            TIMED(e->stats.host_lists_s, okv_sparse_build_lists(e, n_seqs, stage_base, l));
            /* new contents: a new version, unique across engines sharing a backend (the
             * backend may skip comparing lists of an unchanged version) */
            e->lists_version = atomic_fetch_add(&lists_versions, 1) + 1;
        }
        /* build_lists may move the arrays: read them after it */
        struct okv_attn_blocks blocks = {e->blk_start, e->blk_unit, e->blk_index, fill ? e->sel_fill : NULL, e->lists_version};
        CK(o->attention(be, e->att, e->q, kvs, l, &blocks, c->n_heads, scale));
        if (e->resid) {
            if (staged && l + 1 < c->n_layers)
                TIMED(e->stats.host_sparse_s, okv_sparse_stage_fetch(e, n_seqs, stage_base, l + 1));
            TIMED(e->stats.host_sparse_s, okv_sparse_predict_after(e, b, n_seqs, l));
        }
        CK(o->matmul(be, e->tmp, e->att, w->wo, NULL, n, qd, dim));
        CK(o->add(be, e->x, e->tmp, (size_t)n * dim));
        if (la && e->la_mid && l + 1 < c->n_layers)   /* the next layer's blocks, with this attention's output */
            CK(select_ahead(e, n_seqs, l + 1, e->qla[(l + 1) & 1], n, half));
        CK(o->rmsnorm(be, e->h, e->x, w->ffn_norm, n, dim, c->rms_eps));
        CK(o->matmul(be, e->gate, e->h, w->w_gate, NULL, n, dim, c->ffn_dim));
        CK(o->matmul(be, e->up, e->h, w->w_up, NULL, n, dim, c->ffn_dim));
        CK(o->swiglu(be, e->gate, e->gate, e->up, n, c->ffn_dim));
        CK(o->matmul(be, e->tmp, e->gate, w->w_down, NULL, n, c->ffn_dim, dim));
        CK(o->add(be, e->x, e->tmp, (size_t)n * dim));
        if (e->resid)
            TIMED(e->stats.host_sparse_s, okv_sparse_predict_complete(e));
    }
    e->sel_q = e->q;

    int n_rows = 0;
    for (int t = 0; t < n; t++)
        if (b->want_logits && b->want_logits[t])
            e->rows_idx[n_rows++] = t;
    if (n_rows > 0) {
        CK(grow_rows(e, &e->logits, &e->logits_rows_cap, n_rows));
        CK(o->gather_rows(be, e->rows, e->x, e->rows_idx, n_rows, dim));
        CK(o->rmsnorm(be, e->rows, e->rows, e->output_norm, n_rows, dim, c->rms_eps));
        CK(o->matmul(be, e->logits, e->rows, e->output, NULL, n_rows, dim, c->vocab_size));
        if (tokens)
            CK(o->sample(be, e->logits, n_rows, c->vocab_size, params, u, tokens));
        if (q_slot >= 0)
            CK(o->sample_queue(be, e->logits, n_rows, c->vocab_size, params, u, q_slot, copy_rows, n_copy));
        if (logits && copy_rows && q_slot < 0 && n_copy == 1) {   /* some rows only: those sampled on the host */
            CK(o->mem_read(be, e->logits, (size_t)copy_rows[0] * c->vocab_size, logits, (size_t)c->vocab_size));
        } else if (logits && copy_rows && q_slot < 0) {   /* gathered on the device: one read, one wait */
            CK(grow_rows(e, &e->copied, &e->copied_cap, n_copy));
            CK(o->gather_rows(be, e->copied, e->logits, copy_rows, n_copy, c->vocab_size));
            CK(o->mem_read(be, e->copied, 0, logits, (size_t)n_copy * c->vocab_size));
        } else if (logits) {
            CK(o->mem_read(be, e->logits, 0, logits, (size_t)n_rows * c->vocab_size));
        }
    } else if (q_slot >= 0) {   /* a queued step without logit rows (prefill chunks): still one to collect */
        CK(o->sample_queue(be, NULL, 0, c->vocab_size, NULL, NULL, q_slot, NULL, 0));
    }
    t_mark = okv_now();
    e->stats.host_issue_s += t_mark - t_start;
    if (o->host_blocked_s)
        e->stats.host_blocked_s += o->host_blocked_s(be) - blocked0;
    if (q_slot >= 0) {   /* queued: okv_engine_collect waits for it */
        finish_step(e, n_seqs);
        okv_free(stage_base);
        return OKV_OK;
    }
    CK(o->sync(be));
    e->stats.sync_wait_s += okv_now() - t_mark;
    if (e->dev_resid)   /* what the device installs gathered */
        CK(take_fetch_stats(e));
    finish_step(e, n_seqs);
    okv_free(stage_base);
    return OKV_OK;
#undef TIMED
fail:
    e->sel_q = e->q;
    char why[512];   /* the pass's error, kept through the clean-up's calls (which may set their own) */
    snprintf(why, sizeof why, "%s", okv_last_error());
    if (e->pend_items) {   /* a selection still in flight: let it land, drop it */
        if (o->select_wait)
            o->select_wait(be);
        okv_free(e->pend_items);
        e->pend_items = NULL;
    }
    /* fetches in flight must land before their units can be reused */
    if (e->resid)
        for (int l = 0; l < c->n_layers; l++) {
            int pending;
            double stall;
            o->kv_fetch_wait(be, kvs, l, &pending, &stall);
        }
    /* selections installed for the next step are void: the next step selects
     * with its own queries */
    for (int j = 0; j < n_seqs && e->resid; j++) {
        okv_engine_resid_clear(e, e->bs[j].id);
        e->seqs[e->bs[j].id].sparse = false;
    }
    rollback(e, n_seqs);
    if (st != OKV_OK)
        okv_set_error(st, "%s", why);
    okv_free(stage_base);
    return st;
}

enum okv_status okv_engine_forward(okv_engine *e, const struct okv_batch *b, float *logits)
{
    return forward(e, b, logits, NULL, NULL, NULL, NULL, -1, NULL, 0);
}

enum okv_status okv_engine_forward_sample(okv_engine *e, const struct okv_batch *b, const struct okv_sampling *params,
                                          const double *u, int32_t *tokens, float *logits)
{
    if (!params || !u || !tokens)
        return okv_set_error(OKV_ERR_INVALID_ARG, "forward_sample: params, u and tokens are required");
    for (int t = 0; b->want_logits && t < b->n_tokens; t++)
        if (b->want_logits[t] > 1)
            return okv_set_error(OKV_ERR_INVALID_ARG, "forward_sample: row %d wants logits only (2): use okv_engine_forward", t);
    return forward(e, b, logits, params, u, tokens, NULL, -1, NULL, 0);
}

enum okv_status okv_engine_forward_sample_rows(okv_engine *e, const struct okv_batch *b, const struct okv_sampling *params,
                                               const double *u, int32_t *tokens, const int32_t *copy_rows, int n_copy,
                                               float *logits)
{
    if (!params || !u || !tokens || n_copy < 0 || (n_copy > 0 && (!copy_rows || !logits)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "forward_sample_rows: params, u, tokens and (with rows) logits are required");
    int n_rows = 0;
    for (int t = 0; b->want_logits && t < b->n_tokens; t++) {
        if (b->want_logits[t] > 1)
            return okv_set_error(OKV_ERR_INVALID_ARG, "forward_sample_rows: row %d wants logits only (2): use "
                                 "okv_engine_forward", t);
        n_rows += b->want_logits[t] != 0;
    }
    for (int i = 0; i < n_copy; i++)
        if (copy_rows[i] < 0 || copy_rows[i] >= n_rows)
            return okv_set_error(OKV_ERR_INVALID_ARG, "forward_sample_rows: logit row %d of %d", copy_rows[i], n_rows);
    return forward(e, b, n_copy > 0 ? logits : NULL, params, u, tokens, NULL, -1, n_copy > 0 ? copy_rows : NULL, n_copy);
}

bool okv_engine_can_queue(const okv_engine *e)
{
    const struct okv_backend_ops *o = e->be->ops;
    return o->sample_queue && o->sample_collect && o->embed_prev;
}

int okv_engine_queued(const okv_engine *e) { return e->q_count; }

enum okv_status okv_engine_forward_queue(okv_engine *e, const struct okv_batch *b, const int32_t *prev,
                                         const struct okv_sampling *params, const double *u)
{
    return okv_engine_forward_queue_rows(e, b, prev, params, u, NULL, 0);
}

enum okv_status okv_engine_forward_queue_rows(okv_engine *e, const struct okv_batch *b, const int32_t *prev,
                                              const struct okv_sampling *params, const double *u, const int32_t *copy_rows,
                                              int n_copy)
{
    if (!okv_engine_can_queue(e))
        return okv_set_error(OKV_ERR_UNSUPPORTED, "forward_queue: the %s backend does not overlap steps", e->be->ops->name);
    if (!params || !u)
        return okv_set_error(OKV_ERR_INVALID_ARG, "forward_queue: params and u are required");
    if (e->q_count >= 2)
        return okv_set_error(OKV_ERR_INVALID_ARG, "forward_queue: two steps are queued already; collect one first");
    int n_rows = 0;
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->want_logits && b->want_logits[t] > 1)
            return okv_set_error(OKV_ERR_INVALID_ARG, "forward_queue: row %d wants logits only (2): use okv_engine_forward", t);
        n_rows += b->want_logits && b->want_logits[t];
    }
    bool any_prev = false;
    for (int t = 0; prev && t < b->n_tokens; t++) {
        if (prev[t] < 0)
            continue;
        if (e->q_last_slot < 0 || prev[t] >= e->q_rows[e->q_last_slot])
            return okv_set_error(OKV_ERR_INVALID_ARG, "forward_queue: row %d takes sampled row %d of a step with %d", t,
                                 prev[t], e->q_last_slot < 0 ? 0 : e->q_rows[e->q_last_slot]);
        any_prev = true;
    }
    if (n_copy < 0 || (n_copy > 0 && !copy_rows))
        return okv_set_error(OKV_ERR_INVALID_ARG, "forward_queue: %d rows to copy", n_copy);
    for (int i = 0; i < n_copy; i++)
        if (copy_rows[i] < 0 || copy_rows[i] >= n_rows)
            return okv_set_error(OKV_ERR_INVALID_ARG, "forward_queue: logit row %d of %d to copy", copy_rows[i], n_rows);
    const int slot = e->q_last_slot < 0 ? 0 : e->q_last_slot ^ 1;
    enum okv_status st = forward(e, b, NULL, params, u, NULL, any_prev ? prev : NULL, slot, n_copy ? copy_rows : NULL, n_copy);
    if (st != OKV_OK)
        return st;
    e->q_rows[slot] = n_rows;
    e->q_copy[slot] = n_copy;
    e->q_last_slot = slot;
    e->q_count++;
    return OKV_OK;
}

enum okv_status okv_engine_collect(okv_engine *e, int32_t *ids, int *n_ids)
{
    return okv_engine_collect_rows(e, ids, n_ids, NULL);
}

int okv_engine_collect_n_rows(const okv_engine *e)
{
    if (e->q_count <= 0)
        return 0;
    return e->q_copy[e->q_count == 2 ? e->q_last_slot ^ 1 : e->q_last_slot];
}

enum okv_status okv_engine_collect_rows(okv_engine *e, int32_t *ids, int *n_ids, float *rows)
{
    *n_ids = 0;
    if (e->q_count <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "collect: no step is queued");
    const int slot = e->q_count == 2 ? e->q_last_slot ^ 1 : e->q_last_slot;
    const double t0 = okv_now();
    enum okv_status st = e->be->ops->sample_collect(e->be, slot, ids, e->q_rows[slot], rows, e->q_copy[slot]);
    e->stats.sync_wait_s += okv_now() - t0;
    e->q_count--;
    if (st != OKV_OK)
        return st;
    *n_ids = e->q_rows[slot];
    /* the device's gather counts: read when nothing is queued (reading them waits for the
     * compute stream), and every 256 steps of a long overlapped run, so that the metrics
     * stay current (a pause in the overlap of 1 step in 256) */
    if (e->dev_resid && (e->q_count == 0 || ++e->q_collects % 256 == 0))
        return take_fetch_stats(e);
    return OKV_OK;
}
