/* label: unit */
/* Decode-shaped projections from a weight's stored format (src/backend/cpu/cpu_qgemv.c):
 * for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16 and BF16 weights of random content
 * (Q2_K and Q3_K too, which take the fp32 path), 1 to 5 rows, with and
 * without a bias, the CPU backend's matmul must equal a double-precision dot product
 * with the weight's dequantised values (okv_tensor_to_f32) within 2e-6 of the row's scale,
 * on the stored-format path (1-4 rows in one pass, 5 in two) and the fp32 path
 * (OKV_CPU_QGEMV=0). */
#include "backend/cpu/cpu_internal.h"
#include "oasiskv/backend.h"
#include "oasiskv/tensor.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

/* an f16 near 2^e (random mantissa) */
static uint16_t f16_near(int e) { return (uint16_t)(((e + 15) << 10) | (rnd() & 0x3FF) | (rnd() & 1 ? 0x8000 : 0)); }

static void fill(enum okv_dtype t, uint8_t *p, int64_t n)
{
    const int64_t nb = n / 32;
    switch (t) {
    case OKV_DTYPE_Q8_0:
        for (int64_t b = 0; b < nb; b++, p += 34) {
            uint16_t d = f16_near(-7) & 0x7FFF;
            memcpy(p, &d, 2);
            for (int j = 0; j < 32; j++)
                p[2 + j] = (uint8_t)rnd();
        }
        break;
    case OKV_DTYPE_Q4_0:
        for (int64_t b = 0; b < nb; b++, p += 18) {
            uint16_t d = f16_near(-4) & 0x7FFF;
            memcpy(p, &d, 2);
            for (int j = 0; j < 16; j++)
                p[2 + j] = (uint8_t)rnd();
        }
        break;
    case OKV_DTYPE_Q4_1:
        for (int64_t b = 0; b < nb; b++, p += 20) {
            uint16_t d = f16_near(-5) & 0x7FFF, m = f16_near(-2);
            memcpy(p, &d, 2);
            memcpy(p + 2, &m, 2);
            for (int j = 0; j < 16; j++)
                p[4 + j] = (uint8_t)rnd();
        }
        break;
    case OKV_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = f16_near((int)(rnd() % 6) - 6);
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    case OKV_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(((127 - 1 - (int)(rnd() % 6)) << 7) | (rnd() & 0x7F) | (rnd() & 1 ? 0x8000 : 0));
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    default: {
        /* the other block formats: random bytes, their fp16 scale (and min) fields set to
         * random finite values; offsets as in src/model/tensor.c */
        const int64_t bk = okv_dtype_block(t);
        const size_t bb = okv_dtype_nbytes(t, bk);
        int offs[2] = {-1, -1};
        switch (t) {
        case OKV_DTYPE_Q5_0: offs[0] = 0; break;
        case OKV_DTYPE_Q5_1: case OKV_DTYPE_Q4_K: case OKV_DTYPE_Q5_K: offs[0] = 0, offs[1] = 2; break;
        case OKV_DTYPE_Q2_K: offs[0] = 80, offs[1] = 82; break;
        case OKV_DTYPE_Q3_K: offs[0] = 108; break;
        case OKV_DTYPE_Q6_K: offs[0] = 208; break;
        default: break;
        }
        for (int64_t b = 0; b < n / bk; b++, p += bb) {
            for (size_t j = 0; j < bb; j++)
                p[j] = (uint8_t)rnd();
            for (int i = 0; i < 2; i++)
                if (offs[i] >= 0) {
                    uint16_t h = f16_near(bk == 32 ? -5 : -8);
                    memcpy(p + offs[i], &h, 2);
                }
        }
        break;
    }
    }
}

