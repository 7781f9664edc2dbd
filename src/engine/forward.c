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
 * selection of every block gives bit for bit the dense result. */
#include "engine_internal.h"
#include "kv/select_rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void rollback(okv_engine *e, int n_seqs)
{
    for (int j = 0; j < n_seqs; j++)
        okv_kv_seq_truncate(e->kv, e->bs[j].id, okv_kv_seq_len(e->kv, e->bs[j].id));
}

/* Validate the batch, reserve KV space for every sequence in it (all or nothing),
 * decide each sequence's attention mode and fill the step's host metadata. */
static enum okv_status plan_step(okv_engine *e, const struct okv_batch *b, int *n_seqs_out)
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
        if (b->tokens[t] < 0 || b->tokens[t] >= e->cfg.vocab_size)
            return okv_set_error(OKV_ERR_INVALID_ARG, "batch: token id %d out of range [0, %d)", b->tokens[t], e->cfg.vocab_size);
    }
    for (int j = 0; j < n_seqs; j++)
        if (e->bs[j].len > e->max_ctx)
            return okv_set_error(OKV_ERR_CONTEXT, "sequence %d: %d tokens exceed the context length %d", e->bs[j].id,
                                 e->bs[j].len, e->max_ctx);
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

    const int bsz = okv_kv_geometry(e->kv)->block_size;
    const int sink = e->prm.sink_blocks, win = e->prm.window_blocks, budget = e->dense_upto;
    for (int j = 0; j < n_seqs; j++) {
        struct bseq *bs = &e->bs[j];
        struct eseq *es = &e->seqs[bs->id];
        bs->nb = (bs->len + bsz - 1) / bsz;
        e->bseq_len[j] = bs->len;
        bs->ends_prefill = !es->decode && b->want_logits && b->want_logits[bs->r1 - 1];
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
        if (e->prm.predict == OKV_PREDICT_ORACLE) {
            bs->sel = bs->inline_sel = es->decode && bs->len > budget && cand_end > sink;
            bs->cand_end = cand_end;
        } else {
            /* a decode step without a prediction (the first after a failed step, or
             * after okv_engine_seq_fill_random) selects with its own queries */
            bs->sel = es->decode && (es->sparse || es->cand_end > sink);
            bs->inline_sel = bs->sel && !es->sparse;
            bs->cand_end = es->cand_end;
            /* the prompt's last token predicts only when asked to: otherwise the first
             * decode step has no prediction and selects inline with its own queries */
            bs->predict = (es->decode || (bs->ends_prefill && e->prm.predict_from_prompt)) && bs->len > budget &&
                          cand_end > sink;
            bs->pred_cand_end = cand_end;
        }
    }

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

/* Grow every per-call scratch array of the selection path to hold n entries. */
static enum okv_status ensure_scratch(okv_engine *e, int n)
{
    if (n <= e->scr_cap)
        return OKV_OK;
    int cap = e->scr_cap ? e->scr_cap : 256;
    while (cap < n)
        cap *= 2;
    int32_t **arrs[] = {&e->sel_host, &e->sel_logical, &e->cand, &e->f_block, &e->f_head, &e->f_unit, &e->f_src};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        int32_t *p = okv_realloc(*arrs[i], sizeof(int32_t) * (size_t)cap, OKV_TAG_ENGINE);
        if (!p)
            return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
        *arrs[i] = p;
    }
    e->scr_cap = cap;
    return OKV_OK;
}

/* Staging: sequences not reading through a selection whose blocks [sink,
 * cand_end) left the device are given consecutive staging units. Returns the
 * number of staging units of the step, or -1 when they do not fit. */
static int stage_plan(okv_engine *e, int n_seqs, int32_t *stage_base)
{
    const int nkv = e->cfg.n_kv_heads, sink = e->prm.sink_blocks;
    int at = 0;
    for (int j = 0; j < n_seqs; j++) {
        const struct bseq *bs = &e->bs[j];
        const struct eseq *es = &e->seqs[bs->id];
        stage_base[j] = -1;
        if (!e->resid || bs->sel || es->cand_end <= sink)
            continue;
        stage_base[j] = at;
        at += (es->cand_end - sink) * nkv;
    }
    return e->resid && at > okv_kv_geometry(e->kv)->n_stage_units ? -1 : at;
}

