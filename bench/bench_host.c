/* The engine's host work per decode step, alone: the forward pass over a backend whose
 * ops do nothing (no compute, no copies) except block selection, which returns a
 * deterministic selection that keeps (1 - churn) of each (layer, sequence, KV head)'s
 * blocks from one step to the next. What remains is what the host does around the
 * device in a sparse step: planning, block lists, residency (LRU), fetch lists, the
 * selection requests. On a GPU this work sat on the critical path once per layer; since
 * the backends hold residency themselves (select_install, the default) it measures the
 * host path that recall tracking, the oracle and tensor parallelism still take (this
 * null backend has no residency ops).
 *
 *   bench_host [--config DIR] [--batch 1,16,64] [--ctx 8192] [--kv-budget dense,2048]
 *              [--churn 0.1] [--steps 20] [--warmup 3]
 * (default config: bench/configs/smollm2-135m; random weights, never read) */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct okv_bmem { size_t n; };
struct okv_bweight { int unused; };
struct okv_bkv { struct okv_kv_geometry g; size_t unit_bytes; };

static double g_churn = 0.1;
static uint32_t g_step;
static size_t g_bytes;

static enum okv_status n_mem_alloc(okv_backend *be, size_t n, okv_bmem **out)
{
    (void)be;
    *out = calloc(1, sizeof **out);
    (*out)->n = n;
    return OKV_OK;
}
static void n_mem_free(okv_backend *be, okv_bmem *m) { (void)be; free(m); }
static enum okv_status n_mem_write(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n)
{
    (void)be; (void)m; (void)off; (void)src; (void)n;
    return OKV_OK;
}
static enum okv_status n_mem_read(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n)
{
    (void)be; (void)m; (void)off;
    memset(dst, 0, sizeof(float) * n);
    return OKV_OK;
}
static enum okv_status n_weight_load(okv_backend *be, const struct okv_tensor_view *t, okv_bweight **out)
{
    (void)be; (void)t;
    *out = calloc(1, sizeof **out);
    return OKV_OK;
}
static void n_weight_free(okv_backend *be, okv_bweight *w) { (void)be; free(w); }
static size_t n_weight_bytes(const okv_bweight *w) { (void)w; return 0; }
static enum okv_status n_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out)
{
    (void)be;
    *out = calloc(1, sizeof **out);
    (*out)->g = *g;
    (*out)->g.layer_sparse_units = NULL;
    (*out)->unit_bytes = (size_t)2 * g->block_size * g->head_dim * 2;
    return OKV_OK;
}
static void n_kv_free(okv_backend *be, okv_bkv *kv) { (void)be; free(kv); }
static size_t n_kv_unit_bytes(const okv_bkv *kv) { return kv->unit_bytes; }
static size_t n_kv_device_bytes(const okv_bkv *kv)
{
    return (size_t)kv->g.n_group_slots * kv->g.n_kv_heads * kv->g.n_layers * kv->unit_bytes;
}
static size_t n_kv_host_bytes(const okv_bkv *kv) { return (size_t)kv->g.n_host_blocks * kv->g.n_kv_heads * kv->unit_bytes; }
static enum okv_status n_kv_unit_read(okv_backend *be, const okv_bkv *kv, int l, int32_t u, float *k, float *v)
{
    (void)be; (void)kv; (void)l; (void)u; (void)k; (void)v;
    return OKV_OK;
}
static enum okv_status n_kv_host_read(okv_backend *be, const okv_bkv *kv, int l, int hb, int h, float *k, float *v)
{
    (void)be; (void)kv; (void)l; (void)hb; (void)h; (void)k; (void)v;
    return OKV_OK;
}
static enum okv_status n_kv_summary_read(okv_backend *be, const okv_bkv *kv, int l, int hb, int h, float *a, float *b)
{
    (void)be; (void)kv; (void)l; (void)hb; (void)h; (void)a; (void)b;
    return OKV_OK;
}
static enum okv_status n_kv_summary_rebuild(okv_backend *be, okv_bkv *kv, int hb, int n)
{
    (void)be; (void)kv; (void)hb; (void)n;
    return OKV_OK;
}
static enum okv_status n_kv_host_randomize(okv_backend *be, okv_bkv *kv, int hb, uint64_t seed, float scale)
{
    (void)be; (void)kv; (void)hb; (void)seed; (void)scale;
    return OKV_OK;
}
static enum okv_status n_kv_fetch(okv_backend *be, okv_bkv *kv, int layer, int n, const int32_t *src, const int32_t *dst)
{
    (void)be; (void)layer; (void)src; (void)dst;
    g_bytes += (size_t)n * kv->unit_bytes;
    return OKV_OK;
}
static enum okv_status n_kv_fetch_wait(okv_backend *be, okv_bkv *kv, int layer, int *pending, double *stall)
{
    (void)be; (void)kv; (void)layer;
    *pending = 0;
    *stall = 0;
    return OKV_OK;
}
static enum okv_status n_step_begin(okv_backend *be, const struct okv_step_meta *m)
{
    (void)be; (void)m;
    g_step++;
    return OKV_OK;
}
static enum okv_status n_embed(okv_backend *be, okv_bmem *o, const okv_bweight *t, const int32_t *ids, int n, int d)
{
    (void)be; (void)o; (void)t; (void)ids; (void)n; (void)d;
    return OKV_OK;
}
static enum okv_status n_rmsnorm(okv_backend *be, okv_bmem *o, const okv_bmem *x, const okv_bweight *w, int n, int d, float e)
{
    (void)be; (void)o; (void)x; (void)w; (void)n; (void)d; (void)e;
    return OKV_OK;
}
static enum okv_status n_matmul(okv_backend *be, okv_bmem *o, const okv_bmem *x, const okv_bweight *w, const okv_bweight *b,
                                int n, int k, int m)
{
    (void)be; (void)o; (void)x; (void)w; (void)b; (void)n; (void)k; (void)m;
    return OKV_OK;
}
static enum okv_status n_head_rmsnorm(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int h, int d, float e)
{
    (void)be; (void)x; (void)w; (void)n; (void)h; (void)d; (void)e;
    return OKV_OK;
}
static enum okv_status n_rope(okv_backend *be, okv_bmem *x, int n, int h, int d, bool half)
{
    (void)be; (void)x; (void)n; (void)h; (void)d; (void)half;
    return OKV_OK;
}
static enum okv_status n_swiglu(okv_backend *be, okv_bmem *o, const okv_bmem *g, const okv_bmem *u, int n, int f)
{
    (void)be; (void)o; (void)g; (void)u; (void)n; (void)f;
    return OKV_OK;
}
static enum okv_status n_add(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t c)
{
    (void)be; (void)x; (void)y; (void)c;
    return OKV_OK;
}
static enum okv_status n_gather_rows(okv_backend *be, okv_bmem *o, const okv_bmem *x, const int32_t *r, int n, int w)
{
    (void)be; (void)o; (void)x; (void)r; (void)n; (void)w;
    return OKV_OK;
}
static enum okv_status n_kv_write(okv_backend *be, okv_bkv *kv, int l, const okv_bmem *k, const okv_bmem *v)
{
    (void)be; (void)kv; (void)l; (void)k; (void)v;
    return OKV_OK;
}

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

