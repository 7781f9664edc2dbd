/* label: cuda */
/* Every op of the CUDA backend against the CPU backend, on random shapes and fresh
 * random data (never zeros; the seed is printed, OKV_TEST_SEED repeats a run), with
 * every output poisoned with NaN before the op runs.
 *
 * Tolerances (max |cuda - cpu| over max |cpu|, per output tensor, unless stated):
 *  - fp32 kernels (rmsnorm, head_rmsnorm, rope, swiglu, add): 1e-5 .. 1e-4;
 *  - one bf16 rounding (embed, KV stored in bf16, summaries): 2^-8 relative per element;
 *  - matmul (bf16 weights and activations, fp32 accumulation): 1.5e-2 (seen: ~2.5e-3); at 1
 *    to 4 rows the GEMV kernel keeps the activations in fp32 (only the weights in bf16);
 *  - attention and selection are fed KV and keys already rounded to bf16, so both
 *    backends see the same data and only the order of fp32 arithmetic differs: 2e-3;
 *    the chosen blocks must be equal wherever the k-th and (k+1)-th CPU scores are
 *    not a near-tie (gap > 1e-3 of the score scale); per-token key codes are computed
 *    from the same bf16 keys and summaries with the same IEEE arithmetic, so they are
 *    equal and their scores keep the same 2e-3;
 *  - the prefill attention kernel (OKV_PREFILL_KERNEL, cuda_prefill.cu) rounds the
 *    query and the probabilities to bf16 (relative 2^-9 each, random in sign, averaged
 *    over the keys): 2e-2 (expected: a few 1e-3). The decode kernels keep 2e-3 on the
 *    same prefill calls with the variable 0 (kernel off).
 * Skips (77) when no CUDA device is present. */
#include "backend/cuda/cuda_bench.h"
#include "oasiskv/backend.h"
#include "testutil.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

static uint64_t rng_state;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static int rint_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float runif(void) { return (float)(rnd() & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f; }   /* (-1, 1) */

static float bf16r(float x) { return okv_bf16_to_f32(okv_f32_to_bf16(x)); }

static float *rand_vec(size_t n, float scale, bool bf16)
{
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        float x = runif() * scale;
        if (x == 0.0f)
            x = scale * 0.5f;
        v[i] = bf16 ? bf16r(x) : x;
    }
    return v;
}

static okv_backend *cpu, *gpu;
/* CUDA backends created with OKV_PREFILL_KERNEL=1 (tiles of 64 query vectors), =128 with
 * OKV_PREFILL_WARP_ROWS=16 (8 warps of 16 vectors) and =32 (4 warps of 32), =256 (8 warps of
 * 32), the default (nothing set: the kernel, and split keys, by the call's tiles), the
 * default kernel with its keys split in 3 (OKV_PREFILL_SPLIT=3), the warpgroup-MMA kernel
 * (OKV_PREFILL_WGMMA=1, sm_90a; on other GPUs it falls back to the default), and with the
 * warpgroup MMA off (OKV_PREFILL_WGMMA=0: the mma.sync default with its own split keys and
 * fallbacks by tile count), that with 3 parts forced, and tiles of 256 in 3 parts; on a 9.0
 * device OKV_PREFILL_WS=2 (alone and with 3 parts) and =1 force the warp-specialised kernel
 * (cuda_prefill_ws.cu; consumers taking turns, or not), which the default takes only for lists of
 * 2048 keys or more (some of these tests' calls), OKV_PREFILL_WS=0 the two-warpgroup one
 * (cuda_prefill_wg.cu), alone and with 3 parts; `gpu` is created with OKV_PREFILL_KERNEL=0
 * (decode kernels only) */
#define N_PF 15
static okv_backend *gpu_pf[N_PF];
static const char *const pf_label[N_PF] = {"OKV_PREFILL_KERNEL=1", "=128, WARP_ROWS=16", "=128, WARP_ROWS=32",
                                           "OKV_PREFILL_KERNEL=256", "prefill default", "OKV_PREFILL_SPLIT=3",
                                           "OKV_PREFILL_WGMMA=1", "OKV_PREFILL_WGMMA=0", "WGMMA=0, SPLIT=3",
                                           "=256, SPLIT=3", "OKV_PREFILL_WS=0", "WS=0, SPLIT=3", "OKV_PREFILL_WS=1",
                                           "OKV_PREFILL_WS=2", "WS=2, SPLIT=3"};

static okv_bmem *up(okv_backend *be, const float *h, size_t n)
{
    okv_bmem *m = NULL;
    enum okv_status st = be->ops->mem_alloc(be, n, &m);
    if (st != OKV_OK) {
        fprintf(stderr, "mem_alloc: %s\n", okv_last_error());
        exit(1);
    }
    if (h && be->ops->mem_write(be, m, 0, h, n) != OKV_OK) {
        fprintf(stderr, "mem_write: %s\n", okv_last_error());
        exit(1);
    }
    return m;
}

static okv_bmem *poisoned(okv_backend *be, size_t n)
{
    float *nan = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    okv_bmem *m = up(be, nan, n);
    free(nan);
    return m;
}

static float *down(okv_backend *be, const okv_bmem *m, size_t n)
{
    float *h = malloc(sizeof(float) * (n ? n : 1));
    if (be->ops->mem_read(be, m, 0, h, n) != OKV_OK) {
        fprintf(stderr, "mem_read: %s\n", okv_last_error());
        exit(1);
    }
    return h;
}

/* max |a-b| / max |b|; INFINITY on a NaN */
static double rel_err(const float *a, const float *b, size_t n)
{
    double md = 0, mb = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return INFINITY;
        double d = fabs((double)a[i] - b[i]);
        if (d > md)
            md = d;
        if (fabs(b[i]) > mb)
            mb = fabs(b[i]);
    }
    return md / mb;
}

/* max over elements of |a-b| / (|b| + floor) */
static double elem_err(const float *a, const float *b, size_t n, double floor)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return INFINITY;
        double e = fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor);
        if (e > m)
            m = e;
    }
    return m;
}

static struct okv_tensor_view view_of(const char *name, const float *data, int64_t rows, int64_t row_len)
{
    struct okv_tensor_view t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = OKV_DTYPE_F32;
    t.n_dims = rows > 1 ? 2 : 1;
    t.ne[0] = row_len;
    t.ne[1] = rows;
    t.ne[2] = t.ne[3] = 1;
    t.data = data;
    t.nbytes = sizeof(float) * (size_t)(rows * row_len);
    return t;
}

static void weights(const char *name, const float *data, int64_t rows, int64_t row_len, okv_bweight **wc, okv_bweight **wg)
{
    struct okv_tensor_view t = view_of(name, data, rows, row_len);
    CHECK(cpu->ops->weight_load(cpu, &t, wc) == OKV_OK, "%s", okv_last_error());
    CHECK(gpu->ops->weight_load(gpu, &t, wg) == OKV_OK, "%s", okv_last_error());
}

