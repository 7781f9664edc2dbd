/* KV tiers of the CPU backend: the device tier (a bounded RAM pool standing for
 * HBM), the host tier, block summaries, and a background worker that copies units
 * host -> device while the forward pass goes on.
 *
 * The fetch worker owns a FIFO of jobs; per layer it counts units enqueued and
 * units copied. kv_fetch_wait(layer) blocks until the two agree. The mutex hand-off
 * orders the worker's writes before the attention that reads them. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

struct fetch_job {
    struct fetch_job *next;
    int layer;
    int n;
    int32_t *src_host;
    int32_t *dst_unit;
};

struct cpu_fetcher {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_job;
    pthread_cond_t cv_done;
    struct fetch_job *head, *tail;
    int64_t *enqueued;    /* [n_layers] units */
    int64_t *done;        /* [n_layers] units */
    bool stop;
    okv_bkv *kv;
};

static void decode8(const okv_bkv *kv, float *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = kv->dec8[src[i]];
}

static void copy_unit(okv_bkv *kv, int layer, int32_t src_host, int32_t dst_unit)
{
    const int nkv = kv->g.n_kv_heads;
    if (kv->hk8) {
        decode8(kv, cpu_kv_unit(kv, false, layer, dst_unit), cpu_kv_host8(kv, kv->hk8, layer, src_host / nkv, src_host % nkv),
                kv->unit_floats);
        decode8(kv, cpu_kv_unit(kv, true, layer, dst_unit), cpu_kv_host8(kv, kv->hv8, layer, src_host / nkv, src_host % nkv),
                kv->unit_floats);
        return;
    }
    memcpy(cpu_kv_unit(kv, false, layer, dst_unit), cpu_kv_host(kv, kv->hk, layer, src_host / nkv, src_host % nkv),
           kv->unit_floats * sizeof(float));
    memcpy(cpu_kv_unit(kv, true, layer, dst_unit), cpu_kv_host(kv, kv->hv, layer, src_host / nkv, src_host % nkv),
           kv->unit_floats * sizeof(float));
}

static void *fetch_main(void *arg)
{
    struct cpu_fetcher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->stop && !f->head)
            pthread_cond_wait(&f->cv_job, &f->mu);
        if (!f->head && f->stop)
            break;
        struct fetch_job *j = f->head;
        f->head = j->next;
        if (!f->head)
            f->tail = NULL;
        pthread_mutex_unlock(&f->mu);
        for (int i = 0; i < j->n; i++)
            copy_unit(f->kv, j->layer, j->src_host[i], j->dst_unit[i]);
        pthread_mutex_lock(&f->mu);
        f->done[j->layer] += j->n;
        pthread_cond_broadcast(&f->cv_done);
        okv_free(j);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static enum okv_status cpu_kv_fetch(okv_backend *be, okv_bkv *kv, int layer, int n, const int32_t *src_host,
                                    const int32_t *dst_unit)
{
    if (n <= 0)
        return OKV_OK;
    if (!kv->fetch || layer < 0 || layer >= kv->g.n_layers)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu kv_fetch: no host tier or bad layer %d", layer);
    const int64_t max_host = (int64_t)kv->g.n_host_blocks * kv->g.n_kv_heads;
    for (int i = 0; i < n; i++)
        if (src_host[i] < 0 || src_host[i] >= max_host || !cpu_kv_unit_valid(kv, layer, dst_unit[i]))
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu kv_fetch: unit %d -> %d out of range", src_host[i], dst_unit[i]);
    /* one allocation for the job and its two index arrays */
    struct fetch_job *j = okv_malloc(sizeof *j + 2 * sizeof(int32_t) * (size_t)n, OKV_TAG_BACKEND);
    if (!j)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu kv_fetch: out of memory");
    j->next = NULL;
    j->layer = layer;
    j->n = n;
    j->src_host = (int32_t *)(j + 1);
    j->dst_unit = j->src_host + n;
    memcpy(j->src_host, src_host, sizeof(int32_t) * (size_t)n);
    memcpy(j->dst_unit, dst_unit, sizeof(int32_t) * (size_t)n);
    struct cpu_fetcher *f = kv->fetch;
    pthread_mutex_lock(&f->mu);
    if (f->tail)
        f->tail->next = j;
    else
        f->head = j;
    f->tail = j;
    f->enqueued[layer] += n;
    pthread_cond_signal(&f->cv_job);
    pthread_mutex_unlock(&f->mu);
    return OKV_OK;
}