/* Per (layer, request, head): a stable share of the k blocks from the first half of the
 * candidates, the rest from the second half, moving with the step: distinct ids. */
static enum okv_status n_select(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores)
{
    (void)be; (void)q; (void)n_heads; (void)scores;
    const int nkv = kv->g.n_kv_heads;
    size_t at = 0;
    for (int r = 0; r < n_reqs; r++) {
        const int k = reqs[r].k, nc = reqs[r].n_cand, half = nc / 2 > 0 ? nc / 2 : 1;
        int ks = (int)((1.0 - g_churn) * k + 0.5);
        if (ks > half)
            ks = half;
        for (int h = 0; h < nkv; h++) {
            uint32_t base = mix((uint32_t)(layer * 7919 + r * 104729 + h * 15485863));
            for (int x = 0; x < k; x++) {
                int pos;
                if (x < ks || nc - half <= 0)
                    pos = (int)((base + (uint32_t)x) % (uint32_t)half);
                else
                    pos = half + (int)((base + (uint32_t)(x - ks) + g_step * (uint32_t)(k - ks)) % (uint32_t)(nc - half));
                out[at++] = reqs[r].cand_host[pos];
            }
        }
    }
    return OKV_OK;
}
static enum okv_status n_sample(okv_backend *be, const okv_bmem *l, int n, int v, const struct okv_sampling *p,
                                const double *u, int32_t *out)
{
    (void)be; (void)l; (void)v; (void)p; (void)u;
    for (int i = 0; i < n; i++)
        out[i] = 0;
    return OKV_OK;
}
static enum okv_status n_attention(okv_backend *be, okv_bmem *o, const okv_bmem *q, const okv_bkv *kv, int l,
                                   const struct okv_attn_blocks *b, int h, float s)
{
    (void)be; (void)o; (void)q; (void)kv; (void)l; (void)b; (void)h; (void)s;
    return OKV_OK;
}
static enum okv_status n_sync(okv_backend *be) { (void)be; return OKV_OK; }
static void n_destroy(okv_backend *be) { free(be); }