static enum okv_status stage_fetch(okv_engine *e, int n_seqs, const int32_t *stage_base, int layer)
{
    const int nkv = e->cfg.n_kv_heads, sink = e->prm.sink_blocks;
    const int buf_off = (layer % 2) * okv_kv_geometry(e->kv)->n_stage_units;
    int n = 0;
    for (int j = 0; j < n_seqs; j++) {
        if (stage_base[j] < 0)
            continue;
        const struct eseq *es = &e->seqs[e->bs[j].id];
        int nb;
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, e->bs[j].id, &nb);
        enum okv_status st = ensure_scratch(e, n + (es->cand_end - sink) * nkv);
        if (st != OKV_OK)
            return st;
        for (int blk = sink; blk < es->cand_end; blk++)
            for (int h = 0; h < nkv; h++) {
                e->f_src[n] = host[blk] * nkv + h;
                e->f_unit[n] = OKV_UNIT_STAGE | (buf_off + stage_base[j] + (blk - sink) * nkv + h);
                n++;
            }
    }
    if (!n)
        return OKV_OK;
    e->stats.units_fetched += n;
    e->stats.fetch_bytes += (int64_t)n * (int64_t)e->be->ops->kv_unit_bytes(okv_kv_storage(e->kv));
    return e->be->ops->kv_fetch(e->be, okv_kv_storage(e->kv), layer, n, e->f_src, e->f_unit);
}

/* The block lists of one layer. */
static enum okv_status build_lists(okv_engine *e, int n_seqs, const int32_t *stage_base, int layer)
{
    const int nkv = e->cfg.n_kv_heads, sink = e->prm.sink_blocks;
    const int buf_off = (layer % 2) * okv_kv_geometry(e->kv)->n_stage_units;
    int total = 0;
    for (int j = 0; j < n_seqs; j++) {
        int k = 0;
        if (e->bs[j].sel && e->resid)
            okv_resid_selection(e->resid, e->bs[j].id, layer, &k);
        total += nkv * (e->bs[j].nb + k);
    }
    if (total > e->blk_cap) {
        int cap = total * 2;
        int32_t *u = okv_realloc(e->blk_unit, sizeof(int32_t) * (size_t)cap, OKV_TAG_ENGINE);
        if (u)
            e->blk_unit = u;
        int32_t *x = okv_realloc(e->blk_index, sizeof(int32_t) * (size_t)cap, OKV_TAG_ENGINE);
        if (x)
            e->blk_index = x;
        if (!u || !x)
            return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
        e->blk_cap = cap;
    }
    if (e->dev_resid) {
        enum okv_status st = okv_engine_grow_i32(&e->sel_fill, &e->sel_fill_cap, 3 * n_seqs * nkv + 3);
        if (st != OKV_OK)
            return st;
    }
    int at = 0;
    for (int j = 0; j < n_seqs; j++) {
        const struct bseq *bs = &e->bs[j];
        int nb;
        const int32_t *group = okv_kv_seq_blocks(e->kv, bs->id, &nb);
        if (e->dev_resid && bs->sel) {
            /* the backend fills the selected blocks in (okv_attn_blocks.sel_fill): here
             * placeholders, a valid unit of the sequence's quota and block sink */
            int k = 0;
            okv_resid_selection(e->resid, bs->id, layer, &k);
            const int chunk = okv_resid_chunk(e->resid, bs->id);
            const int32_t ph = okv_kv_geometry(e->kv)->n_group_slots * nkv + chunk * okv_resid_k(e->resid, layer) * nkv;
            for (int h = 0; h < nkv; h++) {
                e->blk_start[j * nkv + h] = at;
                for (int blk = 0; blk < sink && blk < bs->cand_end; blk++) {
                    e->blk_unit[at] = group[blk] * nkv + h;
                    e->blk_index[at++] = blk;
                }
                int32_t *f = e->sel_fill + 3 * (j * nkv + h);
                f[0] = at;
                f[1] = chunk;
                f[2] = k;
                for (int i = 0; i < k; i++) {
                    e->blk_unit[at] = ph;
                    e->blk_index[at++] = sink;
                }
                for (int blk = bs->cand_end; blk < bs->nb; blk++) {
                    OKV_ASSERT(group[blk] >= 0);
                    e->blk_unit[at] = group[blk] * nkv + h;
                    e->blk_index[at++] = blk;
                }
            }
            continue;
        }
        if (e->dev_resid)
            for (int h = 0; h < nkv; h++)
                e->sel_fill[3 * (j * nkv + h)] = -1;
        OKV_ASSERT(bs->nb <= nb);
        for (int h = 0; h < nkv; h++) {
            e->blk_start[j * nkv + h] = at;
            if (bs->sel) {
                for (int blk = 0; blk < sink && blk < bs->cand_end; blk++) {
                    e->blk_unit[at] = group[blk] * nkv + h;
                    e->blk_index[at++] = blk;
                }
                /* the selected blocks in block order: a bitmap over the sequence's
                 * blocks (cheaper than sorting each head's selection), with the unit of
                 * each block parked in sel_tmp meanwhile */
                int k = 0;
                const int32_t *sel = e->resid ? okv_resid_selection(e->resid, bs->id, layer, &k) : NULL;
                const int32_t *units = e->resid ? okv_resid_selection_units(e->resid, bs->id, layer) : NULL;
                const int n_words = (bs->nb + 63) / 64;
                /* local restrict copies: the stores below cannot move the arrays */
                uint64_t *restrict bits = e->sel_bits;
                int32_t *restrict tmp = e->sel_tmp, *restrict out_i = e->blk_index, *restrict out_u = e->blk_unit;
                memset(bits, 0, sizeof(uint64_t) * (size_t)n_words);
                for (int i = 0; i < k; i++) {
                    int32_t blk = sel[h * k + i];
                    if (blk >= 0) {
                        OKV_ASSERT(blk < bs->nb && units[h * k + i] >= 0);
                        bits[blk >> 6] |= 1ull << (blk & 63);
                        tmp[blk] = units[h * k + i];
                    }
                }
                for (int w = 0; w < n_words; w++)
                    for (uint64_t word = bits[w]; word; word &= word - 1) {
                        int32_t blk = w * 64 + __builtin_ctzll(word);
                        out_i[at] = blk;
                        out_u[at++] = tmp[blk];
                    }
                for (int blk = bs->cand_end; blk < bs->nb; blk++) {
                    OKV_ASSERT(group[blk] >= 0);
                    e->blk_unit[at] = group[blk] * nkv + h;
                    e->blk_index[at++] = blk;
                }
            } else {
                for (int blk = 0; blk < bs->nb; blk++) {
                    if (group[blk] >= 0) {
                        e->blk_unit[at] = group[blk] * nkv + h;
                    } else {
                        OKV_ASSERT(stage_base[j] >= 0 && blk >= sink);
                        e->blk_unit[at] = OKV_UNIT_STAGE | (buf_off + stage_base[j] + (blk - sink) * nkv + h);
                    }
                    e->blk_index[at++] = blk;
                }
            }
        }
    }
    e->blk_start[n_seqs * nkv] = at;
    return OKV_OK;
}

