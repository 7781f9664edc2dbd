/* The CPU backend: fp32 weights and KV in host memory, a thread pool for the
 * element-wise ops and attention, OpenBLAS (single-threaded calls, split by rows
 * across the pool) for the projections. It is the reference the CUDA backend is
 * tested against. */
#include "backend/cpu/cpu_internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <pthread.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define CTX(be) ((struct cpu_ctx *)(be)->ctx)

/* ---- memory ---- */

static enum okv_status cpu_mem_alloc(okv_backend *be, size_t n, okv_bmem **out)
{
    okv_bmem *m = okv_calloc(1, sizeof *m, OKV_TAG_BACKEND);
    if (m)
        m->data = okv_malloc((n ? n : 1) * sizeof(float), OKV_TAG_BACKEND);
    if (!m || !m->data) {
        if (m)
            okv_free(m);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: cannot allocate %zu floats", n);
    }
    m->n = n;
    *out = m;
    return OKV_OK;
}

static void cpu_mem_free(okv_backend *be, okv_bmem *m)
{
    if (!m)
        return;
    okv_free(m->data);
    okv_free(m);
}

static enum okv_status cpu_mem_write(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n)
{
    if (off + n > m->n)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: write past buffer end");
    memcpy(m->data + off, src, n * sizeof(float));
    return OKV_OK;
}

static enum okv_status cpu_mem_read(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n)
{
    if (off + n > m->n)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: read past buffer end");
    memcpy(dst, m->data + off, n * sizeof(float));
    return OKV_OK;
}

struct conv_job {
    const struct okv_tensor_view *t;
    float *dst;
    int64_t row_len, rows_per_item, rows;
    _Atomic int failed;
};

static void conv_item(void *vctx, int64_t i)
{
    struct conv_job *j = vctx;
    int64_t r0 = i * j->rows_per_item, r1 = r0 + j->rows_per_item;
    if (r1 > j->rows)
        r1 = j->rows;
    if (okv_tensor_to_f32(j->t, r0 * j->row_len, (r1 - r0) * j->row_len, j->dst + r0 * j->row_len) != OKV_OK)
        j->failed = 1;
}

static enum okv_status cpu_weight_load(okv_backend *be, const struct okv_tensor_view *t, okv_bweight **out)
{
    int64_t n = okv_tensor_nelements(t);
    okv_bweight *w = okv_calloc(1, sizeof *w, OKV_TAG_BACKEND);
    if (w)
        w->data = okv_malloc((size_t)n * sizeof(float), OKV_TAG_BACKEND);
    if (!w || !w->data) {
        if (w)
            okv_free(w);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: cannot allocate weight %s (%lld floats)", t->name, (long long)n);
    }
    w->row_len = t->ne[0];
    w->rows = n / t->ne[0];
    struct conv_job j = {t, w->data, w->row_len, 64, w->rows, 0};
    okv_parallel_for(CTX(be)->pool, (w->rows + 63) / 64, conv_item, &j);
    if (j.failed) {
        okv_free(w->data);
        okv_free(w);
        return okv_set_error(OKV_ERR_FORMAT, "cpu backend: cannot convert weight %s", t->name);
    }
    /* matrices in a compact format keep it too, for decode-shaped projections (cpu_qgemv.c) */
    const size_t qbytes = okv_dtype_nbytes(t->dtype, n);
    if (CTX(be)->qgemv && okv_cpu_qgemv_type(t->dtype) && w->rows > 1 && w->row_len % 32 == 0 &&
        w->row_len % okv_dtype_block(t->dtype) == 0 &&
        (!t->nbytes || t->nbytes >= qbytes)) {
        w->q = okv_malloc(qbytes, OKV_TAG_BACKEND);
        if (!w->q) {
            okv_free(w->data);
            okv_free(w);
            return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: cannot allocate weight %s (%zu bytes as stored)", t->name,
                                 qbytes);
        }
        memcpy(w->q, t->data, qbytes);
        w->qtype = t->dtype;
        w->q_row_bytes = okv_dtype_nbytes(t->dtype, w->row_len);
    }
    *out = w;
    return OKV_OK;
}

static void cpu_weight_free(okv_backend *be, okv_bweight *w)
{
    if (!w)
        return;
    okv_free(w->data);
    okv_free(w->q);
    okv_free(w);
}

static size_t cpu_weight_bytes(const okv_bweight *w)
{
    return (size_t)(w->rows * w->row_len) * sizeof(float) + (w->q ? w->q_row_bytes * (size_t)w->rows : 0);
}

static enum okv_status cpu_step_begin(okv_backend *be, const struct okv_step_meta *meta)
{
    CTX(be)->meta = *meta;
    return OKV_OK;
}

