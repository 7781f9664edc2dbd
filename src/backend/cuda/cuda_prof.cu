/* OKV_CUDA_PROFILE=1: where a step's GPU time goes, without a system profiler (the GPU
 * machine has none). The hot ops of the table are wrapped: a timing event is recorded on
 * the compute stream before and after each call; at each sync() (the end of an engine
 * step) the pairs are read back and summed per category, with the span from the step's
 * first op to its last. On destroy a table goes to stderr: per category calls and GPU
 * milliseconds per step, and the span's gaps (time the compute stream was not running a
 * wrapped op: launch latency, host waits, unwrapped work). Gathers on the copy stream
 * are not counted (they overlap). Beside each category's GPU time, the host's time in its
 * calls (validation, uploads, launches): when the host is the slower side, an op's GPU
 * interval also holds the wait for its own launch, so the two columns together say
 * which side bounds the step. The first OKV_CUDA_PROFILE_SKIP steps (default 3: cuBLAS
 * heuristics and module loading) are left out. Off by default; the events cost ~2 us of
 * host time per op, so profiled steps are slower than real ones. */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_EMBED, P_NORM, P_MATMUL, P_ROPE, P_ACT, P_KVWRITE, P_ATTN, P_SELECT, P_INSTALL, P_ROWS, P_SAMPLE, P_N };
static const char *const p_name[P_N] = {"embed", "rmsnorm", "matmul", "rope", "swiglu+add", "kv_write", "attention",
                                        "select (host maps)", "select_install", "gather_rows", "sample"};
#define P_MAX 8192   /* events per step (pairs: P_MAX / 2 ops) */

struct cuda_prof {
    cudaEvent_t ev[P_MAX];
    int cat[P_MAX / 2];
    int n;                 /* pairs recorded this step */
    bool overflow;
    double ms[P_N], host_ms[P_N], span_ms;
    double host_step_ms;   /* host time from the step's first op to its sync */
    double t_first;        /* okv_now() at the step's first op, or 0 */
    double host_cur[P_N];  /* this step's host ms per category (kept only past the skip) */
    long long calls[P_N];
    long long steps, skip, seen;
};

static struct okv_backend_ops real;

static struct cuda_prof *prof_of(okv_backend *be)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    if (!c->prof) {
        struct cuda_prof *p = (struct cuda_prof *)okv_calloc(1, sizeof *p, OKV_TAG_BACKEND);
        if (!p)
            return NULL;
        for (int i = 0; i < P_MAX; i++)
            if (cudaEventCreate(&p->ev[i]) != cudaSuccess) {
                (void)cudaGetLastError();
                for (int j = 0; j < i; j++)
                    cudaEventDestroy(p->ev[j]);
                okv_free(p);
                return NULL;
            }
        const char *sk = getenv("OKV_CUDA_PROFILE_SKIP");
        p->skip = sk ? atoll(sk) : 3;
        c->prof = p;
    }
    return c->prof;
}

static int prof_begin(okv_backend *be, int cat)
{
    struct cuda_prof *p = prof_of(be);
    if (!p || p->n >= P_MAX / 2) {
        if (p)
            p->overflow = true;
        return -1;
    }
    const int i = p->n++;
    p->cat[i] = cat;
    if (i == 0)
        p->t_first = okv_now();
    cudaEventRecord(p->ev[2 * i], OKV_CUDA_CTX(be)->stream);
    return i;
}

static void prof_end(okv_backend *be, int i)
{
    if (i >= 0)
        cudaEventRecord(OKV_CUDA_CTX(be)->prof->ev[2 * i + 1], OKV_CUDA_CTX(be)->stream);
}

/* after the step's sync: read the pairs (t_sync: when the host reached the sync) */
static void prof_collect(okv_backend *be, double t_sync)
{
    struct cuda_prof *p = OKV_CUDA_CTX(be)->prof;
    if (!p || p->n == 0)
        return;
    if (p->seen++ < p->skip) {   /* a warm-up step */
        p->n = 0;
        memset(p->host_cur, 0, sizeof p->host_cur);
        return;
    }
    for (int k = 0; k < P_N; k++)
        p->host_ms[k] += p->host_cur[k];
    memset(p->host_cur, 0, sizeof p->host_cur);
    p->host_step_ms += 1e3 * (t_sync - p->t_first);
    for (int i = 0; i < p->n; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]) == cudaSuccess) {
            p->ms[p->cat[i]] += ms;
            p->calls[p->cat[i]]++;
        }
    }
    float span = 0;
    if (cudaEventElapsedTime(&span, p->ev[0], p->ev[2 * p->n - 1]) == cudaSuccess)
        p->span_ms += span;
    (void)cudaGetLastError();
    p->steps++;
    p->n = 0;
}

#define WRAP(cat, call)                                                \
    do {                                                               \
        const int pi_ = prof_begin(be, (cat));                         \
        const double t0_ = okv_now();                                  \
        const enum okv_status st_ = (call);                            \
        if (OKV_CUDA_CTX(be)->prof)                                    \
            OKV_CUDA_CTX(be)->prof->host_cur[cat] += 1e3 * (okv_now() - t0_); \
        prof_end(be, pi_);                                             \
        return st_;                                                    \
    } while (0)