/* One selection of a batched request: a sequence, the rows that score, and the
 * candidate range [sink, cand_end). */
struct sel_item {
    int j;              /* batch-local sequence */
    int rows_at;        /* its rows in e->pred_rows */
    int n_rows;
    int cand_end;
    int k;              /* filled by select_many */
    int out_at;         /* its [n_kv][k] logical ids in e->sel_logical */
    int k_want;         /* 0: the layer's selection size; else at most this many */
};

/* Select for several sequences of one layer with one backend call; the results, as
 * logical block ids, land in e->sel_logical at each item's out_at. */
/* Queue (async and the backend has the path) or run the selection of the items;
 * *total_out receives the ids it produces. select_finish maps them to logical
 * blocks once they are there. */
static enum okv_status select_launch(okv_engine *e, int layer, struct sel_item *items, int n_items, bool async,
                                     int *total_out_ret)
{
    const int nkv = e->cfg.n_kv_heads, sink = e->prm.sink_blocks;
    int total_cand = 0, total_out = 0;
    for (int i = 0; i < n_items; i++) {
        int n_cand = items[i].cand_end - sink;
        int k = items[i].k_want > 0 && items[i].k_want < e->sel_k[layer] ? items[i].k_want : e->sel_k[layer];
        items[i].k = k > n_cand ? n_cand : k;
        items[i].out_at = total_out;
        total_cand += n_cand;
        total_out += nkv * items[i].k;
    }
    *total_out_ret = total_out;
    enum okv_status st = ensure_scratch(e, (total_cand > total_out ? total_cand : total_out) + 1);
    if (st == OKV_OK)
        st = okv_engine_grow_i32(&e->host_to_logical, &e->h2l_cap, okv_kv_geometry(e->kv)->n_host_blocks);
    if (st != OKV_OK)
        return st;
    struct okv_select_req *reqs = okv_malloc(sizeof *reqs * (size_t)n_items, OKV_TAG_ENGINE);
    if (!reqs)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    int at = 0;
    for (int i = 0; i < n_items; i++) {
        int nb;
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, e->bs[items[i].j].id, &nb);
        int n_cand = items[i].cand_end - sink;
        for (int c = 0; c < n_cand; c++) {
            e->cand[at + c] = host[sink + c];
            e->host_to_logical[host[sink + c]] = sink + c;   /* host blocks belong to one sequence */
        }
        reqs[i] = (struct okv_select_req){e->pred_rows + items[i].rows_at, items[i].n_rows, e->cand + at, n_cand, items[i].k};
        at += n_cand;
    }
    const struct okv_backend_ops *o = e->be->ops;
    if (async && o->select_blocks_async)
        st = o->select_blocks_async(e->be, okv_kv_storage(e->kv), layer, e->q, e->cfg.n_heads, reqs, n_items, e->sel_host);
    else
        st = o->select_blocks(e->be, okv_kv_storage(e->kv), layer, e->q, e->cfg.n_heads, reqs, n_items, e->sel_host, NULL);
    okv_free(reqs);
    return st;
}