/* One op on both backends; compare the first n floats of out. */
#define BOTH(call_cpu, call_gpu)                                                            \
    do {                                                                                    \
        enum okv_status st_c_ = (call_cpu), st_g_ = (call_gpu);                                   \
        CHECK(st_c_ == OKV_OK && st_g_ == OKV_OK, "%s: cpu %d gpu %d: %s", #call_gpu, st_c_, st_g_, okv_last_error()); \
    } while (0)

static void compare(const char *what, okv_bmem *oc, okv_bmem *og, size_t n, double tol)
{
    float *a = down(cpu, oc, n), *b = down(gpu, og, n);
    double e = rel_err(b, a, n);
    CHECK(e <= tol, "%s: error %.3g > %.3g", what, e, tol);
    printf("  %-44s n %-8zu err %.2e (tol %.1e)\n", what, n, e, tol);
    free(a);
    free(b);
}

static struct okv_step_meta simple_meta(int n, int32_t *seq, int32_t *pos, int32_t *slot, float *cs, int32_t *kvlen, int hd)
{
    for (int t = 0; t < n; t++) {
        seq[t] = 0;
        pos[t] = t;
        slot[t] = t;
        for (int i = 0; i < hd / 2; i++) {
            float ang = (float)(t + 3) * powf(10000.f, -2.f * i / hd);
            cs[(size_t)t * hd + 2 * i] = cosf(ang);
            cs[(size_t)t * hd + 2 * i + 1] = sinf(ang);
        }
    }
    kvlen[0] = n;
    struct okv_step_meta m = {n, 1, seq, pos, slot, NULL, cs, kvlen};
    return m;
}

/* ---- element-wise and row ops ---- */
static void test_rows(void)
{
    for (int iter = 0; iter < 3; iter++) {
        const int n = rint_in(1, 70), dim = rint_in(1, 40) * 8 + (iter == 1 ? 0 : 0), hd = 2 * rint_in(4, 64);
        const int heads = rint_in(1, 6), vocab = rint_in(20, 300), f = rint_in(8, 700);
        char name[80];
        int32_t *seq = malloc(4 * n), *pos = malloc(4 * n), *slot = malloc(4 * n), kvlen[1];
        float *cs = malloc(sizeof(float) * (size_t)n * hd);
        struct okv_step_meta meta = simple_meta(n, seq, pos, slot, cs, kvlen, hd);
        BOTH(cpu->ops->step_begin(cpu, &meta), gpu->ops->step_begin(gpu, &meta));

        /* embed */
        float *tab = rand_vec((size_t)vocab * dim, 1.0f, false);
        okv_bweight *tc, *tg;
        weights("embd", tab, vocab, dim, &tc, &tg);
        int32_t *ids = malloc(4 * n);
        for (int i = 0; i < n; i++)
            ids[i] = rint_in(0, vocab - 1);
        okv_bmem *oc = poisoned(cpu, (size_t)n * dim), *og = poisoned(gpu, (size_t)n * dim);
        BOTH(cpu->ops->embed(cpu, oc, tc, ids, n, dim), gpu->ops->embed(gpu, og, tg, ids, n, dim));
        {
            float *a = down(cpu, oc, (size_t)n * dim), *b = down(gpu, og, (size_t)n * dim);
            double e = elem_err(b, a, (size_t)n * dim, 1e-30);
            CHECK(e <= 1.0 / 256, "embed: element error %.3g", e);
            printf("  %-44s n %-8d err %.2e (tol %.0e, per element)\n", "embed (bf16 table)", n * dim, e, 1.0 / 256);
            free(a);
            free(b);
        }
        /* rmsnorm, out of place and in place */
        float *x = rand_vec((size_t)n * dim, 3.0f, false), *w = rand_vec((size_t)dim, 1.0f, false);
        okv_bmem *xc = up(cpu, x, (size_t)n * dim), *xg = up(gpu, x, (size_t)n * dim);
        okv_bweight *wc, *wg;
        weights("norm", w, 1, dim, &wc, &wg);
        okv_bmem *rc = poisoned(cpu, (size_t)n * dim), *rg = poisoned(gpu, (size_t)n * dim);
        BOTH(cpu->ops->rmsnorm(cpu, rc, xc, wc, n, dim, 1e-5f), gpu->ops->rmsnorm(gpu, rg, xg, wg, n, dim, 1e-5f));
        snprintf(name, sizeof name, "rmsnorm (%d x %d)", n, dim);
        compare(name, rc, rg, (size_t)n * dim, 1e-5);
        BOTH(cpu->ops->rmsnorm(cpu, xc, xc, wc, n, dim, 1e-6f), gpu->ops->rmsnorm(gpu, xg, xg, wg, n, dim, 1e-6f));
        compare("rmsnorm in place", xc, xg, (size_t)n * dim, 1e-5);

        /* head rmsnorm + rope, both pairings */
        float *qh = rand_vec((size_t)n * heads * hd, 2.0f, false), *hw = rand_vec((size_t)hd, 1.0f, false);
        okv_bweight *hwc, *hwg;
        weights("q_norm", hw, 1, hd, &hwc, &hwg);
        for (int half = 0; half < 2; half++) {
            okv_bmem *qc = up(cpu, qh, (size_t)n * heads * hd), *qg = up(gpu, qh, (size_t)n * heads * hd);
            BOTH(cpu->ops->head_rmsnorm(cpu, qc, hwc, n, heads, hd, 1e-6f), gpu->ops->head_rmsnorm(gpu, qg, hwg, n, heads, hd, 1e-6f));
            snprintf(name, sizeof name, "head_rmsnorm (%d x %d x %d)", n, heads, hd);
            compare(name, qc, qg, (size_t)n * heads * hd, 1e-5);
            BOTH(cpu->ops->rope(cpu, qc, n, heads, hd, half), gpu->ops->rope(gpu, qg, n, heads, hd, half));
            snprintf(name, sizeof name, "rope %s (hd %d)", half ? "half pairs" : "adjacent pairs", hd);
            compare(name, qc, qg, (size_t)n * heads * hd, 1e-5);
            cpu->ops->mem_free(cpu, qc);
            gpu->ops->mem_free(gpu, qg);
        }

        /* swiglu, add */
        float *g = rand_vec((size_t)n * f, 6.0f, false), *u = rand_vec((size_t)n * f, 2.0f, false);
        okv_bmem *gc = up(cpu, g, (size_t)n * f), *gg = up(gpu, g, (size_t)n * f);
        okv_bmem *uc = up(cpu, u, (size_t)n * f), *ug = up(gpu, u, (size_t)n * f);
        okv_bmem *sc = poisoned(cpu, (size_t)n * f), *sg = poisoned(gpu, (size_t)n * f);
        BOTH(cpu->ops->swiglu(cpu, sc, gc, uc, n, f), gpu->ops->swiglu(gpu, sg, gg, ug, n, f));
        compare("swiglu", sc, sg, (size_t)n * f, 1e-5);
        BOTH(cpu->ops->add(cpu, gc, uc, (size_t)n * f - 3), gpu->ops->add(gpu, gg, ug, (size_t)n * f - 3));
        compare("add", gc, gg, (size_t)n * f, 1e-6);

        /* gather_rows, out of place (any rows) and in place (increasing rows >= i) */
        int nr = rint_in(1, n);
        int32_t *rows = malloc(4 * nr);
        for (int i = 0; i < nr; i++)
            rows[i] = rint_in(0, n - 1);
        okv_bmem *grc = poisoned(cpu, (size_t)nr * dim), *grg = poisoned(gpu, (size_t)nr * dim);
        BOTH(cpu->ops->gather_rows(cpu, grc, rc, rows, nr, dim), gpu->ops->gather_rows(gpu, grg, rg, rows, nr, dim));
        compare("gather_rows", grc, grg, (size_t)nr * dim, 1e-5);
        for (int i = 0, at = 0; i < nr; i++) {
            at = at > i ? at : i;
            rows[i] = at;
            at += rint_in(0, 1);
            if (at >= n)
                at = n - 1;
            if (rows[i] < i)
                rows[i] = i;
        }
        BOTH(cpu->ops->gather_rows(cpu, rc, rc, rows, nr, dim), gpu->ops->gather_rows(gpu, rg, rg, rows, nr, dim));
        compare("gather_rows in place", rc, rg, (size_t)n * dim, 1e-5);

        okv_bmem *all[] = {oc, og, xc, xg, rc, rg, gc, gg, uc, ug, sc, sg, grc, grg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            (i % 2 ? gpu : cpu)->ops->mem_free(i % 2 ? gpu : cpu, all[i]);
        cpu->ops->weight_free(cpu, tc);
        gpu->ops->weight_free(gpu, tg);
        cpu->ops->weight_free(cpu, wc);
        gpu->ops->weight_free(gpu, wg);
        cpu->ops->weight_free(cpu, hwc);
        gpu->ops->weight_free(gpu, hwg);
        free(tab);
        free(ids);
        free(x);
        free(w);
        free(qh);
        free(hw);
        free(g);
        free(u);
        free(rows);
        free(seq);
        free(pos);
        free(slot);
        free(cs);
    }
}

static void test_matmul(void)
{
    const int ns[] = {1, 3, 17, 64, 200};
    for (int i = 0; i < 5; i++) {
        const int n = ns[i], k = rint_in(2, 160) * 8, m = rint_in(1, 300) * (i == 4 ? 8 : 1);
        float *x = rand_vec((size_t)n * k, 1.0f, false), *w = rand_vec((size_t)m * k, 0.1f, false);
        float *b = rand_vec((size_t)m, 0.5f, false);
        okv_bweight *wc, *wg, *bc, *bg;
        weights("w", w, m, k, &wc, &wg);
        weights("b", b, 1, m, &bc, &bg);
        okv_bmem *xc = up(cpu, x, (size_t)n * k), *xg = up(gpu, x, (size_t)n * k);
        okv_bmem *oc = poisoned(cpu, (size_t)n * m), *og = poisoned(gpu, (size_t)n * m);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            BOTH(cpu->ops->matmul(cpu, oc, xc, wc, with_bias ? bc : NULL, n, k, m),
                 gpu->ops->matmul(gpu, og, xg, wg, with_bias ? bg : NULL, n, k, m));
            char name[80];
            snprintf(name, sizeof name, "matmul %d x %d -> %d%s", n, k, m, with_bias ? " + bias" : "");
            compare(name, oc, og, (size_t)n * m, 1.5e-2);
        }
        CHECK(gpu->ops->weight_bytes(wg) == (size_t)m * k * 2, "weight_bytes %zu", gpu->ops->weight_bytes(wg));
        cpu->ops->mem_free(cpu, xc);
        gpu->ops->mem_free(gpu, xg);
        cpu->ops->mem_free(cpu, oc);
        gpu->ops->mem_free(gpu, og);
        cpu->ops->weight_free(cpu, wc);
        gpu->ops->weight_free(gpu, wg);
        cpu->ops->weight_free(cpu, bc);
        gpu->ops->weight_free(gpu, bg);
        free(x);
        free(w);
        free(b);
    }
}

/* The fusions of a deferred run (cuda_backend.cu okv_cuda_gop_issue_fused, kernel in
 * cuda_gemv.cu) on 1 to 5 rows: q/k/v projections of one input (biases, odd widths),
 * a projection plus the residual add of its result, gate/up plus SwiGLU in place and into
 * a third buffer, and two sequences that must not fuse (the add's target is the
 * projection's input; a projection in place). Each sequence runs with graphs on (fused:
 * first sighting, capture, replay) and off (op by op), and with the GEMV path off
 * (conversion + cuBLAS): on and off must be equal bit for bit, every output within the
 * matmul tolerance of the CPU backend. */
struct fz { okv_bmem *c, *g; size_t n; };

static void fused_run(int n, int k, int mq, int mk, int f, int variant, okv_bweight *const *wc, okv_bweight *const *wg,
                      struct fz *bx, struct fz *out, okv_backend *be, bool on_cpu)
{
    okv_bweight *const *w = on_cpu ? wc : wg;
#define B(i) (on_cpu ? out[i].c : out[i].g)
#define X (on_cpu ? bx->c : bx->g)
    enum okv_status st = OKV_OK;
    switch (variant) {
    case 0:   /* q, k, v of one input, q and v with bias */
        st = st ? st : be->ops->matmul(be, B(0), X, w[0], w[5], n, k, mq);
        st = st ? st : be->ops->matmul(be, B(1), X, w[1], NULL, n, k, mk);
        st = st ? st : be->ops->matmul(be, B(2), X, w[2], w[6], n, k, mk);
        break;
    case 1:   /* projection + residual; then gate, up, SwiGLU in place */
        st = st ? st : be->ops->matmul(be, B(0), X, w[0], NULL, n, k, mq);
        st = st ? st : be->ops->add(be, B(3), B(0), (size_t)n * mq);
        st = st ? st : be->ops->matmul(be, B(1), X, w[3], NULL, n, k, f);
        st = st ? st : be->ops->matmul(be, B(2), X, w[4], NULL, n, k, f);
        st = st ? st : be->ops->swiglu(be, B(1), B(1), B(2), n, f);
        break;
    case 2:   /* SwiGLU into a third buffer; an add whose target is the projection's input */
        st = st ? st : be->ops->matmul(be, B(1), X, w[3], NULL, n, k, f);
        st = st ? st : be->ops->matmul(be, B(2), X, w[4], NULL, n, k, f);
        st = st ? st : be->ops->swiglu(be, B(4), B(1), B(2), n, f);
        st = st ? st : be->ops->matmul(be, B(0), X, w[0], NULL, n, k, mq);
        break;
    case 3:   /* x += x W^T with W square (not fused: the add writes the GEMV's input) */
        st = st ? st : be->ops->matmul(be, B(5), X, w[7], NULL, n, k, k);
        st = st ? st : be->ops->add(be, X, B(5), (size_t)n * k);
        break;
    }
    CHECK(st == OKV_OK, "fused sequence %d on %s: %s", variant, on_cpu ? "cpu" : "gpu", okv_last_error());
#undef B
#undef X
}

static void set_buf(okv_backend *be, okv_bmem *m, const float *h, size_t n)
{
    CHECK(be->ops->mem_write(be, m, 0, h, n) == OKV_OK, "mem_write: %s", okv_last_error());
}

static void test_fused(void)
{
    for (int n = 1; n <= 5; n++) {
        const int k = rint_in(2, 100) * 8, mq = rint_in(1, 200) * 2 + (n & 1), mk = rint_in(1, 80), f = rint_in(1, 300);
        float *hx = rand_vec((size_t)n * k, 1.0f, false);
        const int wr[8] = {mq, mk, mk, f, f, mq, mk, k}, wl[8] = {k, k, k, k, k, 1, 1, k};
        okv_bweight *wc[8], *wg[8];
        for (int i = 0; i < 8; i++) {
            float *h = rand_vec((size_t)wr[i] * wl[i], i == 5 || i == 6 ? 0.5f : 0.1f, false);
            if (i == 5 || i == 6)
                weights("bias", h, 1, wr[i], &wc[i], &wg[i]);
            else
                weights("w", h, wr[i], wl[i], &wc[i], &wg[i]);
            free(h);
        }
        for (int variant = 0; variant < 4; variant++) {
            enum { NOUT = 6 };
            const int w12 = variant == 0 ? mk : f;
            const size_t sz[NOUT] = {(size_t)n * mq, (size_t)n * w12, (size_t)n * w12, (size_t)n * mq, (size_t)n * f,
                                     (size_t)n * k};
            float *init[NOUT], *res[3][NOUT], *ref[NOUT];
            for (int i = 0; i < NOUT; i++) {   /* the residual target holds data; the rest NaN */
                init[i] = i == 3 ? rand_vec(sz[i], 1.0f, false) : malloc(sizeof(float) * sz[i]);
                for (size_t e = 0; i != 3 && e < sz[i]; e++)
                    init[i][e] = NAN;
            }
            struct fz bx = {up(cpu, hx, (size_t)n * k), up(gpu, hx, (size_t)n * k), (size_t)n * k}, out[NOUT];
            for (int i = 0; i < NOUT; i++)
                out[i] = (struct fz){up(cpu, init[i], sz[i]), up(gpu, init[i], sz[i]), sz[i]};
            fused_run(n, k, mq, mk, f, variant, wc, wg, &bx, out, cpu, true);
            for (int i = 0; i < NOUT; i++)
                ref[i] = down(cpu, out[i].c, sz[i]);
            float *xref = down(cpu, bx.c, (size_t)n * k);
            /* gpu: graphs on (passes: first sighting, capture, replay), off, GEMV path off;
             * the same buffers every pass, so the run repeats */
            for (int mode = 0; mode < 3; mode++) {
                okv_cuda_set_graphs(gpu, mode != 1);
                okv_cuda_set_gemv_rows(gpu, mode == 2 ? 0 : 4);
                for (int pass = 0; pass < (mode == 0 ? 3 : 1); pass++) {
                    set_buf(gpu, bx.g, hx, (size_t)n * k);
                    for (int i = 0; i < NOUT; i++)
                        set_buf(gpu, out[i].g, init[i], sz[i]);
                    fused_run(n, k, mq, mk, f, variant, wc, wg, &bx, out, gpu, false);
                    for (int i = 0; i < NOUT; i++) {
                        float *g = down(gpu, out[i].g, sz[i]);
                        if (pass > 0)
                            free(res[mode][i]);
                        res[mode][i] = g;
                    }
                    float *xg = down(gpu, bx.g, (size_t)n * k);
                    double e = rel_err(xg, xref, (size_t)n * k);
                    CHECK(e <= 1.5e-2, "fused n %d sequence %d mode %d: input after the run: error %.3g", n, variant, mode, e);
                    free(xg);
                }
            }
            double worst = 0;
            int compared = 0;
            for (int i = 0; i < NOUT; i++) {
                if (isnan(ref[i][0])) {   /* not written by this sequence: still poisoned everywhere */
                    for (int mode = 0; mode < 3; mode++)
                        CHECK(isnan(res[mode][i][0]) && isnan(res[mode][i][sz[i] - 1]),
                              "fused n %d sequence %d: buffer %d written", n, variant, i);
                    continue;
                }
                compared++;
                CHECK(!memcmp(res[0][i], res[1][i], sizeof(float) * sz[i]),
                      "fused n %d sequence %d buffer %d: graphs on and off differ", n, variant, i);
                for (int mode = 0; mode < 3; mode++) {
                    double e = rel_err(res[mode][i], ref[i], sz[i]);
                    CHECK(e <= 1.5e-2, "fused n %d sequence %d buffer %d mode %d: error %.3g", n, variant, i, mode, e);
                    worst = e > worst ? e : worst;
                }
            }
            printf("  fused ops, %d rows, k %-4d sequence %d: %d outputs, graphs on == off, worst err %.2e (tol 1.5e-2)\n", n, k,
                   variant, compared, worst);
            for (int i = 0; i < NOUT; i++) {
                free(ref[i]);
                free(init[i]);
                for (int mode = 0; mode < 3; mode++)
                    free(res[mode][i]);
                cpu->ops->mem_free(cpu, out[i].c);
                gpu->ops->mem_free(gpu, out[i].g);
            }
            free(xref);
            cpu->ops->mem_free(cpu, bx.c);
            gpu->ops->mem_free(gpu, bx.g);
        }
        for (int i = 0; i < 8; i++) {
            cpu->ops->weight_free(cpu, wc[i]);
            gpu->ops->weight_free(gpu, wg[i]);
        }
        free(hx);
    }
    struct okv_cuda_graph_info gi;
    okv_cuda_graph_info(gpu, &gi);
    CHECK(gi.on && gi.launched > 0, "fused: no graph was replayed (launched %lld)", gi.launched);
    okv_cuda_set_graphs(gpu, true);
    okv_cuda_set_gemv_rows(gpu, 4);
}

/* ---- KV: write, host tier, summaries, fetch; attention; selection ---- */

struct kvpair { okv_bkv *c, *g; struct okv_kv_geometry geo; };

/* key codes of the KV pairs kv_make allocates (0: none): test_attention keeps them on
 * half its configurations, so that its selection compares the code scores */
static int kv_code_bits;
/* an FP8 E4M3 host tier on the KV pairs kv_make allocates (test_kv's second pass, half of test_attention's
 * configurations): both backends store the same bytes, so every comparison stays exact */
static bool kv_host_fp8;

static void kv_make(struct kvpair *p, int layers, int slots, int sparse, int host_blocks, int stage, int bs, int nkv, int hd)
{
    struct okv_kv_geometry g = {.n_layers = layers, .n_group_slots = slots, .n_sparse_units = sparse,
                                .n_host_blocks = host_blocks, .n_stage_units = stage, .block_size = bs,
                                .n_kv_heads = nkv, .head_dim = hd, .key_code_bits = host_blocks ? kv_code_bits : 0,
                                .host_fp8 = host_blocks && kv_host_fp8};
    p->geo = g;
    CHECK(cpu->ops->kv_alloc(cpu, &g, &p->c) == OKV_OK, "%s", okv_last_error());
    CHECK(gpu->ops->kv_alloc(gpu, &g, &p->g) == OKV_OK, "%s", okv_last_error());
}

static void kv_drop(struct kvpair *p)
{
    cpu->ops->kv_free(cpu, p->c);
    gpu->ops->kv_free(gpu, p->g);
}

/* One step of kv_write on both backends, every layer, random bf16-exact K/V. */
static void kv_write_rows(struct kvpair *p, const struct okv_step_meta *meta)
{
    const struct okv_kv_geometry *g = &p->geo;
    const int w = g->n_kv_heads * g->head_dim, n = meta->n_tokens;
    BOTH(cpu->ops->step_begin(cpu, meta), gpu->ops->step_begin(gpu, meta));
    for (int l = 0; l < g->n_layers; l++) {
        float *k = rand_vec((size_t)n * w, 2.0f, true), *v = rand_vec((size_t)n * w, 1.0f, true);
        okv_bmem *kc = up(cpu, k, (size_t)n * w), *kg = up(gpu, k, (size_t)n * w);
        okv_bmem *vc = up(cpu, v, (size_t)n * w), *vg = up(gpu, v, (size_t)n * w);
        BOTH(cpu->ops->kv_write(cpu, p->c, l, kc, vc), gpu->ops->kv_write(gpu, p->g, l, kg, vg));
        /* the activations may change right after: the write-through must not read them */
        float *junk = rand_vec((size_t)n * w, 9.0f, false);
        gpu->ops->mem_write(gpu, kg, 0, junk, (size_t)n * w);
        gpu->ops->mem_write(gpu, vg, 0, junk, (size_t)n * w);
        free(junk);
        cpu->ops->mem_free(cpu, kc);
        gpu->ops->mem_free(gpu, kg);
        cpu->ops->mem_free(cpu, vc);
        gpu->ops->mem_free(gpu, vg);
        free(k);
        free(v);
    }
}

/* n rows of one sequence into slots 0..n-1 (and host slots host[], or none) */
static void kv_write_step(struct kvpair *p, int n, const int32_t *host)
{
    int32_t *seq = calloc((size_t)n, 4), *pos = malloc(4 * (size_t)n), *slot = malloc(4 * (size_t)n), kvlen[1] = {n};
    for (int t = 0; t < n; t++) {
        pos[t] = t;
        slot[t] = t;
    }
    struct okv_step_meta meta = {n, 1, seq, pos, slot, host, NULL, kvlen};
    kv_write_rows(p, &meta);
    free(seq);
    free(pos);
    free(slot);
}

/* Write random bf16-exact K/V into every group slot of every layer (a step of
 * slots*bs rows without host tier), then rewrite the first min(slots, host blocks)
 * slots through to whole host blocks in a random order. written[] receives those
 * host blocks; returns their count. */
static int kv_fill(struct kvpair *p, int32_t *written)
{
    const struct okv_kv_geometry *g = &p->geo;
    const int bs = g->block_size;
    kv_write_step(p, g->n_group_slots * bs, NULL);
    int nb = g->n_group_slots < g->n_host_blocks ? g->n_group_slots : g->n_host_blocks;
    int32_t *perm = malloc(4 * (size_t)(g->n_host_blocks + 1)), *host = malloc(4 * (size_t)(nb * bs + 1));
    for (int i = 0; i < g->n_host_blocks; i++)
        perm[i] = i;
    for (int i = g->n_host_blocks - 1; i > 0; i--) {
        int j = rint_in(0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int t = 0; t < nb * bs; t++)
        host[t] = perm[t / bs] * bs + t % bs;
    if (nb > 0)
        kv_write_step(p, nb * bs, host);
    memcpy(written, perm, 4 * (size_t)nb);
    free(perm);
    free(host);
    return nb;
}

/* the device's e4m3 conversions against the CPU's (themselves checked against ml_dtypes, test_fp8) */
static void test_e4m3(void)
{
    uint8_t *enc = malloc(65536);
    uint16_t dec[256], *dec2 = malloc(4 * 65536);
    CHECK(okv_cuda_e4m3_tables(enc, dec, dec2) == OKV_OK, "%s", okv_last_error());
    int bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        const uint8_t want = okv_bf16_to_e4m3((uint16_t)b);
        const bool nan = (b & 0x7fff) > 0x7f80;
        if (nan ? (enc[b] & 0x7f) != 0x7f : enc[b] != want)
            bad++;
    }
    CHECK(bad == 0, "e4m3 encode: %d of 65536 bf16 patterns differ from okv_bf16_to_e4m3", bad);
    int bad_dec = 0;
    for (int c = 0; c < 256; c++) {
        const float want = okv_e4m3_to_f32((uint8_t)c), got = okv_bf16_to_f32(dec[c]);
        if (isnan(want) ? !isnan(got) : (got != want || signbit(got) != signbit(want)))
            bad_dec++;
    }
    CHECK(bad_dec == 0, "e4m3 decode: %d of 256 codes differ from okv_e4m3_to_f32", bad_dec);
    /* the gather's two-code decoder, every pair (low byte first) */
    int bad2 = 0;
    for (uint32_t p = 0; p < 65536; p++)
        for (int j = 0; j < 2; j++) {
            const float want = okv_e4m3_to_f32((uint8_t)(p >> (8 * j))), got = okv_bf16_to_f32(dec2[2 * p + j]);
            bad2 += isnan(want) ? !isnan(got) : (got != want || signbit(got) != signbit(want));
        }
    CHECK(bad2 == 0, "e4m3 pair decode: %d of 131072 values differ from okv_e4m3_to_f32", bad2);
    printf("  e4m3 conversions: encode %d / 65536 differ, decode %d / 256, pair decode %d / 131072\n", bad, bad_dec, bad2);
    free(enc);
    free(dec2);
}

static void test_kv(bool fp8)
{
    kv_host_fp8 = fp8;
    for (int iter = 0; iter < 3; iter++) {
        const int bss[] = {8, 16, 32}, hds[] = {8, 64, 128};
        const int bs = bss[iter], hd = hds[rint_in(0, 2)], nkv = rint_in(1, 4), layers = rint_in(1, 3);
        const int slots = rint_in(4, 12), sparse = rint_in(4, 30), hb = rint_in(slots, 2 * slots), stage = rint_in(1, 6);
        struct kvpair p;
        kv_make(&p, layers, slots, sparse, hb, stage, bs, nkv, hd);
        if (!p.c || !p.g) {
            kv_host_fp8 = false;
            return;
        }
        CHECK(gpu->ops->kv_unit_bytes(p.g) == (size_t)2 * bs * hd * 2, "kv_unit_bytes");
        CHECK(okv_backend_host_unit_bytes(gpu, p.g) == (size_t)2 * bs * hd * (fp8 ? 1 : 2) &&
                  okv_backend_host_unit_bytes(cpu, p.c) == (size_t)2 * bs * hd * (fp8 ? 1 : 4),
              "host unit bytes (fp8 %d)", fp8);
        int32_t written[64];
        const int nw = kv_fill(&p, written);
        /* then a decode-shaped write: a few tokens, each in another written host block (one
         * at a block start: its summary resets; the others widen it), which the CUDA
         * backend writes with its fused kernel; the checks below cover both writes */
        {
            const int nd = rint_in(1, nw < 5 ? nw : 5), first = rint_in(0, nw - nd);
            int32_t seq[5], pos[5], slot[5], host[5], kvlen[5];
            for (int t = 0; t < nd; t++) {
                const int off = t == 0 ? 0 : rint_in(1, bs - 1);
                seq[t] = t;
                pos[t] = 1000 + t;
                slot[t] = rint_in(0, slots - 1) * bs + off;
                for (int u = 0; u < t; u++)   /* distinct group slots */
                    if (slot[u] == slot[t]) {
                        slot[t] = -1;
                        break;
                    }
                if (slot[t] < 0)
                    slot[t] = ((t * 7919) % slots) * bs + off;
                host[t] = written[first + t] * bs + off;
                kvlen[t] = pos[t] + 1;
            }
            bool distinct = true;
            for (int t = 0; t < nd; t++)
                for (int u = 0; u < t; u++)
                    distinct &= slot[u] != slot[t];
            if (distinct) {
                struct okv_step_meta meta = {nd, nd, seq, pos, slot, host, NULL, kvlen};
                kv_write_rows(&p, &meta);
                printf("  kv_write decode-shaped: %d tokens in %d host blocks (one at a block start)\n", nd, nd);
            }
        }
        const size_t uf = (size_t)bs * hd;
        float *k1 = malloc(4 * uf), *v1 = malloc(4 * uf), *k2 = malloc(4 * uf), *v2 = malloc(4 * uf);
        double e_unit = 0, e_host = 0, e_sum = 0;
        for (int l = 0; l < layers; l++) {
            for (int u = 0; u < slots * nkv; u++) {
                CHECK(cpu->ops->kv_unit_read(cpu, p.c, l, u, k1, v1) == OKV_OK, "%s", okv_last_error());
                CHECK(gpu->ops->kv_unit_read(gpu, p.g, l, u, k2, v2) == OKV_OK, "%s", okv_last_error());
                e_unit = fmax(e_unit, fmax(elem_err(k2, k1, uf, 0), elem_err(v2, v1, uf, 0)));
            }
            for (int i = 0; i < nw; i++)
                for (int h = 0; h < nkv; h++) {
                    const int b = written[i];
                    float mn1[256], mx1[256], mn2[256], mx2[256];
                    CHECK(cpu->ops->kv_host_read(cpu, p.c, l, b, h, k1, v1) == OKV_OK, "%s", okv_last_error());
                    CHECK(gpu->ops->kv_host_read(gpu, p.g, l, b, h, k2, v2) == OKV_OK, "%s", okv_last_error());
                    CHECK(cpu->ops->kv_summary_read(cpu, p.c, l, b, h, mn1, mx1) == OKV_OK, "%s", okv_last_error());
                    CHECK(gpu->ops->kv_summary_read(gpu, p.g, l, b, h, mn2, mx2) == OKV_OK, "%s", okv_last_error());
                    e_host = fmax(e_host, fmax(elem_err(k2, k1, uf, 0), elem_err(v2, v1, uf, 0)));
                    e_sum = fmax(e_sum, fmax(elem_err(mn2, mn1, (size_t)hd, 0), elem_err(mx2, mx1, (size_t)hd, 0)));
                }
        }
        CHECK(e_unit == 0 && e_host == 0 && e_sum == 0, "kv_write (bf16-exact data): unit %.3g host %.3g summary %.3g", e_unit,
              e_host, e_sum);
        printf("  kv_write bs %d hd %d kv heads %d layers %d%s: unit err %.1e, host tier %.1e, summaries %.1e\n", bs, hd, nkv,
               layers, fp8 ? " (fp8 host tier)" : "", e_unit, e_host, e_sum);

        /* summary rebuild from a prefix */
        int b = written[rint_in(0, nw - 1)], nv = rint_in(0, bs - 1);
        BOTH(cpu->ops->kv_summary_rebuild(cpu, p.c, b, nv), gpu->ops->kv_summary_rebuild(gpu, p.g, b, nv));
        double e_rb = 0;
        for (int l = 0; l < layers; l++)
            for (int h = 0; h < nkv; h++) {
                float mn1[256], mx1[256], mn2[256], mx2[256];
                cpu->ops->kv_summary_read(cpu, p.c, l, b, h, mn1, mx1);
                gpu->ops->kv_summary_read(gpu, p.g, l, b, h, mn2, mx2);
                for (int d = 0; d < hd; d++) {
                    if (mn1[d] != mn2[d] || mx1[d] != mx2[d])
                        e_rb = fmax(e_rb, fmax(fabs(mn1[d] - mn2[d]), fabs(mx1[d] - mx2[d])));
                    if (nv == 0 && !(isinf(mn2[d]) && mn2[d] > 0 && isinf(mx2[d]) && mx2[d] < 0))
                        e_rb = INFINITY;
                }
            }
        CHECK(e_rb == 0, "summary rebuild (block %d, %d tokens): diff %.3g", b, nv, e_rb);

        /* fetch host units into sparse and staging units, then read back */
        for (int l = 0; l < layers; l++) {
            const int nu = slots * nkv + sparse;
            int n = rint_in(1, sparse + 2 * stage);
            int32_t *src = malloc(4 * (size_t)n), *dst = malloc(4 * (size_t)n);
            /* distinct destinations: sparse units, then staging units */
            for (int i = 0; i < n; i++) {
                src[i] = written[rint_in(0, nw - 1)] * nkv + rint_in(0, nkv - 1);
                dst[i] = i < sparse ? slots * nkv + i : (OKV_UNIT_STAGE | (i - sparse));
            }
            (void)nu;
            BOTH(cpu->ops->kv_fetch(cpu, p.c, l, n, src, dst), gpu->ops->kv_fetch(gpu, p.g, l, n, src, dst));
            int pend1, pend2;
            double st1, st2;
            BOTH(cpu->ops->kv_fetch_wait(cpu, p.c, l, &pend1, &st1), gpu->ops->kv_fetch_wait(gpu, p.g, l, &pend2, &st2));
            /* the CUDA backend reports the round before of the layer (timing events): none yet */
            CHECK(pend2 == 0 && st2 == 0, "kv_fetch_wait, first round: pending %d stall %g", pend2, st2);
            double e_f = 0;
            for (int i = 0; i < n; i++) {
                CHECK(gpu->ops->kv_unit_read(gpu, p.g, l, dst[i], k2, v2) == OKV_OK, "%s", okv_last_error());
                gpu->ops->kv_host_read(gpu, p.g, l, src[i] / nkv, src[i] % nkv, k1, v1);
                e_f = fmax(e_f, fmax(elem_err(k2, k1, uf, 0), elem_err(v2, v1, uf, 0)));
                cpu->ops->kv_unit_read(cpu, p.c, l, dst[i], k1, v1);
                e_f = fmax(e_f, fmax(elem_err(k2, k1, uf, 0), elem_err(v2, v1, uf, 0)));
            }
            CHECK(e_f == 0, "kv_fetch layer %d: %d units, diff %.3g", l, n, e_f);
            /* a second round measures the first: late units within its n, a finite wait
             * (the compute stream is idle here, so the gather is usually late: not asserted) */
            BOTH(cpu->ops->kv_fetch(cpu, p.c, l, n, src, dst), gpu->ops->kv_fetch(gpu, p.g, l, n, src, dst));
            BOTH(cpu->ops->kv_fetch_wait(cpu, p.c, l, &pend1, &st1), gpu->ops->kv_fetch_wait(gpu, p.g, l, &pend2, &st2));
            CHECK(pend2 >= 0 && pend2 <= n && st2 >= 0 && st2 < 10, "kv_fetch_wait, second round: pending %d of %d, stall %g s",
                  pend2, n, st2);
            CHECK(gpu->ops->sync(gpu) == OKV_OK, "%s", okv_last_error());
            printf("  kv_fetch layer %d: %d units, the compute stream waited %.1f us for %d of them, err %.1e\n", l, n,
                   st2 * 1e6, pend2, e_f);
            free(src);
            free(dst);
        }
        free(k1);
        free(v1);
        free(k2);
        free(v2);
        kv_drop(&p);
    }
    kv_host_fp8 = false;
}

/* Bring host units into the sparse region and the staging buffer of `layer`: units
 * slots*nkv ... of the layer, then staging units 0 .. stage-1. */
static void attn_fetch_units(struct kvpair *p, int layer, const int32_t *written, int nw, int slots, int sparse, int stage)
{
    const int nkv = p->geo.n_kv_heads;
    int32_t src[64], dst[64];
    CHECK(sparse + stage <= 64, "too many units to fetch");
    for (int i = 0; i < sparse + stage; i++) {
        src[i] = written[rint_in(0, nw - 1)] * nkv + rint_in(0, nkv - 1);
        dst[i] = i < sparse ? slots * nkv + i : (OKV_UNIT_STAGE | (i - sparse));
    }
    int pend;
    double stall;
    BOTH(cpu->ops->kv_fetch(cpu, p->c, layer, sparse + stage, src, dst),
         gpu->ops->kv_fetch(gpu, p->g, layer, sparse + stage, src, dst));
    BOTH(cpu->ops->kv_fetch_wait(cpu, p->c, layer, &pend, &stall), gpu->ops->kv_fetch_wait(gpu, p->g, layer, &pend, &stall));
}

/* The KV of an attention case: both backends' tiers for contexts up to max_len (group
 * slots for all its blocks + 8, 24 sparse units, 8 staging units), random host blocks
 * written (their ids in written, *nw of them), and some of them fetched into layer
 * ATT_LAYER's sparse and staging units. Returns the group slots; 0 when not made. */
#define ATT_LAYER 1
#define ATT_SPARSE 24
#define ATT_STAGE 8
static int attn_kv(struct kvpair *p, int max_len, int bs, int nkv, int hd, int32_t written[64], int *nw)
{
    const int slots = (max_len + bs - 1) / bs + 8;
    kv_make(p, 2, slots, ATT_SPARSE, 24, ATT_STAGE, bs, nkv, hd);
    if (!p->c || !p->g)
        return 0;
    *nw = kv_fill(p, written);
    attn_fetch_units(p, ATT_LAYER, written, *nw, slots, ATT_SPARSE, ATT_STAGE);
    return slots;
}

/* Block lists of ns sequences x nkv heads: every logical block below kvlen[s] (dense)
 * or a random subset keeping the first and the last (sparse), in random order, each on
 * a random unit of the layer (group slot or sparse unit: n_units of them, or one of
 * `stage` staging units). Returns the number of blocks. */
static int attn_lists(int ns, int nkv, int bs, const int32_t *kvlen, int n_units, int stage, int sparse, int32_t *start,
                      int32_t *unit, int32_t *index)
{
    int at = 0;
    for (int s = 0; s < ns; s++)
        for (int h = 0; h < nkv; h++) {
            start[s * nkv + h] = at;
            int nb = (kvlen[s] + bs - 1) / bs;
            int first = at;
            for (int b = 0; b < nb; b++) {
                if (sparse && b > 0 && b < nb - 1 && rint_in(0, 2) == 0)
                    continue;
                index[at] = b;
                int r = rint_in(0, n_units + stage - 1);
                unit[at] = r < n_units ? r : (OKV_UNIT_STAGE | (r - n_units));
                at++;
            }
            for (int i = at - 1; i > first; i--) {   /* shuffle the list */
                int j = first + rint_in(0, i - first);
                int32_t tu = unit[i], ti = index[i];
                unit[i] = unit[j];
                index[i] = index[j];
                unit[j] = tu;
                index[j] = ti;
            }
        }
    start[ns * nkv] = at;
    return at;
}

/* The prefill backends drive the same device as `gpu` through the CUDA runtime's
 * primary context, so the KV and the buffers `gpu` allocated serve them too; their
 * streams differ, so every hand-over below synchronises. */
static void pf_step_begin(const struct okv_step_meta *m)
{
    for (int i = 0; i < N_PF; i++)
        CHECK(gpu_pf[i]->ops->step_begin(gpu_pf[i], m) == OKV_OK, "%s step_begin: %s", pf_label[i], okv_last_error());
}

/* The attention op of each prefill backend (twice on the first: cached plan and kernel
 * attributes) into a fresh poisoned output, compared with the CPU's output oc. With
 * ref_g (the output of `gpu`, decode kernels), ran[i] tells whether backend i's output
 * differs from it in some element, i.e. whether the prefill kernel ran. */
static void pf_compare(okv_bmem *oc, const float *ref_g, okv_bmem *qg, okv_bkv *kvg, int layer,
                       const struct okv_attn_blocks *blocks, int nh, float scale, size_t n, double tol, bool ran[N_PF])
{
    char name[120];
    for (int i = 0; i < N_PF; i++)
        for (int rep = 0; rep < (i == 0 ? 2 : 1); rep++) {
            okv_bmem *og = poisoned(gpu, n);
            CHECK(gpu->ops->sync(gpu) == OKV_OK, "%s", okv_last_error());
            CHECK(gpu_pf[i]->ops->attention(gpu_pf[i], og, qg, kvg, layer, blocks, nh, scale) == OKV_OK, "%s attention: %s",
                  pf_label[i], okv_last_error());
            CHECK(gpu_pf[i]->ops->sync(gpu_pf[i]) == OKV_OK, "%s sync: %s", pf_label[i], okv_last_error());
            snprintf(name, sizeof name, "  %s%s", pf_label[i], rep ? " again" : "");
            compare(name, oc, og, n, tol);
            if (ref_g && rep == 0) {
                float *b = down(gpu, og, n);
                ran[i] = memcmp(b, ref_g, sizeof(float) * n) != 0;
                free(b);
            }
            gpu->ops->mem_free(gpu, og);
        }
}

/* One selection again on the GPU with env=0 (the kernel the default replaced, named old):
 * against the CPU's scores s1 (the usual tolerance) and the default kernel's s2 (1e-5). */
/* the selection again with env=0 (the kernel old instead of dflt): its scores against the CPU's
 * (s1) and against dflt's (s2), which must agree within tol_m (0: bit for bit) */
static void select_alt(struct kvpair *p, int layer, okv_bmem *qg, int nh, const struct okv_select_req *req, const float *s1,
                       const float *s2, const char *env, const char *old, const char *dflt, double tol_m)
{
    const size_t n = (size_t)p->geo.n_kv_heads * req->n_cand;
    float *s3 = malloc(4 * n);
    int32_t *o3 = malloc(4 * (size_t)p->geo.n_kv_heads * req->k + 4);
    setenv(env, "0", 1);
    BOTH(OKV_OK, gpu->ops->select_blocks(gpu, p->g, layer, qg, nh, req, 1, o3, s3));
    unsetenv(env);
    const double ek = rel_err(s3, s1, n), em = rel_err(s2, s3, n);
    CHECK(ek <= 2e-3, "select scores by %s: error %.3g", old, ek);
    CHECK(tol_m > 0 ? em <= tol_m : !memcmp(s2, s3, 4 * n), "select scores, %s against %s: error %.3g", dflt, old, em);
    char label[80];
    snprintf(label, sizeof label, "  %s (%s=0)", old, env);
    printf("  %-44s score err %.2e (%s against it: %.2e)\n", label, ek, dflt, em);
    free(s3);
    free(o3);
}

/* Attention: random sequences, GQA, lists over group, sparse and staging units in
 * random order, several rows per sequence and prefill chunks. */
static void test_attention(void)
{
    struct cfg { int bs, nkv, group, hd, n_seqs, max_len, sparse_lists; } cfgs[] = {
        {16, 2, 4, 128, 12, 300, 0}, {8, 1, 8, 64, 5, 900, 1}, {16, 4, 1, 16, 9, 200, 1},
        {16, 2, 2, 128, 3, 3000, 0}, {32, 3, 3, 8, 7, 500, 1}, {16, 8, 4, 128, 16, 130, 1},
        {16, 2, 4, 96, 6, 1200, 0},  {16, 4, 2, 32, 8, 700, 1},  {32, 2, 8, 64, 5, 2000, 1},
        {16, 8, 4, 128, 3, 6000, 0}, {8, 2, 16, 128, 4, 800, 1}, {64, 2, 2, 128, 3, 1500, 1},
    };
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const struct cfg cf = cfgs[ci];
        const int bs = cf.bs, nkv = cf.nkv, hd = cf.hd, nh = nkv * cf.group;
        const int max_blocks = (cf.max_len + bs - 1) / bs;
        struct kvpair p;
        int32_t written[64];
        int nw;
        /* key codes on eight configurations: 1, 2 and 4 bits; blocks of 8, 16 and 64 tokens; hd 32 to 128, with
         * threads of the tensor-core kernel that own no channel (hd 32, 64) or part of a word (hd 96 x 2 bits);
         * GQA groups of 1 to 16 queries (n-tiles of 8); hd 8 x 2 bits only codes_k can score (byte reads). codes_k
         * scores every configuration too (OKV_CODES_MMA=0): as 16-byte pieces, words (hd 32 x 1 bit), bytes, and
         * 64-token blocks of 4-bit codes from HBM (not staged) */
        static const int code_bits_of[] = {0, 1, 0, 2, 2, 4, 2, 1, 0, 2, 4, 4};
        kv_code_bits = code_bits_of[ci % (sizeof code_bits_of / sizeof code_bits_of[0])];
        kv_host_fp8 = (ci / 2) % 2 == 1;   /* configurations 2, 3, 6, 7, 10, 11: with and without key codes */
        const int slots = attn_kv(&p, cf.max_len, bs, nkv, hd, written, &nw);
        const int code_bits = kv_code_bits;
        kv_code_bits = 0;
        kv_host_fp8 = false;
        if (!slots)
            return;
        /* codes come from kv_write (the block's last token, above) and from a summary rebuild of a
         * full block (from the host tier): rebuild every other written block */
        for (int i = 0; code_bits && i < nw; i += 2)
            BOTH(cpu->ops->kv_summary_rebuild(cpu, p.c, written[i], bs), gpu->ops->kv_summary_rebuild(gpu, p.g, written[i], bs));
        const int sparse = ATT_SPARSE, stage = ATT_STAGE, layer = ATT_LAYER;

        /* step: sequences with random lengths and rows */
        const int ns = cf.n_seqs;
        int32_t kvlen[64], nq[64];
        int n = 0;
        for (int s = 0; s < ns; s++) {
            kvlen[s] = rint_in(1, cf.max_len);
            int r = rint_in(0, 3);
            nq[s] = r == 0 ? 1 : r == 1 ? rint_in(2, 6) : r == 2 ? rint_in(1, 40) : 1;
            if (nq[s] > kvlen[s])
                nq[s] = kvlen[s];
            n += nq[s];
        }
        int32_t *seq, *pos, *slot;
        tu_step_rows(ns, nq, kvlen, &seq, &pos, &slot);
        struct okv_step_meta meta = {n, ns, seq, pos, slot, NULL, NULL, kvlen};
        BOTH(cpu->ops->step_begin(cpu, &meta), gpu->ops->step_begin(gpu, &meta));
        pf_step_begin(&meta);
        int32_t *start = malloc(4 * (size_t)(ns * nkv + 1));
        int cap = ns * nkv * (max_blocks + 1);
        int32_t *unit = malloc(4 * (size_t)cap), *index = malloc(4 * (size_t)cap);
        const int at = attn_lists(ns, nkv, bs, kvlen, slots * nkv + sparse, stage, cf.sparse_lists, start, unit, index);
        struct okv_attn_blocks blocks = {start, unit, index, NULL, 0};
        float *q = rand_vec((size_t)n * nh * hd, 1.0f, false);
        okv_bmem *qc = up(cpu, q, (size_t)n * nh * hd), *qg = up(gpu, q, (size_t)n * nh * hd);
        okv_bmem *oc = poisoned(cpu, (size_t)n * nh * hd), *og = poisoned(gpu, (size_t)n * nh * hd);
        const float scale = 1.5f / sqrtf((float)hd);
        BOTH(cpu->ops->attention(cpu, oc, qc, p.c, layer, &blocks, nh, scale),
             gpu->ops->attention(gpu, og, qg, p.g, layer, &blocks, nh, scale));
        char name[120];
        snprintf(name, sizeof name, "attention bs %d kv %d x%d hd %d: %d seqs %d rows %d blocks", bs, nkv, cf.group, hd, ns, n,
                 at);
        compare(name, oc, og, (size_t)n * nh * hd, 2e-3);
        /* again with the same lists (cached plan) and a fresh output */
        gpu->ops->mem_free(gpu, og);
        og = poisoned(gpu, (size_t)n * nh * hd);
        BOTH(OKV_OK, gpu->ops->attention(gpu, og, qg, p.g, layer, &blocks, nh, scale));
        compare("  same lists again (cached plan)", oc, og, (size_t)n * nh * hd, 2e-3);
        /* other kernels and split sizes (cuda_bench.h): forced items of 1, 3 and 5 blocks,
         * no split, the SIMT kernel, the tuning variants */
        {
            const int var[][2] = {{0, bs}, {0, 3 * bs}, {0, 5 * bs - 1}, {0, 1 << 30}, {-1, 0}, {-1, bs},
                                  {1, 2 * bs}, {2, 0}, {4, 0}, {5, 3 * bs}, {6, 0}};
            for (size_t vi = 0; vi < sizeof var / sizeof var[0]; vi++) {
                okv_cuda_set_attn(gpu, var[vi][0], var[vi][1]);
                gpu->ops->mem_free(gpu, og);
                og = poisoned(gpu, (size_t)n * nh * hd);
                BOTH(OKV_OK, gpu->ops->attention(gpu, og, qg, p.g, layer, &blocks, nh, scale));
                int n_work = 0, n_merge = 0;
                okv_cuda_attn_info(gpu, &n_work, &n_merge);
                snprintf(name, sizeof name, "  variant %d, %d keys per item: %d items, %d merged", var[vi][0], var[vi][1], n_work,
                         n_merge);
                compare(name, oc, og, (size_t)n * nh * hd, 2e-3);
            }
            okv_cuda_set_attn(gpu, 0, 0);
        }
        /* the prefill kernel where the call is prefill-shaped (head_dim 64 / 128, rows * group >= 64) */
        pf_compare(oc, NULL, qg, p.g, layer, &blocks, nh, scale, (size_t)n * nh * hd, 2e-2, NULL);

        /* selection on the same step: rows of one sequence, candidates among host blocks */
        {
            int s = rint_in(0, ns - 1), r0 = 0;
            for (int i = 0; i < s; i++)
                r0 += nq[i];
            int32_t rows[40], cand[64];
            int nr = nq[s];
            for (int i = 0; i < nr; i++)
                rows[i] = r0 + i;
            int nc = rint_in(2, nw);
            for (int i = 0; i < nw; i++)
                cand[i] = written[i];
            for (int i = nw - 1; i > 0; i--) {
                int j = rint_in(0, i), t = cand[i];
                cand[i] = cand[j];
                cand[j] = t;
            }
            int k = rint_in(1, nc);
            struct okv_select_req req = {rows, nr, cand, nc, k};
            int32_t *o1 = malloc(4 * (size_t)nkv * k), *o2 = malloc(4 * (size_t)nkv * k);
            float *s1 = malloc(4 * (size_t)nkv * nc), *s2 = malloc(4 * (size_t)nkv * nc);
            BOTH(cpu->ops->select_blocks(cpu, p.c, layer, qc, nh, &req, 1, o1, s1),
                 gpu->ops->select_blocks(gpu, p.g, layer, qg, nh, &req, 1, o2, s2));
            double e = rel_err(s2, s1, (size_t)nkv * nc);
            CHECK(e <= 2e-3, "select scores: error %.3g", e);
            int sets_checked = 0;
            for (int h = 0; h < nkv; h++) {
                /* the k-th and (k+1)-th CPU scores */
                float kth = s1[(size_t)h * nc], next = -INFINITY, scale_s = 0;
                float *sorted = malloc(4 * (size_t)nc);
                memcpy(sorted, s1 + (size_t)h * nc, 4 * (size_t)nc);
                for (int i = 0; i < nc; i++)
                    for (int j = i + 1; j < nc; j++)
                        if (sorted[j] > sorted[i]) {
                            float t = sorted[i];
                            sorted[i] = sorted[j];
                            sorted[j] = t;
                        }
                kth = sorted[k - 1];
                next = k < nc ? sorted[k] : -INFINITY;
                scale_s = fabsf(sorted[0]) + 1e-6f;
                free(sorted);
                if (kth - next > 1e-3f * scale_s) {
                    sets_checked++;
                    for (int i = 0; i < k; i++) {
                        bool found = false;
                        for (int j = 0; j < k; j++)
                            found |= o1[(size_t)h * k + i] == o2[(size_t)h * k + j];
                        CHECK(found, "select head %d: block %d chosen on the CPU only", h, o1[(size_t)h * k + i]);
                    }
                }
            }
            const struct okv_kv_geometry cg = {.block_size = bs, .head_dim = hd, .key_code_bits = code_bits};
            const bool mma = code_bits && okv_cuda_codes_mma_fits(&cg);
            snprintf(name, sizeof name, "select_blocks (%s)", !code_bits ? "Quest bound" : code_bits == 1 ? "1-bit key codes"
                     : code_bits == 2 ? "2-bit key codes" : "4-bit key codes");
            printf("  %-44s %d cand, k %d: score err %.2e, %d/%d heads' sets compared%s\n", name, nc, k, e, sets_checked, nkv,
                   !code_bits ? "" : mma ? ", tensor cores" : ", codes_k");
            /* the kernel each default replaced, on the same selection: Quest's bound by quest_k, the codes by codes_k */
            if (!code_bits && hd % 16 == 0 && nr * (nh / nkv) <= 8) {   /* the default: quest_coop_k */
                select_alt(&p, layer, qg, nh, &req, s1, s2, "OKV_QUEST_COOP", "quest_lane_k", "quest_coop_k", 0);
                setenv("OKV_QUEST_COOP", "0", 1);
                select_alt(&p, layer, qg, nh, &req, s1, s2, "OKV_QUEST_LANE", "quest_k", "quest_coop_k", 1e-5);
                unsetenv("OKV_QUEST_COOP");
            } else if (!code_bits && hd % 8 == 0) {
                select_alt(&p, layer, qg, nh, &req, s1, s2, "OKV_QUEST_LANE", "quest_k", "quest_lane_k", 1e-5);
            }
            if (mma)
                select_alt(&p, layer, qg, nh, &req, s1, s2, "OKV_CODES_MMA", "codes_k", "tensor cores", 1e-5);
            if (code_bits) {   /* OKV_CODES_BLEND=0: the codes' max alone (the default blends in Quest's bound) */
                setenv("OKV_CODES_BLEND", "0", 1);
                BOTH(cpu->ops->select_blocks(cpu, p.c, layer, qc, nh, &req, 1, o1, s1),
                     gpu->ops->select_blocks(gpu, p.g, layer, qg, nh, &req, 1, o2, s2));
                unsetenv("OKV_CODES_BLEND");
                const double eb = rel_err(s2, s1, (size_t)nkv * nc);
                CHECK(eb <= 2e-3, "select scores, the codes' max alone: error %.3g", eb);
                printf("  %-44s score err %.2e\n", "  the codes' max alone (blend 0)", eb);
            }
            /* the selection diagnostic OKV_SELECT_SCORE=exact (the true max of q.k over each block's keys, read
             * from the host tier): the GPU's (bf16 keys) against the CPU backend's */
            setenv("OKV_SELECT_SCORE", "exact", 1);
            BOTH(cpu->ops->select_blocks(cpu, p.c, layer, qc, nh, &req, 1, o1, s1),
                 gpu->ops->select_blocks(gpu, p.g, layer, qg, nh, &req, 1, o2, s2));
            unsetenv("OKV_SELECT_SCORE");
            double ex = rel_err(s2, s1, (size_t)nkv * nc);
            CHECK(ex <= 2e-3, "select scores, exact diagnostic: error %.3g", ex);
            printf("  %-44s score err %.2e\n", "  exact-score diagnostic", ex);
            free(o1);
            free(o2);
            free(s1);
            free(s2);
        }
        cpu->ops->mem_free(cpu, qc);
        gpu->ops->mem_free(gpu, qg);
        cpu->ops->mem_free(cpu, oc);
        gpu->ops->mem_free(gpu, og);
        free(q);
        free(seq);
        free(pos);
        free(slot);
        free(start);
        free(unit);
        free(index);
        kv_drop(&p);
    }
}

