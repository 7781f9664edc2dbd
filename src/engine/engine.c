/* Engine construction: weights into the backend, sizing of the KV tiers (dense:
 * group slots for every block; sparse: group slots for sinks, windows and the
 * blocks being written, a per-sequence quota of selected units in every layer,
 * the host tier and the staging buffers), scratch, sequences and statistics.
 * The forward pass is in forward.c. */
#include "engine_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Load one weight; shard tells a tensor-parallel backend how to split it. */
static enum okv_status load_w(struct okv_engine *e, const struct okv_tensor_view *t, enum okv_shard shard, okv_bweight **out)
{
    *out = NULL;
    if (!t->data)
        return OKV_OK;
    struct okv_tensor_view v = *t;
    v.shard = shard;
    enum okv_status st = e->be->ops->weight_load(e->be, &v, out);
    if (st == OKV_OK)
        e->weight_bytes += e->be->ops->weight_bytes(*out);
    return st;
}

/* YaRN's dimension (of head_dim) at which a frequency turns num_rot times over the original context */
static double yarn_dim(double num_rot, int dim, double base, double orig)
{
    return dim * log(orig / (num_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

static void compute_inv_freq(const struct okv_model_config *c, float *inv_freq)
{
    const int half = c->head_dim / 2;
    /* YaRN: pairs below `low` keep their frequency (extrapolation), those above `high` are
     * interpolated (divided by the factor), a linear ramp between (transformers' float32 steps) */
    double low = 0, high = 0;
    if (c->rope_scaling == OKV_ROPE_SCALING_YARN) {
        low = floor(yarn_dim(c->rope_beta_fast, c->head_dim, c->rope_theta, c->rope_orig_max_ctx));
        high = ceil(yarn_dim(c->rope_beta_slow, c->head_dim, c->rope_theta, c->rope_orig_max_ctx));
        low = low < 0 ? 0 : low;
        high = high > c->head_dim - 1 ? c->head_dim - 1 : high;
        if (low == high)
            high += 0.001;
    }
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
        } else if (c->rope_scaling == OKV_ROPE_SCALING_YARN) {
            const float pos = powf(c->rope_theta, expo);
            const float extra = 1.0f / pos, inter = 1.0f / (c->rope_factor * pos);
            float ramp = (float)(((double)i - low) / (high - low));
            ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
            const float keep = 1.0f - ramp;   /* the share of the original frequency */
            f = inter * (1.0f - keep) + extra * keep;
        }
        inv_freq[i] = (float)f;
    }
}

#define ALLOC_MEM(field, n) \
    do { if ((st = be->ops->mem_alloc(be, (size_t)(n), &e->field)) != OKV_OK) goto fail; } while (0)
#define ALLOC_HOST(field, n) \
    do { if (!(e->field = okv_calloc((size_t)(n), sizeof *e->field, OKV_TAG_ENGINE))) { st = okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory"); goto fail; } } while (0)

/* The defaults of the parameters the caller left at 0 (creation and estimates). */
static void fill_defaults(const struct okv_model_config *c, struct okv_engine_params *p)
{
    if (p->block_size <= 0)
        p->block_size = 16;
    if (p->max_batch_tokens <= 0)
        p->max_batch_tokens = 512;
    if (p->max_seqs <= 0)
        p->max_seqs = 1;
    if (p->max_ctx <= 0)
        p->max_ctx = c->max_ctx > 0 ? c->max_ctx : 4096;
    if (p->kv_budget > 0 && !p->streaming) {
        if (p->sink_blocks <= 0)
            p->sink_blocks = 1;
        if (p->window_blocks <= 0)
            p->window_blocks = 4;
        if (p->cache_factor < 1.0f)
            p->cache_factor = 1.0f;
    }
}

/* The sizes of a sparse engine's tiers (params after fill_defaults; sel_k > 0):
 * blocks selected and units cached per (sequence, layer) (sel_k[l], quota[l],
 * arrays of n_layers), and the group slots, host blocks and staging of g. */
static void sparse_plan(const struct okv_model_config *c, const struct okv_engine_params *p, int sel_k_sparse,
                        int dense_upto, int32_t *sel_k, int32_t *quota, struct okv_kv_geometry *g)
{
    const int bsz = p->block_size, nkv = c->n_kv_heads;
    const int ctx_blocks = (p->max_ctx + bsz - 1) / bsz;
    int k_dense = ctx_blocks - p->sink_blocks - p->window_blocks;
    if (k_dense < sel_k_sparse)
        k_dense = sel_k_sparse;
    for (int l = 0; l < c->n_layers; l++) {
        sel_k[l] = l < p->dense_layers ? k_dense : sel_k_sparse;
        int cached = l < p->dense_layers ? k_dense : (int)((float)sel_k_sparse * p->cache_factor);
        if (cached > k_dense)
            cached = k_dense > sel_k[l] ? k_dense : sel_k[l];
        quota[l] = cached * nkv;
    }
    /* group slots: a sequence within dense_upto keeps all its blocks (the dense fast
     * path); past it, sinks, window and the block being filled. Plus the blocks of
     * one prefill chunk. */
    g->n_group_slots = p->kv_slots > 0 ? p->kv_slots
                                       : p->max_seqs * (dense_upto / bsz + 2) + (p->max_batch_tokens + bsz - 1) / bsz + 1;
    g->n_host_blocks = p->host_blocks > 0 ? p->host_blocks : p->max_seqs * ctx_blocks;
    g->n_stage_units = ctx_blocks * nkv;
}

/* An on/off override from the environment (experiments): set and non-empty, its integer value != 0;
 * else def. */
static bool env_flag(const char *name, bool def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) != 0 : def;
}

enum okv_status okv_engine_create(const struct okv_model *m, okv_backend *be, const struct okv_engine_params *p,
                                  okv_engine **out)
{
    *out = NULL;
    enum okv_status st;
    const struct okv_model_config *c = &m->cfg;
    struct okv_engine_params prm = p ? *p : (struct okv_engine_params){0};
    fill_defaults(c, &prm);
    if (!okv_key_code_bits_valid(prm.key_code_bits))
        return okv_set_error(OKV_ERR_INVALID_ARG, "key codes of %d bits a channel: 1, 2 or 4 allowed (0: none)", prm.key_code_bits);
    if (!(prm.sticky >= 0.0f && prm.sticky <= 0.5f))
        return okv_set_error(OKV_ERR_INVALID_ARG, "sticky selection: share %g of the selection (0 to 0.5 allowed)",
                             (double)prm.sticky);
    if ((unsigned)prm.merge > (unsigned)OKV_MERGE_RANK)
        return okv_set_error(OKV_ERR_INVALID_ARG, "merge rule %d: OKV_MERGE_AUTO, OKV_MERGE_SHARE or OKV_MERGE_RANK allowed",
                             (int)prm.merge);
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
    e->q_last_slot = -1;
    e->max_ctx = prm.max_ctx;
    e->max_batch = prm.max_batch_tokens;

    if ((st = load_w(e, &m->tok_embd, OKV_SHARD_NONE, &e->tok_embd)) != OKV_OK ||
        (st = load_w(e, &m->output_norm, OKV_SHARD_NONE, &e->output_norm)) != OKV_OK)
        goto fail;
    /* a tied LM head is the embedding, unless the backend splits the head by vocabulary */
    const bool tied = !m->output.data || m->output.data == m->tok_embd.data;
    if (!tied || okv_backend_shards(be) > 1) {
        if ((st = load_w(e, tied ? &m->tok_embd : &m->output, OKV_SHARD_OUT_VOCAB, &e->output)) != OKV_OK)
            goto fail;
    } else {
        e->output = e->tok_embd;
    }
    ALLOC_HOST(layers, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        const struct okv_layer_weights *lw = &m->layers[l];
        struct layer_w *w = &e->layers[l];
        /* tensor parallelism: q/k/v and gate/up column-parallel, wo and w_down row-parallel */
        const struct { const struct okv_tensor_view *t; enum okv_shard s; okv_bweight **w; } list[] = {
            {&lw->attn_norm, OKV_SHARD_NONE, &w->attn_norm}, {&lw->wq, OKV_SHARD_OUT_Q, &w->wq},
            {&lw->wk, OKV_SHARD_OUT_KV, &w->wk}, {&lw->wv, OKV_SHARD_OUT_KV, &w->wv},
            {&lw->wo, OKV_SHARD_IN_Q, &w->wo}, {&lw->bq, OKV_SHARD_OUT_Q, &w->bq},
            {&lw->bk, OKV_SHARD_OUT_KV, &w->bk}, {&lw->bv, OKV_SHARD_OUT_KV, &w->bv},
            {&lw->q_norm, OKV_SHARD_NONE, &w->q_norm}, {&lw->k_norm, OKV_SHARD_NONE, &w->k_norm},
            {&lw->ffn_norm, OKV_SHARD_NONE, &w->ffn_norm}, {&lw->w_gate, OKV_SHARD_OUT_FFN, &w->w_gate},
            {&lw->w_up, OKV_SHARD_OUT_FFN, &w->w_up}, {&lw->w_down, OKV_SHARD_IN_FFN, &w->w_down},
        };
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
            if ((st = load_w(e, list[i].t, list[i].s, list[i].w)) != OKV_OK)
                goto fail;
    }

    ALLOC_HOST(inv_freq, c->head_dim / 2);
    compute_inv_freq(c, e->inv_freq);

    /* KV tiers */
    const int bsz = prm.block_size, nkv = c->n_kv_heads;
    const size_t unit_bytes = okv_engine_unit_bytes(be, c, prm.block_size);
    if (!unit_bytes) {
        st = OKV_ERR_BACKEND;   /* the backend's message is set */
        goto fail;
    }
    const int ctx_blocks = (prm.max_ctx + bsz - 1) / bsz;
    const bool sparse = prm.kv_budget > 0 && !prm.streaming;
    if (prm.streaming) {
        if (prm.sink_blocks <= 0)
            prm.sink_blocks = 1;
        prm.window_blocks = prm.kv_budget / bsz - prm.sink_blocks;
        if (prm.kv_budget <= 0 || prm.window_blocks < 2) {
            st = okv_set_error(OKV_ERR_INVALID_ARG, "streaming KV: budget %d tokens must hold the sink and at least 2 blocks of %d",
                               prm.kv_budget, bsz);
            goto fail;
        }
        e->streaming = true;
        e->dense_upto = prm.kv_budget;
    }
    int32_t *quota = NULL;
    struct okv_kv_geometry g = {.n_layers = c->n_layers, .block_size = bsz, .n_kv_heads = nkv, .head_dim = c->head_dim};
    if (sparse) {
        g.key_code_bits = prm.streaming ? 0 : prm.key_code_bits;
        g.host_fp8 = prm.host_fp8;
        if (prm.dense_layers < 0 || prm.dense_layers > c->n_layers) {
            st = okv_set_error(OKV_ERR_INVALID_ARG, "dense layers %d: the model has %d layers", prm.dense_layers, c->n_layers);
            goto fail;
        }
        e->sel_k_sparse = prm.kv_budget / bsz - prm.sink_blocks - prm.window_blocks;
        e->dense_upto = prm.tight_device ? (prm.sink_blocks + prm.window_blocks) * bsz : prm.kv_budget;
        if (e->sel_k_sparse < 1) {
            st = okv_set_error(OKV_ERR_INVALID_ARG,
                               "kv budget %d tokens leaves no block to select: it must exceed (sink %d + window %d blocks) x %d tokens",
                               prm.kv_budget, prm.sink_blocks, prm.window_blocks, bsz);
            goto fail;
        }
        quota = okv_malloc(sizeof(int32_t) * (size_t)c->n_layers, OKV_TAG_ENGINE);
        e->sel_k = okv_malloc(sizeof(int32_t) * (size_t)c->n_layers, OKV_TAG_ENGINE);
        if (!quota || !e->sel_k) {
            okv_free(quota);
            st = okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
            goto fail;
        }
        sparse_plan(c, &prm, e->sel_k_sparse, e->dense_upto, e->sel_k, quota, &g);
        int32_t *units = okv_malloc(sizeof(int32_t) * (size_t)c->n_layers, OKV_TAG_ENGINE);
        if (!units) {
            okv_free(quota);
            st = okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
            goto fail;
        }
        /* lending needs every layer's chunk to be the same run of whole slots */
        int lend_slots = quota[0] % nkv ? 0 : quota[0] / nkv;
        for (int l = 0; l < c->n_layers; l++) {
            units[l] = quota[l] * prm.max_seqs;
            if (quota[l] != quota[0])
                lend_slots = 0;
        }
        g.layer_sparse_units = units;
        st = okv_kv_cache_create(be, &g, &e->kv);
        okv_free(units);
        if (st == OKV_OK) {
            struct okv_resid_params rp = {c->n_layers, nkv, prm.max_seqs, g.n_group_slots * nkv, quota};
            st = okv_resid_create(&rp, &e->resid);
        }
        /* residency on the device when the backend can hold it (the host keeps chunks) */
        const char *dr = getenv("OKV_DEVICE_RESID"), *lm = getenv("OKV_LOOKAHEAD_MERGE");
        /* the rows' merge (sparse.c): the environment's rule everywhere, or the parameter's */
        const bool env_rule = lm && *lm, env_rank = env_rule && !strcmp(lm, "rank");
        e->rank_inline = env_rule ? env_rank : prm.merge != OKV_MERGE_SHARE;
        e->rank_predict = env_rule ? env_rank : prm.merge == OKV_MERGE_RANK;
        if (st == OKV_OK && be->ops->resid_init && !prm.host_residency && !prm.track_recall &&
            !(dr && !strcmp(dr, "0"))) {
            struct okv_resid_geometry rg = {prm.max_seqs, ctx_blocks, g.n_group_slots * nkv, quota};
            st = be->ops->resid_init(be, okv_kv_storage(e->kv), &rg);
            if (st == OKV_OK)
                e->dev_resid = true;
            else if (st == OKV_ERR_UNSUPPORTED)
                st = OKV_OK;   /* shapes the backend cannot hold: residency stays on the host */
        }
        okv_free(quota);
        if (st == OKV_OK && prm.prefix_caching && prm.host_fp8)
            /* an attached sequence copies its sink and window back from the host tier: from fp8 they
             * would come back rounded where its own prefill keeps them exact */
            st = okv_set_error(OKV_ERR_UNSUPPORTED, "prefix caching in sparse mode needs the host tier in the device's "
                               "precision (--kv-host-dtype auto), not fp8");
        if (st == OKV_OK && prm.prefix_caching)
            st = okv_kv_prefix_enable(e->kv);
        if (st == OKV_OK && prm.dense_while_room && be->ops->kv_move && lend_slots > 0) {
            /* the quota chunks no sparse sequence holds serve as group slots (kv.h: lending) */
            st = okv_kv_lend_chunks(e->kv, lend_slots, prm.max_seqs);
            e->lend = st == OKV_OK;
        }
        if (st != OKV_OK)
            goto fail;
    } else if (prm.streaming) {
        g.n_group_slots = prm.kv_slots > 0 ? prm.kv_slots
                                           : prm.max_seqs * (prm.kv_budget / bsz + 2) + (prm.max_batch_tokens + bsz - 1) / bsz + 1;
        if ((st = okv_kv_cache_create(be, &g, &e->kv)) != OKV_OK)
            goto fail;
    } else {
        g.n_group_slots = prm.kv_slots > 0 ? prm.kv_slots : prm.max_seqs * ctx_blocks;
        if (prm.device_bytes_limit > 0 && prm.kv_slots <= 0) {
            /* the limit is per device; with tensor parallelism a device holds some heads */
            size_t per_slot = unit_bytes * (size_t)okv_backend_kv_heads_per_device(be, nkv) * (size_t)c->n_layers;
            /* a pool past 4 x max_seqs full contexts (room for cached prefixes beside them) holds
             * blocks no request can use, and their bookkeeping (a GPU's 0.9 beside a tiny model:
             * tens of millions of blocks); past INT_MAX they cannot be numbered */
            size_t want = prm.device_bytes_limit / per_slot, cap = (size_t)4 * (size_t)prm.max_seqs * (size_t)ctx_blocks;
            if (cap > (size_t)INT_MAX)
                cap = (size_t)INT_MAX;
            g.n_group_slots = (int)(want < cap ? want : cap);
            if (g.n_group_slots < 1) {
                st = okv_set_error(OKV_ERR_NO_KV_SPACE, "the device tier of %zu bytes cannot hold one KV block (%zu bytes)",
                                   prm.device_bytes_limit, per_slot);
                goto fail;
            }
        }
        if ((st = okv_kv_cache_create(be, &g, &e->kv)) != OKV_OK)
            goto fail;
        if (prm.prefix_caching && (st = okv_kv_prefix_enable(e->kv)) != OKV_OK)
            goto fail;
    }
    if (prm.device_bytes_limit > 0 && be->ops->kv_device_bytes(okv_kv_storage(e->kv)) > prm.device_bytes_limit) {
        st = okv_set_error(OKV_ERR_NO_KV_SPACE,
                           "the device tier of %.1f MiB cannot hold the KV budget: it needs %.1f MiB (budget, window, "
                           "a prefill chunk, the selection quota, staging and block summaries)",
                           prm.device_bytes_limit / 1048576.0, be->ops->kv_device_bytes(okv_kv_storage(e->kv)) / 1048576.0);
        goto fail;
    }
    e->prm = prm;
    {
        /* OKV_SUCCESSOR_BLOCKS overrides (experiments) */
        const char *sb = getenv("OKV_SUCCESSOR_BLOCKS");
        int v = sb && *sb ? atoi(sb) : prm.successor_blocks == 0 ? 1 : prm.successor_blocks;
        e->succ_blocks = v > 0 ? v : 0;
        /* OKV_LOOKAHEAD_OWN=F: the share of a lookahead selection taken by the real token's
         * own top blocks before the drafted rows' (experiments; default half) */
        const char *lo = getenv("OKV_LOOKAHEAD_OWN");
        const double f = lo && *lo ? atof(lo) : 0.5;
        e->own_share = f > 0 && f <= 1 ? (float)f : 0.5f;
        const char *sk = getenv("OKV_STICKY");
        const double sv = sk && *sk ? atof(sk) : (double)prm.sticky;
        e->sticky = sv > 0 && sv <= 0.5 ? (float)sv : 0.0f;
        e->verify_inline = env_flag("OKV_VERIFY_INLINE", prm.verify_inline);
        const bool ahead = prm.predict == OKV_PREDICT_LAYER_AHEAD;
        e->la_prefetch = ahead && env_flag("OKV_LA_PREFETCH", false);
        e->la_sticky = ahead && env_flag("OKV_LA_STICKY", true);
        e->la_mid = ahead && env_flag("OKV_LA_MID", prm.ahead_after_attention);
        /* OKV_LA_EARLY=1 (experiment): with la_mid, layer l+1's blocks also chosen at layer l's start
         * from the start's estimate and their fetches started, so that the choice after attention
         * finds most of its blocks resident or on their way (the GPU measured the choice after
         * attention in time 16-26% of the time on an 8-layer model: one small MLP hides no fetch) */
        e->la_early = e->la_mid && env_flag("OKV_LA_EARLY", false);
        e->verify_defer = env_flag("OKV_VERIFY_DEFER", prm.verify_defer);
    }
    e->stats.device_bytes_capacity = be->ops->kv_device_bytes(okv_kv_storage(e->kv));

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
    if (prm.predict == OKV_PREDICT_LAYER_AHEAD && e->resid) {
        ALLOC_MEM(qla[0], T * qd);
        ALLOC_MEM(qla[1], T * qd);
    }
    e->sel_q = e->q;
    ALLOC_HOST(tok_seq, T);
    ALLOC_HOST(tok_pos, T);
    ALLOC_HOST(tok_slot, T);
    ALLOC_HOST(rows_idx, T);
    ALLOC_HOST(rope_cs, (size_t)T * c->head_dim);
    ALLOC_HOST(tok_host, T);
    ALLOC_HOST(bs, T);
    ALLOC_HOST(bseq_len, T);
    ALLOC_HOST(pred_rows, T);
    ALLOC_HOST(blk_start, (size_t)T * c->n_kv_heads + 1);
    ALLOC_HOST(sel_bits, (size_t)(ctx_blocks + 63) / 64 + 1);
    ALLOC_HOST(sel_tmp, (size_t)ctx_blocks + 1);
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
    okv_resid_free(e->resid);
    okv_kv_cache_free(e->kv);
    okv_bmem *mems[] = {e->x, e->h, e->q, e->k, e->v, e->att, e->tmp, e->gate, e->up, e->rows, e->logits, e->copied,
                        e->qla[0], e->qla[1]};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            be->ops->mem_free(be, mems[i]);
    okv_free(e->inv_freq);
    okv_free(e->sel_k);
    okv_free(e->tok_seq);
    okv_free(e->tok_pos);
    okv_free(e->tok_slot);
    okv_free(e->rows_idx);
    okv_free(e->rope_cs);
    okv_free(e->tok_host);
    okv_free(e->bs);
    okv_free(e->bseq_len);
    okv_free(e->pred_rows);
    okv_free(e->sel_host);
    okv_free(e->sel_logical);
    okv_free(e->cand);
    okv_free(e->host_to_logical);
    okv_free(e->pc_ids);
    okv_free(e->pc_units);
    okv_free(e->f_block);
    okv_free(e->f_head);
    okv_free(e->f_unit);
    okv_free(e->f_src);
    okv_free(e->seqs);
    okv_free(e->blk_start);
    okv_free(e->sel_bits);
    okv_free(e->sel_tmp);
    okv_free(e->blk_unit);
    okv_free(e->sel_fill);
    okv_free(e->blk_index);
    okv_free(e);
}

const struct okv_model_config *okv_engine_model_config(const okv_engine *e) { return &e->cfg; }
int okv_engine_max_ctx(const okv_engine *e) { return e->max_ctx; }
int okv_engine_max_batch_tokens(const okv_engine *e) { return e->max_batch; }
okv_kv_cache *okv_engine_kv(okv_engine *e) { return e->kv; }
size_t okv_engine_weight_bytes(const okv_engine *e) { return e->weight_bytes; }

int okv_engine_block_size(const okv_engine *e) { return okv_kv_geometry(e->kv)->block_size; }
bool okv_engine_sparse(const okv_engine *e) { return e->resid != NULL; }

bool okv_engine_drafts_select(const okv_engine *e)
{
    return e->resid && (e->prm.predict == OKV_PREDICT_LOOKAHEAD || e->verify_inline);
}

int okv_engine_blocks_total(const okv_engine *e) { return okv_kv_geometry(e->kv)->n_group_slots; }

int okv_engine_blocks_needed(const okv_engine *e, int n_tokens)
{
    int bs = okv_kv_geometry(e->kv)->block_size;
    int blocks = (n_tokens + bs - 1) / bs;
    if (!e->resid && !e->streaming)
        return blocks;
    /* sparse: up to its budget (dense fast path) and the block being filled; the
     * selection quota is reserved apart, when the sequence is created */
    int steady = e->dense_upto / bs + 2;
    return blocks < steady ? blocks : steady;
}

enum okv_status okv_engine_grow_i32(int32_t **p, int *cap, int need)
{
    if (need <= *cap)
        return OKV_OK;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    int32_t *q = okv_realloc(*p, sizeof(int32_t) * (size_t)c, OKV_TAG_ENGINE);
    if (!q)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    *p = q;
    *cap = c;
    return OKV_OK;
}

enum okv_status okv_engine_seq_create(okv_engine *e, int *seq)
{
    enum okv_status st = okv_kv_seq_create(e->kv, seq);
    if (st != OKV_OK)
        return st;
    if (*seq >= e->seqs_cap) {
        int cap = e->seqs_cap ? e->seqs_cap * 2 : 16;
        while (cap <= *seq)
            cap *= 2;
        struct eseq *s = okv_realloc(e->seqs, sizeof *s * (size_t)cap, OKV_TAG_ENGINE);
        if (!s) {
            okv_kv_seq_free(e->kv, *seq);
            return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
        }
        e->seqs = s;
        e->seqs_cap = cap;
    }
    memset(&e->seqs[*seq], 0, sizeof e->seqs[*seq]);
    if (e->lend) {
        /* dense while room: the quota chunk is claimed when the sequence turns sparse */
        if (okv_kv_n_seqs(e->kv) > e->prm.max_seqs) {
            okv_kv_seq_free(e->kv, *seq);
            return okv_set_error(OKV_ERR_NO_KV_SPACE, "residency: all %d sparse quotas are in use", e->prm.max_seqs);
        }
        e->seqs[*seq].dense_phase = true;
        return OKV_OK;
    }
    if (e->resid && (st = okv_resid_attach(e->resid, *seq)) != OKV_OK) {
        okv_kv_seq_free(e->kv, *seq);
        return st;
    }
    /* the chunk's maps on the device may hold an earlier sequence's */
    if (e->dev_resid &&
        (st = e->be->ops->resid_reset(e->be, okv_kv_storage(e->kv), okv_resid_chunk(e->resid, *seq))) != OKV_OK) {
        okv_resid_detach(e->resid, *seq);
        okv_kv_seq_free(e->kv, *seq);
        return st;
    }
    return OKV_OK;
}

void okv_engine_resid_clear(okv_engine *e, int seq)
{
    if (!e->resid)
        return;
    if (e->dev_resid && okv_resid_attached(e->resid, seq)) {
        /* arguments checked at attach: a failure here is the device's (an error of an earlier launch surfacing,
         * as after a forward pass that failed, which clears its sequences on its way out): said, not fatal; the
         * next forward pass meets the same device and returns its error */
        if (e->be->ops->resid_reset(e->be, okv_kv_storage(e->kv), okv_resid_chunk(e->resid, seq)) != OKV_OK)
            OKV_LOG_ERROR("engine: resetting sequence %d's residency maps on the device failed: %s", seq, okv_last_error());
    }
    okv_resid_clear(e->resid, seq);
}


/* Bytes of the tiers in use now, and their peaks: the device tier of one device
 * (with tensor parallelism a device holds some KV heads), the host tier of all. */
void okv_engine_update_mem_stats(okv_engine *e)
{
    okv_bkv *kvs = okv_kv_storage(e->kv);
    const struct okv_kv_geometry *g = okv_kv_geometry(e->kv);
    size_t ub = e->be->ops->kv_unit_bytes(kvs);
    const size_t dev_heads = (size_t)okv_backend_kv_heads_per_device(e->be, g->n_kv_heads);
    const size_t host_heads = dev_heads * (size_t)okv_backend_shards(e->be);   /* replicated heads count twice */
    size_t dev = (size_t)okv_kv_used_slots(e->kv) * dev_heads * g->n_layers * ub;
    size_t host = 0;
    if (e->resid) {
        size_t quota_units = 0;
        for (int l = 0; l < g->n_layers; l++)
            quota_units += (size_t)okv_resid_k(e->resid, l) * dev_heads;   /* the cache, not just the selection */
        dev += (size_t)(e->prm.max_seqs - okv_resid_free_chunks(e->resid)) * quota_units * ub;
        size_t used_host = (size_t)okv_kv_used_host_blocks(e->kv);
        /* summaries (kmin, kmax in the KV's type) and key codes */
        dev += used_host * g->n_layers * dev_heads * (ub / (size_t)g->block_size + okv_key_code_bytes(g));
        host = used_host * g->n_layers * host_heads * okv_backend_host_unit_bytes(e->be, kvs);
    }
    e->stats.device_bytes = dev;
    if (dev > e->stats.device_bytes_peak)
        e->stats.device_bytes_peak = dev;
    e->stats.host_bytes = host;
    if (host > e->stats.host_bytes_peak)
        e->stats.host_bytes_peak = host;
}

void okv_engine_seq_free(okv_engine *e, int seq)
{
    if (!okv_kv_seq_valid(e->kv, seq))
        return;
    int chunk = -1;
    if (e->resid) {
        /* fetches predicted for a step that will not come may still be copying into
         * this sequence's units from its host blocks: both are reused once freed */
        for (int l = 0; l < e->cfg.n_layers; l++) {
            int pending;
            double stall;
            e->be->ops->kv_fetch_wait(e->be, okv_kv_storage(e->kv), l, &pending, &stall);
        }
        chunk = okv_resid_chunk(e->resid, seq);
        okv_resid_detach(e->resid, seq);
    }
    okv_kv_seq_free(e->kv, seq);
    if (e->lend && chunk >= 0)
        okv_kv_chunk_unclaim(e->kv, chunk);   /* its units are group slots again */
    okv_engine_update_mem_stats(e);
}

/* ---- dense while room ---- */

static enum okv_status demote(okv_engine *e, int seq);

/* the dense-phase sequence holding the most device blocks, or -1; not one being turned sparse,
 * nor (while others exist) one whose prefill chunk is in the step being planned */
static int demote_victim(const okv_engine *e)
{
    for (int pass = 0; pass < 2; pass++) {
        int best = -1, most = -1;
        for (int i = 0; i < e->seqs_cap; i++) {
            const struct eseq *es = &e->seqs[i];
            if (okv_kv_seq_valid(e->kv, i) && es->dense_phase && !es->demoting && (pass || !es->prefilling_now) &&
                okv_kv_seq_group_blocks(e->kv, i) > most) {
                most = okv_kv_seq_group_blocks(e->kv, i);
                best = i;
            }
        }
        if (best >= 0)
            return best;
    }
    return -1;
}

/* Turn dense-phase sequence seq sparse: its blocks between the sinks and the local window
 * give their device slots back (the host tier holds them), and it claims the free quota chunk
 * that will hold the fewest other blocks; those move out (kv_move). First, while the slots
 * free outside that chunk could not take them, other dense-phase sequences are turned sparse
 * (largest first); without any, nothing changes and OKV_ERR_NO_KV_SPACE is returned. So every
 * move has a destination, and the moves of one demotion are one batch, issued after those of
 * the demotions it caused. Its next decode step selects with its own queries. */
static enum okv_status demote(okv_engine *e, int seq)
{
    struct eseq *es = &e->seqs[seq];
    if (!es->dense_phase || es->demoting)
        return OKV_OK;
    okv_kv_cache *kv = e->kv;
    const int sink = e->prm.sink_blocks, win = e->prm.window_blocks, bsz = okv_kv_geometry(kv)->block_size;
    const int len = okv_kv_seq_len(kv, seq), nb = (len + bsz - 1) / bsz;
    const int rel_end = len > e->dense_upto && nb - win > sink ? nb - win : sink;   /* [sink, rel_end) go */
    const int n_chunks = okv_kv_lent_chunks(kv);
    int *inside = okv_calloc((size_t)n_chunks + 1, sizeof(int), OKV_TAG_ENGINE);
    if (!inside)
        return okv_set_error(OKV_ERR_NO_MEMORY, "engine: out of memory");
    enum okv_status st = OKV_OK;
    int chunk = -1;
    es->demoting = true;
    for (;;) {
        int n, rel = 0;
        const int32_t *grp = okv_kv_seq_blocks(kv, seq, &n);
        memset(inside, 0, sizeof(int) * (size_t)n_chunks);
        for (int blk = sink; blk < rel_end; blk++)
            if (grp[blk] >= 0) {
                rel++;
                const int ch = okv_kv_chunk_of(kv, grp[blk]);
                if (ch >= 0)
                    inside[ch]++;
            }
        int best = -1, occ = 0x7fffffff;
        for (int i = n_chunks - 1; i >= 0; i--)   /* the highest ids fill last */
            if (okv_resid_chunk_free(e->resid, i) && okv_kv_chunk_used(kv, i) - inside[i] < occ) {
                occ = okv_kv_chunk_used(kv, i) - inside[i];
                best = i;
            }
        if (best < 0) {
            st = okv_set_error(OKV_ERR_NO_KV_SPACE, "residency: all %d sparse quotas are in use", e->prm.max_seqs);
            break;
        }
        /* free once the blocks went and the chunk left the pool (its free slots and the
         * released ones inside it with it) */
        const int room = okv_kv_free_slots(kv) + rel - inside[best] - (okv_kv_chunk_slots(kv) - okv_kv_chunk_used(kv, best));
        if (room >= occ) {
            chunk = best;
            break;
        }
        const int v = demote_victim(e);
        if (v < 0) {
            st = okv_set_error(OKV_ERR_NO_KV_SPACE, "dense while room: no room to turn sequence %d sparse", seq);
            break;
        }
        if ((st = demote(e, v)) != OKV_OK)
            break;
    }
    okv_free(inside);
    if (st == OKV_OK)
        st = okv_resid_attach_chunk(e->resid, seq, chunk);
    if (st != OKV_OK) {
        es->demoting = false;
        return st;   /* nothing of seq changed */
    }
    es->dense_phase = false;
    for (int blk = sink; blk < rel_end; blk++)
        okv_kv_seq_release_group(kv, seq, blk);
    if (rel_end > es->cand_end && rel_end > sink)
        es->cand_end = rel_end;
    okv_kv_chunk_claim(kv, chunk);
    int32_t *from = NULL, *to = NULL;
    int n = 0, cap_f = 0, cap_t = 0, oseq, oblk;
    while (st == OKV_OK && okv_kv_chunk_occupant(kv, chunk, &oseq, &oblk)) {
        if ((st = okv_engine_grow_i32(&from, &cap_f, n + 1)) != OKV_OK ||
            (st = okv_engine_grow_i32(&to, &cap_t, n + 1)) != OKV_OK)
            break;
        st = okv_kv_seq_move_block(kv, oseq, oblk, &from[n], &to[n]);   /* room was made above */
        n += st == OKV_OK;
    }
    if (n > 0) {
        /* enqueued before any op of the coming step; a failure leaves tables pointing at
         * slots whose contents did not arrive (a broken device), returned as is */
        enum okv_status mst = e->be->ops->kv_move(e->be, okv_kv_storage(kv), n, from, to);
        if (st == OKV_OK)
            st = mst;
        e->stats.blocks_moved += n;
    }
    okv_free(from);
    okv_free(to);
    if (st == OKV_OK && e->dev_resid)   /* the chunk's maps on the device may hold an earlier sequence's */
        st = e->be->ops->resid_reset(e->be, okv_kv_storage(kv), chunk);
    es->demoting = false;
    e->stats.demotions += st == OKV_OK;
    return st;
}

enum okv_status okv_engine_make_room(okv_engine *e, int need)
{
    while (okv_kv_free_slots(e->kv) < need) {
        const int v = demote_victim(e);
        if (v < 0)
            return OKV_OK;
        enum okv_status st = demote(e, v);
        if (st != OKV_OK)
            return st;
    }
    return OKV_OK;
}

enum okv_status okv_engine_seq_demote(okv_engine *e, int seq)
{
    if (!okv_kv_seq_valid(e->kv, seq))
        return okv_set_error(OKV_ERR_INVALID_ARG, "demote: unknown sequence %d", seq);
    return e->lend ? demote(e, seq) : OKV_OK;
}

bool okv_engine_seq_dense_phase(const okv_engine *e, int seq)
{
    return okv_kv_seq_valid(e->kv, seq) && e->seqs[seq].dense_phase;
}

bool okv_engine_dense_while_room(const okv_engine *e) { return e->lend; }

int okv_engine_dense_phase_seqs(const okv_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->seqs_cap; i++)
        n += okv_kv_seq_valid(e->kv, i) && e->seqs[i].dense_phase;
    return n;
}

int okv_engine_seq_len(const okv_engine *e, int seq) { return okv_kv_seq_len(e->kv, seq); }

bool okv_engine_seq_defer_own(const okv_engine *e, int seq) { return e->verify_defer && e->seqs[seq].rows_stale; }

/* ---- prefix caching ---- */

#define PC_SEED 0xcbf29ce484222325ull

/* a block's hash: FNV-1a over its tokens from its parent's hash, then a final mix */
static uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t h = parent;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)tokens[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 31;
    h *= 0x7fb5d329728ea185ull;
    h ^= h >> 27;
    return h;
}