static enum okv_status select_finish(okv_engine *e, int total_out)
{
    if (e->be->ops->select_wait) {
        enum okv_status st = e->be->ops->select_wait(e->be);
        if (st != OKV_OK)
            return st;
    }
    for (int i = 0; i < total_out; i++)
        e->sel_logical[i] = e->host_to_logical[e->sel_host[i]];
    return OKV_OK;
}

static enum okv_status select_many(okv_engine *e, int layer, struct sel_item *items, int n_items)
{
    int total_out;
    enum okv_status st = select_launch(e, layer, items, n_items, false, &total_out);
    return st != OKV_OK ? st : select_finish(e, total_out);
}

/* Install each item's selection for (sequence, layer) and fetch what is missing,
 * all sequences' units in one gather. */
static enum okv_status install_many(okv_engine *e, int layer, const struct sel_item *items, int n_items)
{
    const int nkv = e->cfg.n_kv_heads;
    int need = 1;
    for (int i = 0; i < n_items; i++)
        need += nkv * items[i].k;
    enum okv_status st = ensure_scratch(e, need);
    if (st != OKV_OK)
        return st;
    int n = 0;
    for (int i = 0; i < n_items; i++) {
        int seq = e->bs[items[i].j].id;
        /* a fresh stamp per installation: an inline selection and the prediction of
         * the same step must not protect each other's units */
        if (++e->step_stamp == 0)
            e->step_stamp = 1;
        int m = okv_resid_apply(e->resid, seq, layer, e->sel_logical + items[i].out_at, items[i].k, e->step_stamp,
                                e->f_block + n, e->f_head + n, e->f_unit + n);
        int nb;
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, seq, &nb);
        for (int f = n; f < n + m; f++)
            e->f_src[f] = host[e->f_block[f]] * nkv + e->f_head[f];
        n += m;
    }
    if (n == 0)
        return OKV_OK;
    e->stats.units_fetched += n;
    e->stats.fetch_bytes += (int64_t)n * (int64_t)e->be->ops->kv_unit_bytes(okv_kv_storage(e->kv));
    return e->be->ops->kv_fetch(e->be, okv_kv_storage(e->kv), layer, n, e->f_src, e->f_unit);
}

/* Device-side residency: select for the items and install the result on the backend,
 * which gathers what is missing; no id comes back. merge: lookahead's split between the
 * real token (first row) and all rows (merge_lookahead); succ: successor blocks
 * (add_successors). */