/* Prefill chunks: several sequences in one call, 64..600 rows each (one short sequence
 * of 1..8 rows mixed in where there are more than two), positions continuing an
 * existing context (0 for the first sequence: a prompt's first chunk), rows of the
 * sequences interleaved, lists of every block below the KV length (or a random subset)
 * in random order on group, sparse and staging units. The decode kernels (`gpu`) are
 * held to 2e-3, the prefill kernel (gpu_pf) to 2e-2, and the prefill kernel must have
 * run exactly where head_dim is 64 or 128. */
static void test_prefill(void)
{
    struct cfg { int bs, nkv, group, hd, n_seqs, sparse_lists; } cfgs[] = {
        {16, 2, 4, 128, 3, 0}, {16, 4, 1, 128, 3, 0}, {8, 2, 4, 64, 4, 1},
        {32, 2, 1, 64, 3, 0},  {16, 1, 8, 128, 3, 1}, {16, 2, 4, 96, 2, 0},
    };
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const struct cfg cf = cfgs[ci];
        const int bs = cf.bs, nkv = cf.nkv, hd = cf.hd, nh = nkv * cf.group, ns = cf.n_seqs;
        int32_t kvlen[8], nq[8], prev[8], left[8];
        int n = 0, max_len = 1;
        for (int s = 0; s < ns; s++) {
            prev[s] = s == 0 ? 0 : rint_in(1, 1500);
            nq[s] = s == ns - 1 && ns > 2 ? rint_in(1, 8) : rint_in(64, 600);
            kvlen[s] = prev[s] + nq[s];
            max_len = kvlen[s] > max_len ? kvlen[s] : max_len;
            left[s] = nq[s];
            n += nq[s];
        }
        const int max_blocks = (max_len + bs - 1) / bs;
        struct kvpair p;
        int32_t written[64];
        int nw;
        const int slots = attn_kv(&p, max_len, bs, nkv, hd, written, &nw);
        if (!slots)
            return;
        const int sparse = ATT_SPARSE, stage = ATT_STAGE, layer = ATT_LAYER;
        int32_t *seq = malloc(4 * (size_t)n), *pos = malloc(4 * (size_t)n), *slot = calloc((size_t)n, 4);
        for (int t = 0; t < n; t++) {   /* row t: a sequence drawn among the rows left, its next position */
            int r = rint_in(0, n - t - 1), s = 0;
            while (r >= left[s])
                r -= left[s++];
            left[s]--;
            seq[t] = s;
            pos[t] = prev[s] + nq[s] - left[s] - 1;
        }
        struct okv_step_meta meta = {n, ns, seq, pos, slot, NULL, NULL, kvlen};
        BOTH(cpu->ops->step_begin(cpu, &meta), gpu->ops->step_begin(gpu, &meta));
        pf_step_begin(&meta);
        int32_t *start = malloc(4 * (size_t)(ns * nkv + 1));
        const int cap = ns * nkv * (max_blocks + 1);
        int32_t *unit = malloc(4 * (size_t)cap), *index = malloc(4 * (size_t)cap);
        const int at = attn_lists(ns, nkv, bs, kvlen, slots * nkv + sparse, stage, cf.sparse_lists, start, unit, index);
        struct okv_attn_blocks blocks = {start, unit, index, NULL, 0};
        const size_t no = (size_t)n * nh * hd;
        float *q = rand_vec(no, 1.0f, false);
        okv_bmem *qc = up(cpu, q, no), *qg = up(gpu, q, no);
        okv_bmem *oc = poisoned(cpu, no), *og = poisoned(gpu, no);
        const float scale = 1.5f / sqrtf((float)hd);
        BOTH(cpu->ops->attention(cpu, oc, qc, p.c, layer, &blocks, nh, scale),
             gpu->ops->attention(gpu, og, qg, p.g, layer, &blocks, nh, scale));
        char name[120];
        snprintf(name, sizeof name, "prefill bs %d kv %d x%d hd %d: %d seqs %d rows %d blocks", bs, nkv, cf.group, hd, ns, n, at);
        compare(name, oc, og, no, 2e-3);
        float *ref_g = down(gpu, og, no);
        bool ran[N_PF] = {false};
        pf_compare(oc, ref_g, qg, p.g, layer, &blocks, nh, scale, no, 2e-2, ran);
        const bool expect = hd == 64 || hd == 128;
        for (int i = 0; i < N_PF; i++)
            CHECK(ran[i] == expect, "%s, hd %d: the prefill kernel %s", pf_label[i], hd, ran[i] ? "ran" : "did not run");
        free(ref_g);
        cpu->ops->mem_free(cpu, qc);
        gpu->ops->mem_free(gpu, qg);
        cpu->ops->mem_free(cpu, oc);
        gpu->ops->mem_free(gpu, og);
        free(q);
        free(seq);
        free(pos);
        free(slot);
        free(start);
        free(unit);
        free(index);
        kv_drop(&p);
    }
}