static enum okv_status cpu_kv_fetch_wait(okv_backend *be, okv_bkv *kv, int layer, int *pending, double *stall_s)
{
    *pending = 0;
    *stall_s = 0;
    struct cpu_fetcher *f = kv->fetch;
    if (!f)
        return OKV_OK;
    pthread_mutex_lock(&f->mu);
    int64_t left = f->enqueued[layer] - f->done[layer];
    if (left > 0) {
        *pending = (int)left;
        double t0 = okv_now();
        while (f->enqueued[layer] != f->done[layer])
            pthread_cond_wait(&f->cv_done, &f->mu);
        *stall_s = okv_now() - t0;
    }
    pthread_mutex_unlock(&f->mu);
    return OKV_OK;
}

static enum okv_status cpu_kv_move(okv_backend *be, okv_bkv *kv, int n, const int32_t *src, const int32_t *dst)
{
    (void)be;
    const int nkv = kv->g.n_kv_heads, ids = kv->slot_ids;
    for (int i = 0; i < n; i++)
        if (src[i] < 0 || src[i] >= ids || dst[i] < 0 || dst[i] >= ids)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu kv_move: slot %d -> %d out of range (%d)", src[i], dst[i], ids);
    const size_t bytes = sizeof(float) * kv->unit_floats * (size_t)nkv;   /* a slot's heads are consecutive units */
    for (int l = 0; l < kv->g.n_layers; l++)
        for (int i = 0; i < n; i++) {
            memmove(cpu_kv_unit(kv, false, l, (int64_t)dst[i] * nkv), cpu_kv_unit(kv, false, l, (int64_t)src[i] * nkv), bytes);
            memmove(cpu_kv_unit(kv, true, l, (int64_t)dst[i] * nkv), cpu_kv_unit(kv, true, l, (int64_t)src[i] * nkv), bytes);
        }
    return OKV_OK;
}