static enum okv_status dev_select_install(okv_engine *e, int layer, struct sel_item *items, int n, bool merge, int succ)
{
    const int sink = e->prm.sink_blocks;
    int total_cand = 0;
    for (int i = 0; i < n; i++) {
        const int n_cand = items[i].cand_end - sink;
        const int k = items[i].k_want > 0 && items[i].k_want < e->sel_k[layer] ? items[i].k_want : e->sel_k[layer];
        items[i].k = k > n_cand ? n_cand : k;
        total_cand += n_cand;
    }
    enum okv_status st = ensure_scratch(e, total_cand + 1);
    if (st != OKV_OK)
        return st;
    struct okv_select_req *reqs = okv_malloc(sizeof *reqs * (size_t)(2 * n), OKV_TAG_ENGINE), *own = reqs ? reqs + n : NULL;
    struct okv_resid_item *inst = okv_malloc(sizeof *inst * (size_t)n, OKV_TAG_ENGINE);
    if (!reqs || !inst) {
        okv_free(reqs);
        okv_free(inst);
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    }
    const int k_own = (e->sel_k[layer] + 1) / 2;
    int at = 0;
    for (int i = 0; i < n; i++) {
        const int seq = e->bs[items[i].j].id, n_cand = items[i].cand_end - sink;
        int nb;
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, seq, &nb);
        memcpy(e->cand + at, host + sink, sizeof(int32_t) * (size_t)n_cand);
        const int32_t *rows = e->pred_rows + items[i].rows_at;
        reqs[i] = (struct okv_select_req){rows, items[i].n_rows, e->cand + at, n_cand, items[i].k};
        own[i] = (struct okv_select_req){rows, 1, e->cand + at, n_cand, k_own < items[i].k ? k_own : items[i].k};
        if (++e->step_stamp == 0)   /* a fresh stamp per installation, as install_many */
            e->step_stamp = 1;
        inst[i] = (struct okv_resid_item){okv_resid_chunk(e->resid, seq), sink, e->step_stamp};
        at += n_cand;
    }
    st = e->be->ops->select_install(e->be, okv_kv_storage(e->kv), layer, e->q, e->cfg.n_heads, reqs, merge ? own : NULL,
                                    inst, n, succ);
    if (st == OKV_OK)
        for (int i = 0; i < n; i++)
            okv_resid_set_k(e->resid, e->bs[items[i].j].id, layer, items[i].k);
    okv_free(reqs);
    okv_free(inst);
    return st;
}

/* Rows of a sequence used to predict its next step: its last real token, plus its
 * drafted tokens in lookahead mode. */
static int pred_rows(const okv_engine *e, const struct okv_batch *b, const struct bseq *bs, int32_t *rows)
{
    int last_real = bs->r1 - 1;
    if (b->is_draft)
        while (last_real > bs->r0 && b->is_draft[last_real])
            last_real--;
    int n = 0;
    rows[n++] = last_real;
    if (e->prm.predict == OKV_PREDICT_LOOKAHEAD && b->is_draft)
        for (int r = last_real + 1; r < bs->r1; r++)
            if (b->is_draft[r])
                rows[n++] = r;
    return n;
}

static int count_common(int32_t *a, int32_t *b, int n)
{
    qsort(a, (size_t)n, sizeof(int32_t), cmp_i32);
    qsort(b, (size_t)n, sizeof(int32_t), cmp_i32);
    int i = 0, j = 0, c = 0;
    while (i < n && j < n) {
        if (a[i] == b[j]) {
            c++;
            i++;
            j++;
        } else if (a[i] < b[j]) {
            i++;
        } else {
            j++;
        }
    }
    return c;
}

static enum okv_status merge_lookahead(okv_engine *e, int layer, struct sel_item *items, int n);

/* Before layer l's attention: inline selection (oracle mode, or a step without a
 * prediction), recall measurement, and waiting for the layer's fetches. */