bool okv_engine_prefix_caching(const okv_engine *e) { return okv_kv_prefix_enabled(e->kv); }

int okv_engine_stage_need(const okv_engine *e, int seq)
{
    if (!e->resid || !okv_kv_seq_valid(e->kv, seq))
        return 0;
    const struct eseq *es = &e->seqs[seq];
    const int sink = e->prm.sink_blocks;
    /* as okv_sparse_stage_plan: a prefill (no selection) whose blocks [sink, cand_end) left the device */
    return !es->decode && es->cand_end > sink ? (es->cand_end - sink) * e->cfg.n_kv_heads : 0;
}

int okv_engine_stage_capacity(const okv_engine *e) { return e->resid ? okv_kv_geometry(e->kv)->n_stage_units : 0; }

int okv_engine_prefix_attach(okv_engine *e, int seq, const int32_t *tokens, int n)
{
    if (!okv_kv_prefix_enabled(e->kv) || !okv_kv_seq_valid(e->kv, seq) || okv_kv_seq_len(e->kv, seq) != 0 || n <= 0)
        return 0;
    const int bsz = okv_kv_geometry(e->kv)->block_size;
    struct eseq *es = &e->seqs[seq];
    e->stats.prefix_query_tokens += n;
    es->pc_n = 0;
    es->pc_hash = PC_SEED;
    /* whole blocks, leaving at least the last token to compute (its logits start generation) */
    const int max_k = (n - 1) / bsz;
    if (max_k < 1 || okv_engine_grow_i32(&e->pc_ids, &e->pc_ids_cap, max_k) != OKV_OK)
        return 0;
    uint64_t parent = PC_SEED;
    int k = 0;
    while (k < max_k) {
        const uint64_t h = block_hash(parent, tokens + (size_t)k * bsz, bsz);
        const int32_t id = okv_kv_prefix_lookup(e->kv, parent, h, tokens + (size_t)k * bsz);
        if (id < 0)
            break;
        e->pc_ids[k++] = id;
        parent = h;
    }
    if (k == 0)
        return 0;
    /* sparse: the blocks a sequence of k blocks keeps on the device (all of them within the dense
     * fast path, else the sinks and the local window) get group slots of their own, filled from
     * the shared host blocks; the rest are reached through selection, as after a prefill */
    const int sink = e->prm.sink_blocks, win = e->prm.window_blocks;
    if (e->lend && e->seqs[seq].dense_phase && k > okv_kv_free_slots(e->kv)) {
        /* no room for every block on the device: the sequence starts sparse */
        if (demote(e, seq) != OKV_OK)
            return 0;
    }
    const bool sparse = e->resid != NULL,
               all_dev = !sparse || k * bsz <= okv_engine_seq_dense_upto(e, &e->seqs[seq]);
#define ON_DEVICE(i) (all_dev || (i) < sink || (i) >= k - win)
    if (sparse) {
        int need = 0;
        for (int i = 0; i < k; i++)
            need += ON_DEVICE(i);
        if (need > okv_kv_free_slots(e->kv))
            return 0;
    }
    for (int i = 0; i < k; i++)
        if (okv_kv_seq_attach_block(e->kv, seq, e->pc_ids[i], ON_DEVICE(i)) != OKV_OK) {
            okv_kv_seq_truncate(e->kv, seq, 0);
            return 0;
        }
    if (sparse) {
        const int nkv = e->cfg.n_kv_heads;
        int nb, nd = 0;
        const int32_t *group = okv_kv_seq_blocks(e->kv, seq, &nb);
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, seq, &nb);
        /* [0, k*nkv): host units to read; [k*nkv, 2*k*nkv): device units to write */
        enum okv_status st = okv_engine_grow_i32(&e->pc_units, &e->pc_units_cap, 2 * k * nkv);
        int32_t *src = e->pc_units, *dst = e->pc_units + (size_t)k * nkv;
        for (int i = 0; i < k && st == OKV_OK; i++)
            if (ON_DEVICE(i))
                for (int h = 0; h < nkv; h++, nd++) {
                    src[nd] = host[i] * nkv + h;
                    dst[nd] = group[i] * nkv + h;
                }
        okv_bkv *kvs = okv_kv_storage(e->kv);
        for (int l = 0; l < e->cfg.n_layers && st == OKV_OK; l++) {
            int pending;
            double stall;
            st = e->be->ops->kv_fetch(e->be, kvs, l, nd, src, dst);
            if (st == OKV_OK)   /* the layer's next attention waits for the copy */
                st = e->be->ops->kv_fetch_wait(e->be, kvs, l, &pending, &stall);
        }
        if (st != OKV_OK) {
            okv_kv_seq_truncate(e->kv, seq, 0);
            return 0;
        }
        es->cand_end = all_dev || k - win <= sink ? 0 : k - win;
    }
