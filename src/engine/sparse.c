/* OasisKV's selection around the forward pass (forward.c calls these per layer):
 * staging of long prefills, the attention block lists, inline selections and the wait
 * for a layer's fetches before its attention, and after it the prediction of the next
 * step's blocks: selection (the real token, plus drafted rows in lookahead mode),
 * lookahead merge and successor blocks (kv/select_rules.c), and installation with the
 * gather of what is missing, either by the backend (select_install: residency held by
 * the backend, the default) or here with src/kv/resid.c (recall tracking, the oracle,
 * tensor parallelism). */
#include "engine_internal.h"
#include "kv/select_rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the real token's part of a lookahead selection of k blocks (at least one) */
static int own_k(const okv_engine *e, int k)
{
    const int v = (int)ceilf((float)k * e->own_share);
    return v < 1 ? 1 : v > k ? k : v;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
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
int okv_sparse_stage_plan(okv_engine *e, int n_seqs, int32_t *stage_base)
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

enum okv_status okv_sparse_stage_fetch(okv_engine *e, int n_seqs, const int32_t *stage_base, int layer)
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
    e->stats.fetch_bytes += (int64_t)n * (int64_t)okv_backend_host_unit_bytes(e->be, okv_kv_storage(e->kv));
    return e->be->ops->kv_fetch(e->be, okv_kv_storage(e->kv), layer, n, e->f_src, e->f_unit);
}

/* The block lists of one layer. */
enum okv_status okv_sparse_build_lists(okv_engine *e, int n_seqs, const int32_t *stage_base, int layer)
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
    int extra;          /* candidates selected beyond that (sticky selection, OKV_STICKY) */
};

/* Blocks per KV head an item selects: the layer's selection size (or k_want when smaller),
 * at most its candidates. */
static int item_k_base(const okv_engine *e, int layer, const struct sel_item *it)
{
    const int n_cand = it->cand_end - e->prm.sink_blocks;
    const int k = it->k_want > 0 && it->k_want < e->sel_k[layer] ? it->k_want : e->sel_k[layer];
    return k > n_cand ? n_cand : k;
}

/* Sticky selection: the blocks an item selects beyond its k (F*k, okv_engine_params.sticky). */
static int sticky_extra(const okv_engine *e, int layer)
{
    return (int)(e->sticky * (float)e->sel_k[layer] + 0.5f);
}

static int item_k(const okv_engine *e, int layer, const struct sel_item *it)
{
    const int n_cand = it->cand_end - e->prm.sink_blocks, k = item_k_base(e, layer, it) + it->extra;
    return k > n_cand ? n_cand : k;
}

/* Sticky selection (okv_engine_params.sticky = F): an item selected m = F*k blocks beyond
 * its k, and the sticky cut (kv/select_rules.h) keeps k of them, blocks the device holds
 * first among all but the best k - m. Compacts each item to [n_kv][k]. Host residency
 * (the backend path cuts in select_install, items[i].keep). */
static enum okv_status sticky_apply(okv_engine *e, int layer, struct sel_item *items, int n)
{
    if (e->sticky <= 0)   /* no item selected extra blocks */
        return OKV_OK;
    const int nkv = e->cfg.n_kv_heads;
    int kmax = 0;
    for (int i = 0; i < n; i++)
        kmax = items[i].k > kmax ? items[i].k : kmax;
    int32_t *tmp = okv_malloc(sizeof(int32_t) * (size_t)(kmax + 1), OKV_TAG_ENGINE);
    uint8_t *held = okv_malloc((size_t)kmax + 1, OKV_TAG_ENGINE);
    if (!tmp || !held) {
        okv_free(tmp);
        okv_free(held);
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    }
    for (int i = 0; i < n; i++) {
        const int K = items[i].k, k = item_k_base(e, layer, &items[i]), seq = e->bs[items[i].j].id;
        if (K <= k)
            continue;
        for (int h = 0; h < nkv; h++) {
            okv_resid_sticky_cut(e->resid, seq, layer, h, e->sel_logical + items[i].out_at + h * K, K, k, held, tmp);
            memcpy(e->sel_logical + items[i].out_at + h * k, tmp, sizeof(int32_t) * (size_t)k);
        }
        items[i].k = k;
    }
    okv_free(tmp);
    okv_free(held);
    return OKV_OK;
}

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
        items[i].k = item_k(e, layer, &items[i]);
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
            /* a host block belongs to one sequence, or (a shared prefix, okv_engine_prefix_attach) to
             * several at the same logical block: the map holds one value either way */
            e->host_to_logical[host[sink + c]] = sink + c;
        }
        reqs[i] = (struct okv_select_req){e->pred_rows + items[i].rows_at, items[i].n_rows, e->cand + at, n_cand, items[i].k};
        at += n_cand;
    }
    const struct okv_backend_ops *o = e->be->ops;
    if (async && o->select_blocks_async)
        st = o->select_blocks_async(e->be, okv_kv_storage(e->kv), layer, e->sel_q, e->cfg.n_heads, reqs, n_items, e->sel_host);
    else
        st = o->select_blocks(e->be, okv_kv_storage(e->kv), layer, e->sel_q, e->cfg.n_heads, reqs, n_items, e->sel_host, NULL);
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
    e->stats.fetch_bytes += (int64_t)n * (int64_t)okv_backend_host_unit_bytes(e->be, okv_kv_storage(e->kv));
    return e->be->ops->kv_fetch(e->be, okv_kv_storage(e->kv), layer, n, e->f_src, e->f_unit);
}