/* ---- batched selection and sampling (exact comparisons) ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Keys in multiples of 1/8 up to 2, queries in multiples of 1/8 up to 1: every Quest
 * bound is a multiple of 1/64 below 2^13, exact in fp32 on both backends, so ids and
 * scores must be equal bit for bit, ties (frequent here) included. */
static void kv_fill_exact(struct kvpair *p)
{
    const struct okv_kv_geometry *g = &p->geo;
    const int n = g->n_host_blocks * g->block_size, w = g->n_kv_heads * g->head_dim;
    int32_t *seq = calloc((size_t)n, 4), *pos = malloc(4 * (size_t)n), *slot = malloc(4 * (size_t)n), kvlen[1] = {n};
    for (int t = 0; t < n; t++)
        pos[t] = slot[t] = t;
    struct okv_step_meta meta = {n, 1, seq, pos, slot, slot, NULL, kvlen};
    BOTH(cpu->ops->step_begin(cpu, &meta), gpu->ops->step_begin(gpu, &meta));
    float *k = malloc(sizeof(float) * (size_t)n * w);
    for (int l = 0; l < g->n_layers; l++) {
        for (size_t i = 0; i < (size_t)n * w; i++)
            k[i] = (float)rint_in(-16, 16) / 8.0f;
        okv_bmem *kc = up(cpu, k, (size_t)n * w), *kg = up(gpu, k, (size_t)n * w);
        BOTH(cpu->ops->kv_write(cpu, p->c, l, kc, kc), gpu->ops->kv_write(gpu, p->g, l, kg, kg));
        BOTH(cpu->ops->sync(cpu), gpu->ops->sync(gpu));
        cpu->ops->mem_free(cpu, kc);
        gpu->ops->mem_free(gpu, kg);
    }
    free(k);
    free(seq);
    free(pos);
    free(slot);
}

