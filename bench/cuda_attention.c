/* cuda_attention: decode attention of the CUDA backend, achieved HBM bandwidth; or
 * prefill attention, tokens/s and TFLOPS.
 *
 *   cuda_attention [--ctx 8192,32768] [--max-batch 256] [--variants 0,-1,...] [--kpi 0,256,...]
 *   cuda_attention --prefill ROWS[,ROWS...] [--ctx 8192,32768] [--seqs 1] [--shape 32,8,128]
 *
 * --prefill ROWS: each of `seqs` sequences has a chunk of ROWS query rows at positions
 * ctx-ROWS .. ctx-1 (the last chunk of a ctx-token prompt) over dense lists of its
 * ctx keys, same model shape as below. Two backends of this process run it: one
 * created with OKV_PREFILL_KERNEL=0 (decode kernels) and one with it on (the caller's
 * value: 1, 64, 128 or 256; the default when unset or 0; OKV_PREFILL_WARP_ROWS passes
 * through). --shape QUERY_HEADS,KV_HEADS,HEAD_DIM (default the 8B shape's 32,8,128; the
 * trained target's is 4,2,64). Per path: time of one attention call (= one
 * layer), tokens/s = rows / that time, TFLOPS = 4 * heads * head_dim * (keys the causal
 * mask lets each row read, summed) / time, and the prefill kernel's largest
 * difference from the decode kernels' output (max |d| / max |ref|).
 *
 * --kpi times each listed split size too (keys a work item; 0 the split policy's choice).
 * --variants times each listed kernel variant on the same data (okv_cuda_set_attn:
 * 0 default, -1 the SIMT kernel, k > 0 tuning variants) and prints the largest
 * difference of each variant's output from the first one's (max |d| / max |ref|).
 *
 * Llama-3-8B-like shape: 32 query heads, 8 KV heads (GQA 4), head_dim 128, blocks
 * of 16 tokens, bf16 KV. Each of `batch` sequences has `ctx` tokens and one query
 * row (decode). Bandwidth = bytes of K+V read (batch * ctx * 8 heads * 128 * 2 * 2)
 * over the time of one attention op, timed on the host clock over back-to-back
 * calls after warm-up; the layers rotate so that the KV read per round is at least
 * 1 GiB (more than the 60 MB L2). Target: >= 70% of ~4.2 TB/s at batch >= 16. */
#include "backend/cuda/cuda_bench.h"
#include "oasiskv/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HBM_GBS 4200.0

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static float rndf(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) % 2001) / 1000.0f - 1.0f;
}

static void die(const char *what)
{
    fprintf(stderr, "cuda_attention: %s: %s\n", what, okv_last_error());
    exit(1);
}

/* Block lists reading every block of `seqs` sequences of nb blocks each: sequence s's
 * block b of head h on group unit (s * nb + b) * nkv + h (free_lists frees them). */
static struct okv_attn_blocks dense_lists(int seqs, int nkv, int nb)
{
    int32_t *start = malloc(4 * (size_t)(seqs * nkv + 1));
    int32_t *unit = malloc(4 * (size_t)seqs * nkv * nb), *index = malloc(4 * (size_t)seqs * nkv * nb);
    int at = 0;
    for (int s = 0; s < seqs; s++)
        for (int hh = 0; hh < nkv; hh++) {
            start[s * nkv + hh] = at;
            for (int b = 0; b < nb; b++, at++) {
                unit[at] = (s * nb + b) * nkv + hh;
                index[at] = b;
            }
        }
    start[seqs * nkv] = at;
    return (struct okv_attn_blocks){start, unit, index, NULL, 0};
}

static void free_lists(struct okv_attn_blocks *b)
{
    free((void *)b->blk_start);
    free((void *)b->blk_unit);
    free((void *)b->blk_index);
}

/* A query buffer of n random floats and an output buffer of n on the backend. */
static void query_and_out(okv_backend *be, size_t n, okv_bmem **q, okv_bmem **out)
{
    const struct okv_backend_ops *o = be->ops;
    float *qh = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        qh[i] = rndf();
    if (o->mem_alloc(be, n, q) != OKV_OK || o->mem_alloc(be, n, out) != OKV_OK)
        die("mem_alloc");
    o->mem_write(be, *q, 0, qh, n);
    free(qh);
}

/* KV tiers of `slots` group slots per layer, every slot filled with random (non-zero)
 * K/V in steps of 32768 tokens */
