/* Residency held by the CPU backend (backend.h: okv_resid_geometry), so that the engine's
 * backend path (select_install, placeholders in the attention lists) is the same on every
 * backend and runs in CI. The state is a src/kv/resid.c instance whose sequence i is quota
 * chunk i; select_install runs the CPU selection, the shared rules of kv/select_rules.h,
 * okv_resid_apply, and queues one kv_fetch for the missing units. The CUDA backend keeps
 * the same state in HBM (cuda_resid.cu). */
#include "backend/cpu/cpu_internal.h"
#include "kv/resid.h"
#include "kv/select_rules.h"

#include <stdlib.h>
#include <string.h>

struct cpu_resid {
    okv_resid *r;
    int max_seqs, max_blocks;
    int32_t *quota;       /* [n_layers] */
    int32_t *h2l;         /* [n_host_blocks] */
    int64_t fetched;      /* units since the last resid_take_stats */
};

void okv_cpu_resid_free(okv_bkv *kv)
{
    struct cpu_resid *s = kv->resid;
    if (!s)
        return;
    okv_resid_free(s->r);
    okv_free(s->quota);
    okv_free(s->h2l);
    okv_free(s);
    kv->resid = NULL;
}

static enum okv_status cpu_resid_init(okv_backend *be, okv_bkv *kv, const struct okv_resid_geometry *g)
{
    (void)be;
    okv_cpu_resid_free(kv);
    const int L = kv->g.n_layers, nkv = kv->g.n_kv_heads;
    if (!cpu_kv_has_host(kv) || g->max_seqs <= 0 || g->max_blocks <= 0 || !g->quota)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu residency: no host tier or bad geometry");
    for (int l = 0; l < L; l++)
        if (g->quota[l] % nkv || (size_t)g->base_unit + (size_t)g->max_seqs * g->quota[l] > kv->layer_units[l])
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu residency: layer %d: quota %d does not fit its units", l, g->quota[l]);
    struct cpu_resid *s = okv_calloc(1, sizeof *s, OKV_TAG_KV);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu residency: out of memory");
    kv->resid = s;
    s->max_seqs = g->max_seqs;
    s->max_blocks = g->max_blocks;
    s->quota = okv_malloc(sizeof(int32_t) * (size_t)L, OKV_TAG_KV);
    s->h2l = okv_malloc(sizeof(int32_t) * (size_t)(kv->g.n_host_blocks > 0 ? kv->g.n_host_blocks : 1), OKV_TAG_KV);
    if (!s->quota || !s->h2l) {
        okv_cpu_resid_free(kv);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu residency: out of memory");
    }
    memcpy(s->quota, g->quota, sizeof(int32_t) * (size_t)L);
    struct okv_resid_params rp = {L, nkv, g->max_seqs, g->base_unit, s->quota};
    enum okv_status st = okv_resid_create(&rp, &s->r);
    for (int i = 0; i < g->max_seqs && st == OKV_OK; i++)
        st = okv_resid_attach(s->r, i);   /* sequence i gets chunk i */
    if (st != OKV_OK)
        okv_cpu_resid_free(kv);
    return st;
}

static enum okv_status cpu_resid_reset(okv_backend *be, okv_bkv *kv, int chunk)
{
    (void)be;
    struct cpu_resid *s = kv->resid;
    if (!s || chunk < 0 || chunk >= s->max_seqs)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu residency: no state or bad chunk %d", chunk);
    okv_resid_clear(s->r, chunk);
    return OKV_OK;
}