static void run(okv_backend *be, const char *label, bool want_q)
{
    const enum okv_dtype types[] = {OKV_DTYPE_Q8_0, OKV_DTYPE_Q4_0, OKV_DTYPE_Q4_1, OKV_DTYPE_Q5_0, OKV_DTYPE_Q5_1,
                                    OKV_DTYPE_Q2_K, OKV_DTYPE_Q3_K, OKV_DTYPE_Q4_K, OKV_DTYPE_Q5_K, OKV_DTYPE_Q6_K,
                                    OKV_DTYPE_F16,  OKV_DTYPE_BF16};
    const int shapes[][2] = {{576, 37}, {1536, 64}, {64, 5}, {32, 3}};   /* k, m */
    const int shapes_k[][2] = {{768, 37}, {1536, 64}, {256, 5}, {512, 3}};   /* 256-element blocks */
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const enum okv_dtype t = types[ti];
            const bool kq = okv_dtype_block(t) == 256;
            const int k = kq ? shapes_k[si][0] : shapes[si][0], m = kq ? shapes_k[si][1] : shapes[si][1];
            const size_t nbytes = okv_dtype_nbytes(t, (int64_t)k * m);
            uint8_t *raw = malloc(nbytes);
            fill(t, raw, (int64_t)k * m);
            struct okv_tensor_view v = {.dtype = t, .n_dims = 2, .ne = {k, m, 1, 1}, .data = raw, .nbytes = nbytes};
            snprintf(v.name, sizeof v.name, "w_%s_%dx%d", okv_dtype_name(t), m, k);
            float *wf = malloc(sizeof(float) * (size_t)k * m);
            CHECK(okv_tensor_to_f32(&v, 0, (int64_t)k * m, wf) == OKV_OK, "%s", okv_last_error());
            okv_bweight *w = NULL, *bias = NULL;
            CHECK(be->ops->weight_load(be, &v, &w) == OKV_OK, "weight_load: %s", okv_last_error());
            if (!w)
                return;
            const bool kept = want_q && okv_cpu_qgemv_type(t);
            CHECK((w->q != NULL) == kept, "%s %s: stored format kept %d (want %d)", label, v.name, w->q != NULL, kept);
            float *bv = malloc(sizeof(float) * (size_t)m);
            for (int r = 0; r < m; r++)
                bv[r] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
            struct okv_tensor_view bt = {.dtype = OKV_DTYPE_F32, .n_dims = 1, .ne = {m, 1, 1, 1}, .data = bv,
                                         .nbytes = sizeof(float) * (size_t)m};
            snprintf(bt.name, sizeof bt.name, "bias");
            CHECK(be->ops->weight_load(be, &bt, &bias) == OKV_OK, "%s", okv_last_error());
            for (int n = 1; n <= 5; n++)
                for (int wb = 0; wb < 2; wb++) {
                    float *x = malloc(sizeof(float) * (size_t)n * k), *o = malloc(sizeof(float) * (size_t)n * m);
                    for (int i = 0; i < n * k; i++)
                        x[i] = (float)((int)(rnd() % 2001) - 1000) / 500.0f;
                    okv_bmem *xm = NULL, *om = NULL;
                    CHECK(be->ops->mem_alloc(be, (size_t)n * k, &xm) == OKV_OK && be->ops->mem_alloc(be, (size_t)n * m, &om) == OKV_OK,
                          "alloc");
                    be->ops->mem_write(be, xm, 0, x, (size_t)n * k);
                    CHECK(be->ops->matmul(be, om, xm, w, wb ? bias : NULL, n, k, m) == OKV_OK, "matmul: %s", okv_last_error());
                    be->ops->mem_read(be, om, 0, o, (size_t)n * m);
                    double worst = 0;
                    for (int t2 = 0; t2 < n; t2++)
                        for (int r = 0; r < m; r++) {
                            double ref = wb ? bv[r] : 0, scale = 0;
                            for (int i = 0; i < k; i++) {
                                ref += (double)x[(size_t)t2 * k + i] * wf[(size_t)r * k + i];
                                scale += fabs((double)x[(size_t)t2 * k + i] * wf[(size_t)r * k + i]);
                            }
                            const double err = fabs(o[(size_t)t2 * m + r] - ref) / (scale + 1e-30);
                            worst = err > worst ? err : worst;
                        }
                    CHECK(worst <= 2e-6, "%s %s, %d rows%s: error %.3g of the row's scale", label, v.name, n,
                          wb ? " + bias" : "", worst);
                    be->ops->mem_free(be, xm);
                    be->ops->mem_free(be, om);
                    free(x);
                    free(o);
                }
            be->ops->weight_free(be, w);
            be->ops->weight_free(be, bias);
            free(bv);
            free(wf);
            free(raw);
        }
    printf("  %s: %s weights, 1-5 rows, against dequantised doubles\n", label, want_q ? "stored-format" : "fp32");
}

int main(void)
{
    struct okv_backend_params bp = {.n_threads = 2};
    okv_backend *be = NULL;
    unsetenv("OKV_CPU_QGEMV");
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    run(be, "default", true);
    okv_backend_free(be);
    setenv("OKV_CPU_QGEMV", "0", 1);
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    run(be, "OKV_CPU_QGEMV=0", false);
    okv_backend_free(be);
    unsetenv("OKV_CPU_QGEMV");
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_cpu_qgemv");
}