static const struct okv_backend_ops null_ops = {
    .name = "null", .destroy = n_destroy, .mem_alloc = n_mem_alloc, .mem_free = n_mem_free, .mem_write = n_mem_write,
    .mem_read = n_mem_read, .weight_load = n_weight_load, .weight_free = n_weight_free, .weight_bytes = n_weight_bytes,
    .kv_alloc = n_kv_alloc, .kv_free = n_kv_free, .kv_unit_bytes = n_kv_unit_bytes, .kv_device_bytes = n_kv_device_bytes,
    .kv_host_bytes = n_kv_host_bytes, .kv_unit_read = n_kv_unit_read, .kv_host_read = n_kv_host_read,
    .kv_summary_read = n_kv_summary_read, .kv_summary_rebuild = n_kv_summary_rebuild,
    .kv_host_randomize = n_kv_host_randomize, .kv_fetch = n_kv_fetch, .kv_fetch_wait = n_kv_fetch_wait,
    .step_begin = n_step_begin, .embed = n_embed, .rmsnorm = n_rmsnorm, .matmul = n_matmul,
    .head_rmsnorm = n_head_rmsnorm, .rope = n_rope, .swiglu = n_swiglu, .add = n_add, .gather_rows = n_gather_rows,
    .kv_write = n_kv_write, .select_blocks = n_select, .sample = n_sample, .attention = n_attention, .sync = n_sync,
};

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = !strncmp(s, "dense", 5) ? 0 : atoi(s);
        const char *c = strchr(s, ',');
        s = c ? c + 1 : NULL;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *config = "bench/configs/smollm2-135m", *batch_s = "1,16,64", *ctx_s = "8192", *budget_s = "dense,2048";
    int steps = 20, warmup = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--batch")) batch_s = v;
        else if (!strcmp(a, "--ctx")) ctx_s = v;
        else if (!strcmp(a, "--kv-budget")) budget_s = v;
        else if (!strcmp(a, "--churn")) g_churn = atof(v);
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else {
            fprintf(stderr, "bench_host: unknown option %s\n", a);
            return 1;
        }
    }
    struct okv_model *m = NULL;
    if (okv_model_load_dummy(config, 1, &m) != OKV_OK) {
        fprintf(stderr, "bench_host: %s\n", okv_last_error());
        return 1;
    }
    okv_backend *be = calloc(1, sizeof *be);
    be->ops = &null_ops;
    int batches[16], ctxs[16], budgets[16];
    int nb = parse_list(batch_s, batches, 16), nc = parse_list(ctx_s, ctxs, 16), nk = parse_list(budget_s, budgets, 16);
    printf("host work of a decode step (%s, %d layers, %d KV heads; selection churn %.0f%%)\n\n", config, m->cfg.n_layers,
           m->cfg.n_kv_heads, g_churn * 100);
    printf("| batch | ctx | kv | host ms/step | us per (layer, sequence) | fetched units/step |\n|---|---|---|---|---|---|\n");
    for (int ci = 0; ci < nc; ci++)
        for (int bi = 0; bi < nb; bi++)
            for (int ki = 0; ki < nk; ki++) {
                int B = batches[bi], ctx = ctxs[ci], budget = budgets[ki];
                struct okv_engine_params ep = {.max_ctx = ctx + steps + warmup + 16, .max_seqs = B,
                                               .max_batch_tokens = B < 256 ? 256 : B, .kv_budget = budget,
                                               .predict = OKV_PREDICT_CURRENT};
                okv_engine *e = NULL;
                if (okv_engine_create(m, be, &ep, &e) != OKV_OK) {
                    printf("| %d | %d | %d | %s |||\n", B, ctx, budget, okv_last_error());
                    continue;
                }
                int32_t *seqs = malloc(sizeof(int32_t) * (size_t)B), *toks = calloc((size_t)B, sizeof(int32_t));
                uint8_t *want = malloc((size_t)B);
                for (int s = 0; s < B; s++) {
                    if (okv_engine_seq_create(e, &seqs[s]) != OKV_OK ||
                        okv_engine_seq_fill_random(e, seqs[s], ctx, (uint64_t)s + 1) != OKV_OK) {
                        fprintf(stderr, "bench_host: %s\n", okv_last_error());
                        return 1;
                    }
                    want[s] = 1;
                }
                struct okv_batch b = {B, toks, seqs, want, NULL};
                double t0 = 0;
                int64_t f0 = 0;
                for (int it = 0; it < warmup + steps; it++) {
                    if (it == warmup) {
                        struct okv_engine_stats st;
                        okv_engine_stats_get(e, &st);
                        f0 = st.units_fetched;
                        t0 = okv_now();
                    }
                    if (okv_engine_forward(e, &b, NULL) != OKV_OK) {
                        fprintf(stderr, "bench_host: %s\n", okv_last_error());
                        return 1;
                    }
                }
                double ms = (okv_now() - t0) * 1e3 / steps;
                struct okv_engine_stats st;
                okv_engine_stats_get(e, &st);
                char kvname[32];
                snprintf(kvname, sizeof kvname, budget ? "%d" : "dense", budget);
                printf("| %d | %d | %s | %.3f | %.2f | %.0f |\n", B, ctx, kvname, ms, ms * 1e3 / (m->cfg.n_layers * B),
                       (double)(st.units_fetched - f0) / steps);
                fflush(stdout);
                okv_engine_free(e);
                free(seqs);
                free(toks);
                free(want);
            }
    okv_model_free(m);
    okv_backend_free(be);
    return 0;
}
