/* label: unit */
/* Model loading tests: dtype conversion against hand-built blocks, fp16/bf16 round
 * trips, synthetic GGUF files and Hugging Face folders written here and loaded back,
 * corrupt inputs (every prefix of a file, bad magic, version, counts, offsets,
 * shapes, types, configs), and, when present, the real SmolLM2-135M GGUF checked
 * against values from the Python `gguf` package (tests/py/model_ref_values.py).
 * Exit 0 on success, 1 on failure. */
#define _GNU_SOURCE
#include "oasiskv/gguf.h"
#include "oasiskv/model.h"
#include "oasiskv/tensor.h"

#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_checks, g_fails;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        g_checks++;                                                             \
        if (!(cond)) {                                                          \
            g_fails++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

/* An expected failure: the right status and a non-empty message. */
#define CHECK_ERR(st, want, what)                                                                  \
    do {                                                                                           \
        enum okv_status st_ = (st);                                                                \
        CHECK(st_ == (want) && okv_last_error()[0], "%s: got %d (%s) '%s', want %d", what, (int)st_, \
              okv_status_str(st_), okv_last_error(), (int)(want));                                 \
    } while (0)

#define CHECK_MSG(sub, what) \
    CHECK(strstr(okv_last_error(), sub) != NULL, "%s: message '%s' lacks '%s'", what, okv_last_error(), sub)

static char g_tmp[256];

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void)   /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static void tmp_path(char *out, size_t cap, const char *fmt, ...)
{
    char name[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    snprintf(out, cap, "%s/%s", g_tmp, name);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    if (n && fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* ---------------------------------------------------------------- byte buffer */

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void b_put(struct buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(1);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b_u32(struct buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(struct buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(struct buf *b, const char *s)
{
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_pad(struct buf *b, size_t align)
{
    static const uint8_t z[64];
    while (b->n % align)
        b_put(b, z, 1);
}

/* ---------------------------------------------------------------- quantizers */

static uint16_t h16(float f) { return okv_f32_to_fp16(f); }
static float f16(uint16_t h) { return okv_fp16_to_f32(h); }

/* Encode n floats as dtype t into out (allocated); returns the tolerance of a
 * dequantized value against the original. */
static size_t encode(enum okv_dtype t, const float *x, int64_t n, uint8_t **out, float *tol)
{
    size_t nb = okv_dtype_nbytes(t, n);
    uint8_t *p = calloc(1, nb + 1);
    *out = p;
    *tol = 0;
    switch (t) {
    case OKV_DTYPE_F32: memcpy(p, x, (size_t)n * 4); break;
    case OKV_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = h16(x[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        *tol = 1e-3f;
        break;
    case OKV_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = okv_f32_to_bf16(x[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        *tol = 8e-3f;
        break;
    case OKV_DTYPE_Q8_0:
    case OKV_DTYPE_Q4_0:
    case OKV_DTYPE_Q4_1:
        for (int64_t b = 0; b < n / 32; b++) {
            const float *xb = x + 32 * b;
            float mn = xb[0], mx = xb[0], amax = 0;
            for (int j = 0; j < 32; j++) {
                mn = fminf(mn, xb[j]);
                mx = fmaxf(mx, xb[j]);
                amax = fmaxf(amax, fabsf(xb[j]));
            }
            if (t == OKV_DTYPE_Q8_0) {
                uint16_t dh = h16(amax / 127);
                float d = f16(dh), id = d ? 1 / d : 0;
                uint8_t *blk = p + 34 * b;
                memcpy(blk, &dh, 2);
                for (int j = 0; j < 32; j++) {
                    long q = lroundf(xb[j] * id);
                    blk[2 + j] = (uint8_t)(int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
                }
                *tol = fmaxf(*tol, d * 0.6f + 1e-6f);
            } else if (t == OKV_DTYPE_Q4_0) {
                uint16_t dh = h16(amax / 7);
                float d = f16(dh), id = d ? 1 / d : 0;
                uint8_t *blk = p + 18 * b;
                memcpy(blk, &dh, 2);
                for (int j = 0; j < 16; j++) {
                    long q0 = lroundf(xb[j] * id) + 8, q1 = lroundf(xb[j + 16] * id) + 8;
                    q0 = q0 < 0 ? 0 : q0 > 15 ? 15 : q0;
                    q1 = q1 < 0 ? 0 : q1 > 15 ? 15 : q1;
                    blk[2 + j] = (uint8_t)(q0 | (q1 << 4));
                }
                *tol = fmaxf(*tol, d * 0.6f + 1e-6f);
            } else {
                uint16_t dh = h16((mx - mn) / 15), mh = h16(mn);
                float d = f16(dh), m = f16(mh), id = d ? 1 / d : 0;
                uint8_t *blk = p + 20 * b;
                memcpy(blk, &dh, 2);
                memcpy(blk + 2, &mh, 2);
                for (int j = 0; j < 16; j++) {
                    long q0 = lroundf((xb[j] - m) * id), q1 = lroundf((xb[j + 16] - m) * id);
                    q0 = q0 < 0 ? 0 : q0 > 15 ? 15 : q0;
                    q1 = q1 < 0 ? 0 : q1 > 15 ? 15 : q1;
                    blk[4 + j] = (uint8_t)(q0 | (q1 << 4));
                }
                *tol = fmaxf(*tol, d * 0.6f + 2e-3f);
            }
        }
        break;
    default: break;
    }
    return nb;
}

/* ---------------------------------------------------------------- dtype tests */

static void test_dtypes(void)
{
    CHECK(okv_dtype_nbytes(OKV_DTYPE_Q8_0, 64) == 68, "q8_0 bytes");
    CHECK(okv_dtype_nbytes(OKV_DTYPE_Q4_0, 64) == 36, "q4_0 bytes");
    CHECK(okv_dtype_nbytes(OKV_DTYPE_Q4_1, 64) == 40, "q4_1 bytes");
    CHECK(okv_dtype_nbytes(OKV_DTYPE_BF16, 3) == 6 && okv_dtype_nbytes(OKV_DTYPE_F32, 3) == 12, "plain bytes");
    CHECK(strcmp(okv_dtype_name(OKV_DTYPE_Q4_1), "q4_1") == 0, "name");

    /* Two blocks each, built by hand; the second block has other scales so that a
     * start offset of 32 is tested too. */
    uint8_t q8[68], q40[36], q41[40];
    float out[64];
    for (int b = 0; b < 2; b++) {
        uint16_t d = b ? 0x3C00 /* 1.0 */ : 0x3800 /* 0.5 */;
        memcpy(q8 + 34 * b, &d, 2);
        for (int j = 0; j < 32; j++)
            q8[34 * b + 2 + j] = (uint8_t)(int8_t)(j - 16);
        uint16_t d4 = b ? 0x4000 /* 2.0 */ : 0x3400 /* 0.25 */;
        memcpy(q40 + 18 * b, &d4, 2);
        for (int j = 0; j < 16; j++)
            q40[18 * b + 2 + j] = (uint8_t)(j | ((15 - j) << 4));
        uint16_t m = 0xBC00; /* -1.0 */
        memcpy(q41 + 20 * b, &d, 2);
        memcpy(q41 + 20 * b + 2, &m, 2);
        for (int j = 0; j < 16; j++)
            q41[20 * b + 4 + j] = (uint8_t)(j | ((15 - j) << 4));
    }
    struct okv_tensor_view v = {.name = "q8", .dtype = OKV_DTYPE_Q8_0, .n_dims = 1, .ne = {64, 1, 1, 1}, .data = q8, .nbytes = 68};
    CHECK(okv_tensor_to_f32(&v, 0, 64, out) == OKV_OK, "q8_0");
    int bad = 0;
    for (int i = 0; i < 64; i++)
        bad += out[i] != (float)((i % 32) - 16) * (i < 32 ? 0.5f : 1.0f);
    CHECK(!bad, "q8_0 values: %d wrong (out[1]=%g)", bad, out[1]);
    CHECK(okv_tensor_to_f32(&v, 32, 32, out) == OKV_OK && out[0] == -16.0f && out[31] == 15.0f, "q8_0 second block");
    CHECK_ERR(okv_tensor_to_f32(&v, 16, 32, out), OKV_ERR_INVALID_ARG, "q8_0 misaligned start");
    CHECK_ERR(okv_tensor_to_f32(&v, 32, 64, out), OKV_ERR_INVALID_ARG, "q8_0 past the end");

    v = (struct okv_tensor_view){.name = "q40", .dtype = OKV_DTYPE_Q4_0, .n_dims = 1, .ne = {64, 1, 1, 1}, .data = q40, .nbytes = 36};
    CHECK(okv_tensor_to_f32(&v, 0, 64, out) == OKV_OK, "q4_0");
    bad = 0;
    for (int i = 0; i < 64; i++) {
        int j = i % 32;
        float d = i < 32 ? 0.25f : 2.0f;
        float want = j < 16 ? (float)(j - 8) * d : (float)((15 - (j - 16)) - 8) * d;
        bad += out[i] != want;
    }
    CHECK(!bad, "q4_0 values: %d wrong", bad);

    v = (struct okv_tensor_view){.name = "q41", .dtype = OKV_DTYPE_Q4_1, .n_dims = 1, .ne = {64, 1, 1, 1}, .data = q41, .nbytes = 40};
    CHECK(okv_tensor_to_f32(&v, 0, 64, out) == OKV_OK, "q4_1");
    bad = 0;
    for (int i = 0; i < 64; i++) {
        int j = i % 32;
        float d = i < 32 ? 0.5f : 1.0f;
        float want = (float)(j < 16 ? j : 15 - (j - 16)) * d - 1.0f;
        bad += out[i] != want;
    }
    CHECK(!bad, "q4_1 values: %d wrong (out[0]=%g out[16]=%g)", bad, out[0], out[16]);

    uint16_t hf[5] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555};   /* 1, -2, 65504, 2^-24, 0.33325195 */
    float hwant[5] = {1.0f, -2.0f, 65504.0f, 5.9604645e-8f, 0.33325195f};
    v = (struct okv_tensor_view){.name = "f16", .dtype = OKV_DTYPE_F16, .n_dims = 1, .ne = {5, 1, 1, 1}, .data = hf, .nbytes = 10};
    CHECK(okv_tensor_to_f32(&v, 0, 5, out) == OKV_OK, "f16");
    for (int i = 0; i < 5; i++)
        CHECK(out[i] == hwant[i], "f16[%d] = %.9g, want %.9g", i, out[i], hwant[i]);
    /* A longer f16 run exercises the vector path and its tail. */
    uint16_t hl[37];
    for (int i = 0; i < 37; i++)
        hl[i] = h16((float)i * 0.125f - 2.0f);
    v = (struct okv_tensor_view){.name = "f16", .dtype = OKV_DTYPE_F16, .n_dims = 1, .ne = {37, 1, 1, 1}, .data = hl, .nbytes = 74};
    CHECK(okv_tensor_to_f32(&v, 1, 36, out) == OKV_OK, "f16 long");
    bad = 0;
    for (int i = 0; i < 36; i++)
        bad += out[i] != (float)(i + 1) * 0.125f - 2.0f;
    CHECK(!bad, "f16 long values: %d wrong", bad);

    uint16_t bf[3] = {0x3F80, 0xC040, 0x3DCD};   /* 1, -3, 0.10009765625 */
    v = (struct okv_tensor_view){.name = "bf16", .dtype = OKV_DTYPE_BF16, .n_dims = 1, .ne = {3, 1, 1, 1}, .data = bf, .nbytes = 6};
    CHECK(okv_tensor_to_f32(&v, 0, 3, out) == OKV_OK && out[0] == 1.0f && out[1] == -3.0f && out[2] == 0.10009765625f,
          "bf16 values %g %g %.9g", out[0], out[1], out[2]);
    float f3[3] = {1.5f, -0.25f, 3e38f};
    v = (struct okv_tensor_view){.name = "f32", .dtype = OKV_DTYPE_F32, .n_dims = 1, .ne = {3, 1, 1, 1}, .data = f3, .nbytes = 12};
    CHECK(okv_tensor_to_f32(&v, 1, 2, out) == OKV_OK && out[0] == -0.25f && out[1] == 3e38f, "f32 values");
}

static void test_half(void)
{
    /* Every finite fp16 and bf16 value survives f32 and back; NaNs stay NaN. */
    int bad16 = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = okv_fp16_to_f32((uint16_t)h);
        if (isnan(f))
            bad16 += !isnan(okv_fp16_to_f32(okv_f32_to_fp16(f)));
        else
            bad16 += okv_f32_to_fp16(f) != h;
        float g = okv_bf16_to_f32((uint16_t)h);
        if (isnan(g))
            badbf += !isnan(okv_bf16_to_f32(okv_f32_to_bf16(g)));
        else
            badbf += okv_f32_to_bf16(g) != h;
    }
    CHECK(!bad16, "fp16 round trip: %d values differ", bad16);
    CHECK(!badbf, "bf16 round trip: %d values differ", badbf);
    CHECK(okv_f32_to_fp16(1.0f) == 0x3C00 && okv_f32_to_fp16(65504.0f) == 0x7BFF && okv_f32_to_fp16(1e6f) == 0x7C00, "fp16 encode");
    CHECK(okv_f32_to_fp16(1.0f + 1.0f / 2048) == 0x3C00, "fp16 ties to even (down)");
    CHECK(okv_f32_to_fp16(1.0f + 3.0f / 2048) == 0x3C02, "fp16 ties to even (up)");
    CHECK(okv_f32_to_bf16(0.1f) == 0x3DCD && okv_f32_to_bf16(1.0f) == 0x3F80, "bf16 encode");
}

/* ---------------------------------------------------------------- GGUF writer */

struct gt {
    char name[96];
    uint32_t type;         /* ggml type */
    int n_dims;
    int64_t ne[4];
    uint8_t *data;
    size_t nbytes;
    float *x;              /* original values (NULL for hand-made data) */
    float tol;
};

struct gmodel {
    struct buf kv;
    uint64_t n_kv;
    struct gt t[80];
    int n_t;
};

static void kv_key(struct gmodel *g, const char *key, uint32_t type)
{
    b_str(&g->kv, key);
    b_u32(&g->kv, type);
    g->n_kv++;
}
static void kv_u32(struct gmodel *g, const char *key, uint32_t v) { kv_key(g, key, OKV_GGUF_TYPE_U32); b_u32(&g->kv, v); }
static void kv_u64(struct gmodel *g, const char *key, uint64_t v) { kv_key(g, key, OKV_GGUF_TYPE_U64); b_u64(&g->kv, v); }
static void kv_f32(struct gmodel *g, const char *key, float v) { kv_key(g, key, OKV_GGUF_TYPE_F32); b_put(&g->kv, &v, 4); }
static void kv_str(struct gmodel *g, const char *key, const char *v) { kv_key(g, key, OKV_GGUF_TYPE_STRING); b_str(&g->kv, v); }
static void kv_bool(struct gmodel *g, const char *key, bool v)
{
    kv_key(g, key, OKV_GGUF_TYPE_BOOL);
    uint8_t b = v;
    b_put(&g->kv, &b, 1);
}

static uint32_t ggml_of(enum okv_dtype t)
{
    static const uint32_t m[] = {[OKV_DTYPE_F32] = 0, [OKV_DTYPE_F16] = 1, [OKV_DTYPE_BF16] = 30,
                                 [OKV_DTYPE_Q8_0] = 8, [OKV_DTYPE_Q4_0] = 2, [OKV_DTYPE_Q4_1] = 3};
    return m[t];
}

static struct gt *add_t(struct gmodel *g, const char *name, enum okv_dtype t, int n_dims, int64_t ne0, int64_t ne1)
{
    struct gt *x = &g->t[g->n_t++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->type = ggml_of(t);
    x->n_dims = n_dims;
    x->ne[0] = ne0;
    x->ne[1] = ne1;
    x->ne[2] = x->ne[3] = 1;
    int64_t n = ne0 * ne1;
    x->x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x->x[i] = frand();
    x->nbytes = encode(t, x->x, n, &x->data, &x->tol);
    return x;
}

static struct gt *find_t(struct gmodel *g, const char *name)
{
    for (int i = 0; i < g->n_t; i++)
        if (strcmp(g->t[i].name, name) == 0)
            return &g->t[i];
    return NULL;
}

static void drop_t(struct gmodel *g, const char *name)
{
    struct gt *x = find_t(g, name);
    if (!x)
        return;
    free(x->data);
    free(x->x);
    *x = g->t[--g->n_t];
}

static void gmodel_free(struct gmodel *g)
{
    for (int i = 0; i < g->n_t; i++) {
        free(g->t[i].data);
        free(g->t[i].x);
    }
    free(g->kv.p);
    memset(g, 0, sizeof *g);
}

/* A corrupt file for the overlap checks: tensor g_overlap's data offset is written as the
 * previous tensor's (gguf_serialize, st_serialize); -1: none */
static int g_overlap = -1;

/* Serialise to out: header, kv, tensor infos, aligned data (no trailing padding). */
static void gguf_serialize(const struct gmodel *g, struct buf *out)
{
    b_u32(out, 0x46554747u);
    b_u32(out, 3);
    b_u64(out, (uint64_t)g->n_t);
    b_u64(out, g->n_kv);
    b_put(out, g->kv.p, g->kv.n);
    uint64_t off = 0, prev = 0;
    for (int i = 0; i < g->n_t; i++) {
        const struct gt *x = &g->t[i];
        b_str(out, x->name);
        b_u32(out, (uint32_t)x->n_dims);
        for (int d = 0; d < x->n_dims; d++)
            b_u64(out, (uint64_t)(d < 4 ? x->ne[d] : 1));
        b_u32(out, x->type);
        b_u64(out, i == g_overlap && i > 0 ? prev : off);
        prev = off;
        off += (x->nbytes + 31) / 32 * 32;
    }
    b_pad(out, 32);
    for (int i = 0; i < g->n_t; i++) {
        if (i)
            b_pad(out, 32);
        b_put(out, g->t[i].data, g->t[i].nbytes);
    }
}

static void gguf_write(const struct gmodel *g, const char *path)
{
    struct buf b = {0};
    gguf_serialize(g, &b);
    write_file(path, b.p, b.n);
    free(b.p);
}

struct tiny {
    const char *arch;
    int layers, dim, heads, kv_heads, head_dim, ffn, vocab, ctx;
    bool tied;
    enum okv_dtype embd, mat, norm;
};

static const struct tiny k_tiny = {"llama", 2, 64, 4, 2, 16, 96, 128, 256, false, OKV_DTYPE_Q8_0, OKV_DTYPE_F16, OKV_DTYPE_F32};

/* A tiny model with random weights: dtypes vary by tensor so each path is used. */
static void tiny_gguf(struct gmodel *g, const struct tiny *c)
{
    memset(g, 0, sizeof *g);
    char key[128];
    kv_str(g, "general.architecture", c->arch);
    kv_str(g, "general.name", "tiny test model");
#define AKEY(s) (snprintf(key, sizeof key, "%s.%s", c->arch, s), key)
    kv_u32(g, AKEY("block_count"), (uint32_t)c->layers);
    kv_u64(g, AKEY("context_length"), (uint64_t)c->ctx);
    kv_u32(g, AKEY("embedding_length"), (uint32_t)c->dim);
    kv_u32(g, AKEY("feed_forward_length"), (uint32_t)c->ffn);
    kv_u32(g, AKEY("attention.head_count"), (uint32_t)c->heads);
    kv_u32(g, AKEY("attention.head_count_kv"), (uint32_t)c->kv_heads);
    kv_f32(g, AKEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    kv_f32(g, AKEY("rope.freq_base"), 500000.0f);
    kv_u32(g, AKEY("rope.dimension_count"), (uint32_t)c->head_dim);
    if (c->head_dim != c->dim / c->heads)
        kv_u32(g, AKEY("attention.key_length"), (uint32_t)c->head_dim);
#undef AKEY
    /* Tokenizer-like arrays: strings, i32, and a nested array that must be skipped. */
    kv_key(g, "tokenizer.ggml.tokens", OKV_GGUF_TYPE_ARRAY);
    b_u32(&g->kv, OKV_GGUF_TYPE_STRING);
    b_u64(&g->kv, (uint64_t)c->vocab);
    for (int i = 0; i < c->vocab; i++) {
        char tok[32];
        snprintf(tok, sizeof tok, i == 5 ? "" : "tok%d", i);
        b_str(&g->kv, tok);
    }
    kv_key(g, "tokenizer.ggml.token_type", OKV_GGUF_TYPE_ARRAY);
    b_u32(&g->kv, OKV_GGUF_TYPE_I32);
    b_u64(&g->kv, (uint64_t)c->vocab);
    for (int i = 0; i < c->vocab; i++)
        b_u32(&g->kv, (uint32_t)(i < 3 ? 3 : 1));
    kv_key(g, "test.nested", OKV_GGUF_TYPE_ARRAY);
    b_u32(&g->kv, OKV_GGUF_TYPE_ARRAY);
    b_u64(&g->kv, 2);
    for (int i = 0; i < 2; i++) {
        b_u32(&g->kv, OKV_GGUF_TYPE_STRING);
        b_u64(&g->kv, 1);
        b_str(&g->kv, "x");
    }
    kv_bool(g, "tokenizer.ggml.add_bos_token", true);
    kv_u32(g, "general.alignment", 32);

    int q = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim;
    add_t(g, "token_embd.weight", c->embd, 2, c->dim, c->vocab);
    add_t(g, "output_norm.weight", c->norm, 1, c->dim, 1);
    if (!c->tied)
        add_t(g, "output.weight", OKV_DTYPE_Q4_0, 2, c->dim, c->vocab);
    bool qwen2 = strcmp(c->arch, "qwen2") == 0, qwen3 = strcmp(c->arch, "qwen3") == 0;
    for (int l = 0; l < c->layers; l++) {
        char n[96];
#define T(name, dt, nd, a, b) (snprintf(n, sizeof n, "blk.%d." name, l), add_t(g, n, dt, nd, a, b))
        T("attn_norm.weight", c->norm, 1, c->dim, 1);
        T("attn_q.weight", c->mat, 2, c->dim, q);
        T("attn_k.weight", OKV_DTYPE_Q4_0, 2, c->dim, kv);
        T("attn_v.weight", OKV_DTYPE_Q4_1, 2, c->dim, kv);
        T("attn_output.weight", OKV_DTYPE_F32, 2, q, c->dim);
        if (qwen2) {
            T("attn_q.bias", OKV_DTYPE_F32, 1, q, 1);
            T("attn_k.bias", OKV_DTYPE_F32, 1, kv, 1);
            T("attn_v.bias", OKV_DTYPE_F32, 1, kv, 1);
        }
        if (qwen3) {
            T("attn_q_norm.weight", OKV_DTYPE_F32, 1, c->head_dim, 1);
            T("attn_k_norm.weight", OKV_DTYPE_F32, 1, c->head_dim, 1);
        }
        T("ffn_norm.weight", c->norm, 1, c->dim, 1);
        T("ffn_gate.weight", OKV_DTYPE_BF16, 2, c->dim, c->ffn);
        T("ffn_up.weight", c->mat, 2, c->dim, c->ffn);
        T("ffn_down.weight", OKV_DTYPE_Q8_0, 2, c->ffn, c->dim);
#undef T
    }
}

/* Dequantize a view and compare with the writer's original values. */
static void check_values(const struct okv_tensor_view *v, const struct gt *x, const char *what)
{
    if (!v->data || !x) {
        CHECK(0, "%s: missing tensor", what);
        return;
    }
    int64_t n = okv_tensor_nelements(v);
    float *out = malloc((size_t)n * sizeof(float));
    enum okv_status st = okv_tensor_to_f32(v, 0, n, out);
    CHECK(st == OKV_OK, "%s: to_f32: %s", what, okv_last_error());
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n && st == OKV_OK; i++)
        if (!(fabsf(out[i] - x->x[i]) <= x->tol * (v->dtype == OKV_DTYPE_F16 || v->dtype == OKV_DTYPE_BF16 ? fabsf(x->x[i]) : 1))) {
            if (first < 0)
                first = i;
            bad++;
        }
    CHECK(!bad, "%s (%s): %lld of %lld values off, first at %lld: %g vs %g", what, okv_dtype_name(v->dtype), (long long)bad,
          (long long)n, (long long)first, first >= 0 ? out[first] : 0, first >= 0 ? x->x[first] : 0);
    free(out);
}

static void check_model_values(const struct okv_model *m, struct gmodel *g)
{
    check_values(&m->tok_embd, find_t(g, "token_embd.weight"), "token_embd");
    check_values(&m->output_norm, find_t(g, "output_norm.weight"), "output_norm");
    if (!m->cfg.tied_embeddings)
        check_values(&m->output, find_t(g, "output.weight"), "output");
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const struct okv_layer_weights *w = &m->layers[l];
        const struct { const struct okv_tensor_view *v; const char *n; } list[] = {
            {&w->attn_norm, "attn_norm.weight"}, {&w->wq, "attn_q.weight"}, {&w->wk, "attn_k.weight"},
            {&w->wv, "attn_v.weight"}, {&w->wo, "attn_output.weight"}, {&w->ffn_norm, "ffn_norm.weight"},
            {&w->w_gate, "ffn_gate.weight"}, {&w->w_up, "ffn_up.weight"}, {&w->w_down, "ffn_down.weight"},
            {&w->bq, "attn_q.bias"}, {&w->bk, "attn_k.bias"}, {&w->bv, "attn_v.bias"},
            {&w->q_norm, "attn_q_norm.weight"}, {&w->k_norm, "attn_k_norm.weight"},
        };
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
            char n[96];
            snprintf(n, sizeof n, "blk.%d.%s", l, list[i].n);
            struct gt *x = find_t(g, n);
            if (!x) {
                CHECK(list[i].v->data == NULL, "%s: bound but not written", n);
                continue;
            }
            check_values(list[i].v, x, n);
        }
    }
}

static void test_gguf_reader(void)
{
    struct gmodel g;
    tiny_gguf(&g, &k_tiny);
    char path[512];
    tmp_path(path, sizeof path, "tiny.gguf");
    gguf_write(&g, path);

    okv_gguf *f = NULL;
    enum okv_status st = okv_gguf_open(path, &f);
    CHECK(st == OKV_OK, "open tiny.gguf: %s", okv_last_error());
    if (st == OKV_OK) {
        int64_t v = 0;
        float fv = 0;
        bool b = false;
        const char *s;
        size_t len;
        enum okv_gguf_type et;
        uint64_t n;
        CHECK(okv_gguf_version(f) == 3, "version");
        CHECK(okv_gguf_get_int(f, "llama.context_length", &v) && v == 256, "u64 context_length %lld", (long long)v);
        CHECK(okv_gguf_get_int(f, "llama.block_count", &v) && v == 2, "u32 block_count");
        CHECK(okv_gguf_get_f32(f, "llama.rope.freq_base", &fv) && fv == 500000.0f, "f32");
        CHECK(!okv_gguf_get_f32(f, "llama.block_count", &fv), "int read as float refused");
        CHECK(!okv_gguf_get_int(f, "general.name", &v), "string read as int refused");
        CHECK(okv_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) && b, "bool");
        CHECK(okv_gguf_get_str(f, "general.name", &s, &len) && len == 15 && memcmp(s, "tiny test model", 15) == 0, "str");
        CHECK(!okv_gguf_has(f, "no.such.key") && okv_gguf_has(f, "test.nested"), "has");
        CHECK(okv_gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n) && et == OKV_GGUF_TYPE_STRING && n == 128, "arr");
        CHECK(okv_gguf_arr_str(f, "tokenizer.ggml.tokens", 127, &s, &len) && len == 6 && memcmp(s, "tok127", 6) == 0, "arr_str");
        CHECK(okv_gguf_arr_str(f, "tokenizer.ggml.tokens", 5, &s, &len) && len == 0, "empty string element");
        CHECK(!okv_gguf_arr_str(f, "tokenizer.ggml.tokens", 128, &s, &len), "arr_str out of range");
        CHECK(okv_gguf_arr_int(f, "tokenizer.ggml.token_type", 2, &v) && v == 3, "arr_int");
        CHECK(okv_gguf_arr_int(f, "tokenizer.ggml.token_type", 3, &v) && v == 1, "arr_int");
        CHECK(!okv_gguf_arr_int(f, "tokenizer.ggml.tokens", 0, &v), "arr_int on strings refused");
        CHECK(okv_gguf_get_arr(f, "test.nested", &et, &n) && et == OKV_GGUF_TYPE_ARRAY && n == 2, "nested arr");
        CHECK(okv_gguf_n_tensors(f) == g.n_t, "n_tensors");
        struct okv_tensor_view tv;
        CHECK(okv_gguf_find_tensor(f, "blk.1.attn_v.weight", &tv) == OKV_OK && tv.dtype == OKV_DTYPE_Q4_1 && tv.ne[0] == 64 &&
                  tv.ne[1] == 32 && tv.n_dims == 2 && tv.nbytes == 2 * 32 * 20,
              "find_tensor");
        CHECK_ERR(okv_gguf_find_tensor(f, "blk.9.attn_v.weight", &tv), OKV_ERR_NOT_FOUND, "find absent tensor");
        CHECK(okv_gguf_tensor(f, 0, &tv) == OKV_OK && strcmp(tv.name, "token_embd.weight") == 0, "tensor(0)");
        CHECK_ERR(okv_gguf_tensor(f, g.n_t, &tv), OKV_ERR_INVALID_ARG, "tensor(n)");
        okv_gguf_close(f);
    }
    okv_gguf_close(NULL);
    gmodel_free(&g);
}

static void test_gguf_models(void)
{
    char path[512], desc[2048];
    struct okv_model *m = NULL;
    enum okv_status st;

    /* llama, untied */
    struct gmodel g;
    tiny_gguf(&g, &k_tiny);
    tmp_path(path, sizeof path, "llama.gguf");
    gguf_write(&g, path);
    st = okv_model_load(path, &m);
    CHECK(st == OKV_OK, "load llama.gguf: %s", okv_last_error());
    if (st == OKV_OK) {
        const struct okv_model_config *c = &m->cfg;
        CHECK(c->arch == OKV_ARCH_LLAMA && strcmp(c->arch_name, "llama") == 0, "arch");
        CHECK(c->n_layers == 2 && c->dim == 64 && c->n_heads == 4 && c->n_kv_heads == 2 && c->head_dim == 16 &&
                  c->ffn_dim == 96 && c->vocab_size == 128 && c->max_ctx == 256,
              "hyper-parameters %d %d %d %d %d %d %d %d", c->n_layers, c->dim, c->n_heads, c->n_kv_heads, c->head_dim,
              c->ffn_dim, c->vocab_size, c->max_ctx);
        CHECK(c->rms_eps == 1e-5f && c->rope_theta == 500000.0f, "eps/theta");
        CHECK(c->rope_pairing == OKV_ROPE_PAIRING_INTERLEAVED && c->rope_scaling == OKV_ROPE_SCALING_NONE, "rope");
        CHECK(!c->tied_embeddings && !c->qkv_bias && !c->qk_norm, "flags");
        CHECK(m->format == OKV_MODEL_FORMAT_GGUF && m->gguf != NULL, "format");
        CHECK(m->output.data != m->tok_embd.data, "untied output");
        check_model_values(m, &g);
        okv_model_describe(m, desc, sizeof desc);
        CHECK(strstr(desc, "layers 2") && strstr(desc, "interleaved") && strstr(desc, "q4_1") && strstr(desc, "parameters"),
              "describe: %s", desc);
        char small[40];
        okv_model_describe(m, small, sizeof small);
        CHECK(strlen(small) == sizeof small - 1, "describe truncates");
        okv_model_free(m);
        m = NULL;
    }
    gmodel_free(&g);

    /* qwen2, tied (no output.weight), biases */
    struct tiny q2 = k_tiny;
    q2.arch = "qwen2";
    q2.tied = true;
    q2.embd = OKV_DTYPE_F16;
    q2.mat = OKV_DTYPE_Q8_0;
    tiny_gguf(&g, &q2);
    tmp_path(path, sizeof path, "qwen2.gguf");
    gguf_write(&g, path);
    st = okv_model_load(path, &m);
    CHECK(st == OKV_OK, "load qwen2.gguf: %s", okv_last_error());
    if (st == OKV_OK) {
        CHECK(m->cfg.arch == OKV_ARCH_QWEN2 && m->cfg.qkv_bias && !m->cfg.qk_norm, "qwen2 flags");
        CHECK(m->cfg.tied_embeddings && m->output.data == m->tok_embd.data, "tied");
        CHECK(m->cfg.rope_pairing == OKV_ROPE_PAIRING_HALF, "qwen2 pairing half");
        check_model_values(m, &g);
        okv_model_free(m);
        m = NULL;
    }
    gmodel_free(&g);

    /* qwen3: q/k norms, head_dim (key_length) != dim / heads */
    struct tiny q3 = k_tiny;
    q3.arch = "qwen3";
    q3.head_dim = 32;
    q3.norm = OKV_DTYPE_BF16;
    tiny_gguf(&g, &q3);
    tmp_path(path, sizeof path, "qwen3.gguf");
    gguf_write(&g, path);
    st = okv_model_load(path, &m);
    CHECK(st == OKV_OK, "load qwen3.gguf: %s", okv_last_error());
    if (st == OKV_OK) {
        CHECK(m->cfg.arch == OKV_ARCH_QWEN3 && m->cfg.qk_norm && !m->cfg.qkv_bias && m->cfg.head_dim == 32, "qwen3");
        CHECK(m->layers[1].q_norm.ne[0] == 32 && m->layers[0].wq.ne[1] == 128, "qwen3 shapes");
        check_model_values(m, &g);
        okv_model_free(m);
        m = NULL;
    }
    gmodel_free(&g);

    /* llama3 rope scaling stored as rope_freqs.weight (factor 8, low 1, high 4, 8192);
     * head_dim 64 puts three frequencies in the smoothed band. */
    struct tiny hd64 = {"llama", 1, 128, 2, 1, 64, 64, 32, 256, true, OKV_DTYPE_F32, OKV_DTYPE_F32, OKV_DTYPE_F32};
    tiny_gguf(&g, &hd64);
    {
        struct gt *x = add_t(&g, "rope_freqs.weight", OKV_DTYPE_F32, 1, 32, 1);
        float *rf = (float *)x->data;
        double theta = 500000.0;
        int middle = 0;
        for (int i = 0; i < 32; i++) {
            double freq = pow(theta, -2.0 * i / 64), wl = 2 * M_PI / freq;
            double lw = 8192 / 1.0, hw = 8192 / 4.0;
            if (wl < hw)
                rf[i] = 1;
            else if (wl > lw)
                rf[i] = 8;
            else {
                double s = (8192 / wl - 1) / (4 - 1);
                rf[i] = (float)(1 / ((1 - s) / 8 + s));
                middle++;
            }
        }
        CHECK(middle >= 2, "rope_freqs test needs two smoothed frequencies, has %d", middle);
        tmp_path(path, sizeof path, "llama3.gguf");
        gguf_write(&g, path);
        st = okv_model_load(path, &m);
        CHECK(st == OKV_OK, "load llama3.gguf: %s", okv_last_error());
        if (st == OKV_OK) {
            CHECK(m->cfg.rope_scaling == OKV_ROPE_SCALING_LLAMA3 && fabsf(m->cfg.rope_factor - 8) < 1e-4f &&
                      m->cfg.rope_orig_max_ctx == 8192 && fabsf(m->cfg.rope_low_freq_factor - 1) < 1e-3f &&
                      fabsf(m->cfg.rope_high_freq_factor - 4) < 1e-3f,
                  "llama3 from rope_freqs: scaling %d factor %g low %g high %g", m->cfg.rope_scaling, m->cfg.rope_factor,
                  m->cfg.rope_low_freq_factor, m->cfg.rope_high_freq_factor);
            okv_model_free(m);
            m = NULL;
        }
        /* values that follow no llama3 curve */
        rf[0] = 3;
        gguf_write(&g, path);
        CHECK_ERR(okv_model_load(path, &m), OKV_ERR_UNSUPPORTED, "rope_freqs not llama3");
        CHECK_MSG("rope_freqs", "rope_freqs");
    }
    gmodel_free(&g);

    /* linear rope scaling keys */
    tiny_gguf(&g, &k_tiny);
    kv_str(&g, "llama.rope.scaling.type", "linear");
    kv_f32(&g, "llama.rope.scaling.factor", 4.0f);
    tmp_path(path, sizeof path, "linear.gguf");
    gguf_write(&g, path);
    st = okv_model_load(path, &m);
    CHECK(st == OKV_OK && m->cfg.rope_scaling == OKV_ROPE_SCALING_LINEAR && m->cfg.rope_factor == 4.0f, "linear: %s",
          okv_last_error());
    okv_model_free(m);
    m = NULL;
    gmodel_free(&g);
}

/* ---------------------------------------------------------------- GGUF corruption */

static void expect_gguf_err(struct gmodel *g, enum okv_status want, const char *sub, const char *what)
{
    char path[512];
    tmp_path(path, sizeof path, "bad.gguf");
    gguf_write(g, path);
    struct okv_model *m = NULL;
    CHECK_ERR(okv_model_load(path, &m), want, what);
    if (sub)
        CHECK_MSG(sub, what);
    CHECK(m == NULL, "%s: model returned on error", what);
    okv_model_free(m);
}

/* Patch bytes of a serialized file and load it. */
static void expect_bytes_err(const struct buf *b, size_t n, enum okv_status want, const char *what)
{
    char path[512];
    tmp_path(path, sizeof path, "bad.gguf");
    write_file(path, b->p, n);
    okv_gguf *f = NULL;
    CHECK_ERR(okv_gguf_open(path, &f), want, what);
    CHECK(f == NULL, "%s: handle returned on error", what);
    okv_gguf_close(f);
}

static void test_gguf_corrupt(void)
{
    struct gmodel g;
    struct tiny small = {"llama", 1, 32, 2, 1, 16, 32, 32, 64, true, OKV_DTYPE_Q8_0, OKV_DTYPE_F16, OKV_DTYPE_F32};
    tiny_gguf(&g, &small);
    struct buf b = {0};
    gguf_serialize(&g, &b);
    char path[512];
    tmp_path(path, sizeof path, "small.gguf");
    write_file(path, b.p, b.n);
    struct okv_model *m = NULL;
    enum okv_status st = okv_model_load(path, &m);
    CHECK(st == OKV_OK, "small.gguf loads: %s", okv_last_error());
    okv_model_free(m);
    m = NULL;

    /* Every proper prefix must be refused as malformed. */
    int wrong = 0;
    size_t first_wrong = 0;
    tmp_path(path, sizeof path, "prefix.gguf");
    write_file(path, b.p, b.n);
    for (size_t n = b.n; n-- > 0;) {   /* shrink the file one byte at a time */
        if (truncate(path, (off_t)n) != 0) {
            perror(path);
            exit(1);
        }
        st = okv_model_load(path, &m);
        if (st != OKV_ERR_FORMAT || !okv_last_error()[0] || m) {
            if (!wrong++)
                first_wrong = n;
            okv_model_free(m);
            m = NULL;
        }
    }
    CHECK(!wrong, "%d of %zu prefixes not refused as FORMAT (first at %zu: %s)", wrong, b.n, first_wrong, okv_last_error());

    /* Header fields. Offsets: magic 0, version 4, tensor_count 8, kv_count 16. */
    struct buf c = {0};
    b_put(&c, b.p, b.n);
    memcpy(c.p, "GGUX", 4);
    expect_bytes_err(&c, c.n, OKV_ERR_FORMAT, "bad magic");
    CHECK_MSG("magic", "bad magic");
    memcpy(c.p, b.p, b.n);
    uint32_t v2 = 2;
    memcpy(c.p + 4, &v2, 4);
    expect_bytes_err(&c, c.n, OKV_ERR_FORMAT, "version 2");
    CHECK_MSG("version 2", "version 2");
    memcpy(c.p, b.p, b.n);
    uint64_t huge = (uint64_t)1 << 60;
    memcpy(c.p + 16, &huge, 8);
    expect_bytes_err(&c, c.n, OKV_ERR_FORMAT, "kv_count 2^60");
    CHECK_MSG("kv_count", "kv_count");
    memcpy(c.p, b.p, b.n);
    memcpy(c.p + 8, &huge, 8);
    expect_bytes_err(&c, c.n, OKV_ERR_FORMAT, "tensor_count 2^60");
    memcpy(c.p, b.p, b.n);
    huge = ~(uint64_t)0;
    memcpy(c.p + 24, &huge, 8);   /* length of the first key */
    expect_bytes_err(&c, c.n, OKV_ERR_FORMAT, "key length 2^64-1");
    /* A kv_count one too large: the parser runs into the tensor infos and must stop cleanly. */
    memcpy(c.p, b.p, b.n);
    uint64_t kvc = g.n_kv + 1;
    memcpy(c.p + 16, &kvc, 8);
    {
        okv_gguf *f = NULL;
        write_file(path, c.p, c.n);
        st = okv_gguf_open(path, &f);
        CHECK(st == OKV_ERR_FORMAT && okv_last_error()[0], "kv_count + 1: %d %s", st, okv_last_error());
        okv_gguf_close(f);
    }
    /* two tensors' data overlapping (a corrupt offset, type or shape): refused, both named */
    {
        struct buf d = {0};
        g_overlap = 3;
        gguf_serialize(&g, &d);
        g_overlap = -1;
        expect_bytes_err(&d, d.n, OKV_ERR_FORMAT, "overlapping tensors");
        CHECK_MSG(g.t[2].name, "overlapping tensors: the first");
        CHECK_MSG(g.t[3].name, "overlapping tensors: the second");
        CHECK_MSG("overlap", "overlapping tensors");
        free(d.p);
    }
    free(c.p);
    free(b.p);

    /* Random byte corruption: any status is fine, a crash or leak is not. */
    {
        struct buf r = {0};
        gguf_serialize(&g, &r);
        size_t hdr = r.n < 4096 ? r.n : 4096;   /* header, infos and the first data */
        for (int it = 0; it < 2000; it++) {
            struct buf x = {0};
            b_put(&x, r.p, r.n);
            for (int k = 0; k < 1 + it % 4; k++) {
                size_t at = (size_t)((g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % hdr;
                x.p[at] = (uint8_t)(g_rng >> 20);
            }
            write_file(path, x.p, x.n);
            if (okv_model_load(path, &m) == OKV_OK)
                okv_model_free(m);
            m = NULL;
            free(x.p);
        }
        free(r.p);
    }
    gmodel_free(&g);

    /* Tensor-level faults. */
    tiny_gguf(&g, &small);
    find_t(&g, "blk.0.ffn_up.weight")->ne[1] = 1 << 20;   /* data past the end */
    expect_gguf_err(&g, OKV_ERR_FORMAT, "blk.0.ffn_up.weight", "tensor data past end of file");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    find_t(&g, "blk.0.ffn_up.weight")->n_dims = 5;
    expect_gguf_err(&g, OKV_ERR_FORMAT, "dimensions", "5 dimensions");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    find_t(&g, "blk.0.ffn_up.weight")->ne[0] = 0;
    expect_gguf_err(&g, OKV_ERR_FORMAT, "blk.0.ffn_up.weight", "zero dimension");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    drop_t(&g, "blk.0.ffn_up.weight");
    expect_gguf_err(&g, OKV_ERR_NOT_FOUND, "blk.0.ffn_up.weight", "missing tensor");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    drop_t(&g, "token_embd.weight");
    expect_gguf_err(&g, OKV_ERR_NOT_FOUND, "token_embd.weight", "missing token_embd");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    {   /* wrong shape: attn_k with 32 rows instead of 16 */
        drop_t(&g, "blk.0.attn_k.weight");
        add_t(&g, "blk.0.attn_k.weight", OKV_DTYPE_Q4_0, 2, 32, 32);
    }
    expect_gguf_err(&g, OKV_ERR_FORMAT, "blk.0.attn_k.weight", "wrong shape");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    {   /* a norm that is 2-D */
        drop_t(&g, "blk.0.ffn_norm.weight");
        add_t(&g, "blk.0.ffn_norm.weight", OKV_DTYPE_F32, 2, 32, 1);
    }
    expect_gguf_err(&g, OKV_ERR_FORMAT, "blk.0.ffn_norm.weight", "2-D norm");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    {   /* TQ2_0 (ternary, 256-element blocks of 66 bytes): a valid ggml type the engine does not read */
        struct gt *x = find_t(&g, "blk.0.attn_q.weight");
        x->type = 35;
        x->ne[0] = 256;
        x->ne[1] = 1;
        free(x->data);
        x->nbytes = 66;
        x->data = calloc(1, 66);
        expect_gguf_err(&g, OKV_ERR_UNSUPPORTED, "TQ2_0", "unsupported type TQ2_0");
    }
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    find_t(&g, "blk.0.attn_q.weight")->type = 200;   /* unknown ggml type */
    expect_gguf_err(&g, OKV_ERR_UNSUPPORTED, "blk.0.attn_q.weight", "unknown ggml type");
    gmodel_free(&g);

    struct tiny other = small;
    other.arch = "gemma3";
    tiny_gguf(&g, &other);
    expect_gguf_err(&g, OKV_ERR_UNSUPPORTED, "gemma3", "unsupported architecture");
    gmodel_free(&g);

    /* Missing hyper-parameter: build without block_count by renaming the key. */
    tiny_gguf(&g, &small);
    {
        uint8_t *p = memmem(g.kv.p, g.kv.n, "llama.block_count", 17);
        CHECK(p != NULL, "key present");
        if (p)
            memcpy(p, "llama.block_xxxxx", 17);
    }
    expect_gguf_err(&g, OKV_ERR_FORMAT, "block_count", "missing block_count");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    kv_u32(&g, "llama.block_count", 3);   /* duplicate key */
    expect_gguf_err(&g, OKV_ERR_FORMAT, "twice", "duplicate key");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    kv_u32(&g, "general.alignment", 33);
    expect_gguf_err(&g, OKV_ERR_FORMAT, "alignment", "bad alignment");   /* duplicate or bad: both FORMAT */
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    {   /* string array whose count exceeds the file */
        kv_key(&g, "tokenizer.ggml.merges", OKV_GGUF_TYPE_ARRAY);
        b_u32(&g.kv, OKV_GGUF_TYPE_STRING);
        b_u64(&g.kv, (uint64_t)1 << 61);
    }
    expect_gguf_err(&g, OKV_ERR_FORMAT, "tokenizer.ggml.merges", "huge string array");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    {   /* i32 array whose count * 4 overflows */
        kv_key(&g, "x.arr", OKV_GGUF_TYPE_ARRAY);
        b_u32(&g.kv, OKV_GGUF_TYPE_I32);
        b_u64(&g.kv, (uint64_t)1 << 62);
    }
    expect_gguf_err(&g, OKV_ERR_FORMAT, "x.arr", "huge i32 array");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    kv_key(&g, "x.badtype", 13);
    b_u32(&g.kv, 0);
    expect_gguf_err(&g, OKV_ERR_FORMAT, "x.badtype", "bad value type");
    gmodel_free(&g);

    tiny_gguf(&g, &small);
    {   /* tensor offset not aligned */
        struct gmodel *gp = &g;
        struct buf s = {0};
        gguf_serialize(gp, &s);
        /* the first tensor info's offset field sits after its name, n_dims, ne and type */
        uint8_t *p = memmem(s.p, s.n, "token_embd.weight", 17);
        CHECK(p != NULL, "name present");
        if (p) {
            uint64_t off = 3;
            memcpy(p + 17 + 4 + 16 + 4, &off, 8);
            expect_bytes_err(&s, s.n, OKV_ERR_FORMAT, "misaligned offset");
            CHECK_MSG("alignment", "misaligned offset");
            off = (uint64_t)1 << 40;
            memcpy(p + 17 + 4 + 16 + 4, &off, 8);
            expect_bytes_err(&s, s.n, OKV_ERR_FORMAT, "offset 2^40");
            CHECK_MSG("token_embd.weight", "offset 2^40");
        }
        free(s.p);
    }
    gmodel_free(&g);

    /* Non-existent path and a directory without config.json. */
    CHECK_ERR(okv_model_load("/nonexistent/okv/model.gguf", &m), OKV_ERR_IO, "missing file");
    CHECK_ERR(okv_model_load(NULL, &m), OKV_ERR_INVALID_ARG, "NULL path");
}

/* ---------------------------------------------------------------- safetensors */

struct st_t {
    char name[96];
    const char *dtype;
    int rank;
    int64_t shape[4];
    uint8_t *data;
    size_t nbytes;
    float *x;
    float tol;
};

struct hf {
    struct st_t t[80];
    int n;
};

static struct st_t *hf_add(struct hf *h, const char *name, enum okv_dtype dt, int rank, int64_t out, int64_t in)
{
    struct st_t *t = &h->t[h->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt == OKV_DTYPE_F32 ? "F32" : dt == OKV_DTYPE_F16 ? "F16" : "BF16";
    t->rank = rank;
    t->shape[0] = out;
    t->shape[1] = in;
    int64_t n = rank == 1 ? out : out * in;
    t->x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        t->x[i] = frand();
    t->nbytes = encode(dt, t->x, n, &t->data, &t->tol);
    return t;
}

static struct st_t *hf_find(struct hf *h, const char *name)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->t[i].name, name) == 0)
            return &h->t[i];
    return NULL;
}

static void hf_drop(struct hf *h, const char *name)
{
    struct st_t *t = hf_find(h, name);
    if (!t)
        return;
    free(t->data);
    free(t->x);
    *t = h->t[--h->n];
}

static void hf_free(struct hf *h)
{
    for (int i = 0; i < h->n; i++) {
        free(h->t[i].data);
        free(h->t[i].x);
    }
    h->n = 0;
}

/* Write tensors [from, to) of h as one safetensors file. */
static void st_serialize(const struct hf *h, int from, int to, struct buf *out)
{
    struct buf js = {0};
    char tmp[512];
    size_t off = 0, prev = 0;
    const char *meta = "{\"__metadata__\":{\"format\":\"pt\"}";
    b_put(&js, meta, strlen(meta));
    for (int i = from; i < to; i++) {
        const struct st_t *t = &h->t[i];
        const size_t o = i == g_overlap && i > from ? prev : off;
        int k = snprintf(tmp, sizeof tmp, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (int d = 0; d < t->rank; d++)
            k += snprintf(tmp + k, sizeof tmp - (size_t)k, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        k += snprintf(tmp + k, sizeof tmp - (size_t)k, "],\"data_offsets\":[%zu,%zu]}", o, o + t->nbytes);
        b_put(&js, tmp, (size_t)k);
        prev = off;
        off += t->nbytes;
    }
    b_put(&js, "}", 1);
    while (js.n % 8)
        b_put(&js, " ", 1);
    b_u64(out, js.n);
    b_put(out, js.p, js.n);
    for (int i = from; i < to; i++)
        b_put(out, h->t[i].data, h->t[i].nbytes);
    free(js.p);
}

static void hf_tiny(struct hf *h, const char *arch, int layers, int dim, int heads, int kvh, int hd, int ffn, int vocab,
                    bool lm_head)
{
    h->n = 0;
    int q = heads * hd, kv = kvh * hd;
    hf_add(h, "model.embed_tokens.weight", OKV_DTYPE_BF16, 2, vocab, dim);
    hf_add(h, "model.norm.weight", OKV_DTYPE_F32, 1, dim, 1);
    if (lm_head)
        hf_add(h, "lm_head.weight", OKV_DTYPE_F16, 2, vocab, dim);
    for (int l = 0; l < layers; l++) {
        char n[96];
#define T(name, dt, r, a, b) (snprintf(n, sizeof n, "model.layers.%d." name, l), hf_add(h, n, dt, r, a, b))
        T("input_layernorm.weight", OKV_DTYPE_BF16, 1, dim, 1);
        T("self_attn.q_proj.weight", OKV_DTYPE_BF16, 2, q, dim);
        T("self_attn.k_proj.weight", OKV_DTYPE_F16, 2, kv, dim);
        T("self_attn.v_proj.weight", OKV_DTYPE_F32, 2, kv, dim);
        T("self_attn.o_proj.weight", OKV_DTYPE_BF16, 2, dim, q);
        if (strcmp(arch, "qwen2") == 0) {
            T("self_attn.q_proj.bias", OKV_DTYPE_BF16, 1, q, 1);
            T("self_attn.k_proj.bias", OKV_DTYPE_BF16, 1, kv, 1);
            T("self_attn.v_proj.bias", OKV_DTYPE_BF16, 1, kv, 1);
        }
        if (strcmp(arch, "qwen3") == 0) {
            T("self_attn.q_norm.weight", OKV_DTYPE_BF16, 1, hd, 1);
            T("self_attn.k_norm.weight", OKV_DTYPE_BF16, 1, hd, 1);
        }
        T("post_attention_layernorm.weight", OKV_DTYPE_BF16, 1, dim, 1);
        T("mlp.gate_proj.weight", OKV_DTYPE_BF16, 2, ffn, dim);
        T("mlp.up_proj.weight", OKV_DTYPE_F16, 2, ffn, dim);
        T("mlp.down_proj.weight", OKV_DTYPE_BF16, 2, dim, ffn);
#undef T
    }
}

/* Write h into a fresh folder dir with config text; shards > 1 writes an index. */
static void hf_write(const struct hf *h, const char *dir, const char *config, int shards)
{
    mkdir(dir, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (config)
        write_file(p, config, strlen(config));
    else
        remove(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    remove(p);
    if (shards <= 1) {
        struct buf b = {0};
        st_serialize(h, 0, h->n, &b);
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        write_file(p, b.p, b.n);
        free(b.p);
        return;
    }
    struct buf idx = {0};
    b_put(&idx, "{\"metadata\":{\"total_size\":0},\"weight_map\":{", 43);
    for (int s = 0; s < shards; s++) {
        int from = h->n * s / shards, to = h->n * (s + 1) / shards;
        char shard[128];
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", s + 1, shards);
        struct buf b = {0};
        st_serialize(h, from, to, &b);
        snprintf(p, sizeof p, "%s/%s", dir, shard);
        write_file(p, b.p, b.n);
        free(b.p);
        for (int i = from; i < to; i++) {
            char e[300];
            int k = snprintf(e, sizeof e, "%s\"%s\":\"%s\"", idx.n > 43 ? "," : "", h->t[i].name, shard);
            b_put(&idx, e, (size_t)k);
        }
    }
    b_put(&idx, "}}", 2);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_file(p, idx.p, idx.n);
    free(idx.p);
}

static void check_st(const struct okv_tensor_view *v, struct hf *h, const char *name)
{
    struct st_t *t = hf_find(h, name);
    if (!t) {
        CHECK(0, "%s not written", name);
        return;
    }
    struct gt x = {.x = t->x, .tol = t->tol};
    check_values(v, &x, name);
}

static const char *k_llama_cfg =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":96,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"rms_norm_eps\":1e-05,"
    "\"vocab_size\":128,\"max_position_embeddings\":131072,\"tie_word_embeddings\":true,\"rope_theta\":500000.0,"
    "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"torch_dtype\":\"bfloat16\"}";

static enum okv_status load_cfg(const char *dir, struct hf *h, const char *cfg, struct okv_model **m)
{
    hf_write(h, dir, cfg, 1);
    *m = NULL;
    enum okv_status st = okv_model_load(dir, m);
    if (st == OKV_OK) {
        okv_model_free(*m);
        *m = NULL;
    }
    return st;
}

/* Replace the first occurrence of `from` in src by `to` (static buffer). */
static const char *subst(const char *src, const char *from, const char *to)
{
    static char out[4096];
    const char *p = strstr(src, from);
    if (!p) {
        fprintf(stderr, "subst: '%s' not found\n", from);
        exit(1);
    }
    snprintf(out, sizeof out, "%.*s%s%s", (int)(p - src), src, to, p + strlen(from));
    return out;
}


/* A tensor of raw bytes (FP8 weights and their scales, in the tests of FP8 checkpoints). */
static struct st_t *hf_add_raw(struct hf *h, const char *name, const char *dtype, int rank, int64_t d0, int64_t d1,
                               const void *bytes, size_t nbytes)
{
    struct st_t *t = &h->t[h->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->rank = rank;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->data = malloc(nbytes);
    memcpy(t->data, bytes, nbytes);
    t->nbytes = nbytes;
    return t;
}

static const char *subst(const char *src, const char *from, const char *to);

/* q_proj back to FP8 q with its per-channel BF16 scale ch (after a case that replaced them) */
static void fp8_q_proj(struct hf *h, const char *wq, const uint8_t *q, const uint16_t *ch)
{
    hf_add_raw(h, wq, "F8_E4M3", 2, 64, 64, q, 64 * 64);
    hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_scale", "BF16", 2, 64, 1, ch, 64 * 2);
}

/* FP8 checkpoints (their numbers against transformers: test_engine_ref's llama_fp8_block and
 * qwen2_fp8_channel): the formats' scales, the quantization methods refused by name, and the
 * faults of the scale tensors. */
static void test_hf_fp8(const char *dir, struct hf *h)
{
    struct okv_model *m = NULL;
    const char *wq = "model.layers.0.self_attn.q_proj.weight";   /* 64 x 64 */
    uint8_t q[64 * 64];
    for (int i = 0; i < 64 * 64; i++) {
        q[i] = (uint8_t)(rand() & 0xFF);
        if ((q[i] & 0x7F) == 0x7F)   /* NaN */
            q[i] ^= 1;
    }
    hf_drop(h, wq);
    hf_add_raw(h, wq, "F8_E4M3", 2, 64, 64, q, sizeof q);
    char cfg[4096];
#define QCFG(qc) (snprintf(cfg, sizeof cfg, "%s", subst(k_llama_cfg, "\"torch_dtype\":\"bfloat16\"}", \
                                                       "\"torch_dtype\":\"bfloat16\",\"quantization_config\":" qc "}")), cfg)
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"weight_block_size\":[32,32]}"), &m),
              OKV_ERR_FORMAT, "FP8 weight without a scale");
    CHECK_MSG("has no scale", "FP8 weight without a scale");

    /* 128 x 128-style blocks (here 32 x 32 on a 64 x 64 matrix): a 2 x 2 grid of F32 */
    const float grid[4] = {0.5f, -2.0f, 0.125f, 3.0f};
    struct st_t *sc = hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_scale_inv", "F32", 2, 2, 2, grid, sizeof grid);
    enum okv_status st;
    hf_write(h, dir, QCFG("{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"weight_block_size\":[32,32]}"), 1);
    st = okv_model_load(dir, &m);
    CHECK(st == OKV_OK, "fp8 blocks: %s", okv_last_error());
    if (st == OKV_OK) {
        float row[64];
        int bad = 0;
        CHECK(m->layers[0].wq.dtype == OKV_DTYPE_F8_E4M3 && m->cfg.fp8_block[0] == 32, "fp8 view");
        for (int r = 0; r < 64; r += 9) {
            CHECK(okv_tensor_to_f32(&m->layers[0].wq, (int64_t)r * 64, 64, row) == OKV_OK, "%s", okv_last_error());
            for (int c = 0; c < 64; c++)
                bad += row[c] != okv_e4m3_to_f32(q[r * 64 + c]) * grid[(r / 32) * 2 + c / 32];
        }
        /* a range that starts and ends inside rows */
        float part[100];
        CHECK(okv_tensor_to_f32(&m->layers[0].wq, 1000, 100, part) == OKV_OK, "%s", okv_last_error());
        for (int i = 0; i < 100; i++) {
            const int e = 1000 + i, r = e / 64, c = e % 64;
            bad += part[i] != okv_e4m3_to_f32(q[e]) * grid[(r / 32) * 2 + c / 32];
        }
        CHECK(bad == 0, "fp8 blocks: %d values differ from e4m3(q) x scale", bad);
        char desc[2048];
        okv_model_describe(m, desc, sizeof desc);
        CHECK(strstr(desc, "f8_e4m3") != NULL, "describe names the fp8 weights: %s", desc);
        okv_model_free(m);
        m = NULL;
    }
    /* partial blocks: up_proj (96 x 64) in 64 x 64 blocks is a 2 x 1 grid whose second block has 32 rows
     * (an even split would take blocks of 48); q_proj per tensor meanwhile */
    {
        const char *up = "model.layers.0.mlp.up_proj.weight";
        uint8_t q2[96 * 64];
        for (int i = 0; i < 96 * 64; i++)
            q2[i] = (uint8_t)((rand() & 0xFF) & ~0x01) | 0x02;   /* bit 1 set: never 0x7f / 0xff */
        const float g2[2] = {0.25f, 4.0f}, one = 0.75f;
        hf_drop(h, up);
        hf_add_raw(h, up, "F8_E4M3", 2, 96, 64, q2, sizeof q2);
        hf_add_raw(h, "model.layers.0.mlp.up_proj.weight_scale_inv", "F32", 2, 2, 1, g2, sizeof g2);
        float keep[4];
        sc = hf_find(h, "model.layers.0.self_attn.q_proj.weight_scale_inv");   /* hf_drop moves entries */
        memcpy(keep, sc->data, sizeof keep);
        sc->shape[0] = sc->shape[1] = 1;
        sc->nbytes = 4;
        memcpy(sc->data, &one, 4);
        hf_write(h, dir, QCFG("{\"quant_method\":\"fp8\",\"weight_block_size\":[64,64]}"), 1);
        st = okv_model_load(dir, &m);
        CHECK(st == OKV_OK, "fp8 partial blocks: %s", okv_last_error());
        if (st == OKV_OK) {
            float row[64];
            int bad = 0;
            for (int r = 0; r < 96; r += 5) {
                okv_tensor_to_f32(&m->layers[0].w_up, (int64_t)r * 64, 64, row);
                for (int c = 0; c < 64; c++)
                    bad += row[c] != okv_e4m3_to_f32(q2[r * 64 + c]) * g2[r / 64];
                okv_tensor_to_f32(&m->layers[0].wq, (int64_t)(r % 64) * 64, 64, row);
                for (int c = 0; c < 64; c++)
                    bad += row[c] != okv_e4m3_to_f32(q[(r % 64) * 64 + c]) * one;
            }
            CHECK(bad == 0, "fp8 partial blocks / per tensor: %d values differ", bad);
            okv_model_free(m);
            m = NULL;
        }
        hf_drop(h, "model.layers.0.mlp.up_proj.weight_scale_inv");
        hf_drop(h, up);
        hf_add(h, up, OKV_DTYPE_F16, 2, 96, 64);
        sc = hf_find(h, "model.layers.0.self_attn.q_proj.weight_scale_inv");
        sc->shape[0] = sc->shape[1] = 2;
        sc->nbytes = sizeof keep;
        memcpy(sc->data, keep, sizeof keep);
    }
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"fp8\",\"weight_block_size\":[16,16]}"), &m), OKV_ERR_FORMAT,
              "a grid the configured blocks do not tile");
    CHECK_MSG("does not tile", "a grid the configured blocks do not tile");
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"fp8\",\"weight_block_size\":[0,128]}"), &m), OKV_ERR_FORMAT,
              "weight_block_size 0");
    CHECK_MSG("weight_block_size", "weight_block_size 0");
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"fp8\",\"fmt\":\"e5m2\"}"), &m), OKV_ERR_UNSUPPORTED, "fp8 e5m2");
    CHECK_MSG("e5m2", "fp8 e5m2");
    hf_find(h, "model.layers.0.self_attn.q_proj.weight_scale_inv")->dtype = "I32";
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"fp8\"}"), &m), OKV_ERR_UNSUPPORTED, "an I32 scale");
    CHECK_MSG("weight_scale_inv", "an I32 scale");
    hf_drop(h, "model.layers.0.self_attn.q_proj.weight_scale_inv");

    /* compressed-tensors, per output channel: a [64, 1] BF16 "_scale" */
    uint16_t ch[64];
    for (int r = 0; r < 64; r++)
        ch[r] = okv_f32_to_bf16((float)(r + 1) / 16.0f);
    hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_scale", "BF16", 2, 64, 1, ch, sizeof ch);
    const char *ct = "{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":"
                     "{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":{\"num_bits\":8,\"type\":\"float\","
                     "\"strategy\":\"channel\"}}},\"ignore\":[\"lm_head\"]}";
    char ctcfg[4096];
    snprintf(ctcfg, sizeof ctcfg, "%s", subst(k_llama_cfg, "\"torch_dtype\":\"bfloat16\"}", "\"torch_dtype\":\"bfloat16\",\"quantization_config\":"));
    snprintf(ctcfg + strlen(ctcfg), sizeof ctcfg - strlen(ctcfg), "%s}", ct);
    hf_write(h, dir, ctcfg, 1);
    st = okv_model_load(dir, &m);
    CHECK(st == OKV_OK, "compressed-tensors channel: %s", okv_last_error());
    if (st == OKV_OK) {
        float row[64];
        int bad = 0;
        for (int r = 0; r < 64; r += 7) {
            okv_tensor_to_f32(&m->layers[0].wq, (int64_t)r * 64, 64, row);
            for (int c = 0; c < 64; c++)
                bad += row[c] != okv_e4m3_to_f32(q[r * 64 + c]) * okv_bf16_to_f32(ch[r]);
        }
        CHECK(bad == 0, "fp8 per channel: %d values differ", bad);
        okv_model_free(m);
        m = NULL;
    }
    /* the methods that are not read: refused by name before any tensor */
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"bitsandbytes\",\"load_in_4bit\":true}"), &m),
              OKV_ERR_UNSUPPORTED, "bitsandbytes");
    CHECK_MSG("bitsandbytes", "bitsandbytes");
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"version\":\"gemv\"}"), &m),
              OKV_ERR_UNSUPPORTED, "AWQ gemv");
    CHECK_MSG("gemv", "AWQ gemv");
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"gptq\",\"bits\":3,\"group_size\":128}"), &m),
              OKV_ERR_UNSUPPORTED, "GPTQ 3-bit");
    CHECK_MSG("3 bits", "GPTQ 3-bit");
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"gptq\",\"bits\":4,\"checkpoint_format\":\"marlin\"}"), &m),
              OKV_ERR_UNSUPPORTED, "GPTQ marlin format");
    CHECK_MSG("marlin", "GPTQ marlin format");
    CHECK_ERR(load_cfg(dir, h, QCFG("{\"quant_method\":\"compressed-tensors\",\"format\":\"marlin-24\"}"), &m),
              OKV_ERR_UNSUPPORTED, "compressed-tensors 2:4 sparse");
    CHECK_MSG("marlin-24", "compressed-tensors 2:4 sparse");
    CHECK_ERR(load_cfg(dir, h,
                       QCFG("{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":"
                            "{\"g\":{\"weights\":{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"group\","
                            "\"group_size\":128,\"actorder\":\"group\"}}}}"),
                       &m),
              OKV_ERR_UNSUPPORTED, "compressed-tensors actorder group");
    CHECK_MSG("actorder", "compressed-tensors actorder group");
    CHECK_ERR(load_cfg(dir, h,
                       QCFG("{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"weights\":"
                            "{\"num_bits\":4,\"type\":\"int\"}}}}"),
                       &m),
              OKV_ERR_UNSUPPORTED, "compressed-tensors int4 group");
    CHECK_MSG("4-bit int", "compressed-tensors int4 group");
    CHECK_ERR(load_cfg(dir, h, QCFG("[1]"), &m), OKV_ERR_FORMAT, "quantization_config not an object");
    /* compressed-tensors pack-quantized (their numbers against the library: test_engine_ref's
     * llama_w4a16_group, qwen3_w8a16_asym): 4-bit symmetric groups of 32 on q_proj, then faults */
    {
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_scale");
        hf_drop(h, wq);
        uint32_t words[64 * 8];   /* 64 rows of 64 4-bit values: 8 words a row */
        for (int i = 0; i < 64 * 8; i++)
            words[i] = (uint32_t)rand() * 2654435761u;
        uint16_t gs[64 * 2];
        for (int i = 0; i < 128; i++)
            gs[i] = okv_f32_to_bf16((float)(i % 7 + 1) / 64.0f);
        const int64_t shape[2] = {64, 64};
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_packed", "I32", 2, 64, 8, words, sizeof words);
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_scale", "BF16", 2, 64, 2, gs, sizeof gs);
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_shape", "I64", 1, 2, 1, shape, sizeof shape);
        char pk[4096];
        snprintf(pk, sizeof pk, "%s",
                 subst(k_llama_cfg, "\"torch_dtype\":\"bfloat16\"}",
                       "\"torch_dtype\":\"bfloat16\",\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
                       "\"format\":\"pack-quantized\",\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],"
                       "\"weights\":{\"num_bits\":4,\"type\":\"int\",\"symmetric\":true,\"strategy\":\"group\","
                       "\"group_size\":32}}}}}"));
        hf_write(h, dir, pk, 1);
        enum okv_status st2 = okv_model_load(dir, &m);
        CHECK(st2 == OKV_OK, "pack-quantized: %s", okv_last_error());
        if (st2 == OKV_OK) {
            float row[64];
            int bad = 0;
            CHECK(m->layers[0].wq.dtype == OKV_DTYPE_INT_PACKED && m->cfg.pack_bits == 4 && m->cfg.pack_group == 32,
                  "packed view");
            for (int r = 0; r < 64; r += 3) {
                okv_tensor_to_f32(&m->layers[0].wq, (int64_t)r * 64, 64, row);
                for (int c = 0; c < 64; c++) {
                    const int qv = (int)((words[r * 8 + c / 8] >> (4 * (c % 8))) & 15) - 8;
                    bad += row[c] != (float)qv * okv_bf16_to_f32(gs[r * 2 + c / 32]);
                }
            }
            CHECK(bad == 0, "pack-quantized: %d values differ from (q - 8) x scale", bad);
            okv_model_free(m);
            m = NULL;
        }
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_g_idx", "I32", 1, 64, 1, words, 64 * 4);
        CHECK_ERR(load_cfg(dir, h, pk, &m), OKV_ERR_UNSUPPORTED, "activation-ordered groups");
        CHECK_MSG("g_idx", "activation-ordered groups");
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_g_idx");
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_shape");
        CHECK_ERR(load_cfg(dir, h, pk, &m), OKV_ERR_FORMAT, "packed without weight_shape");
        CHECK_MSG("weight_shape", "packed without weight_shape");
        const int64_t wrong[2] = {64, 40};   /* 40 4-bit values are 5 words, not 8 */
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_shape", "I64", 1, 2, 1, wrong, sizeof wrong);
        CHECK_ERR(load_cfg(dir, h, pk, &m), OKV_ERR_UNSUPPORTED, "packed words that do not fit the shape");
        CHECK_MSG("4- and 8-bit", "packed words that do not fit the shape");
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_shape");
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_packed");
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_scale");
        fp8_q_proj(h, wq, q, ch);
    }
    /* GPTQ / AWQ (their numbers against GPTQModel: test_engine_ref's llama_gptq_actorder and qwen2_awq): faults */
    {
        hf_drop(h, "model.layers.0.self_attn.q_proj.weight_scale");
        hf_drop(h, wq);
        uint32_t qw[8 * 64], qz[2 * 8];
        for (int i = 0; i < 8 * 64; i++)
            qw[i] = (uint32_t)rand() * 2246822519u;
        for (int i = 0; i < 16; i++)
            qz[i] = 0x77777777u;
        uint16_t sc16[2 * 64];
        for (int i = 0; i < 128; i++)
            sc16[i] = okv_f32_to_fp16(0.01f * (float)(i % 5 + 1));
        int32_t gidx[64];
        for (int i = 0; i < 64; i++)
            gidx[i] = (i * 7) % 2;
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.qweight", "I32", 2, 8, 64, qw, sizeof qw);
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.qzeros", "I32", 2, 2, 8, qz, sizeof qz);
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.scales", "F16", 2, 2, 64, sc16, sizeof sc16);
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.g_idx", "I32", 1, 64, 1, gidx, sizeof gidx);
        CHECK_ERR(load_cfg(dir, h, k_llama_cfg, &m), OKV_ERR_FORMAT, "qweight without a quantization_config");
        CHECK_MSG("names neither", "qweight without a quantization_config");
        char gq[4096];
        snprintf(gq, sizeof gq, "%s",
                 subst(k_llama_cfg, "\"torch_dtype\":\"bfloat16\"}",
                       "\"torch_dtype\":\"bfloat16\",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,"
                       "\"group_size\":32,\"desc_act\":true,\"checkpoint_format\":\"gptq\"}}"));
        enum okv_status st3 = load_cfg(dir, h, gq, &m);
        CHECK(st3 == OKV_OK, "gptq with activation order: %s", okv_last_error());
        gidx[17] = 2;   /* two groups: 2 is out of range */
        hf_drop(h, "model.layers.0.self_attn.q_proj.g_idx");
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.g_idx", "I32", 1, 64, 1, gidx, sizeof gidx);
        CHECK_ERR(load_cfg(dir, h, gq, &m), OKV_ERR_FORMAT, "g_idx out of range");
        CHECK_MSG("outside", "g_idx out of range");
        hf_drop(h, "model.layers.0.self_attn.q_proj.g_idx");
        hf_drop(h, "model.layers.0.self_attn.q_proj.scales");
        hf_add_raw(h, "model.layers.0.self_attn.q_proj.scales", "F16", 2, 1, 64, sc16, 64 * 2);
        CHECK_ERR(load_cfg(dir, h, gq, &m), OKV_ERR_FORMAT, "scales of one group for two");
        CHECK_MSG("do not agree", "scales of one group for two");
        hf_drop(h, "model.layers.0.self_attn.q_proj.scales");
        hf_drop(h, "model.layers.0.self_attn.q_proj.qzeros");
        hf_drop(h, "model.layers.0.self_attn.q_proj.qweight");
        fp8_q_proj(h, wq, q, ch);
    }
    /* a per-channel scale whose length is not the rows' */
    hf_drop(h, "model.layers.0.self_attn.q_proj.weight_scale");
    hf_add_raw(h, "model.layers.0.self_attn.q_proj.weight_scale", "BF16", 1, 48, 1, ch, 48 * 2);
    CHECK_ERR(load_cfg(dir, h, ctcfg, &m), OKV_ERR_FORMAT, "a 48-long scale on 64 rows");
    CHECK_MSG("does not tile", "a 48-long scale on 64 rows");
    hf_drop(h, "model.layers.0.self_attn.q_proj.weight_scale");