static enum okv_status w_embed(okv_backend *be, okv_bmem *out, const okv_bweight *t, const int32_t *ids, int n, int dim)
{
    WRAP(P_EMBED, real.embed(be, out, t, ids, n, dim));
}
static enum okv_status w_rmsnorm(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, int n, int dim, float eps)
{
    WRAP(P_NORM, real.rmsnorm(be, out, x, w, n, dim, eps));
}
static enum okv_status w_head_rmsnorm(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int heads, int hd, float eps)
{
    WRAP(P_NORM, real.head_rmsnorm(be, x, w, n, heads, hd, eps));
}
static enum okv_status w_matmul(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, const okv_bweight *b,
                                int n, int k, int m)
{
    WRAP(P_MATMUL, real.matmul(be, out, x, w, b, n, k, m));
}
static enum okv_status w_rope(okv_backend *be, okv_bmem *x, int n, int heads, int hd, bool half)
{
    WRAP(P_ROPE, real.rope(be, x, n, heads, hd, half));
}
static enum okv_status w_swiglu(okv_backend *be, okv_bmem *out, const okv_bmem *g, const okv_bmem *u, int n, int f)
{
    WRAP(P_ACT, real.swiglu(be, out, g, u, n, f));
}
static enum okv_status w_add(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t count)
{
    WRAP(P_ACT, real.add(be, x, y, count));
}
static enum okv_status w_gather_rows(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows, int width)
{
    WRAP(P_ROWS, real.gather_rows(be, out, x, rows, n_rows, width));
}
static enum okv_status w_kv_write(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v)
{
    WRAP(P_KVWRITE, real.kv_write(be, kv, layer, k, v));
}
static enum okv_status w_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                   const struct okv_attn_blocks *b, int n_heads, float scale)
{
    WRAP(P_ATTN, real.attention(be, out, q, kv, layer, b, n_heads, scale));
}
static enum okv_status w_select_async(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                      const struct okv_select_req *reqs, int n_reqs, int32_t *out)
{
    WRAP(P_SELECT, real.select_blocks_async(be, kv, layer, q, n_heads, reqs, n_reqs, out));
}
static enum okv_status w_select_install(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                        const struct okv_select_req *reqs, const struct okv_select_req *own,
                                        const struct okv_resid_item *items, int n_items, int succ)
{
    WRAP(P_INSTALL, real.select_install(be, kv, layer, q, n_heads, reqs, own, items, n_items, succ));
}
static enum okv_status w_sample(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                const struct okv_sampling *params, const double *u, int32_t *out)
{
    WRAP(P_SAMPLE, real.sample(be, logits, n_rows, vocab, params, u, out));
}
static enum okv_status w_sync(okv_backend *be)
{
    const double t = okv_now();
    const enum okv_status st = real.sync(be);
    if (st == OKV_OK)
        prof_collect(be, t);
    return st;
}

static void w_destroy(okv_backend *be)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    struct cuda_prof *p = c ? c->prof : NULL;
    if (p && p->steps > 0) {
        const double steps = (double)p->steps;
        double busy = 0;
        for (int i = 0; i < P_N; i++)
            busy += p->ms[i];
        double host = 0;
        for (int i = 0; i < P_N; i++)
            host += p->host_ms[i];
        fprintf(stderr,
                "OKV_CUDA_PROFILE: %lld steps after %lld warm-up (device %d): GPU span %.3f ms/step, wrapped ops %.3f, gaps %.3f; "
                "host first op to sync %.3f ms/step, in wrapped calls %.3f%s\n",
                p->steps, p->skip, c->device, p->span_ms / steps, busy / steps, (p->span_ms - busy) / steps,
                p->host_step_ms / steps, host / steps, p->overflow ? " (some steps had more ops than recorded)" : "");
        fprintf(stderr, "  %-20s %12s %12s %8s %12s\n", "op", "calls/step", "GPU ms/step", "of span", "host ms/step");
        for (int i = 0; i < P_N; i++)
            if (p->calls[i])
                fprintf(stderr, "  %-20s %12.1f %12.3f %7.1f%% %12.3f\n", p_name[i], (double)p->calls[i] / steps, p->ms[i] / steps,
                        p->span_ms > 0 ? 100.0 * p->ms[i] / p->span_ms : 0.0, p->host_ms[i] / steps);
    }
    if (p) {
        for (int i = 0; i < P_MAX; i++)
            cudaEventDestroy(p->ev[i]);
        okv_free(p);
        c->prof = NULL;
    }
    real.destroy(be);
}

void okv_cuda_prof_wrap(struct okv_backend_ops *o)
{
    const char *v = getenv("OKV_CUDA_PROFILE");
    if (!v || strcmp(v, "1"))
        return;
    real = *o;
    o->embed = w_embed;
    o->rmsnorm = w_rmsnorm;
    o->head_rmsnorm = w_head_rmsnorm;
    o->matmul = w_matmul;
    o->rope = w_rope;
    o->swiglu = w_swiglu;
    o->add = w_add;
    o->gather_rows = w_gather_rows;
    o->kv_write = w_kv_write;
    o->attention = w_attention;
    o->select_blocks_async = w_select_async;
    o->select_install = w_select_install;
    o->sample = w_sample;
    /* a profile is read at each step's sync: profiled steps run to their end, none overlaps */
    o->sample_queue = NULL;
    o->sample_collect = NULL;
    o->embed_prev = NULL;
    o->sync = w_sync;
    o->destroy = w_destroy;
}