/* ---- ops ---- */

/* embed; prev (NULL: none) as embed_prev: rows with prev[t] >= 0 take id prev[t] of
 * sample_queue's buffer `slot` */
static enum okv_status embed_rows(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids,
                                  const int32_t *prev, int slot, int n, int dim)
{
    const struct cpu_ctx *c = CTX(be);
    if (n < 0 || out->n < (size_t)n * dim || table->row_len != dim || (prev && (slot < 0 || slot > 1)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu embed: bad shapes (%d rows, slot %d)", n, slot);
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (prev && prev[i] >= 0) {
            if (prev[i] >= c->qids_n[slot])
                return okv_set_error(OKV_ERR_INVALID_ARG, "cpu embed: row %d takes id %d of %d queued", i, prev[i],
                                     c->qids_n[slot]);
            id = c->qids[slot][prev[i]];
        }
        if (id < 0 || id >= table->rows)
            return okv_set_error(OKV_ERR_INVALID_ARG, "token id %d out of range [0, %lld)", id, (long long)table->rows);
        memcpy(out->data + (size_t)i * dim, table->data + (size_t)id * dim, sizeof(float) * (size_t)dim);
    }
    return OKV_OK;
}

static enum okv_status cpu_embed(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids, int n, int dim)
{
    return embed_rows(be, out, table, ids, NULL, 0, n, dim);
}

static void rmsnorm_row(float *o, const float *x, const float *w, int dim, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < dim; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / dim + eps));
    for (int i = 0; i < dim; i++)
        o[i] = x[i] * inv * w[i];
}

static enum okv_status cpu_rmsnorm(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, int n, int dim, float eps)
{
    if (out->n < (size_t)n * dim || x->n < (size_t)n * dim || w->rows * w->row_len != dim)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu rmsnorm: bad shapes");
    for (int i = 0; i < n; i++)
        rmsnorm_row(out->data + (size_t)i * dim, x->data + (size_t)i * dim, w->data, dim, eps);
    return OKV_OK;
}

static enum okv_status cpu_head_rmsnorm(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int heads, int hd, float eps)
{
    if (x->n < (size_t)n * heads * hd || w->rows * w->row_len != hd)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu head_rmsnorm: bad shapes");
    for (size_t i = 0; i < (size_t)n * heads; i++)
        rmsnorm_row(x->data + i * hd, x->data + i * hd, w->data, hd, eps);
    return OKV_OK;
}

struct mm_job {
    float *out;
    const float *x, *w, *bias;
    int n, k, m, chunk;
    const okv_bweight *qw;   /* decode-shaped: read the stored format (cpu_qgemv.c) */
};

static void mm_item(void *vctx, int64_t i)
{
    const struct mm_job *j = vctx;
    int r0 = (int)i * j->chunk, r1 = r0 + j->chunk;
    if (r1 > j->m)
        r1 = j->m;
    if (j->qw) {   /* input rows four at a time: each pass reads the rows' weights once */
        for (int t0 = 0; t0 < j->n; t0 += OKV_CPU_QGEMV_ROWS)
            okv_cpu_qgemv(j->qw, j->x + (size_t)t0 * j->k, j->n - t0 < OKV_CPU_QGEMV_ROWS ? j->n - t0 : OKV_CPU_QGEMV_ROWS,
                          j->m, r0, r1, j->out + (size_t)t0 * j->m);
    } else if (j->n == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, r1 - r0, j->k, 1.0f, j->w + (size_t)r0 * j->k, j->k,
                    j->x, 1, 0.0f, j->out + r0, 1);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, r1 - r0, j->k, 1.0f, j->x, j->k,
                    j->w + (size_t)r0 * j->k, j->k, 0.0f, j->out + r0, j->m);
    }
    if (j->bias)
        for (int t = 0; t < j->n; t++)
            for (int r = r0; r < r1; r++)
                j->out[(size_t)t * j->m + r] += j->bias[r];
}

static enum okv_status cpu_matmul(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w,
                                  const okv_bweight *bias, int n, int k, int m)
{
    if (w->row_len != k || w->rows != m || x->n < (size_t)n * k || out->n < (size_t)n * m ||
        (bias && bias->rows * bias->row_len != m))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu matmul: bad shapes (n %d, k %d, m %d; weight %lld x %lld)",
                             n, k, m, (long long)w->rows, (long long)w->row_len);
    struct cpu_ctx *c = CTX(be);
    int items = c->n_threads * 4;
    int chunk = (m + items - 1) / items;
    chunk = (chunk + 15) & ~15;
    if (chunk < 16)
        chunk = 16;
    struct mm_job j = {out->data, x->data, w->data, bias ? bias->data : NULL, n, k, m, chunk,
                       w->q && n <= OKV_CPU_QGEMV_MAX_ROWS ? w : NULL};
    okv_parallel_for(c->pool, (m + chunk - 1) / chunk, mm_item, &j);
    return OKV_OK;
}