#undef ON_DEVICE
    es->pc_n = k;
    es->pc_hash = parent;
    e->stats.prefix_hit_tokens += (int64_t)k * bsz;
    okv_engine_update_mem_stats(e);
    return k * bsz;
}

void okv_engine_prefix_register(okv_engine *e, int seq, const int32_t *tokens, int n)
{
    if (!okv_kv_prefix_enabled(e->kv) || !okv_kv_seq_valid(e->kv, seq))
        return;
    const int bsz = okv_kv_geometry(e->kv)->block_size;
    struct eseq *es = &e->seqs[seq];
    if (n > okv_kv_seq_len(e->kv, seq))
        n = okv_kv_seq_len(e->kv, seq);
    if (es->pc_n == 0 && es->pc_hash == 0)
        es->pc_hash = PC_SEED;
    while ((es->pc_n + 1) * bsz <= n) {
        const int32_t *t = tokens + (size_t)es->pc_n * bsz;
        const uint64_t h = block_hash(es->pc_hash, t, bsz);
        okv_kv_prefix_register(e->kv, seq, es->pc_n, es->pc_hash, h, t);
        es->pc_hash = h;
        es->pc_n++;
    }
}

enum okv_status okv_engine_seq_truncate(okv_engine *e, int seq, int len)
{
    if (!okv_kv_seq_valid(e->kv, seq))
        return okv_set_error(OKV_ERR_INVALID_ARG, "truncate: unknown sequence %d", seq);
    int cur = okv_kv_seq_len(e->kv, seq);
    if (len >= cur)
        return OKV_OK;
    if (len < 0)
        len = 0;
    const int bsz = okv_kv_geometry(e->kv)->block_size;
    struct eseq *es = &e->seqs[seq];
    if ((e->resid || e->streaming) && es->cand_end > 0 && len < es->cand_end * bsz)
        return okv_set_error(OKV_ERR_INVALID_ARG, "truncate: sequence %d to %d tokens cuts into blocks that left the local window",
                             seq, len);
    if (len < es->pc_n * bsz)   /* attached or registered blocks are shared: never written again */
        return okv_set_error(OKV_ERR_INVALID_ARG, "truncate: sequence %d to %d tokens cuts into its %d prefix-cached blocks",
                             seq, len, es->pc_n);
    okv_kv_seq_truncate(e->kv, seq, len);
    if (e->resid && len % bsz) {
        /* the last block's summary was widened by the dropped keys: rebuild it */
        int nb;
        const int32_t *host = okv_kv_seq_host_blocks(e->kv, seq, &nb);
        enum okv_status st = e->be->ops->kv_summary_rebuild(e->be, okv_kv_storage(e->kv), host[nb - 1], len % bsz);
        if (st != OKV_OK)
            return st;
    }
    return OKV_OK;
}