/* Device-side residency: select for the items and install the result on the backend,
 * which gathers what is missing; no id comes back. merge: several rows' selections merged
 * as merge_lookahead does (the half share, or by rank); succ: successor blocks
 * (add_successors). */
static enum okv_status dev_select_install(okv_engine *e, int layer, struct sel_item *items, int n, bool merge, bool rank,
                                          int succ)
{
    const int sink = e->prm.sink_blocks;
    for (int i = 0; i < n; i++)
        items[i].k = item_k(e, layer, &items[i]);
    enum okv_status st;
    struct okv_select_req *reqs = okv_malloc(sizeof *reqs * (size_t)(2 * n), OKV_TAG_ENGINE), *own = reqs ? reqs + n : NULL;
    struct okv_resid_item *inst = okv_malloc(sizeof *inst * (size_t)n, OKV_TAG_ENGINE);
    if (!reqs || !inst) {
        okv_free(reqs);
        okv_free(inst);
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    }
    const int k_own = own_k(e, e->sel_k[layer]);
    for (int i = 0; i < n; i++) {
        const int seq = e->bs[items[i].j].id, n_cand = items[i].cand_end - sink;
        int nb;
        /* the sequence's own host block list (the backend reads it during the call and
         * keeps only a copy: on the GPU a table in HBM that it updates with what changed) */
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, seq, &nb);
        const int32_t *rows = e->pred_rows + items[i].rows_at;
        reqs[i] = (struct okv_select_req){rows, items[i].n_rows, host + sink, n_cand, items[i].k};
        own[i] = (struct okv_select_req){rows, 1, host + sink, n_cand, k_own < items[i].k ? k_own : items[i].k};
        if (++e->step_stamp == 0)   /* a fresh stamp per installation, as install_many */
            e->step_stamp = 1;
        const int keep = item_k_base(e, layer, &items[i]);   /* sticky: items[i].k selected, keep installed */
        inst[i] = (struct okv_resid_item){okv_resid_chunk(e->resid, seq), sink, e->step_stamp, keep < items[i].k ? keep : 0,
                                          merge && rank};
    }
    st = e->be->ops->select_install(e->be, okv_kv_storage(e->kv), layer, e->sel_q, e->cfg.n_heads, reqs,
                                    merge && !rank ? own : NULL, inst, n, succ);
    if (st == OKV_OK)
        for (int i = 0; i < n; i++)
            okv_resid_set_k(e->resid, e->bs[items[i].j].id, layer, inst[i].keep ? inst[i].keep : items[i].k);
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

static enum okv_status merge_lookahead(okv_engine *e, int layer, struct sel_item *items, int n, bool rank);

/* The inline selections of layer `layer` (the sequences that select with the step's own rows,
 * scoring e->sel_q): chosen and installed, their fetches started. Layer-ahead mode calls this
 * for layer l + 1 at layer l's start (forward.c); otherwise okv_sparse_before_attention does. */
enum okv_status okv_sparse_select_inline(okv_engine *e, int n_seqs, int layer, int64_t *units)
{
    *units = 0;
    struct sel_item *inl = okv_malloc(sizeof *inl * (size_t)(n_seqs + 1), OKV_TAG_ENGINE);
    if (!inl)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    int n_inl = 0, rows_at = 0;
    bool multi = false;
    for (int j = 0; j < n_seqs; j++) {
        const struct bseq *bs = &e->bs[j];
        if (!bs->sel)
            continue;
        struct sel_item it = {j, rows_at, bs->r1 - bs->r0, bs->cand_end, 0, 0, 0, 0};
        for (int r = bs->r0; r < bs->r1; r++)
            e->pred_rows[rows_at++] = r;   /* the step's own rows */
        if (bs->inline_sel) {
            inl[n_inl++] = it;
            multi |= it.n_rows > 1;
        }
    }
    /* layer-ahead with a sticky share (okv_engine_params.sticky; OKV_LA_STICKY=0 turns it off): as a
     * prediction, F*k blocks beyond k selected and, of all but the best k - F*k, those already on the
     * device kept first (SmolLM2 at 8K: the same fidelity, 20-65% fewer bytes fetched; ACCURACY.md) */
    const bool sticky = e->la_sticky && e->sticky > 0 && !multi && e->sel_k[layer] <= 1024;
    for (int i = 0; sticky && i < n_inl; i++)
        inl[i].extra = sticky_extra(e, layer);
    enum okv_status st = OKV_OK;
    if (n_inl) {
        if (e->dev_resid)
            st = dev_select_install(e, layer, inl, n_inl, multi && e->sel_k[layer] <= 1024, e->rank_inline, 0);
        else if ((st = multi ? merge_lookahead(e, layer, inl, n_inl, e->rank_inline) : select_many(e, layer, inl, n_inl)) ==
                     OKV_OK &&
                 (!sticky || (st = sticky_apply(e, layer, inl, n_inl)) == OKV_OK))
            st = install_many(e, layer, inl, n_inl);
        for (int i = 0; i < n_inl; i++)
            *units += (int64_t)item_k_base(e, layer, &inl[i]) * e->cfg.n_kv_heads;
    }
    okv_free(inl);
    return st;
}