static okv_bkv *random_kv(okv_backend *be, int layers, int slots, int bs, int nkv, int hd)
{
    const struct okv_backend_ops *o = be->ops;
    const struct okv_kv_geometry g = {.n_layers = layers, .n_group_slots = slots, .block_size = bs, .n_kv_heads = nkv,
                                      .head_dim = hd};
    okv_bkv *kv = NULL;
    if (o->kv_alloc(be, &g, &kv) != OKV_OK)
        die("kv_alloc");
    const int wt = 32768 < slots * bs ? 32768 : slots * bs;
    float *h = malloc(sizeof(float) * (size_t)wt * nkv * hd);
    for (size_t i = 0; i < (size_t)wt * nkv * hd; i++)
        h[i] = rndf();
    okv_bmem *k = NULL, *v = NULL;
    if (o->mem_alloc(be, (size_t)wt * nkv * hd, &k) != OKV_OK || o->mem_alloc(be, (size_t)wt * nkv * hd, &v) != OKV_OK)
        die("mem_alloc");
    o->mem_write(be, k, 0, h, (size_t)wt * nkv * hd);
    for (size_t i = 0; i < (size_t)wt * nkv * hd; i++)
        h[i] = rndf();
    o->mem_write(be, v, 0, h, (size_t)wt * nkv * hd);
    int32_t *seq = calloc((size_t)wt, 4), *pos = malloc(4 * (size_t)wt), *slot = malloc(4 * (size_t)wt), kvl[1];
    for (int at = 0; at < slots * bs; at += wt) {
        for (int t = 0; t < wt; t++) {
            pos[t] = t;
            slot[t] = at + t;
        }
        kvl[0] = wt;
        struct okv_step_meta m = {wt, 1, seq, pos, slot, NULL, NULL, kvl};
        if (o->step_begin(be, &m) != OKV_OK)
            die("step_begin");
        for (int l = 0; l < layers; l++)
            if (o->kv_write(be, kv, l, k, v) != OKV_OK)
                die("kv_write");
    }
    o->sync(be);
    o->mem_free(be, k);
    o->mem_free(be, v);
    free(h);
    free(seq);
    free(pos);
    free(slot);
    return kv;
}

/* --prefill: the last chunk of `rows` rows of a ctx-token prompt in each of `seqs`
 * sequences, on a backend without and one with the prefill kernel */
static void prefill_bench(int rows, const int *ctxs, int n_ctx, int seqs, int nh, int nkv, int hd)
{
    const int bs = 16, layers = 2;
    const char *pk = getenv("OKV_PREFILL_KERNEL");
    char on_val[16];
    snprintf(on_val, sizeof on_val, "%s", pk && atoi(pk) ? pk : "");
    okv_backend *bes[2] = {NULL, NULL};
    struct okv_backend_params bp = {.n_threads = 0};
    setenv("OKV_PREFILL_KERNEL", "0", 1);
    if (okv_backend_create("cuda", &bp, &bes[0]) != OKV_OK)
        die("backend");
    if (*on_val)
        setenv("OKV_PREFILL_KERNEL", on_val, 1);
    else
        unsetenv("OKV_PREFILL_KERNEL");   /* the default */
    if (okv_backend_create("cuda", &bp, &bes[1]) != OKV_OK)
        die("backend (prefill kernel)");
    const char *label[2] = {"decode kernels", "prefill kernel"};
    printf("prefill attention: %d query heads, %d KV heads, head_dim %d, block %d, bf16 KV; %d sequence(s), one call = "
           "one layer; the prefill kernel with OKV_PREFILL_KERNEL=%s\n", nh, nkv, hd, bs, seqs, *on_val ? on_val : "unset (default)");
    printf("%-7s %-6s %-16s %-10s %-12s %-8s %s\n", "ctx", "rows", "path", "ms/call", "tokens/s", "TFLOPS", "diff vs decode");
    for (int ci = 0; ci < n_ctx; ci++) {
        const int ctx = ctxs[ci], nb = (ctx + bs - 1) / bs, nr = rows < ctx ? rows : ctx, n = seqs * nr;
        const size_t n_out = (size_t)n * nh * hd;
        float *res[2] = {malloc(sizeof(float) * n_out), malloc(sizeof(float) * n_out)};
        double keys = 0;   /* keys read by the causal mask */
        for (int i = 0; i < nr; i++)
            keys += (double)(ctx - nr + i + 1);
        keys *= seqs;
        const double flops = 4.0 * nh * hd * keys;
        for (int bi = 0; bi < 2; bi++) {
            okv_backend *be = bes[bi];
            const struct okv_backend_ops *o = be->ops;
            rs = 0x2545F4914F6CDD1Dull;   /* the same data on both */
            okv_bkv *kv = random_kv(be, layers, seqs * nb, bs, nkv, hd);
            int32_t *tseq = malloc(4 * (size_t)n), *tpos = malloc(4 * (size_t)n), *tslot = calloc((size_t)n, 4);
            int32_t *len = malloc(4 * (size_t)seqs);
            for (int t = 0; t < n; t++) {
                tseq[t] = t / nr;
                tpos[t] = ctx - nr + t % nr;
            }
            for (int s = 0; s < seqs; s++)
                len[s] = ctx;
            struct okv_step_meta m = {n, seqs, tseq, tpos, tslot, NULL, NULL, len};
            if (o->step_begin(be, &m) != OKV_OK)
                die("step_begin");
            struct okv_attn_blocks blocks = dense_lists(seqs, nkv, nb);
            okv_bmem *q = NULL, *out = NULL;
            query_and_out(be, n_out, &q, &out);
            const float scale = 1.0f / sqrtf((float)hd);
            for (int w = 0; w < 2; w++)   /* warm-up */
                if (o->attention(be, out, q, kv, w % layers, &blocks, nh, scale) != OKV_OK)
                    die("attention");
            if (o->sync(be) != OKV_OK)
                die("sync");
            double t0 = okv_now();
            if (o->attention(be, out, q, kv, 0, &blocks, nh, scale) != OKV_OK || o->sync(be) != OKV_OK)
                die("attention");
            const double t1 = okv_now() - t0;
            int iters = (int)(0.5 / (t1 > 1e-6 ? t1 : 1e-6));
            iters = iters < 3 ? 3 : iters > 200 ? 200 : iters;
            t0 = okv_now();
            for (int it = 0; it < iters; it++)
                if (o->attention(be, out, q, kv, it % layers, &blocks, nh, scale) != OKV_OK)
                    die("attention");
            if (o->sync(be) != OKV_OK)
                die("sync");
            const double dt = (okv_now() - t0) / iters;
            if (o->attention(be, out, q, kv, 0, &blocks, nh, scale) != OKV_OK || o->mem_read(be, out, 0, res[bi], n_out) != OKV_OK)
                die("attention check");
            double diff = 0;
            if (bi) {
                double md = 0, mr = 1e-30;
                for (size_t i = 0; i < n_out; i++) {
                    double d = fabs((double)res[1][i] - res[0][i]);
                    if (!(d <= md))
                        md = d;   /* NaN sticks */
                    if (fabs(res[0][i]) > mr)
                        mr = fabs(res[0][i]);
                }
                diff = md / mr;
            }
            printf("%-7d %-6d %-16s %-10.3f %-12.0f %-8.1f %.2e\n", ctx, nr, label[bi], dt * 1e3, n / dt, flops / dt / 1e12, diff);
            fflush(stdout);
            o->mem_free(be, q);
            o->mem_free(be, out);
            free(tseq);
            free(tpos);
            free(tslot);
            free(len);
            free_lists(&blocks);
            o->kv_free(be, kv);
        }
        free(res[0]);
        free(res[1]);
    }
    okv_backend_free(bes[0]);
    okv_backend_free(bes[1]);
}