static enum okv_status before_attention(okv_engine *e, int n_seqs, int layer, bool any_fetch)
{
    const int nkv = e->cfg.n_kv_heads;
    enum okv_status st = OKV_OK;
    int64_t selected = 0;
    bool any_sel = false;
    struct sel_item *inl = okv_malloc(sizeof *inl * (size_t)(2 * n_seqs + 1), OKV_TAG_ENGINE), *rec = inl + n_seqs;
    if (!inl)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    int n_inl = 0, n_rec = 0, rows_at = 0;
    for (int j = 0; j < n_seqs; j++) {
        const struct bseq *bs = &e->bs[j];
        if (!bs->sel)
            continue;
        any_sel = true;
        struct sel_item it = {j, rows_at, bs->r1 - bs->r0, bs->cand_end, 0, 0, 0};
        for (int r = bs->r0; r < bs->r1; r++)
            e->pred_rows[rows_at++] = r;   /* the step's own (true) queries */
        if (bs->inline_sel) {
            inl[n_inl++] = it;
        } else {
            int k;
            okv_resid_selection(e->resid, bs->id, layer, &k);
            selected += (int64_t)k * nkv;
            if (e->prm.track_recall && k > 0)
                rec[n_rec++] = it;
        }
    }
    if (n_inl) {
        bool multi = false;
        for (int i = 0; i < n_inl; i++)
            multi |= inl[i].n_rows > 1;
        if (e->dev_resid)
            st = dev_select_install(e, layer, inl, n_inl, multi && e->sel_k[layer] <= 1024, 0);
        else if ((st = multi ? merge_lookahead(e, layer, inl, n_inl) : select_many(e, layer, inl, n_inl)) == OKV_OK)
            st = install_many(e, layer, inl, n_inl);
        if (st != OKV_OK)
            goto out;
        for (int i = 0; i < n_inl; i++)
            selected += (int64_t)inl[i].k * nkv;
    }
    if (n_rec) {
        if ((st = select_many(e, layer, rec, n_rec)) != OKV_OK)
            goto out;
        for (int i = 0; i < n_rec; i++) {
            int k;
            const int32_t *pred = okv_resid_selection(e->resid, e->bs[rec[i].j].id, layer, &k);
            if (k != rec[i].k)
                continue;
            int32_t *mine = okv_malloc(sizeof(int32_t) * (size_t)(k * nkv + 1), OKV_TAG_ENGINE);
            if (!mine) {
                st = okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
                goto out;
            }
            memcpy(mine, pred, sizeof(int32_t) * (size_t)(k * nkv));
            for (int h = 0; h < nkv; h++)
                e->stats.recall_hits += count_common(mine + h * k, e->sel_logical + rec[i].out_at + h * k, k);
            e->stats.recall_total += (int64_t)k * nkv;
            okv_free(mine);
        }
    }
    if (any_sel || any_fetch) {
        int pending = 0;
        double stall = 0;
        if ((st = e->be->ops->kv_fetch_wait(e->be, okv_kv_storage(e->kv), layer, &pending, &stall)) != OKV_OK)
            goto out;
        e->stats.stall_s += stall;
        if (e->prm.predict != OKV_PREDICT_ORACLE) {
            /* pending counts staging and inline fetches too: charging them to the
             * selection under-reports the in-time share, never over-reports it (a
             * GPU backend reports the layer's previous round: the totals hold) */
            e->stats.units_selected += selected;
            e->stats.units_in_time += selected - (pending < selected ? pending : selected);
        }
    }
out:
    okv_free(inl);
    return st;
}

/* Lookahead: the drafted rows' queries may point elsewhere than the real token's
 * (a rejected draft, or a draft that copies a repetitive passage), and a plain max
 * over rows lets them crowd out the blocks the real token needs. So half of the
 * selection goes to the real token's own best blocks, and the rest to the best by
 * the max over the real and drafted queries. */
static enum okv_status merge_lookahead(okv_engine *e, int layer, struct sel_item *items, int n)
{
    const int nkv = e->cfg.n_kv_heads;
    if (e->sel_k[layer] > 1024)   /* a dense layer selects every block: nothing to share out */
        return select_many(e, layer, items, n);
    struct sel_item *own = okv_malloc(sizeof *own * (size_t)n, OKV_TAG_ENGINE);
    int total = 0;
    for (int i = 0; i < n; i++)
        total += nkv * (e->sel_k[layer] + 1);
    int32_t *first = okv_malloc(sizeof(int32_t) * (size_t)(total + 1), OKV_TAG_ENGINE);
    enum okv_status st = OKV_OK;
    if (!own || !first) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        own[i] = items[i];
        own[i].n_rows = 1;   /* pred_rows puts the real token first */
        own[i].k_want = (e->sel_k[layer] + 1) / 2;
    }
    if ((st = select_many(e, layer, own, n)) != OKV_OK)
        goto out;
    int at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(first + at, e->sel_logical + own[i].out_at, sizeof(int32_t) * (size_t)(nkv * own[i].k));
        own[i].out_at = at;
        at += nkv * own[i].k;
    }
    if ((st = select_many(e, layer, items, n)) != OKV_OK)
        goto out;
    for (int i = 0; i < n; i++) {
        const int k = items[i].k, k1 = own[i].k;
        for (int h = 0; h < nkv; h++) {
            int32_t *dst = e->sel_logical + items[i].out_at + h * k;
            const int32_t *mine = first + own[i].out_at + h * k1;
            int32_t merged[1024];
            const int m = okv_sel_merge(mine, k1, dst, k, merged);
            memcpy(dst, merged, sizeof(int32_t) * (size_t)m);
        }
    }