void okv_engine_stats_get(const okv_engine *e, struct okv_engine_stats *out)
{
    *out = e->stats;
    out->device_residency = e->dev_resid;
    out->dense_phase_seqs = e->lend ? okv_engine_dense_phase_seqs(e) : 0;
}

void okv_engine_stats_reset(okv_engine *e)
{
    size_t cap = e->stats.device_bytes_capacity, dev = e->stats.device_bytes, host = e->stats.host_bytes;
    memset(&e->stats, 0, sizeof e->stats);
    e->stats.device_bytes_capacity = cap;
    e->stats.device_bytes = e->stats.device_bytes_peak = dev;
    e->stats.host_bytes = e->stats.host_bytes_peak = host;
}

enum okv_status okv_engine_seq_fill_random(okv_engine *e, int seq, int n, uint64_t seed)
{
    if (!okv_kv_seq_valid(e->kv, seq))
        return okv_set_error(OKV_ERR_INVALID_ARG, "fill: unknown sequence %d", seq);
    const int bsz = okv_kv_geometry(e->kv)->block_size;
    int len = okv_kv_seq_len(e->kv, seq);
    if (len + n > e->max_ctx)
        return okv_set_error(OKV_ERR_CONTEXT, "fill: %d tokens exceed the context length %d", len + n, e->max_ctx);
    struct eseq *es = &e->seqs[seq];
    const int sink = e->prm.sink_blocks, win = e->prm.window_blocks;
    /* a block at a time, so that a sparse sequence never holds more than its window */
    while (n > 0) {
        int step = bsz - len % bsz;
        if (step > n)
            step = n;
        enum okv_status st = e->lend && len % bsz == 0 ? okv_engine_make_room(e, 1) : OKV_OK;
        if (st == OKV_OK)
            st = okv_kv_seq_reserve(e->kv, seq, step);
        if (st != OKV_OK)
            return st;
        if (e->resid && len % bsz == 0) {
            int nb;
            const int32_t *host = okv_kv_seq_host_blocks(e->kv, seq, &nb);
            st = e->be->ops->kv_host_randomize(e->be, okv_kv_storage(e->kv), host[len / bsz], seed, 1.0f);
            if (st != OKV_OK)
                return st;
        }
        okv_kv_seq_commit(e->kv, seq, step);
        len += step;
        n -= step;
        int nb = (len + bsz - 1) / bsz;
        if ((e->resid || e->streaming) && len > okv_engine_seq_dense_upto(e, es) && nb - win > sink) {
            for (int blk = es->cand_end > sink ? es->cand_end : sink; blk < nb - win; blk++) {
                if (e->resid)
                    okv_kv_seq_release_group(e->kv, seq, blk);
                else
                    okv_kv_seq_drop_group(e->kv, seq, blk);
            }
            es->cand_end = nb - win;
        }
    }
    es->decode = true;
    es->sparse = false;
    okv_engine_resid_clear(e, seq);
    return OKV_OK;
}