/* One batched call on both backends, outputs poisoned; ids and scores must be equal. */
static void select_compare(struct kvpair *p, int layer, okv_bmem *qc, okv_bmem *qg, int nh, const struct okv_select_req *reqs,
                           int n_reqs, const char *what)
{
    const int nkv = p->geo.n_kv_heads;
    size_t n_out = 0, n_sc = 0;
    for (int r = 0; r < n_reqs; r++) {
        n_out += (size_t)nkv * reqs[r].k;
        n_sc += (size_t)nkv * reqs[r].n_cand;
    }
    int32_t *o1 = malloc(4 * (n_out + 1)), *o2 = malloc(4 * (n_out + 1)), *o3 = malloc(4 * (n_out + 1));
    float *s1 = malloc(4 * (n_sc + 1)), *s2 = malloc(4 * (n_sc + 1));
    for (size_t i = 0; i < n_out; i++)
        o2[i] = o3[i] = -7;
    for (size_t i = 0; i < n_sc; i++)
        s2[i] = NAN;
    BOTH(cpu->ops->select_blocks(cpu, p->c, layer, qc, nh, reqs, n_reqs, o1, s1),
         gpu->ops->select_blocks(gpu, p->g, layer, qg, nh, reqs, n_reqs, o2, s2));
    BOTH(OKV_OK, gpu->ops->select_blocks(gpu, p->g, layer, qg, nh, reqs, n_reqs, o3, NULL));
    size_t bad_sc = 0, bad_id = 0, bad_id2 = 0;
    for (size_t i = 0; i < n_sc; i++)
        bad_sc += memcmp(&s1[i], &s2[i], 4) != 0;
    for (size_t i = 0; i < n_out; i++) {
        bad_id += o1[i] != o2[i];
        bad_id2 += o1[i] != o3[i];
    }
    CHECK(bad_sc == 0 && bad_id == 0 && bad_id2 == 0, "%s: %zu/%zu scores, %zu/%zu ids (%zu without scores) differ", what,
          bad_sc, n_sc, bad_id, n_out, bad_id2);
    for (size_t i = 0, shown = 0; i < n_sc && shown < 4; i++)
        if (memcmp(&s1[i], &s2[i], 4) != 0) {
            printf("    score %zu: cpu %.9g (%a) gpu %.9g (%a)\n", i, s1[i], s1[i], s2[i], s2[i]);
            shown++;
        }
    printf("  %-44s %d requests, %zu scores, %zu ids: %zu + %zu differ\n", what, n_reqs, n_sc, n_out, bad_sc, bad_id + bad_id2);
    free(o1);
    free(o2);
    free(o3);
    free(s1);
    free(s2);
}