static enum okv_status cpu_rope(okv_backend *be, okv_bmem *x, int n, int heads, int hd, bool half_pairing)
{
    const float *cs = CTX(be)->meta.rope_cos_sin;
    if (x->n < (size_t)n * heads * hd || n != CTX(be)->meta.n_tokens || (hd & 1))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu rope: bad shapes");
    const int half = hd / 2;
    for (int t = 0; t < n; t++) {
        const float *row = cs + (size_t)t * hd;
        for (int h = 0; h < heads; h++) {
            float *v = x->data + ((size_t)t * heads + h) * hd;
            for (int i = 0; i < half; i++) {
                float c = row[2 * i], s = row[2 * i + 1];
                int a = half_pairing ? i : 2 * i, b = half_pairing ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
    return OKV_OK;
}

static enum okv_status cpu_swiglu(okv_backend *be, okv_bmem *out, const okv_bmem *gate, const okv_bmem *up, int n, int f)
{
    size_t cnt = (size_t)n * f;
    if (out->n < cnt || gate->n < cnt || up->n < cnt)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu swiglu: bad shapes");
    for (size_t i = 0; i < cnt; i++) {
        float g = gate->data[i];
        out->data[i] = g / (1.0f + expf(-g)) * up->data[i];
    }
    return OKV_OK;
}

static enum okv_status cpu_add(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t count)
{
    if (x->n < count || y->n < count)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu add: bad shapes");
    for (size_t i = 0; i < count; i++)
        x->data[i] += y->data[i];
    return OKV_OK;
}

static enum okv_status cpu_gather_rows(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows, int width)
{
    if (out->n < (size_t)n_rows * width)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu gather_rows: bad shapes");
    for (int i = 0; i < n_rows; i++) {
        if ((size_t)(rows[i] + 1) * width > x->n)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu gather_rows: row %d out of range", rows[i]);
        memmove(out->data + (size_t)i * width, x->data + (size_t)rows[i] * width, sizeof(float) * (size_t)width);
    }
    return OKV_OK;
}

static enum okv_status cpu_sample(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                  const struct okv_sampling *params, const double *u, int32_t *out)
{
    if (logits->n < (size_t)n_rows * vocab)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu sample: %d rows of %d do not fit the buffer", n_rows, vocab);
    float *scratch = NULL;
    for (int i = 0; i < n_rows; i++) {
        if (params[i].temperature > 0.0f && !scratch &&
            !(scratch = okv_malloc(sizeof(float) * (size_t)vocab, OKV_TAG_BACKEND)))
            return okv_set_error(OKV_ERR_NO_MEMORY, "cpu sample: out of memory");
        out[i] = okv_sample_u(logits->data + (size_t)i * vocab, vocab, &params[i], u[i], scratch);
    }
    okv_free(scratch);
    return OKV_OK;
}

/* overlapped decoding: the CPU computes as it goes, so the queue is only a buffer */
static enum okv_status cpu_sample_queue(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                        const struct okv_sampling *params, const double *u, int slot,
                                        const int32_t *copy_rows, int n_copy)
{
    struct cpu_ctx *c = CTX(be);
    if (slot < 0 || slot > 1 || n_rows < 0 || n_copy < 0 || n_copy > n_rows || (n_copy && !copy_rows))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu sample_queue: slot %d, %d rows, %d to copy", slot, n_rows, n_copy);
    c->qrows_n[slot] = 0;
    if ((size_t)n_copy * vocab > c->qrows_cap[slot]) {
        float *r = okv_realloc(c->qrows[slot], sizeof(float) * (size_t)n_copy * vocab, OKV_TAG_BACKEND);
        if (!r)
            return okv_set_error(OKV_ERR_NO_MEMORY, "cpu sample_queue: out of memory");
        c->qrows[slot] = r;
        c->qrows_cap[slot] = (size_t)n_copy * vocab;
    }
    for (int i = 0; i < n_copy; i++) {   /* before sampling: the rows as the model gave them */
        if (copy_rows[i] < 0 || copy_rows[i] >= n_rows)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cpu sample_queue: row %d of %d", copy_rows[i], n_rows);
        memcpy(c->qrows[slot] + (size_t)i * vocab, logits->data + (size_t)copy_rows[i] * vocab, sizeof(float) * (size_t)vocab);
    }
    c->qrows_n[slot] = n_copy;
    c->qrows_vocab[slot] = vocab;
    if (n_rows > c->qids_cap[slot]) {
        int32_t *q = okv_realloc(c->qids[slot], sizeof(int32_t) * (size_t)n_rows, OKV_TAG_BACKEND);
        if (!q)
            return okv_set_error(OKV_ERR_NO_MEMORY, "cpu sample_queue: out of memory");
        c->qids[slot] = q;
        c->qids_cap[slot] = n_rows;
    }
    c->qids_n[slot] = 0;
    enum okv_status st = n_rows ? cpu_sample(be, logits, n_rows, vocab, params, u, c->qids[slot]) : OKV_OK;
    if (st == OKV_OK)
        c->qids_n[slot] = n_rows;
    return st;
}

static enum okv_status cpu_sample_collect(okv_backend *be, int slot, int32_t *out, int n_rows, float *rows_out, int n_copy)
{
    struct cpu_ctx *c = CTX(be);
    if (slot < 0 || slot > 1 || n_rows < 0 || n_rows > c->qids_n[slot] || n_copy != c->qrows_n[slot])
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu sample_collect: slot %d holds %d ids and %d rows, not %d and %d",
                             slot, slot < 0 || slot > 1 ? 0 : c->qids_n[slot], slot < 0 || slot > 1 ? 0 : c->qrows_n[slot],
                             n_rows, n_copy);
    if (n_rows)
        memcpy(out, c->qids[slot], sizeof(int32_t) * (size_t)n_rows);
    if (n_copy && rows_out)
        memcpy(rows_out, c->qrows[slot], sizeof(float) * (size_t)n_copy * (size_t)c->qrows_vocab[slot]);
    return OKV_OK;
}

static enum okv_status cpu_embed_prev(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids,
                                      const int32_t *prev, int slot, int n, int dim)
{
    return embed_rows(be, out, table, ids, prev, slot, n, dim);
}

static enum okv_status cpu_sync(okv_backend *be) { return OKV_OK; }

static void cpu_destroy(okv_backend *be)
{
    struct cpu_ctx *c = CTX(be);
    okv_threadpool_free(c->pool);
    okv_free(c->qids[0]);
    okv_free(c->qids[1]);
    okv_free(c->qrows[0]);
    okv_free(c->qrows[1]);
    okv_free(c);
    okv_free(be);
}

static struct okv_backend_ops cpu_ops;
static pthread_once_t cpu_ops_once = PTHREAD_ONCE_INIT;
static void fill_ops(void)
{
    okv_cpu_fill_kv_ops(&cpu_ops);
    okv_cpu_fill_resid_ops(&cpu_ops);
}

static struct okv_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_write = cpu_mem_write,
    .mem_read = cpu_mem_read,
    .weight_load = cpu_weight_load,
    .weight_free = cpu_weight_free,
    .weight_bytes = cpu_weight_bytes,
    .step_begin = cpu_step_begin,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .head_rmsnorm = cpu_head_rmsnorm,
    .rope = cpu_rope,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .gather_rows = cpu_gather_rows,
    .attention = okv_cpu_attention,
    .sample = cpu_sample,
    .sample_queue = cpu_sample_queue,
    .sample_collect = cpu_sample_collect,
    .embed_prev = cpu_embed_prev,
    .sync = cpu_sync,
};

enum okv_status okv_backend_cpu_create(const struct okv_backend_params *p, okv_backend **out)
{
    *out = NULL;
    int n = p && p->n_threads > 0 ? p->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 256)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu backend: %d threads is too many", n);
    okv_backend *be = okv_calloc(1, sizeof *be, OKV_TAG_BACKEND);
    struct cpu_ctx *c = okv_calloc(1, sizeof *c, OKV_TAG_BACKEND);
    if (!be || !c) {
        okv_free(be);
        okv_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu backend: out of memory");
    }
    enum okv_status st = okv_threadpool_create(n, &c->pool);
    if (st != OKV_OK) {
        okv_free(be);
        okv_free(c);
        return st;
    }
    pthread_once(&cpu_ops_once, fill_ops);
    /* The pool splits work; each OpenBLAS call runs on one thread. */
    openblas_set_num_threads(1);
    c->n_threads = n;
    {
        /* decode-shaped projections from the stored format (cpu_qgemv.c; SmolLM2 Q4_1 on 2
         * cores: bench/RESULTS.md section 1); OKV_CPU_QGEMV=0 keeps fp32 alone */
        const char *q = getenv("OKV_CPU_QGEMV");
        c->qgemv = !(q && *q && atoi(q) == 0);
    }
    be->ops = &cpu_ops;
    be->ctx = c;
    *out = be;
    return OKV_OK;
}