size_t okv_engine_estimate_device_bytes(const struct okv_model_config *c, size_t unit_bytes, const struct okv_engine_params *p)
{
    struct okv_engine_params prm = *p;
    fill_defaults(c, &prm);
    const int bsz = prm.block_size, nkv = c->n_kv_heads, L = c->n_layers;
    const int ctx_blocks = (prm.max_ctx + bsz - 1) / bsz;
    if (prm.kv_budget <= 0)
        return (size_t)(prm.kv_slots > 0 ? prm.kv_slots : prm.max_seqs * ctx_blocks) * nkv * L * unit_bytes;
    int k = prm.kv_budget / bsz - prm.sink_blocks - prm.window_blocks;
    int dense_upto = prm.tight_device ? (prm.sink_blocks + prm.window_blocks) * bsz : prm.kv_budget;
    int32_t *sel_k = okv_malloc(sizeof(int32_t) * (size_t)L, OKV_TAG_ENGINE);
    int32_t *quota = okv_malloc(sizeof(int32_t) * (size_t)L, OKV_TAG_ENGINE);
    if (!sel_k || !quota) {
        okv_free(sel_k);
        okv_free(quota);
        return SIZE_MAX;
    }
    struct okv_kv_geometry g = {.block_size = bsz, .head_dim = c->head_dim,
                                .key_code_bits = prm.streaming ? 0 : prm.key_code_bits};
    sparse_plan(c, &prm, k < 1 ? 1 : k, dense_upto, sel_k, quota, &g);
    size_t quota_units = 0, max_quota = 0;
    for (int l = 0; l < L; l++) {
        quota_units += (size_t)quota[l];
        max_quota = (size_t)quota[l] > max_quota ? (size_t)quota[l] : max_quota;
    }
    okv_free(sel_k);
    okv_free(quota);
    /* device-side residency, where the backend holds it (cuda_resid.cu): the block ->
     * unit maps (int16), six int32 arrays per quota unit, the top-k results (twice the
     * quota for sticky selections, and the real token's), a map of the host blocks, the
     * candidate table (an int32 per sequence and block) and per-layer counters (a bound) */
    const size_t resid = (size_t)L * prm.max_seqs * nkv * ctx_blocks * 2 + quota_units * prm.max_seqs * 6 * 4 +
                         3 * (size_t)prm.max_seqs * max_quota * 4 + (size_t)g.n_host_blocks * 4 +
                         (size_t)prm.max_seqs * ctx_blocks * 4 + 64 + (size_t)L * 20;
    return ((size_t)g.n_group_slots * nkv * L + quota_units * prm.max_seqs + 2 * (size_t)g.n_stage_units) * unit_bytes +
           (size_t)g.n_host_blocks * L * nkv * (unit_bytes / (size_t)bsz + okv_key_code_bytes(&g)) +   /* summaries, codes */
           resid;
}