/* code_bits 1: 1-bit key codes, whose float steps are exact on this data (weights q (kmax - kmin)
 * on a grid of 1/64), so the scores must be bit-equal too; groups of 4 make n-tiles of up to 16
 * queries, and the small requests put several requests into one warp of the tensor-core kernel */
static void test_select_batched(int code_bits)
{
    const int hb = 600, bs = 8, nkv = 4, group = code_bits ? 4 : 2, hd = 64, nh = nkv * group, n_q = 64, layer = 1;
    struct kvpair p;
    kv_code_bits = code_bits;
    kv_make(&p, 2, hb, 0, hb, 0, bs, nkv, hd);
    kv_code_bits = 0;
    if (!p.c || !p.g)
        return;
    kv_fill_exact(&p);
    float *q = malloc(sizeof(float) * (size_t)n_q * nh * hd);
    for (size_t i = 0; i < (size_t)n_q * nh * hd; i++)
        q[i] = (float)rint_in(-8, 8) / 8.0f;
    okv_bmem *qc = up(cpu, q, (size_t)n_q * nh * hd), *qg = up(gpu, q, (size_t)n_q * nh * hd);
    enum { MAXR = 48 };
    struct okv_select_req reqs[MAXR];
    int32_t *rows = malloc(4 * MAXR * 4), *cand = malloc(4 * (size_t)(MAXR * hb + 2 * 20000 + 9000));
    /* call 1: requests of every size, distinct candidates, k from 0 to n_cand */
    int at = 0, n_reqs = MAXR;
    for (int r = 0; r < n_reqs; r++) {
        const int kind = r % 6;
        int nc = kind == 0 ? rint_in(1, 8) : kind == 1 ? rint_in(50, 300) : kind == 2 ? hb : rint_in(1, hb);
        if (r == 7)
            nc = 0;
        int nr = rint_in(1, 4);
        for (int i = 0; i < nr; i++)
            rows[r * 4 + i] = rint_in(0, n_q - 1);
        int32_t *c = cand + at;
        for (int i = 0; i < hb; i++)
            c[i] = i;
        for (int i = hb - 1; i > 0; i--) {
            int j = rint_in(0, i), t = c[i];
            c[i] = c[j];
            c[j] = t;
        }
        const int k = nc == 0 ? 0 : kind == 3 ? nc : kind == 4 ? 1 : rint_in(0, nc);
        reqs[r] = (struct okv_select_req){rows + r * 4, nr, c, nc, k};
        at += nc;
    }
    select_compare(&p, layer, qc, qg, nh, reqs, n_reqs, code_bits ? "select batched (exact data, 1-bit codes)" : "select batched (exact data)");
    /* call 2: segments past the shared-memory staging (read from L2), repeated
     * candidates, a k past the GPU sort (host fallback), mixed with small ones */
    at = 0;
    const int big[][2] = {{20000, 300}, {9000, 5000}, {17000, 17000}, {40, 40}, {600, 123}, {1, 1}};
    n_reqs = (int)(sizeof big / sizeof big[0]);
    for (int r = 0; r < n_reqs; r++) {
        const int nc = big[r][0];
        for (int i = 0; i < nc; i++)
            cand[at + i] = nc <= hb ? (i * 7919 + r) % hb : rint_in(0, hb - 1);
        rows[r * 4] = rint_in(0, n_q - 1);
        reqs[r] = (struct okv_select_req){rows + r * 4, 1, cand + at, nc, big[r][1]};
        at += nc;
    }
    select_compare(&p, layer, qc, qg, nh, reqs, n_reqs, code_bits ? "select: 20000/9000/17000 candidates, codes" : "select: 20000/9000/17000 candidates");
    /* bad input is refused */
    int32_t o[64];
    reqs[0] = (struct okv_select_req){rows, 1, cand, 4, 5};
    CHECK(gpu->ops->select_blocks(gpu, p.g, layer, qg, nh, reqs, 1, o, NULL) == OKV_ERR_INVALID_ARG, "k > n_cand accepted");
    cand[2] = hb;
    reqs[0].k = 2;
    CHECK(gpu->ops->select_blocks(gpu, p.g, layer, qg, nh, reqs, 1, o, NULL) == OKV_ERR_INVALID_ARG, "bad host block accepted");
    cpu->ops->mem_free(cpu, qc);
    gpu->ops->mem_free(gpu, qg);
    free(q);
    free(rows);
    free(cand);
    kv_drop(&p);
}