#undef QCFG
}

static void test_hf(void)
{
    char dir[512];
    struct okv_model *m = NULL;
    enum okv_status st;
    struct hf h;

    /* llama: single file, tied, llama3 scaling in the old rope_scaling form */
    hf_tiny(&h, "llama", 2, 64, 4, 2, 16, 96, 128, false);
    tmp_path(dir, sizeof dir, "hf_llama");
    hf_write(&h, dir, k_llama_cfg, 1);
    st = okv_model_load(dir, &m);
    CHECK(st == OKV_OK, "load hf_llama: %s", okv_last_error());
    if (st == OKV_OK) {
        const struct okv_model_config *c = &m->cfg;
        CHECK(m->format == OKV_MODEL_FORMAT_HF && !m->gguf, "hf format");
        CHECK(c->arch == OKV_ARCH_LLAMA && c->n_layers == 2 && c->dim == 64 && c->n_heads == 4 && c->n_kv_heads == 2 &&
                  c->head_dim == 16 && c->ffn_dim == 96 && c->vocab_size == 128 && c->max_ctx == 131072,
              "hf llama config");
        CHECK(c->rope_pairing == OKV_ROPE_PAIRING_HALF && c->rope_theta == 500000.0f, "hf rope");
        CHECK(c->rope_scaling == OKV_ROPE_SCALING_LLAMA3 && c->rope_factor == 8 && c->rope_low_freq_factor == 1 &&
                  c->rope_high_freq_factor == 4 && c->rope_orig_max_ctx == 8192,
              "llama3 scaling");
        CHECK(c->tied_embeddings && m->output.data == m->tok_embd.data, "tied");
        CHECK(c->rms_eps == 1e-5f, "eps");
        check_st(&m->tok_embd, &h, "model.embed_tokens.weight");
        CHECK(m->tok_embd.ne[0] == 64 && m->tok_embd.ne[1] == 128, "ne order");
        check_st(&m->output_norm, &h, "model.norm.weight");
        check_st(&m->layers[1].wq, &h, "model.layers.1.self_attn.q_proj.weight");
        check_st(&m->layers[1].wk, &h, "model.layers.1.self_attn.k_proj.weight");
        check_st(&m->layers[0].wv, &h, "model.layers.0.self_attn.v_proj.weight");
        check_st(&m->layers[0].w_down, &h, "model.layers.0.mlp.down_proj.weight");
        check_st(&m->layers[0].ffn_norm, &h, "model.layers.0.post_attention_layernorm.weight");
        char desc[2048];
        okv_model_describe(m, desc, sizeof desc);
        CHECK(strstr(desc, "llama3") && strstr(desc, "half") && strstr(desc, "bf16"), "describe: %s", desc);
        okv_model_free(m);
        m = NULL;
    }
    hf_free(&h);

    /* qwen2: sharded (3 shards), untied lm_head, biases, transformers-5 rope_parameters */
    hf_tiny(&h, "qwen2", 2, 64, 4, 2, 16, 96, 128, true);
    tmp_path(dir, sizeof dir, "hf_qwen2");
    const char *q2cfg = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"qwen2\",\"hidden_size\":64,"
                        "\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                        "\"num_key_value_heads\":2,\"rms_norm_eps\":1e-06,\"vocab_size\":128,\"max_position_embeddings\":32768,"
                        "\"tie_word_embeddings\":false,\"rope_scaling\":null,"
                        "\"rope_parameters\":{\"rope_theta\":1000000.0,\"rope_type\":\"default\"}}";
    hf_write(&h, dir, q2cfg, 3);
    st = okv_model_load(dir, &m);
    CHECK(st == OKV_OK, "load hf_qwen2: %s", okv_last_error());
    if (st == OKV_OK) {
        const struct okv_model_config *c = &m->cfg;
        CHECK(c->arch == OKV_ARCH_QWEN2 && c->qkv_bias && !c->qk_norm && !c->tied_embeddings, "qwen2 flags");
        CHECK(c->rope_theta == 1000000.0f && c->rope_scaling == OKV_ROPE_SCALING_NONE && c->rms_eps == 1e-6f, "qwen2 rope");
        check_st(&m->output, &h, "lm_head.weight");
        check_st(&m->layers[1].bk, &h, "model.layers.1.self_attn.k_proj.bias");
        check_st(&m->layers[1].w_down, &h, "model.layers.1.mlp.down_proj.weight");
        okv_model_free(m);
        m = NULL;
    }
    /* weight_map names a shard that does not hold the tensor / escapes the folder */
    {
        char p[600], *text;
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        FILE *f = fopen(p, "rb");
        text = calloc(1, 1 << 16);
        size_t n = fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
        text[n] = 0;
        const char *bad = subst(text, "\"lm_head.weight\":\"model-00001-of-00003.safetensors\"",
                                "\"lm_head.weight\":\"model-00002-of-00003.safetensors\"");
        write_file(p, bad, strlen(bad));
        CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "weight_map wrong shard");
        CHECK_MSG("lm_head.weight", "weight_map wrong shard");
        bad = subst(text, "\"lm_head.weight\":\"model-00001-of-00003.safetensors\"", "\"lm_head.weight\":\"../x.safetensors\"");
        write_file(p, bad, strlen(bad));
        CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "weight_map escapes");
        bad = subst(text, "\"lm_head.weight\":\"model-00001-of-00003.safetensors\"",
                    "\"lm_head.weight\":\"model-00009-of-00003.safetensors\"");
        write_file(p, bad, strlen(bad));
        CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_NOT_FOUND, "weight_map names a missing shard");
        write_file(p, "{\"weight_map\": [", 16);
        CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "index.json malformed");
        free(text);
    }
    hf_free(&h);

    /* qwen3: q/k norms, explicit head_dim, lm_head absent with tie false => tied */
    hf_tiny(&h, "qwen3", 2, 64, 4, 2, 32, 96, 128, false);
    tmp_path(dir, sizeof dir, "hf_qwen3");
    const char *q3cfg = "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":64,"
                        "\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"head_dim\":32,"
                        "\"num_key_value_heads\":2,\"rms_norm_eps\":1e-06,\"vocab_size\":128,\"max_position_embeddings\":40960,"
                        "\"rope_theta\":1000000,\"attention_bias\":false,\"tie_word_embeddings\":false}";
    hf_write(&h, dir, q3cfg, 1);
    st = okv_model_load(dir, &m);
    CHECK(st == OKV_OK, "load hf_qwen3: %s", okv_last_error());
    if (st == OKV_OK) {
        const struct okv_model_config *c = &m->cfg;
        CHECK(c->arch == OKV_ARCH_QWEN3 && c->qk_norm && !c->qkv_bias && c->head_dim == 32 && c->tied_embeddings, "qwen3");
        check_st(&m->layers[0].q_norm, &h, "model.layers.0.self_attn.q_norm.weight");
        CHECK(m->layers[0].wq.ne[1] == 128 && m->layers[0].wo.ne[0] == 128, "qwen3 shapes");
        okv_model_free(m);
        m = NULL;
    }
    hf_free(&h);

    /* Config faults, on a valid llama folder. */
    hf_tiny(&h, "llama", 2, 64, 4, 2, 16, 96, 128, false);
    tmp_path(dir, sizeof dir, "hf_bad");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"hidden_size\":64,", ""), &m), OKV_ERR_FORMAT, "missing hidden_size");
    CHECK_MSG("hidden_size", "missing hidden_size");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"vocab_size\":128,", ""), &m), OKV_ERR_FORMAT, "missing vocab_size");
    CHECK_MSG("vocab_size", "missing vocab_size");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"num_hidden_layers\":2,", "\"num_hidden_layers\":\"2\","), &m),
              OKV_ERR_FORMAT, "string layers");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"num_hidden_layers\":2,", "\"num_hidden_layers\":-2,"), &m),
              OKV_ERR_FORMAT, "negative layers");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"num_key_value_heads\":2,", "\"num_key_value_heads\":3,"), &m),
              OKV_ERR_FORMAT, "heads not a multiple of kv heads");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"low_freq_factor\":1.0,", ""), &m), OKV_ERR_FORMAT,
              "llama3 without low_freq_factor");
    CHECK_MSG("low_freq_factor", "llama3 without low_freq_factor");
    /* YaRN (the numbers against transformers: test_engine_ref's qwen2_yarn): the factor as given, the
     * attention factor 0.1 ln 8 + 1, the served context original x factor when that is longer */
    hf_write(&h, dir, subst(k_llama_cfg, "\"rope_type\":\"llama3\"", "\"rope_type\":\"yarn\""), 1);
    st = okv_model_load(dir, &m);
    CHECK(st == OKV_OK && m->cfg.rope_scaling == OKV_ROPE_SCALING_YARN && m->cfg.rope_factor == 8.0f &&
              m->cfg.rope_orig_max_ctx == 8192 && m->cfg.rope_beta_fast == 32.0f && m->cfg.rope_beta_slow == 1.0f &&
              fabsf(m->cfg.rope_attn_factor - (float)(0.1 * log(8.0) + 1.0)) < 1e-6f && m->cfg.max_ctx == 131072,
          "yarn: %s", st == OKV_OK ? "fields" : okv_last_error());
    okv_model_free(m);
    m = NULL;
    {
        const char *qy = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":2,"
                         "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":128,"
                         "\"max_position_embeddings\":32768,\"tie_word_embeddings\":true,"
                         "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}}";
        hf_write(&h, dir, qy, 1);
        st = okv_model_load(dir, &m);
        CHECK(st == OKV_OK && m->cfg.rope_scaling == OKV_ROPE_SCALING_YARN && m->cfg.max_ctx == 131072,
              "yarn as Qwen2.5 documents it: context %d (131072 expected): %s", m ? m->cfg.max_ctx : -1,
              st == OKV_OK ? "" : okv_last_error());
        okv_model_free(m);
        m = NULL;
        CHECK_ERR(load_cfg(dir, &h, subst(qy, "\"factor\":4.0,", ""), &m), OKV_ERR_FORMAT, "yarn without factor");
        CHECK_MSG("factor", "yarn without factor");
        CHECK_ERR(load_cfg(dir, &h, subst(qy, "\"factor\":4.0,", "\"factor\":4.0,\"truncate\":false,"), &m),
                  OKV_ERR_UNSUPPORTED, "yarn without truncation");
        CHECK_MSG("truncate", "yarn without truncation");
        CHECK_ERR(load_cfg(dir, &h, subst(qy, "\"type\":\"yarn\"", "\"type\":\"dynamic\""), &m), OKV_ERR_UNSUPPORTED,
                  "dynamic rope scaling");
        CHECK_MSG("dynamic", "dynamic rope scaling");
    }
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"model_type\":\"llama\"", "\"model_type\":\"gemma3\""), &m),
              OKV_ERR_UNSUPPORTED, "gemma3 config");
    CHECK_MSG("gemma3", "gemma3 config");
    CHECK_ERR(load_cfg(dir, &h, "{\"hidden_size\": 64,", &m), OKV_ERR_FORMAT, "malformed JSON");
    CHECK_ERR(load_cfg(dir, &h, "[1,2,3]", &m), OKV_ERR_FORMAT, "config not an object");
    CHECK_ERR(load_cfg(dir, &h, "", &m), OKV_ERR_FORMAT, "empty config");
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"hidden_size\":64,", "\"hidden_size\":80,"), &m), OKV_ERR_FORMAT,
              "hidden_size does not match tensors");
    CHECK_MSG("model.embed_tokens.weight", "hidden_size does not match tensors");
    CHECK_ERR(load_cfg(dir, &h, NULL, &m), OKV_ERR_NOT_FOUND, "no config.json");
    CHECK_MSG("config.json", "no config.json");
    /* a float field past the largest float (it would be read as inf) */
    CHECK_ERR(load_cfg(dir, &h, subst(k_llama_cfg, "\"high_freq_factor\":4.0,", "\"high_freq_factor\":1e39,"), &m),
              OKV_ERR_FORMAT, "high_freq_factor 1e39");
    CHECK_MSG("high_freq_factor", "high_freq_factor 1e39");
    /* old-style rope_scaling {type: linear}, and the defaults of absent fields */
    {
        const char *lin = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":2,"
                          "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":128,"
                          "\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}";
        hf_write(&h, dir, lin, 1);
        st = okv_model_load(dir, &m);
        CHECK(st == OKV_OK && m->cfg.rope_scaling == OKV_ROPE_SCALING_LINEAR && m->cfg.rope_factor == 2.0f &&
                  m->cfg.max_ctx == 2048 && m->cfg.rope_theta == 10000.0f && m->cfg.tied_embeddings /* no lm_head */,
              "linear / defaults: %s", okv_last_error());
        okv_model_free(m);
        m = NULL;
    }

    test_hf_fp8(dir, &h);
    hf_free(&h);
    hf_tiny(&h, "llama", 2, 64, 4, 2, 16, 96, 128, false);

    /* Tensor faults. */
    struct st_t *t = hf_find(&h, "model.layers.1.mlp.up_proj.weight");
    t->shape[0] = 95;   /* the bytes no longer match the shape */
    CHECK_ERR(load_cfg(dir, &h, k_llama_cfg, &m), OKV_ERR_FORMAT, "data_offsets vs shape");
    CHECK_MSG("model.layers.1.mlp.up_proj.weight", "data_offsets vs shape");
    t->shape[0] = 48;
    t->shape[1] = 128;   /* same bytes, wrong shape */
    CHECK_ERR(load_cfg(dir, &h, k_llama_cfg, &m), OKV_ERR_FORMAT, "wrong shape");
    CHECK_MSG("model.layers.1.mlp.up_proj.weight", "wrong shape");
    t->shape[0] = 96;
    t->shape[1] = 64;
    t->dtype = "I16";   /* same size as F16: a valid file, an unsupported dtype */
    CHECK_ERR(load_cfg(dir, &h, k_llama_cfg, &m), OKV_ERR_UNSUPPORTED, "I16 weight");
    CHECK_MSG("I16", "I16 weight");
    t->dtype = "Q9";
    CHECK_ERR(load_cfg(dir, &h, k_llama_cfg, &m), OKV_ERR_FORMAT, "unknown dtype");
    t->dtype = "F16";
    CHECK(load_cfg(dir, &h, k_llama_cfg, &m) == OKV_OK, "restored: %s", okv_last_error());
    hf_drop(&h, "model.layers.1.self_attn.v_proj.weight");
    CHECK_ERR(load_cfg(dir, &h, k_llama_cfg, &m), OKV_ERR_NOT_FOUND, "missing v_proj");
    CHECK_MSG("model.layers.1.self_attn.v_proj.weight", "missing v_proj");
    hf_free(&h);

    /* Byte-level safetensors faults on a one-layer folder. */
    hf_tiny(&h, "llama", 1, 32, 2, 1, 16, 32, 32, false);
    const char *small_cfg = "{\"model_type\":\"llama\",\"hidden_size\":32,\"intermediate_size\":32,\"num_hidden_layers\":1,"
                            "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"vocab_size\":32}";
    tmp_path(dir, sizeof dir, "hf_small");
    hf_write(&h, dir, small_cfg, 1);
    CHECK(okv_model_load(dir, &m) == OKV_OK, "hf_small: %s", okv_last_error());
    okv_model_free(m);
    m = NULL;
    struct buf b = {0};
    st_serialize(&h, 0, h.n, &b);
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    int wrong = 0;
    size_t first = 0;
    write_file(p, b.p, b.n);
    for (size_t n = b.n; n-- > 0;) {
        if (truncate(p, (off_t)n) != 0) {
            perror(p);
            exit(1);
        }
        st = okv_model_load(dir, &m);
        if (st != OKV_ERR_FORMAT || !okv_last_error()[0] || m) {
            if (!wrong++)
                first = n;
            okv_model_free(m);
            m = NULL;
        }
    }
    CHECK(!wrong, "%d of %zu safetensors prefixes not refused as FORMAT (first at %zu: %s)", wrong, b.n, first,
          okv_last_error());
    struct buf c = {0};
    b_put(&c, b.p, b.n);
    uint64_t huge = (uint64_t)1 << 62;
    memcpy(c.p, &huge, 8);
    write_file(p, c.p, c.n);
    CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "header length 2^62");
    memcpy(c.p, b.p, b.n);
    c.p[8] = '[';
    write_file(p, c.p, c.n);
    CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "header not an object");
    memcpy(c.p, b.p, b.n);
    c.p[20] = '}';
    write_file(p, c.p, c.n);
    CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "header malformed");
    /* data_offsets beyond the buffer: the first end offset 2048 becomes 9048 */
    {
        char *hdr = (char *)c.p + 8;
        memcpy(c.p, b.p, b.n);
        char *q = strstr(hdr, "\"data_offsets\":[0,");
        CHECK(q != NULL, "offsets present");
        if (q) {
            q += strlen("\"data_offsets\":[0,");
            *q = '9';
            write_file(p, c.p, c.n);
            CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "data_offsets past end");
        }
    }
    /* two tensors' data_offsets overlapping: refused, both named */
    {
        struct buf d = {0};
        g_overlap = 2;
        st_serialize(&h, 0, h.n, &d);
        g_overlap = -1;
        write_file(p, d.p, d.n);
        CHECK_ERR(okv_model_load(dir, &m), OKV_ERR_FORMAT, "overlapping data_offsets");
        CHECK_MSG(h.t[1].name, "overlapping data_offsets: the first");
        CHECK_MSG(h.t[2].name, "overlapping data_offsets: the second");
        free(d.p);
    }
    /* Random byte corruption of the header: any status, never a crash or leak. */
    for (int it = 0; it < 500; it++) {
        memcpy(c.p, b.p, b.n);
        for (int k = 0; k < 1 + it % 3; k++) {
            g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
            c.p[(g_rng >> 33) % 600] = (uint8_t)(g_rng >> 20);
        }
        write_file(p, c.p, c.n);
        if (okv_model_load(dir, &m) == OKV_OK)
            okv_model_free(m);
        m = NULL;
    }
    free(c.p);
    free(b.p);
    hf_free(&h);
}