static enum okv_status cpu_select_install(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                          const struct okv_select_req *reqs, const struct okv_select_req *own,
                                          const struct okv_resid_item *items, int n_items, int succ)
{
    struct cpu_resid *s = kv->resid;
    const int nkv = kv->g.n_kv_heads;
    if (!s || layer < 0 || layer >= kv->g.n_layers || n_items < 0 || n_items > s->max_seqs)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu select_install: no residency state, bad layer %d or %d items", layer,
                             n_items);
    const int qh = s->quota[layer] / nkv;
    size_t n_out = 0, n_own = 0, n_ids = 0;
    int kmax = 0, n_calls = 0;
    for (int i = 0; i < n_items; i++) {
        const int k1 = own ? own[i].k : 0, keep = items[i].keep;
        const bool bad_keep = keep < 0 || (keep > 0 && (own || keep > qh || reqs[i].k < keep || reqs[i].k > 2 * keep));
        const bool bad_rank = items[i].by_rank && (own || keep || reqs[i].n_rows < 1);
        if (items[i].chunk < 0 || items[i].chunk >= s->max_seqs || (!keep && reqs[i].k > qh) || bad_keep || bad_rank ||
            k1 > reqs[i].k || items[i].stamp == 0 || items[i].sink < 0 || items[i].sink + reqs[i].n_cand > s->max_blocks ||
            (own && own[i].n_cand != reqs[i].n_cand))
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu select_install: item %d: chunk %d, k %d (own %d, keep %d%s) of %d "
                                 "per head", i, items[i].chunk, reqs[i].k, k1, keep, items[i].by_rank ? ", by rank" : "", qh);
        const int lists = okv_sel_lists(&items[i], &reqs[i]);   /* a rank item selects once per row */
        n_out += (size_t)nkv * reqs[i].k;
        n_ids += (size_t)nkv * reqs[i].k * lists;
        n_own += (size_t)nkv * k1;
        n_calls += lists;
        kmax = reqs[i].k > kmax ? reqs[i].k : kmax;
    }
    int32_t *ids = okv_malloc(sizeof(int32_t) * (n_ids + n_own + 1), OKV_TAG_KV), *oids = ids ? ids + n_ids : NULL;
    int32_t *sel = okv_malloc(sizeof(int32_t) * ((size_t)nkv * kmax * 2 + 2 * kmax + 1), OKV_TAG_KV);
    int32_t *src = okv_malloc(sizeof(int32_t) * (n_out + 1) * 4, OKV_TAG_KV);
    uint8_t *held = okv_malloc((size_t)kmax + 1, OKV_TAG_KV);
    struct okv_select_req *calls = okv_malloc(sizeof *calls * (size_t)(n_calls + 1), OKV_TAG_KV);
    enum okv_status st = OKV_OK;
    if (!ids || !sel || !src || !held || !calls) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "cpu select_install: out of memory");
        goto out;
    }
    okv_sel_rank_expand(reqs, items, n_items, calls, NULL);
    if ((st = okv_cpu_select_blocks(be, kv, layer, q, n_heads, calls, n_calls, ids, NULL)) != OKV_OK ||
        (own && (st = okv_cpu_select_blocks(be, kv, layer, q, n_heads, own, n_items, oids, NULL)) != OKV_OK))
        goto out;
    int32_t *all_l = sel + (size_t)nkv * kmax, *own_l = all_l + kmax, *dst = src + n_out + 1;
    int32_t *fb = dst + n_out + 1, *fh = fb + n_out + 1;
    int n_fetch = 0;
    size_t at = 0, at_own = 0;
    for (int i = 0; i < n_items; i++) {
        const struct okv_select_req *rq = &reqs[i];
        const int K = rq->k, k1 = own ? own[i].k : 0, sink = items[i].sink;
        const int k = items[i].keep > 0 ? items[i].keep : K;   /* what is installed */
        for (int c = 0; c < rq->n_cand; c++)
            s->h2l[rq->cand_host[c]] = sink + c;   /* checked by select_blocks; a shared host block has one logical block */
        for (int h = 0; h < nkv; h++) {
            int32_t *out = sel + (size_t)h * k;
            if (items[i].by_rank) {   /* the rows' lists: [n_rows][nkv][K] from ids + at */
                okv_sel_merge_rank(ids + at + (size_t)h * K, rq->n_rows, nkv * K, K, all_l);
                for (int x = 0; x < k; x++)
                    out[x] = s->h2l[all_l[x]];
            } else {
                for (int x = 0; x < K; x++)
                    all_l[x] = s->h2l[ids[at + (size_t)h * K + x]];
                if (own) {
                    for (int x = 0; x < k1; x++)
                        own_l[x] = s->h2l[oids[at_own + (size_t)h * k1 + x]];
                    okv_sel_merge(own_l, k1, all_l, k, out);
                } else if (k < K) {
                    okv_resid_sticky_cut(s->r, items[i].chunk, layer, h, all_l, K, k, held, out);
                } else {
                    memcpy(out, all_l, sizeof(int32_t) * (size_t)k);
                }
            }
            if (succ > 0)
                okv_sel_successors(out, k, succ, sink + rq->n_cand);
        }
        const int m = okv_resid_apply(s->r, items[i].chunk, layer, sel, k, items[i].stamp, fb + n_fetch, fh + n_fetch,
                                      dst + n_fetch);
        for (int f = n_fetch; f < n_fetch + m; f++)
            src[f] = rq->cand_host[fb[f] - sink] * nkv + fh[f];
        n_fetch += m;
        at += (size_t)nkv * K * okv_sel_lists(&items[i], rq);
        at_own += (size_t)nkv * k1;
    }
    s->fetched += n_fetch;
    if (n_fetch)
        st = be->ops->kv_fetch(be, kv, layer, n_fetch, src, dst);