enum okv_status okv_cpu_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out)
{
    *out = NULL;
    if (g->n_layers <= 0 || g->n_group_slots < 0 || g->n_sparse_units < 0 || g->n_host_blocks < 0 ||
        g->n_stage_units < 0 || g->block_size <= 0 || g->block_size > 256 || g->n_kv_heads <= 0 || g->head_dim <= 0 || g->head_dim > 512 ||
        (g->n_group_slots == 0 && g->n_sparse_units == 0 && !g->layer_sparse_units))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: bad KV geometry");
    okv_bkv *kv = okv_calloc(1, sizeof *kv, OKV_TAG_KV);
    if (!kv)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: out of memory");
    if (!okv_key_code_bits_valid(g->key_code_bits)) {
        okv_free(kv);
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: key codes of %d bits (1, 2 or 4 allowed)", g->key_code_bits);
    }
    kv->g = *g;
    kv->unit_floats = (size_t)g->block_size * g->head_dim;
    kv->layer_units = okv_calloc((size_t)g->n_layers, sizeof(size_t), OKV_TAG_KV);
    kv->layer_off = okv_calloc((size_t)g->n_layers, sizeof(size_t), OKV_TAG_KV);
    if (!kv->layer_units || !kv->layer_off) {
        okv_cpu_kv_free(be, kv);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: out of memory");
    }
    for (int l = 0; l < g->n_layers; l++) {
        int sp = g->layer_sparse_units ? g->layer_sparse_units[l] : g->n_sparse_units;
        if (sp < 0) {
            okv_cpu_kv_free(be, kv);
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: layer %d: negative sparse units", l);
        }
        kv->layer_units[l] = (size_t)g->n_group_slots * g->n_kv_heads + (size_t)sp;
        kv->layer_off[l] = kv->total_units;
        kv->total_units += kv->layer_units[l];
        const int ids = (int)(kv->layer_units[l] / (size_t)g->n_kv_heads);
        kv->slot_ids = l == 0 || ids < kv->slot_ids ? ids : kv->slot_ids;
    }
    kv->g.layer_sparse_units = NULL;   /* not kept: the caller's array */
    size_t dev = kv->total_units * kv->unit_floats;
    size_t host = (size_t)g->n_layers * g->n_host_blocks * g->n_kv_heads * kv->unit_floats;
    size_t summ = (size_t)g->n_layers * g->n_host_blocks * g->n_kv_heads * 2 * g->head_dim;
    size_t stage = 2 * (size_t)g->n_stage_units * kv->unit_floats;
    kv->k = okv_malloc(dev * sizeof(float), OKV_TAG_KV);
    kv->v = okv_malloc(dev * sizeof(float), OKV_TAG_KV);
    kv->sk = okv_malloc((stage ? stage : 1) * sizeof(float), OKV_TAG_KV);
    kv->sv = okv_malloc((stage ? stage : 1) * sizeof(float), OKV_TAG_KV);
    bool ok = kv->k && kv->v && kv->sk && kv->sv;
    const size_t host_es = g->host_fp8 ? 1 : sizeof(float);
    for (int c = 0; c < 256; c++)
        kv->dec8[c] = okv_e4m3_to_f32((uint8_t)c);
    if (ok && host) {
        if (g->host_fp8) {
            kv->hk8 = okv_malloc(host, OKV_TAG_KV);
            kv->hv8 = okv_malloc(host, OKV_TAG_KV);
            kv->scratch = okv_malloc(kv->unit_floats * sizeof(float), OKV_TAG_KV);
            ok = kv->hk8 && kv->hv8 && kv->scratch;
        } else {
            kv->hk = okv_malloc(host * sizeof(float), OKV_TAG_KV);
            kv->hv = okv_malloc(host * sizeof(float), OKV_TAG_KV);
            ok = kv->hk && kv->hv;
        }
        kv->summ = okv_malloc(summ * sizeof(float), OKV_TAG_KV);
        ok = ok && kv->summ;
        if (ok && g->key_code_bits) {
            kv->codes = okv_calloc((size_t)g->n_layers * g->n_host_blocks * g->n_kv_heads, okv_key_code_bytes(g), OKV_TAG_KV);
            ok = kv->codes != NULL;
        }
    }
    if (ok && host) {
        struct cpu_fetcher *f = okv_calloc(1, sizeof *f, OKV_TAG_KV);
        if (f) {
            f->enqueued = okv_calloc((size_t)g->n_layers, sizeof(int64_t), OKV_TAG_KV);
            f->done = okv_calloc((size_t)g->n_layers, sizeof(int64_t), OKV_TAG_KV);
            f->kv = kv;
            pthread_mutex_init(&f->mu, NULL);
            pthread_cond_init(&f->cv_job, NULL);
            pthread_cond_init(&f->cv_done, NULL);
            kv->fetch = f;
            if (!f->enqueued || !f->done || pthread_create(&f->thread, NULL, fetch_main, f) != 0) {
                okv_free(f->enqueued);
                okv_free(f->done);
                okv_free(f);
                kv->fetch = NULL;
            }
        }
        ok = kv->fetch != NULL;
    }
    if (!ok) {
        okv_cpu_kv_free(be, kv);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: cannot allocate the KV tiers (device %zu MiB, host %zu MiB)",
                             2 * dev * sizeof(float) >> 20, 2 * host * host_es >> 20);
    }
    *out = kv;
    return OKV_OK;
}