/* ---------------------------------------------------------------- real model */

struct ref_row {
    const char *tensor;
    int row;
    float first[8];
    double sum, sumsq;
};

/* From tests/py/model_ref_values.py (gguf-py's dequantize). */
static const struct ref_row k_ref_rows[] = {
    {"token_embd.weight", 0, {-0.106544495f, 0.0329780579f, 0.0481987f, -0.0228309631f, -0.0684928894f, -0.0456619263f, 0.0202941895f, -0.121765137f}, -2.25410938, 8.5952949},
    {"token_embd.weight", 1, {-0.0238037109f, -0.0158691406f, -0.0396728516f, 0.0158691406f, -0.111083984f, -0.00793457031f, -0.0634765625f, 0.0714111328f}, 0.35922718, 10.9534741},
    {"token_embd.weight", 1000, {-0.111938477f, -0.0739593506f, 0.037979126f, -0.0179901123f, -0.161911011f, -0.00999450684f, 0.0299835205f, 0.239868164f}, 1.97842503, 7.0178814},
    {"token_embd.weight", 49151, {0.011505127f, 0.00575256348f, 0.0977935791f, -0.0977935791f, 0.0862884521f, -0.0460205078f, 0.172576904f, 0.0517730713f}, -0.466220856, 15.1939829},
    {"blk.0.attn_q.weight", 0, {-0.0963134766f, 0.157348633f, -0.0963134766f, -0.73046875f, 1.17199707f, -0.0963134766f, 0.0305175781f, 0.664672852f}, 1.00726318, 94.832906},
    {"blk.0.attn_q.weight", 575, {-0.156799316f, 0.154327393f, 0.341003418f, 0.029876709f, 0.216552734f, -0.28125f, 0.0921020508f, -0.0323486328f}, -4.73495483, 22.9561339},
    {"blk.29.ffn_down.weight", 7, {0.30670166f, 0.0433959961f, -0.219909668f, -0.00048828125f, 0.0872802734f, -0.0443725586f, -0.307678223f, -0.0443725586f}, -11.4091797, 52.0322336},
};