out:
    okv_free(own);
    okv_free(first);
    return st;
}

/* Predictions only: the successor of each of the best `succ` blocks of a head's
 * selection (best first) takes the place of the lowest-ranked entries, unless it is
 * already selected or lies in the window (>= cand_end). */
static void add_successors(okv_engine *e, int layer, const struct sel_item *items, int n_items)
{
    const int succ = e->succ_blocks;
    if (succ <= 0 || e->sel_k[layer] > 1024)   /* off, or a dense layer (every block selected) */
        return;
    const int nkv = e->cfg.n_kv_heads;
    for (int i = 0; i < n_items; i++)
        for (int h = 0; h < nkv; h++)
            okv_sel_successors(e->sel_logical + items[i].out_at + h * items[i].k, items[i].k, succ, items[i].cand_end);
}

static enum okv_status predict_after(okv_engine *e, const struct okv_batch *b, int n_seqs, int layer)
{
    struct sel_item *items = okv_malloc(sizeof *items * (size_t)(n_seqs + 1), OKV_TAG_ENGINE);
    if (!items)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    int n = 0, rows_at = 0;
    bool drafts = false;
    for (int j = 0; j < n_seqs; j++) {
        const struct bseq *bs = &e->bs[j];
        if (!bs->predict)
            continue;
        int nr = pred_rows(e, b, bs, e->pred_rows + rows_at);
        drafts |= nr > 1;
        items[n++] = (struct sel_item){j, rows_at, nr, bs->pred_cand_end, 0, 0, 0};
        rows_at += nr;
    }
    enum okv_status st = OKV_OK;
    if (n && e->dev_resid) {
        const bool sparse_layer = e->sel_k[layer] <= 1024;   /* see merge_lookahead, add_successors */
        st = dev_select_install(e, layer, items, n, drafts && sparse_layer, sparse_layer ? e->succ_blocks : 0);
    } else if (n && drafts) {
        if ((st = merge_lookahead(e, layer, items, n)) == OKV_OK) {
            add_successors(e, layer, items, n);
            st = install_many(e, layer, items, n);
        }
    } else if (n && e->be->ops->select_blocks_async) {
        /* queued behind this layer's attention; predict_complete installs it once
         * the rest of the layer is queued too, so the device is not idle meanwhile
         * (the gather still waits for this layer's attention alone) */
        int total_out;
        if ((st = select_launch(e, layer, items, n, true, &total_out)) == OKV_OK) {
            e->pend_items = items;
            e->pend_n = n;
            e->pend_layer = layer;
            e->pend_out = total_out;
            return OKV_OK;
        }
    } else if (n) {
        if ((st = select_many(e, layer, items, n)) == OKV_OK) {
            add_successors(e, layer, items, n);
            st = install_many(e, layer, items, n);
        }
    }
    okv_free(items);
    return st;
}