/* Before layer l's attention: inline selection (oracle mode, or a step without a
 * prediction; in layer-ahead mode made a layer earlier), recall measurement (of a prediction, or
 * of layer-ahead's estimate), and waiting for the layer's fetches. */
enum okv_status okv_sparse_before_attention(okv_engine *e, int n_seqs, int layer, bool any_fetch)
{
    const bool ahead = e->prm.predict == OKV_PREDICT_LAYER_AHEAD;
    const int nkv = e->cfg.n_kv_heads;
    enum okv_status st = OKV_OK;
    int64_t selected = 0;
    bool any_sel = false, any_inline = false;
    struct sel_item *rec = okv_malloc(sizeof *rec * (size_t)(n_seqs + 1), OKV_TAG_ENGINE);
    if (!rec)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    int n_rec = 0, rows_at = 0;
    for (int j = 0; j < n_seqs; j++) {
        const struct bseq *bs = &e->bs[j];
        if (!bs->sel)
            continue;
        any_sel = true;
        struct sel_item it = {j, rows_at, bs->r1 - bs->r0, bs->cand_end, 0, 0, 0, 0};
        for (int r = bs->r0; r < bs->r1; r++)
            e->pred_rows[rows_at++] = r;   /* the step's own (true) queries */
        if (bs->inline_sel) {
            any_inline = true;
            /* layer-ahead: the set chosen a layer earlier with estimated queries, against the one this
             * layer's own queries choose (layer 0 selects with its own: not counted) */
            int k = 0;
            if (ahead && layer > 0 && e->prm.track_recall)
                okv_resid_selection(e->resid, bs->id, layer, &k);
            if (k > 0)
                rec[n_rec++] = it;
        } else {
            int k;
            okv_resid_selection(e->resid, bs->id, layer, &k);
            selected += (int64_t)k * nkv;
            if (e->prm.track_recall && k > 0)
                rec[n_rec++] = it;
        }
    }
    if (any_inline) {
        int64_t units;
        if (ahead)   /* chosen a layer earlier (forward.c) */
            units = e->ahead_units[layer & 1];
        else if ((st = okv_sparse_select_inline(e, n_seqs, layer, &units)) != OKV_OK)
            goto out;
        selected += units;
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
    okv_free(rec);
    return st;
}

/* select_many for its[0..n), then its results copied aside into a new buffer (*aside, the
 * caller frees it) for a merge that reads them while the next select_many reuses
 * e->sel_logical: select_launch lays the results out from 0, so each item's out_at is its
 * offset in the copy too. */
static enum okv_status select_aside(okv_engine *e, int layer, struct sel_item *its, int n, int32_t **aside)
{
    *aside = NULL;
    enum okv_status st = select_many(e, layer, its, n);
    if (st != OKV_OK)
        return st;
    int total = 0;
    for (int i = 0; i < n; i++)
        total += e->cfg.n_kv_heads * its[i].k;
    if (!(*aside = okv_malloc(sizeof(int32_t) * (size_t)(total + 1), OKV_TAG_ENGINE)))
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    memcpy(*aside, e->sel_logical, sizeof(int32_t) * (size_t)total);
    return OKV_OK;
}

/* Rank merge (okv_engine_params.merge; bench/ACCURACY.md): each row's own top
 * k, taken by rank in turn (the real token's first, then each drafted row's first, then the
 * seconds, ...), duplicates skipped (okv_sel_merge_rank). */
static enum okv_status merge_by_rank(okv_engine *e, int layer, struct sel_item *items, int n)
{
    const int nkv = e->cfg.n_kv_heads;
    int n_sub = 0;
    for (int i = 0; i < n; i++)
        n_sub += items[i].n_rows;
    struct sel_item *sub = okv_malloc(sizeof *sub * (size_t)(n_sub + 1), OKV_TAG_ENGINE);
    if (!sub)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    for (int i = 0, at = 0; i < n; i++)
        for (int r = 0; r < items[i].n_rows; r++, at++) {
            sub[at] = items[i];
            sub[at].rows_at = items[i].rows_at + r;
            sub[at].n_rows = 1;
        }
    int32_t *rowsel;
    enum okv_status st = select_aside(e, layer, sub, n_sub, &rowsel);
    for (int i = 0, s0 = 0; st == OKV_OK && i < n; s0 += items[i].n_rows, i++) {
        /* the item's selection goes where its first row's was (install_many reads it there) */
        const int k = sub[s0].k;   /* every row's (the same request) */
        items[i].out_at = sub[s0].out_at;
        items[i].k = k;
        for (int h = 0; h < nkv; h++)
            okv_sel_merge_rank(rowsel + sub[s0].out_at + h * k, items[i].n_rows, nkv * k, k,
                               e->sel_logical + items[i].out_at + h * k);
    }
    okv_free(rowsel);
    okv_free(sub);
    return st;
}

/* Lookahead: the drafted rows' queries may point elsewhere than the real token's
 * (a rejected draft, or a draft that copies a repetitive passage), and a plain max
 * over rows lets them crowd out the blocks the real token needs. So half of the
 * selection goes to the real token's own best blocks, and the rest to the best by
 * the max over the real and drafted queries. */
static enum okv_status merge_lookahead(okv_engine *e, int layer, struct sel_item *items, int n, bool rank)
{
    const int nkv = e->cfg.n_kv_heads;
    if (e->sel_k[layer] > 1024)   /* a dense layer selects every block: nothing to share out */
        return select_many(e, layer, items, n);
    if (rank)
        return merge_by_rank(e, layer, items, n);
    struct sel_item *own = okv_malloc(sizeof *own * (size_t)n, OKV_TAG_ENGINE);
    if (!own)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    for (int i = 0; i < n; i++) {
        own[i] = items[i];
        own[i].n_rows = 1;   /* pred_rows puts the real token first */
        own[i].k_want = own_k(e, e->sel_k[layer]);
    }
    int32_t *first;
    enum okv_status st = select_aside(e, layer, own, n, &first);
    if (st == OKV_OK)
        st = select_many(e, layer, items, n);
    for (int i = 0; st == OKV_OK && i < n; i++) {
        const int k = items[i].k, k1 = own[i].k;
        for (int h = 0; h < nkv; h++) {
            int32_t *dst = e->sel_logical + items[i].out_at + h * k;
            int32_t merged[1024];
            const int m = okv_sel_merge(first + own[i].out_at + h * k1, k1, dst, k, merged);
            memcpy(dst, merged, sizeof(int32_t) * (size_t)m);
        }
    }
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

enum okv_status okv_sparse_predict_after(okv_engine *e, const struct okv_batch *b, int n_seqs, int layer)
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
        items[n++] = (struct sel_item){j, rows_at, nr, bs->pred_cand_end, 0, 0, 0, 0};
        rows_at += nr;
    }
    if (e->sticky > 0 && !drafts && e->sel_k[layer] <= 1024)   /* not with lookahead's merge, nor in dense layers */
        for (int i = 0; i < n; i++)
            items[i].extra = sticky_extra(e, layer);
    enum okv_status st = OKV_OK;
    if (n && e->dev_resid) {
        const bool sparse_layer = e->sel_k[layer] <= 1024;   /* see merge_lookahead, add_successors */
        st = dev_select_install(e, layer, items, n, drafts && sparse_layer, e->rank_predict,
                                sparse_layer ? e->succ_blocks : 0);
    } else if (n && drafts) {
        if ((st = merge_lookahead(e, layer, items, n, e->rank_predict)) == OKV_OK) {
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
        if ((st = select_many(e, layer, items, n)) == OKV_OK && (st = sticky_apply(e, layer, items, n)) == OKV_OK) {
            add_successors(e, layer, items, n);
            st = install_many(e, layer, items, n);
        }
    }
    okv_free(items);
    return st;
}

enum okv_status okv_sparse_predict_complete(okv_engine *e)
{
    if (!e->pend_items)
        return OKV_OK;
    enum okv_status st = select_finish(e, e->pend_out);
    if (st == OKV_OK)
        st = sticky_apply(e, e->pend_layer, e->pend_items, e->pend_n);
    if (st == OKV_OK) {
        add_successors(e, e->pend_layer, e->pend_items, e->pend_n);
        st = install_many(e, e->pend_layer, e->pend_items, e->pend_n);
    }
    okv_free(e->pend_items);
    e->pend_items = NULL;
    return st;
}