void okv_cpu_kv_free(okv_backend *be, okv_bkv *kv)
{
    if (!kv)
        return;
    if (kv->fetch) {
        struct cpu_fetcher *f = kv->fetch;
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_signal(&f->cv_job);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv_job);
        pthread_cond_destroy(&f->cv_done);
        okv_free(f->enqueued);
        okv_free(f->done);
        okv_free(f);
    }
    okv_cpu_resid_free(kv);
    okv_free(kv->k);
    okv_free(kv->v);
    okv_free(kv->sk);
    okv_free(kv->sv);
    okv_free(kv->hk);
    okv_free(kv->hv);
    okv_free(kv->hk8);
    okv_free(kv->hv8);
    okv_free(kv->scratch);
    okv_free(kv->summ);
    okv_free(kv->codes);
    okv_free(kv->layer_units);
    okv_free(kv->layer_off);
    okv_free(kv);
}

static size_t cpu_kv_unit_bytes(const okv_bkv *kv) { return 2 * kv->unit_floats * sizeof(float); }

static size_t cpu_kv_device_bytes(const okv_bkv *kv)
{
    return (kv->total_units + 2 * (size_t)kv->g.n_stage_units) * 2 * kv->unit_floats * sizeof(float) +
           (size_t)kv->g.n_layers * kv->g.n_host_blocks * kv->g.n_kv_heads *
               (2 * kv->g.head_dim * sizeof(float) + (kv->codes ? okv_key_code_bytes(&kv->g) : 0));
}

static size_t cpu_kv_host_unit_bytes(const okv_bkv *kv) { return 2 * kv->unit_floats * (kv->g.host_fp8 ? 1 : sizeof(float)); }

static size_t cpu_kv_host_bytes(const okv_bkv *kv)
{
    return (size_t)kv->g.n_layers * kv->g.n_host_blocks * kv->g.n_kv_heads * cpu_kv_host_unit_bytes(kv);
}

/* the keys of a host unit as floats: the tier itself, or decoded into the scratch unit (fp8) */
static const float *host_keys(okv_bkv *kv, int layer, int64_t hb, int h)
{
    if (!kv->hk8)
        return cpu_kv_host(kv, kv->hk, layer, hb, h);
    decode8(kv, kv->scratch, cpu_kv_host8(kv, kv->hk8, layer, hb, h), kv->unit_floats);
    return kv->scratch;
}

static enum okv_status cpu_kv_unit_read(okv_backend *be, const okv_bkv *kv, int layer, int32_t unit, float *k, float *v)
{
    if (layer < 0 || layer >= kv->g.n_layers || !cpu_kv_unit_valid(kv, layer, unit))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: KV unit (%d, %d) out of range", layer, unit);
    memcpy(k, cpu_kv_unit(kv, false, layer, unit), kv->unit_floats * sizeof(float));
    memcpy(v, cpu_kv_unit(kv, true, layer, unit), kv->unit_floats * sizeof(float));
    return OKV_OK;
}