static enum okv_status predict_complete(okv_engine *e)
{
    if (!e->pend_items)
        return OKV_OK;
    enum okv_status st = select_finish(e, e->pend_out);
    if (st == OKV_OK) {
        add_successors(e, e->pend_layer, e->pend_items, e->pend_n);
        st = install_many(e, e->pend_layer, e->pend_items, e->pend_n);
    }
    okv_free(e->pend_items);
    e->pend_items = NULL;
    return st;
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
        if (bs->len > e->dense_upto && bs->nb - win > sink) {
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

#define CK(call) do { if ((st = (call)) != OKV_OK) goto fail; } while (0)

static enum okv_status forward(okv_engine *e, const struct okv_batch *b, float *logits, const struct okv_sampling *params,
                               const double *u, int32_t *tokens)
{
    enum okv_status st;
    const int n = b->n_tokens;
    if (n <= 0 || n > e->max_batch)
        return okv_set_error(OKV_ERR_INVALID_ARG, "batch: %d rows (1 to %d allowed)", n, e->max_batch);
    int n_seqs = 0;
    if ((st = plan_step(e, b, &n_seqs)) != OKV_OK)
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
    int staged = stage_plan(e, n_seqs, stage_base);
    if (staged < 0) {
        st = okv_set_error(OKV_ERR_NO_KV_SPACE, "batch: the prefill chunks of this step need more staging than %d units",
                           okv_kv_geometry(e->kv)->n_stage_units);
        goto fail;
    }

    struct okv_step_meta meta = {n, n_seqs, e->tok_seq, e->tok_pos, e->tok_slot, e->resid ? e->tok_host : NULL,
                                 e->rope_cs, e->bseq_len};

    /* without selection or staging every layer reads the same lists: built once */
    bool lists_static = staged == 0;
    for (int j = 0; j < n_seqs && lists_static; j++)
        lists_static = !e->bs[j].sel;

    CK(o->step_begin(be, &meta));
    if (staged)
        TIMED(e->stats.host_sparse_s, stage_fetch(e, n_seqs, stage_base, 0));
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
        if (e->resid)
            TIMED(e->stats.host_sparse_s, before_attention(e, n_seqs, l, staged > 0));
        if (l == 0 || !lists_static)
            TIMED(e->stats.host_lists_s, build_lists(e, n_seqs, stage_base, l));
        bool fill = false;
        for (int j = 0; j < n_seqs && e->dev_resid && !fill; j++)
            fill = e->bs[j].sel;
        /* build_lists may move them */
        struct okv_attn_blocks blocks = {e->blk_start, e->blk_unit, e->blk_index, fill ? e->sel_fill : NULL};
        CK(o->attention(be, e->att, e->q, kvs, l, &blocks, c->n_heads, scale));
        if (e->resid) {
            if (staged && l + 1 < c->n_layers)
                TIMED(e->stats.host_sparse_s, stage_fetch(e, n_seqs, stage_base, l + 1));
            TIMED(e->stats.host_sparse_s, predict_after(e, b, n_seqs, l));
        }
        CK(o->matmul(be, e->tmp, e->att, w->wo, NULL, n, qd, dim));
        CK(o->add(be, e->x, e->tmp, (size_t)n * dim));
        CK(o->rmsnorm(be, e->h, e->x, w->ffn_norm, n, dim, c->rms_eps));
        CK(o->matmul(be, e->gate, e->h, w->w_gate, NULL, n, dim, c->ffn_dim));
        CK(o->matmul(be, e->up, e->h, w->w_up, NULL, n, dim, c->ffn_dim));
        CK(o->swiglu(be, e->gate, e->gate, e->up, n, c->ffn_dim));
        CK(o->matmul(be, e->tmp, e->gate, w->w_down, NULL, n, c->ffn_dim, dim));
        CK(o->add(be, e->x, e->tmp, (size_t)n * dim));
        if (e->resid)
            TIMED(e->stats.host_sparse_s, predict_complete(e));
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
        if (tokens)
            CK(o->sample(be, e->logits, n_rows, c->vocab_size, params, u, tokens));
        if (logits)
            CK(o->mem_read(be, e->logits, 0, logits, (size_t)n_rows * c->vocab_size));
    }
    t_mark = okv_now();
    e->stats.host_issue_s += t_mark - t_start;
    CK(o->sync(be));
    e->stats.sync_wait_s += okv_now() - t_mark;
    if (e->dev_resid) {   /* what the device installs gathered */
        int64_t units = 0;
        CK(o->resid_take_stats(be, kvs, &units));
        e->stats.units_fetched += units;
        e->stats.fetch_bytes += units * (int64_t)o->kv_unit_bytes(kvs);
    }
    finish_step(e, n_seqs);
    okv_free(stage_base);
    return OKV_OK;
#undef TIMED
fail:
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
    okv_free(stage_base);
    return st;
}

enum okv_status okv_engine_forward(okv_engine *e, const struct okv_batch *b, float *logits)
{
    return forward(e, b, logits, NULL, NULL, NULL);
}

enum okv_status okv_engine_forward_sample(okv_engine *e, const struct okv_batch *b, const struct okv_sampling *params,
                                          const double *u, int32_t *tokens, float *logits)
{
    if (!params || !u || !tokens)
        return okv_set_error(OKV_ERR_INVALID_ARG, "forward_sample: params, u and tokens are required");
    return forward(e, b, logits, params, u, tokens);
}