/* Time per batched call (wall clock, the call synchronises): n_reqs requests of one row
 * and n_cand distinct candidates each, k kept per KV head. */
static void select_perf(okv_bkv *kv, const struct okv_kv_geometry *g, okv_bmem *qg, int nh, int n_reqs, int n_cand, int k)
{
    struct okv_select_req *reqs = malloc(sizeof *reqs * (size_t)n_reqs);
    int32_t *rows = malloc(4 * (size_t)n_reqs), *cand = malloc(4 * (size_t)n_reqs * n_cand),
            *out = malloc(4 * (size_t)n_reqs * g->n_kv_heads * k);
    int32_t *perm = malloc(4 * (size_t)g->n_host_blocks);
    for (int i = 0; i < g->n_host_blocks; i++)
        perm[i] = i;
    for (int r = 0; r < n_reqs; r++) {
        for (int i = 0; i < n_cand; i++) {   /* a partial shuffle: n_cand distinct blocks */
            int j = rint_in(i, g->n_host_blocks - 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            cand[(size_t)r * n_cand + i] = perm[i];
        }
        rows[r] = r % 64;
        reqs[r] = (struct okv_select_req){rows + r, 1, cand + (size_t)r * n_cand, n_cand, k};
    }
    enum okv_status st = OKV_OK;
    for (int i = 0; i < 3 && st == OKV_OK; i++)
        st = gpu->ops->select_blocks(gpu, kv, 0, qg, nh, reqs, n_reqs, out, NULL);
    const int iters = 20;
    double t0 = now_s();
    for (int i = 0; i < iters && st == OKV_OK; i++)
        st = gpu->ops->select_blocks(gpu, kv, 0, qg, nh, reqs, n_reqs, out, NULL);
    const double dt = (now_s() - t0) / iters;
    CHECK(st == OKV_OK, "select perf: %s", okv_last_error());
    /* bf16 summaries, and the key codes when there are */
    const double bytes = (double)n_reqs * n_cand * g->n_kv_heads * (2.0 * g->head_dim * 2 + (double)okv_key_code_bytes(g));
    printf("  select perf%s: %d requests x %d KV heads x %d candidates, k %d, bs %d hd %d: %.1f us per call "
           "(summaries%s %.0f MB: %.2f TB/s)\n", g->key_code_bits == 2 ? " (2-bit key codes)" : g->key_code_bits ? " (key codes)" : "",
           n_reqs, g->n_kv_heads, n_cand, k, g->block_size, g->head_dim, dt * 1e6, g->key_code_bits ? " + codes" : "",
           bytes / 1e6, bytes / dt / 1e12);
    free(reqs);
    free(rows);
    free(cand);
    free(out);
    free(perm);
}

static void select_perf_geometry(int bs, int bits)
{
    struct okv_kv_geometry g = {.n_layers = 1, .n_group_slots = 1, .n_sparse_units = 0, .n_host_blocks = 16384,
                                .n_stage_units = 0, .block_size = bs, .n_kv_heads = 8, .head_dim = 128, .key_code_bits = bits};
    okv_bkv *kv = NULL;
    if (gpu->ops->kv_alloc(gpu, &g, &kv) != OKV_OK) {
        printf("  select perf: skipped (%s)\n", okv_last_error());
        return;
    }
    for (int b = 0; b < g.n_host_blocks; b++)
        CHECK(gpu->ops->kv_host_randomize(gpu, kv, b, 1234, 1.0f) == OKV_OK, "%s", okv_last_error());
    const int nh = 32;
    float *q = rand_vec((size_t)64 * nh * g.head_dim, 1.0f, false);
    okv_bmem *qg = up(gpu, q, (size_t)64 * nh * g.head_dim);
    select_perf(kv, &g, qg, nh, 64, 2000, 123);
    select_perf(kv, &g, qg, nh, 256, 4000, 123);
    if (!bits) {   /* the same by quest_lane_k and quest_k, the kernels before quest_coop_k */
        setenv("OKV_QUEST_COOP", "0", 1);
        printf("  (quest_lane_k, OKV_QUEST_COOP=0:)\n");
        select_perf(kv, &g, qg, nh, 64, 2000, 123);
        select_perf(kv, &g, qg, nh, 256, 4000, 123);
        setenv("OKV_QUEST_LANE", "0", 1);
        printf("  (quest_k, OKV_QUEST_COOP=0 OKV_QUEST_LANE=0:)\n");
        select_perf(kv, &g, qg, nh, 64, 2000, 123);
        unsetenv("OKV_QUEST_LANE");
        unsetenv("OKV_QUEST_COOP");
    }
    if (bits && okv_cuda_codes_mma_fits(&g)) {   /* the same by codes_k, the kernel before the tensor-core one */
        setenv("OKV_CODES_MMA", "0", 1);
        printf("  (codes_k, OKV_CODES_MMA=0:)\n");
        select_perf(kv, &g, qg, nh, 64, 2000, 123);
        select_perf(kv, &g, qg, nh, 256, 4000, 123);
        unsetenv("OKV_CODES_MMA");
    }
    gpu->ops->mem_free(gpu, qg);
    free(q);
    gpu->ops->kv_free(gpu, kv);
}

/* Quest's bound with 8-token blocks (the earlier figures), then both scorings with 16-token
 * blocks (the engine's default) */
static void test_select_perf(void)
{
    if (getenv("OKV_TEST_QUICK"))   /* e.g. under compute-sanitizer */
        return;
    const int cfg[][2] = {{8, 0}, {16, 0}, {16, 2}};   /* block size, code bits */
    for (int i = 0; i < 3; i++)
        select_perf_geometry(cfg[i][0], cfg[i][1]);
}

/* Sampling against okv_sample_u. Greedy rows on logits with many ties (lowest id);
 * sampled rows on distinct, well-separated logits (a random permutation of a grid
 * spanning 30 / temperature nats), over a grid of temperature, top_k, top_p and u. */
static void test_sample(void)
{
    const int vocabs[] = {1000, 32000, 128256, 151936};
    const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
    const int top_ks[] = {0, 1, 5, 50, 1000};
    const float top_ps[] = {0.0f, 0.5f, 0.9f, 0.99f, 1.0f};
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const int V = vocabs[vi];
        const int n_rows = V <= 32000 ? 300 : 100;
        float *lg = malloc(sizeof(float) * (size_t)n_rows * V), *scratch = malloc(sizeof(float) * (size_t)V);
        int32_t *perm = malloc(4 * (size_t)V), *o1 = malloc(4 * (size_t)n_rows), *o2 = malloc(4 * (size_t)n_rows);
        struct okv_sampling *prm = calloc((size_t)n_rows, sizeof *prm);
        double *u = malloc(sizeof(double) * (size_t)n_rows);
        for (int r = 0; r < n_rows; r++) {
            float *x = lg + (size_t)r * V;
            const bool greedy = r % 5 == 0;
            if (greedy) {
                for (int i = 0; i < V; i++)
                    x[i] = (float)rint_in(0, 40) * 0.25f - 5.0f;   /* many ties at the max */
                prm[r].temperature = r % 10 == 0 ? 0.0f : -1.0f;
                prm[r].top_k = rint_in(0, 3);
                prm[r].top_p = 0.5f;
            } else {
                const int c = r / 5 * 4 + r % 5 - 1;   /* the grid, then random points */
                const int n_grid = 4 * 5 * 5;
                prm[r].temperature = temps[(c < n_grid ? c : rint_in(0, 99)) % 4];
                prm[r].top_k = c < n_grid ? top_ks[(c / 4) % 5] : rint_in(0, 3000);
                prm[r].top_p = c < n_grid ? top_ps[(c / 20) % 5] : (float)rint_in(1, 1000) / 1000.0f;
                for (int i = 0; i < V; i++)
                    perm[i] = i;
                for (int i = V - 1; i > 0; i--) {
                    int j = rint_in(0, i), t = perm[i];
                    perm[i] = perm[j];
                    perm[j] = t;
                }
                const float span = 30.0f * prm[r].temperature, off = (float)rint_in(-20, 20);
                for (int i = 0; i < V; i++)
                    x[i] = off - span + span * (float)perm[i] / (float)V;
            }
            const int ui = rint_in(0, 9);
            u[r] = ui == 0 ? 0.0 : ui == 1 ? 0.999999 : (double)(rnd() & 0xffffff) / 16777216.0;
        }
        for (int r = 0; r < n_rows; r++)
            o1[r] = okv_sample_u(lg + (size_t)r * V, V, &prm[r], u[r], scratch);
        okv_bmem *lc = up(cpu, lg, (size_t)n_rows * V), *lgp = up(gpu, lg, (size_t)n_rows * V);
        for (int r = 0; r < n_rows; r++)
            o2[r] = -7;
        BOTH(OKV_OK, gpu->ops->sample(gpu, lgp, n_rows, V, prm, u, o2));
        int bad_g = 0, bad_s = 0, n_g = 0;
        for (int r = 0; r < n_rows; r++) {
            const bool greedy = prm[r].temperature <= 0.0f;
            n_g += greedy;
            if (o1[r] != o2[r]) {
                if (greedy)
                    bad_g++;
                else
                    bad_s++;
                if (bad_g + bad_s <= 5)
                    fprintf(stderr, "  sample vocab %d row %d (T %g, top_k %d, top_p %g, u %.6f): cpu %d gpu %d\n", V, r,
                            prm[r].temperature, prm[r].top_k, prm[r].top_p, u[r], o1[r], o2[r]);
            }
        }
        /* the CPU backend's op is the same reference */
        int32_t *o3 = malloc(4 * (size_t)n_rows);
        BOTH(cpu->ops->sample(cpu, lc, n_rows, V, prm, u, o3), OKV_OK);
        CHECK(memcmp(o1, o3, 4 * (size_t)n_rows) == 0, "cpu sample op differs from okv_sample_u");
        CHECK(bad_g == 0 && bad_s == 0, "sample vocab %d: %d/%d greedy and %d/%d sampled rows differ", V, bad_g, n_g, bad_s,
              n_rows - n_g);
        printf("  %-44s %d greedy + %d sampled rows: %d + %d differ\n", "sample vs okv_sample_u", n_g, n_rows - n_g, bad_g,
               bad_s);
        if (V == 128256 && !getenv("OKV_TEST_QUICK")) {   /* time: 64 rows, four settings */
            const struct okv_sampling sets[] = {{0.0f, 0, 1.0f, 0, 0.0f}, {0.8f, 0, 1.0f, 0, 0.0f}, {0.8f, 50, 0.9f, 0, 0.0f}, {0.8f, 0, 0.9f, 0, 0.0f}};
            for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
                struct okv_sampling ps[64];
                for (int i = 0; i < 64; i++)
                    ps[i] = sets[si];
                enum okv_status st = gpu->ops->sample(gpu, lgp, 64, V, ps, u, o2);
                const int iters = 20;
                double t0 = now_s();
                for (int i = 0; i < iters && st == OKV_OK; i++)
                    st = gpu->ops->sample(gpu, lgp, 64, V, ps, u, o2);
                CHECK(st == OKV_OK, "%s", okv_last_error());
                printf("  sample perf: 64 rows x %d vocab, T %.1f top_k %d top_p %.2f: %.1f us per call\n", V, ps[0].temperature,
                       ps[0].top_k, ps[0].top_p, (now_s() - t0) / iters * 1e6);
            }
        }
        cpu->ops->mem_free(cpu, lc);
        gpu->ops->mem_free(gpu, lgp);
        free(o3);
        free(lg);
        free(scratch);
        free(perm);
        free(o1);
        free(o2);
        free(prm);
        free(u);
    }
}