int main(int argc, char **argv)
{
    int ctxs[4] = {8192, 32768}, n_ctx = 2, max_batch = 256, vars[16] = {0}, n_vars = 1, seqs = 1, kpis[16] = {0}, n_kpis = 1;
    int prefill[4] = {0}, n_prefill = 0;
    int pf_nh = 32, pf_nkv = 8, pf_hd = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ctx")) {
            n_ctx = 0;
            for (char *s = argv[i + 1]; s && *s && n_ctx < 4; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
                ctxs[n_ctx++] = atoi(s);
        } else if (!strcmp(argv[i], "--kpi")) {
            n_kpis = 0;
            for (char *s = argv[i + 1]; s && *s && n_kpis < 16; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
                kpis[n_kpis++] = atoi(s);
        } else if (!strcmp(argv[i], "--variants")) {
            n_vars = 0;
            for (char *s = argv[i + 1]; s && *s && n_vars < 16; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
                vars[n_vars++] = atoi(s);
        } else if (!strcmp(argv[i], "--max-batch")) {
            max_batch = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "--prefill")) {
            n_prefill = 0;
            for (char *s = argv[i + 1]; s && *s && n_prefill < 4; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
                if ((prefill[n_prefill++] = atoi(s)) <= 0)
                    die("--prefill ROWS[,ROWS...]: positive row counts");
        } else if (!strcmp(argv[i], "--seqs")) {
            seqs = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
        } else if (!strcmp(argv[i], "--shape")) {
            if (sscanf(argv[i + 1], "%d,%d,%d", &pf_nh, &pf_nkv, &pf_hd) != 3 || pf_nkv <= 0 || pf_nh % pf_nkv || pf_hd <= 0)
                die("--shape QUERY_HEADS,KV_HEADS,HEAD_DIM");
        }
    }
    if (n_prefill > 0) {
        for (int i = 0; i < n_prefill; i++)
            prefill_bench(prefill[i], ctxs, n_ctx, seqs, pf_nh, pf_nkv, pf_hd);
        return 0;
    }
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 0};
    if (okv_backend_create("cuda", &bp, &be) != OKV_OK)
        die("backend");
    const struct okv_backend_ops *o = be->ops;
    const int nkv = 8, nh = 32, hd = 128, bs = 16;
    printf("decode attention: %d query heads, %d KV heads, head_dim %d, block %d, bf16 KV; ceiling %.0f GB/s\n", nh, nkv, hd,
           bs, HBM_GBS);
    printf("%-7s %-6s %-4s %-5s %-7s %-10s %-10s %-10s %-8s %-6s %-6s %s\n", "ctx", "batch", "var", "kpi", "layers", "KV MiB", "us/call",
           "GB/s", "% 4.2TB", "items", "slots", "diff vs first");
    for (int ci = 0; ci < n_ctx; ci++) {
        const int ctx = ctxs[ci], nb = ctx / bs;
        for (int batch = 1; batch <= max_batch; batch *= 2) {
            const size_t layer_bytes = (size_t)batch * ctx * nkv * hd * 2 * 2;
            int layers = (int)(((size_t)1 << 30) / layer_bytes);
            if (layers < 1)
                layers = 1;
            if (layers > 32)
                layers = 32;
            const int slots = batch * nb;
            okv_bkv *kv = random_kv(be, layers, slots, bs, nkv, hd);
            /* the decode step: one row per sequence at position ctx-1 */
            int32_t *tseq = malloc(4 * (size_t)batch), *tpos = malloc(4 * (size_t)batch), *tslot = calloc((size_t)batch, 4);
            int32_t *len = malloc(4 * (size_t)batch);
            for (int s = 0; s < batch; s++) {
                tseq[s] = s;
                tpos[s] = ctx - 1;
                len[s] = ctx;
            }
            struct okv_step_meta m = {batch, batch, tseq, tpos, tslot, NULL, NULL, len};
            if (o->step_begin(be, &m) != OKV_OK)
                die("step_begin");
            struct okv_attn_blocks blocks = dense_lists(batch, nkv, nb);
            okv_bmem *q = NULL, *out = NULL;
            query_and_out(be, (size_t)batch * nh * hd, &q, &out);
            const float scale = 1.0f / sqrtf((float)hd);
            const size_t n_out = (size_t)batch * nh * hd;
            float *ref = malloc(sizeof(float) * n_out), *got = malloc(sizeof(float) * n_out);
            for (int vk = 0; vk < n_vars * n_kpis; vk++) {
                const int vi = vk / n_kpis, kpi = kpis[vk % n_kpis];
                okv_cuda_set_attn(be, vars[vi], kpi);
                for (int w = 0; w < 2 * layers + 2; w++)
                    if (o->attention(be, out, q, kv, w % layers, &blocks, nh, scale) != OKV_OK)
                        die("attention");
                if (o->sync(be) != OKV_OK)
                    die("sync");
                /* output of layer 0 for the cross-check */
                if (o->attention(be, out, q, kv, 0, &blocks, nh, scale) != OKV_OK || o->mem_read(be, out, 0, vk ? got : ref, n_out) != OKV_OK)
                    die("attention check");
                double diff = 0;
                if (vk) {
                    double md = 0, mr = 1e-30;
                    for (size_t i = 0; i < n_out; i++) {
                        double d = fabs((double)got[i] - ref[i]);
                        if (!(d <= md))
                            md = d;   /* NaN sticks */
                        if (fabs(ref[i]) > mr)
                            mr = fabs(ref[i]);
                    }
                    diff = md / mr;
                }
                int iters = (int)(((size_t)16 << 30) / layer_bytes);
                if (iters < 20)
                    iters = 20;
                if (iters > 3000)
                    iters = 3000;
                double t0 = okv_now();
                for (int it = 0; it < iters; it++)
                    if (o->attention(be, out, q, kv, it % layers, &blocks, nh, scale) != OKV_OK)
                        die("attention");
                if (o->sync(be) != OKV_OK)
                    die("sync");
                double dt = (okv_now() - t0) / iters;
                double gbs = (double)layer_bytes / dt / 1e9;
                int n_work = 0, n_merge = 0;
                const int slots = okv_cuda_attn_info(be, &n_work, &n_merge);
                printf("%-7d %-6d %-4d %-5d %-7d %-10.0f %-10.1f %-10.0f %-8.1f %-6d %-6d %.2e\n", ctx, batch, vars[vi], kpi, layers,
                       (double)layer_bytes / 1048576.0, dt * 1e6, gbs, 100.0 * gbs / HBM_GBS, n_work, slots, diff);
                fflush(stdout);
            }
            okv_cuda_set_attn(be, 0, 0);
            free(ref);
            free(got);
            o->mem_free(be, q);
            o->mem_free(be, out);
            free(tseq);
            free(tpos);
            free(tslot);
            free(len);
            free_lists(&blocks);
            o->kv_free(be, kv);
        }
    }
    okv_backend_free(be);
    return 0;
}