/* a one-block KV probe of the backend: the bytes of a device unit, or (host) of a host-tier unit */
static size_t probe_unit_bytes(okv_backend *be, const struct okv_model_config *c, int block_size, bool host, bool fp8)
{
    struct okv_kv_geometry pg = {.n_layers = 1, .n_group_slots = 1, .n_host_blocks = host ? 1 : 0,
                                 .block_size = block_size > 0 ? block_size : 16, .n_kv_heads = c->n_kv_heads,
                                 .head_dim = c->head_dim, .host_fp8 = host && fp8};
    okv_bkv *probe = NULL;
    if (be->ops->kv_alloc(be, &pg, &probe) != OKV_OK)
        return 0;
    size_t b = host ? okv_backend_host_unit_bytes(be, probe) : be->ops->kv_unit_bytes(probe);
    be->ops->kv_free(be, probe);
    return b;
}

size_t okv_engine_unit_bytes(okv_backend *be, const struct okv_model_config *c, int block_size)
{
    return probe_unit_bytes(be, c, block_size, false, false);
}

size_t okv_engine_host_unit_bytes(okv_backend *be, const struct okv_model_config *c, int block_size, bool fp8)
{
    return probe_unit_bytes(be, c, block_size, true, fp8);
}

enum okv_status okv_engine_prefill(okv_engine *e, int seq, const int32_t *tokens, int n, int chunk, float *logits)
{
    if (chunk <= 0 || chunk > e->max_batch)
        chunk = e->max_batch;
    int32_t *seqs = okv_malloc(sizeof(int32_t) * (size_t)chunk, OKV_TAG_ENGINE);
    uint8_t *want = okv_calloc((size_t)chunk, 1, OKV_TAG_ENGINE);
    enum okv_status st = seqs && want ? OKV_OK : okv_set_error(OKV_ERR_NO_MEMORY, "prefill: out of memory");
    for (int i = 0; st == OKV_OK && i < chunk; i++)
        seqs[i] = seq;
    for (int at = 0; st == OKV_OK && at < n; at += chunk) {
        int k = n - at < chunk ? n - at : chunk;
        want[k - 1] = at + k == n;
        struct okv_batch b = {k, tokens + at, seqs, want, NULL};
        st = okv_engine_forward(e, &b, logits);
        want[k - 1] = 0;
    }
    okv_free(seqs);
    okv_free(want);
    return st;
}

const char *okv_merge_name(enum okv_merge m)
{
    return m == OKV_MERGE_RANK ? "rank" : m == OKV_MERGE_SHARE ? "share" : "auto";
}