static void test_errors(void)
{
    okv_bmem *m = NULL;
    enum okv_status st = gpu->ops->mem_alloc(gpu, (size_t)1 << 42, &m);   /* 16 TiB */
    CHECK(st == OKV_ERR_NO_MEMORY && !m, "huge mem_alloc: %d", st);
    printf("  huge allocation: %s\n", okv_last_error());
    struct okv_kv_geometry g = {.n_layers = 64, .n_group_slots = 1 << 20, .block_size = 256, .n_kv_heads = 8, .head_dim = 128};
    okv_bkv *kv = NULL;
    st = gpu->ops->kv_alloc(gpu, &g, &kv);
    CHECK(st == OKV_ERR_NO_MEMORY && !kv, "huge kv_alloc: %d", st);
    printf("  huge KV: %s\n", okv_last_error());
    g.head_dim = 12;
    g.n_group_slots = 4;
    CHECK(gpu->ops->kv_alloc(gpu, &g, &kv) == OKV_ERR_UNSUPPORTED, "head_dim 12 must be refused");
}

int main(void)
{
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0) {
        printf("test_cuda_ops: skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    const char *seed_env = getenv("OKV_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    rng_state = seed ? seed : 88172645463325252ull;
    printf("test_cuda_ops: seed %llu (OKV_TEST_SEED repeats it)\n", (unsigned long long)seed);
    struct okv_backend_params bp = {.n_threads = 4};
    /* OKV_PREFILL_KERNEL is read when a CUDA backend is created: `gpu` with it 0 (the
     * decode kernels only), gpu_pf[] with it on (the caller's value is restored afterwards) */
    static const char *const pf_var[5] = {"OKV_PREFILL_KERNEL", "OKV_PREFILL_WARP_ROWS", "OKV_PREFILL_SPLIT",
                                          "OKV_PREFILL_WGMMA", "OKV_PREFILL_WS"};
    char *pf_saved[5];
    for (int v = 0; v < 5; v++) {
        const char *e = getenv(pf_var[v]);
        pf_saved[v] = e ? strdup(e) : NULL;
        unsetenv(pf_var[v]);
    }
    setenv("OKV_PREFILL_KERNEL", "0", 1);
    bool ok = okv_backend_cpu_create(&bp, &cpu) == OKV_OK && okv_backend_create("cuda", &bp, &gpu) == OKV_OK;
    const char *pf_env[N_PF][5] = {{"1", "16", NULL, NULL, NULL},  {"128", "16", NULL, NULL, NULL},
                                   {"128", "32", NULL, NULL, NULL}, {"256", "32", NULL, NULL, NULL},
                                   {NULL, NULL, NULL, NULL, NULL},  {NULL, NULL, "3", NULL, NULL},
                                   {NULL, NULL, NULL, "1", NULL},   {NULL, NULL, NULL, "0", NULL},
                                   {NULL, NULL, "3", "0", NULL},    {"256", "32", "3", NULL, NULL},
                                   {NULL, NULL, NULL, NULL, "0"},   {NULL, NULL, "3", NULL, "0"},
                                   {NULL, NULL, NULL, NULL, "1"},   {NULL, NULL, NULL, NULL, "2"},
                                   {NULL, NULL, "3", NULL, "2"}};
    for (int i = 0; i < N_PF; i++) {
        for (int v = 0; v < 5; v++)
            if (pf_env[i][v])
                setenv(pf_var[v], pf_env[i][v], 1);
            else
                unsetenv(pf_var[v]);
        ok = ok && okv_backend_create("cuda", &bp, &gpu_pf[i]) == OKV_OK;
    }
    for (int v = 0; v < 5; v++) {
        if (pf_saved[v])
            setenv(pf_var[v], pf_saved[v], 1);
        else
            unsetenv(pf_var[v]);
        free(pf_saved[v]);
    }
    if (!ok) {
        fprintf(stderr, "backend: %s\n", okv_last_error());
        return 1;
    }
    /* OKV_TEST_ONLY=name[,name]: only the tests whose names contain one (e.g. select_perf under a profiler) */
    const char *only = getenv("OKV_TEST_ONLY");
#define RUN(name, call)                                                                                                    \
    do {                                                                                                                   \
        if (!only || strstr(only, name))                                                                                   \
            call;                                                                                                          \
    } while (0)
    RUN("rows", test_rows());
    RUN("matmul", test_matmul());
    RUN("fused", test_fused());
    RUN("e4m3", test_e4m3());
    RUN("kv", test_kv(false));
    RUN("kv", test_kv(true));
    RUN("attention", test_attention());
    RUN("prefill", test_prefill());
    RUN("select_batched", test_select_batched(0));
    RUN("select_batched", test_select_batched(1));
    RUN("select_perf", test_select_perf());
    RUN("sample", test_sample());
    RUN("errors", test_errors());
#undef RUN
    okv_backend_free(cpu);
    okv_backend_free(gpu);
    for (int i = 0; i < N_PF; i++)
        okv_backend_free(gpu_pf[i]);
    CHECK(okv_alloc_live_count(OKV_TAG_KV) == 0, "KV allocations leaked");
    CHECK(okv_alloc_live_count(OKV_TAG_BACKEND) == 0, "backend allocations leaked");
    return tu_finish("test_cuda_ops");
}