static enum okv_status cpu_kv_host_read(okv_backend *be, const okv_bkv *kv, int layer, int hb, int head, float *k, float *v)
{
    if (layer < 0 || layer >= kv->g.n_layers || hb < 0 || hb >= kv->g.n_host_blocks || head < 0 || head >= kv->g.n_kv_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: host block (%d, %d, %d) out of range", layer, hb, head);
    if (!cpu_kv_has_host(kv))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: no host tier");
    if (kv->hk8) {
        decode8(kv, k, cpu_kv_host8(kv, kv->hk8, layer, hb, head), kv->unit_floats);
        decode8(kv, v, cpu_kv_host8(kv, kv->hv8, layer, hb, head), kv->unit_floats);
        return OKV_OK;
    }
    memcpy(k, cpu_kv_host(kv, kv->hk, layer, hb, head), kv->unit_floats * sizeof(float));
    memcpy(v, cpu_kv_host(kv, kv->hv, layer, hb, head), kv->unit_floats * sizeof(float));
    return OKV_OK;
}

static enum okv_status cpu_kv_summary_read(okv_backend *be, const okv_bkv *kv, int layer, int hb, int head, float *kmin, float *kmax)
{
    if (layer < 0 || layer >= kv->g.n_layers || hb < 0 || hb >= kv->g.n_host_blocks || head < 0 || head >= kv->g.n_kv_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: summary (%d, %d, %d) out of range", layer, hb, head);
    const float *s = cpu_kv_summary(kv, layer, hb, head);
    memcpy(kmin, s, sizeof(float) * (size_t)kv->g.head_dim);
    memcpy(kmax, s + kv->g.head_dim, sizeof(float) * (size_t)kv->g.head_dim);
    return OKV_OK;
}

static void summary_widen(float *s, const float *key, int hd, bool first)
{
    for (int d = 0; d < hd; d++) {
        if (first || key[d] < s[d])
            s[d] = key[d];
        if (first || key[d] > s[hd + d])
            s[hd + d] = key[d];
    }
}

/* the key codes of a full host block at one layer and head, from its (stored) keys and summary */
static void codes_build(okv_bkv *kv, int layer, int hb, int h)
{
    const int hd = kv->g.head_dim, bs = kv->g.block_size, bits = kv->g.key_code_bits, top = (1 << bits) - 1;
    const float *k = host_keys(kv, layer, hb, h), *mn = cpu_kv_summary(kv, layer, hb, h), *mx = mn + hd;
    uint8_t *c = cpu_kv_codes(kv, layer, hb, h);
    memset(c, 0, okv_key_code_bytes(&kv->g));
    for (int t = 0; t < bs; t++)
        for (int d = 0; d < hd; d++) {
            const int code = cpu_key_quantize(k[(size_t)t * hd + d], mn[d], mx[d] - mn[d], top);
            const size_t i = (size_t)t * hd + d;
            c[i * (size_t)bits / 8] |= (uint8_t)(code << ((i * (size_t)bits) % 8));
        }
}

static enum okv_status cpu_kv_summary_rebuild(okv_backend *be, okv_bkv *kv, int hb, int n_valid)
{
    if (!kv->summ || hb < 0 || hb >= kv->g.n_host_blocks || n_valid < 0 || n_valid > kv->g.block_size)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: summary rebuild of block %d (%d tokens) invalid", hb, n_valid);
    const int hd = kv->g.head_dim;
    for (int l = 0; l < kv->g.n_layers; l++)
        for (int h = 0; h < kv->g.n_kv_heads; h++) {
            float *s = cpu_kv_summary(kv, l, hb, h);
            const float *k = host_keys(kv, l, hb, h);
            if (n_valid == 0) {
                for (int d = 0; d < hd; d++) {
                    s[d] = INFINITY;
                    s[hd + d] = -INFINITY;
                }
            }
            for (int i = 0; i < n_valid; i++)
                summary_widen(s, k + (size_t)i * hd, hd, i == 0);
            if (kv->codes && n_valid == kv->g.block_size)
                codes_build(kv, l, hb, h);
        }
    return OKV_OK;
}

static enum okv_status cpu_kv_write(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v)
{
    const struct okv_step_meta *meta = &((struct cpu_ctx *)be->ctx)->meta;
    const int hd = kv->g.head_dim, bs = kv->g.block_size, nkv = kv->g.n_kv_heads;
    const size_t row = sizeof(float) * (size_t)hd;
    for (int t = 0; t < meta->n_tokens; t++) {
        int slot = meta->tok_slot[t] / bs, off = meta->tok_slot[t] % bs;
        if (meta->tok_slot[t] < 0 || slot >= kv->slot_ids)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu kv_write: slot %d out of range", meta->tok_slot[t]);
        int hb = -1, hoff = 0;
        if (meta->tok_host && cpu_kv_has_host(kv)) {
            hb = meta->tok_host[t] / bs;
            hoff = meta->tok_host[t] % bs;
            if (meta->tok_host[t] < 0 || hb >= kv->g.n_host_blocks)
                return okv_set_error(OKV_ERR_INVALID_ARG, "cpu kv_write: host slot %d out of range", meta->tok_host[t]);
        }
        for (int h = 0; h < nkv; h++) {
            const float *ks = k->data + ((size_t)t * nkv + h) * hd, *vs = v->data + ((size_t)t * nkv + h) * hd;
            int64_t unit = (int64_t)slot * nkv + h;
            memcpy(cpu_kv_unit(kv, false, layer, unit) + (size_t)off * hd, ks, row);
            memcpy(cpu_kv_unit(kv, true, layer, unit) + (size_t)off * hd, vs, row);
            if (hb >= 0 && kv->hk8) {
                /* fp8: the summary widens by the key as stored (what a fetch brings back) */
                uint8_t *k8 = cpu_kv_host8(kv, kv->hk8, layer, hb, h) + (size_t)hoff * hd;
                uint8_t *v8 = cpu_kv_host8(kv, kv->hv8, layer, hb, h) + (size_t)hoff * hd;
                float kq[512];
                for (int d = 0; d < hd; d++) {
                    k8[d] = okv_f32_to_e4m3(ks[d]);
                    v8[d] = okv_f32_to_e4m3(vs[d]);
                    kq[d] = kv->dec8[k8[d]];
                }
                summary_widen(cpu_kv_summary(kv, layer, hb, h), kq, hd, hoff == 0);
                if (kv->codes && hoff == bs - 1)
                    codes_build(kv, layer, hb, h);
            } else if (hb >= 0) {
                memcpy(cpu_kv_host(kv, kv->hk, layer, hb, h) + (size_t)hoff * hd, ks, row);
                memcpy(cpu_kv_host(kv, kv->hv, layer, hb, h) + (size_t)hoff * hd, vs, row);
                summary_widen(cpu_kv_summary(kv, layer, hb, h), ks, hd, hoff == 0);
                if (kv->codes && hoff == bs - 1)   /* the block is full: its summary is final */
                    codes_build(kv, layer, hb, h);
            }
        }
    }
    return OKV_OK;
}

static enum okv_status cpu_kv_host_randomize(okv_backend *be, okv_bkv *kv, int hb, uint64_t seed, float scale)
{
    if (!cpu_kv_has_host(kv) || hb < 0 || hb >= kv->g.n_host_blocks)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: host block %d out of range", hb);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + (uint64_t)hb * 0xbf58476d1ce4e5b9ull + 1;
    for (int l = 0; l < kv->g.n_layers; l++)
        for (int h = 0; h < kv->g.n_kv_heads; h++) {
            for (size_t i = 0; i < kv->unit_floats; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                const float kx = scale * ((float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f);
                const float vx = scale * ((float)((x >> 16) & 0xffffff) * (2.0f / 16777216.0f) - 1.0f);
                if (kv->hk8) {
                    cpu_kv_host8(kv, kv->hk8, l, hb, h)[i] = okv_f32_to_e4m3(kx);
                    cpu_kv_host8(kv, kv->hv8, l, hb, h)[i] = okv_f32_to_e4m3(vx);
                } else {
                    cpu_kv_host(kv, kv->hk, l, hb, h)[i] = kx;
                    cpu_kv_host(kv, kv->hv, l, hb, h)[i] = vx;
                }
            }
        }
    return cpu_kv_summary_rebuild(be, kv, hb, kv->g.block_size);
}

void okv_cpu_fill_kv_ops(struct okv_backend_ops *o)
{
    o->kv_host_randomize = cpu_kv_host_randomize;
    o->kv_alloc = okv_cpu_kv_alloc;
    o->kv_free = okv_cpu_kv_free;
    o->kv_unit_bytes = cpu_kv_unit_bytes;
    o->kv_device_bytes = cpu_kv_device_bytes;
    o->kv_host_bytes = cpu_kv_host_bytes;
    o->kv_host_unit_bytes = cpu_kv_host_unit_bytes;
    o->kv_unit_read = cpu_kv_unit_read;
    o->kv_host_read = cpu_kv_host_read;
    o->kv_summary_read = cpu_kv_summary_read;
    o->kv_summary_rebuild = cpu_kv_summary_rebuild;
    o->kv_fetch = cpu_kv_fetch;
    o->kv_fetch_wait = cpu_kv_fetch_wait;
    o->kv_move = cpu_kv_move;
    o->kv_write = cpu_kv_write;
    o->select_blocks = okv_cpu_select_blocks;
}