static int test_real_model(void)
{
    const char *src = getenv("OKV_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src ? src : ".");
    if (access(path, R_OK) != 0) {
        printf("test_model: %s absent, real-model check skipped\n", path);
        return 0;
    }
    struct okv_model *m = NULL;
    enum okv_status st = okv_model_load(path, &m);
    CHECK(st == OKV_OK, "load SmolLM2: %s", okv_last_error());
    if (st)
        return 1;
    const struct okv_model_config *c = &m->cfg;
    CHECK(c->arch == OKV_ARCH_LLAMA && c->n_layers == 30 && c->dim == 576 && c->n_heads == 9 && c->n_kv_heads == 3 &&
              c->head_dim == 64 && c->ffn_dim == 1536 && c->vocab_size == 49152 && c->tied_embeddings && c->max_ctx == 8192 &&
              c->rope_theta == 100000.0f && c->rms_eps == 1e-5f && c->rope_pairing == OKV_ROPE_PAIRING_INTERLEAVED,
          "SmolLM2 hyper-parameters");
    CHECK(m->tok_embd.dtype == OKV_DTYPE_Q8_0 && m->layers[0].wq.dtype == OKV_DTYPE_Q4_1, "SmolLM2 dtypes");
    float row[1536];
    for (size_t i = 0; i < sizeof k_ref_rows / sizeof k_ref_rows[0]; i++) {
        const struct ref_row *r = &k_ref_rows[i];
        struct okv_tensor_view v;
        if (okv_gguf_find_tensor(m->gguf, r->tensor, &v) != OKV_OK) {
            CHECK(0, "%s: %s", r->tensor, okv_last_error());
            continue;
        }
        int64_t n = v.ne[0];
        st = okv_tensor_to_f32(&v, r->row * n, n, row);
        CHECK(st == OKV_OK, "%s row %d: %s", r->tensor, r->row, okv_last_error());
        double sum = 0, sq = 0;
        int bad = 0;
        for (int j = 0; j < 8; j++)
            bad += fabsf(row[j] - r->first[j]) > 1e-6f * (1 + fabsf(r->first[j]));
        for (int64_t j = 0; j < n; j++) {
            sum += row[j];
            sq += (double)row[j] * row[j];
        }
        CHECK(!bad, "%s row %d: first values differ (%.9g vs %.9g)", r->tensor, r->row, row[0], r->first[0]);
        CHECK(fabs(sum - r->sum) < 1e-4 * (1 + fabs(r->sum)) && fabs(sq - r->sumsq) < 1e-5 * r->sumsq,
              "%s row %d: sum %.9g (want %.9g), sumsq %.9g (want %.9g)", r->tensor, r->row, sum, r->sum, sq, r->sumsq);
    }
    /* The tied output is the embedding itself. */
    CHECK(m->output.data == m->tok_embd.data, "SmolLM2 tied output");
    /* Dequantizing the whole embedding is a throughput smoke test (~28M values). */
    float *all = malloc((size_t)49152 * 576 * sizeof(float));
    double t0 = okv_now();
    st = okv_tensor_to_f32(&m->tok_embd, 0, (int64_t)49152 * 576, all);
    double dt = okv_now() - t0;
    CHECK(st == OKV_OK, "full embedding");
    printf("test_model: dequantized token_embd (q8_0, 28.3M values) in %.1f ms\n", dt * 1e3);
    struct okv_tensor_view w = m->layers[3].w_up;
    float *up = malloc((size_t)okv_tensor_nelements(&w) * sizeof(float));
    t0 = okv_now();
    st = okv_tensor_to_f32(&w, 0, okv_tensor_nelements(&w), up);
    dt = okv_now() - t0;
    printf("test_model: dequantized blk.3.ffn_up (q4_1, %.1fM values) in %.2f ms\n", (double)okv_tensor_nelements(&w) / 1e6,
           dt * 1e3);
    free(up);
    free(all);
    char desc[2048];
    okv_model_describe(m, desc, sizeof desc);
    CHECK(strstr(desc, "parameters 134515008") != NULL, "describe: %s", desc);
    okv_model_free(m);
    return 0;
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "%s/okv_test_model_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_dtypes();
    test_half();
    test_gguf_reader();
    test_gguf_models();
    test_gguf_corrupt();
    test_hf();
    test_real_model();

    int64_t live = okv_alloc_live_count(OKV_TAG_MODEL);
    CHECK(live == 0, "%lld allocations leaked under OKV_TAG_MODEL (%lld bytes)", (long long)live,
          (long long)okv_alloc_live_bytes(OKV_TAG_MODEL));
    nftw(g_tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    printf("test_model: %d checks, %d failed\n", g_checks, g_fails);
    return g_fails ? 1 : 0;
}