out:
    okv_free(ids);
    okv_free(sel);
    okv_free(src);
    okv_free(held);
    okv_free(calls);
    return st;
}

static enum okv_status cpu_resid_take_stats(okv_backend *be, okv_bkv *kv, int64_t *units)
{
    (void)be;
    *units = kv->resid ? kv->resid->fetched : 0;
    if (kv->resid)
        kv->resid->fetched = 0;
    return OKV_OK;
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The installed selection of (chunk, layer) for heads [h0, h1), each in block order, and
 * its units ([nkv][k] layout). pairs: scratch of 2 * k entries. */
static enum okv_status sorted_selection(const struct cpu_resid *s, int chunk, int layer, int h0, int h1, int k,
                                        int32_t *blocks, int32_t *units, int32_t *pairs)
{
    int kk = 0;
    const int32_t *sel = okv_resid_selection(s->r, chunk, layer, &kk);
    const int32_t *su = okv_resid_selection_units(s->r, chunk, layer);
    if (kk != k)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu residency: chunk %d layer %d holds %d blocks per head, not %d", chunk,
                             layer, kk, k);
    for (int h = h0; h < h1; h++) {
        for (int i = 0; i < k; i++) {
            pairs[2 * i] = sel[h * k + i];
            pairs[2 * i + 1] = su[h * k + i];
        }
        qsort(pairs, (size_t)k, 2 * sizeof(int32_t), cmp_pair);
        for (int i = 0; i < k; i++) {
            blocks[h * k + i] = pairs[2 * i];
            units[h * k + i] = pairs[2 * i + 1];
        }
    }
    return OKV_OK;
}

static enum okv_status cpu_resid_read(okv_backend *be, okv_bkv *kv, int chunk, int layer, int k, int32_t *blocks,
                                      int32_t *units)
{
    (void)be;
    struct cpu_resid *s = kv->resid;
    if (!s || chunk < 0 || chunk >= s->max_seqs || layer < 0 || layer >= kv->g.n_layers || k < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu resid_read: bad chunk %d, layer %d or k %d", chunk, layer, k);
    int32_t *pairs = okv_malloc(sizeof(int32_t) * (2 * (size_t)k + 1), OKV_TAG_KV);
    if (!pairs)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu resid_read: out of memory");
    enum okv_status st = sorted_selection(s, chunk, layer, 0, kv->g.n_kv_heads, k, blocks, units, pairs);
    okv_free(pairs);
    return st;
}

enum okv_status okv_cpu_resid_fill(const okv_bkv *kv, int layer, const struct okv_attn_blocks *b, int n_lists, int32_t *unit,
                                   int32_t *index)
{
    const struct cpu_resid *s = kv->resid;
    const int nkv = kv->g.n_kv_heads;
    if (!s)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu attention: selection placeholders without residency state");
    int kmax = 0;
    for (int li = 0; li < n_lists; li++)   /* lists without placeholders (pos < 0) carry nothing else */
        if (b->sel_fill[3 * li] >= 0 && b->sel_fill[3 * li + 2] > kmax)
            kmax = b->sel_fill[3 * li + 2];
    int32_t *tmp = okv_malloc(sizeof(int32_t) * (4 * (size_t)kmax * nkv + 1), OKV_TAG_KV);
    if (!tmp)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu attention: out of memory");
    enum okv_status st = OKV_OK;
    for (int li = 0; li < n_lists && st == OKV_OK; li++) {
        const int32_t *f = b->sel_fill + 3 * li;
        if (f[0] < 0)
            continue;
        if (f[1] < 0 || f[1] >= s->max_seqs || f[2] < 0 || f[0] < b->blk_start[li] || f[0] + f[2] > b->blk_start[li + 1]) {
            st = okv_set_error(OKV_ERR_INVALID_ARG, "cpu attention: list %d: bad selection placeholder", li);
            break;
        }
        const int k = f[2], h = li % nkv;
        int32_t *blocks = tmp, *units = tmp + (size_t)k * nkv, *pairs = units + (size_t)k * nkv;
        if ((st = sorted_selection(s, f[1], layer, h, h + 1, k, blocks, units, pairs)) != OKV_OK)
            break;
        memcpy(unit + f[0], units + (size_t)h * k, sizeof(int32_t) * (size_t)k);
        memcpy(index + f[0], blocks + (size_t)h * k, sizeof(int32_t) * (size_t)k);
    }
    okv_free(tmp);
    return st;
}

void okv_cpu_fill_resid_ops(struct okv_backend_ops *o)
{
    o->resid_init = cpu_resid_init;
    o->resid_reset = cpu_resid_reset;
    o->select_install = cpu_select_install;
    o->resid_take_stats = cpu_resid_take_stats;
    o->resid_read = cpu_resid_read;
}
