/* The CUDA backend: the ops table, device memory, weights, projections and the
 * step's metadata. bf16 weights and KV, fp32 activations.
 *
 * Projections: cuBLAS GEMM with bf16 operands, fp32 accumulation and fp32 output.
 * The fp32 activation is first converted to bf16 by a kernel (cuBLAS has no mixed
 * fp32 x bf16 GEMM): the conversion moves n*k*6 bytes, against m*k*2 bytes of weight
 * that the GEMM reads, so in decode (n << m) it costs a few percent, and the GEMM
 * then runs on the tensor cores at the bf16 rate in prefill.
 * Vector weights (norm weights, biases: one row) are kept in fp32 as well, so the
 * norms and biases add no bf16 rounding; they are a negligible share of memory. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_prefill.cuh"

#include <cuda.h>
#include "backend/cuda/cuda_kernels.cuh"
#include "backend/cuda/cuda_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTX(be) OKV_CUDA_CTX(be)

enum okv_status okv_cuda_err(cudaError_t e, const char *what, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    (void)cudaGetLastError();   /* clear a non-sticky error so later launch checks do not report it */
    if (e == cudaErrorMemoryAllocation)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of device or pinned memory: %s (%s:%d)", what, base, line);
    return okv_set_error(OKV_ERR_BACKEND, "cuda backend: %s: %s (%s, %s:%d)", what, cudaGetErrorString(e),
                         cudaGetErrorName(e), base, line);
}

enum okv_status okv_cublas_err(cublasStatus_t e, const char *what, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (e == CUBLAS_STATUS_ALLOC_FAILED)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: cuBLAS out of memory: %s (%s:%d)", what, base, line);
    return okv_set_error(OKV_ERR_BACKEND, "cuda backend: cuBLAS %s: %s (%s:%d)", what, cublasGetStatusString(e), base, line);
}

#define OKV_BLAS(call, what)                                                                \
    do {                                                                                    \
        cublasStatus_t okv_b_ = (call);                                                     \
        if (okv_b_ != CUBLAS_STATUS_SUCCESS)                                                \
            return okv_cublas_err(okv_b_, (what), __FILE__, __LINE__);                      \
    } while (0)

/* ---- staging ring ---- */

static void ring_free(struct cuda_ring *r)
{
    if (r->h)
        cudaFreeHost(r->h);
    if (r->d)
        cudaFree(r->d);
    r->h = r->d = NULL;
    r->cap = r->head = 0;
    r->m_first = r->m_count = 0;
    r->n_open = 0;
}

static enum okv_status ring_grow(struct cuda_ctx *c, size_t need)
{
    struct cuda_ring *r = &c->ring;
    enum okv_status st = okv_cuda_sync_all(c);
    if (st != OKV_OK)
        return st;
    size_t cap = r->cap ? r->cap : ((size_t)4 << 20);
    while (cap < need)
        cap *= 2;
    ring_free(r);
    OKV_CU(cudaHostAlloc((void **)&r->h, cap, cudaHostAllocDefault), "staging ring (pinned host)");
    cudaError_t e = cudaMalloc((void **)&r->d, cap);
    if (e != cudaSuccess) {
        cudaFreeHost(r->h);
        r->h = NULL;
        return okv_cuda_err(e, "staging ring (device)", __FILE__, __LINE__);
    }
    r->cap = cap;
    return OKV_OK;
}

static bool overlaps(size_t a0, size_t a1, size_t b0, size_t b1) { return a0 < b1 && b0 < a1; }

enum okv_status okv_cuda_ring_reserve(struct cuda_ctx *c, size_t cap)
{
    /* not while regions reserved by the caller are open: growing replaces the buffers */
    return cap > c->ring.cap && c->ring.n_open == 0 ? ring_grow(c, cap) : OKV_OK;
}

enum okv_status okv_cuda_ring_alloc(struct cuda_ctx *c, size_t n, void **h, void **d)
{
    struct cuda_ring *r = &c->ring;
    n = (n + 255) & ~(size_t)255;
    if (n == 0)
        n = 256;
    if (n > r->cap) {
        enum okv_status st = ring_grow(c, n);
        if (st != OKV_OK)
            return st;
    }
    size_t beg = r->head;
    if (beg + n > r->cap)
        beg = 0;
    /* wait for the oldest regions until none overlaps [beg, beg+n) */
    for (;;) {
        bool hit = false;
        for (int i = 0; i < r->m_count && !hit; i++) {
            const struct cuda_ring_mark *m = &r->marks[(r->m_first + i) % OKV_CUDA_RING_MARKS];
            hit = overlaps(m->beg, m->end, beg, beg + n);
        }
        if (!hit && r->m_count < OKV_CUDA_RING_MARKS)
            break;
        struct cuda_ring_mark *old = &r->marks[r->m_first];
        OKV_CU_WAIT(c, cudaEventSynchronize(old->ev), "staging ring wait");
        r->m_first = (r->m_first + 1) % OKV_CUDA_RING_MARKS;
        r->m_count--;
    }
    int slot = (r->m_first + r->m_count) % OKV_CUDA_RING_MARKS;
    r->marks[slot].beg = beg;
    r->marks[slot].end = beg + n;
    r->marks[slot].ev = r->ev_pool[slot];
    r->m_count++;
    r->n_open++;
    r->head = beg + n;
    *h = r->h + beg;
    *d = r->d + beg;
    return OKV_OK;
}

enum okv_status okv_cuda_ring_commit(struct cuda_ctx *c, cudaStream_t s)
{
    struct cuda_ring *r = &c->ring;
    /* every region reserved since the last commit is in use until this point of s */
    const int n = r->n_open < r->m_count ? r->n_open : r->m_count;
    r->n_open = 0;
    for (int i = 0; i < n || (i == 0 && r->m_count > 0); i++) {
        int slot = (r->m_first + r->m_count - 1 - i) % OKV_CUDA_RING_MARKS;
        OKV_CU(cudaEventRecord(r->marks[slot].ev, s), "staging ring event");
    }
    return OKV_OK;
}

enum okv_status okv_cuda_upload(struct cuda_ctx *c, cudaStream_t s, const void *src, size_t n, void **d)
{
    void *h;
    enum okv_status st = okv_cuda_ring_alloc(c, n, &h, d);
    if (st != OKV_OK)
        return st;
    memcpy(h, src, n);
    OKV_CU(cudaMemcpyAsync(*d, h, n, cudaMemcpyHostToDevice, s), "upload of op metadata");
    return OKV_OK;
}

enum okv_status okv_cuda_sync_all(struct cuda_ctx *c)
{
    if (c->side)
        OKV_CU_WAIT(c, cudaStreamSynchronize(c->side), "selection stream synchronize");
    OKV_CU_WAIT(c, cudaStreamSynchronize(c->copy), "copy stream synchronize");
    OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "stream synchronize");
    return OKV_OK;
}

/* a grow-only device buffer of *cap elements holds at least n: when it must grow, the
 * stream that uses it drains (its queued ops may read the old one), then it is replaced */
enum okv_status okv_cuda_grow_device(cudaStream_t drain, void **buf, size_t *cap, size_t n, size_t elem, const char *what)
{
    if (n <= *cap)
        return OKV_OK;
    OKV_CU(cudaStreamSynchronize(drain), what);
    if (*buf)
        cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    const size_t want = n + n / 2 + 4096;
    OKV_CU(cudaMalloc(buf, want * elem), what);
    *cap = want;
    return OKV_OK;
}

enum okv_status okv_cuda_scratch(struct cuda_ctx *c, size_t n, float **out)
{
    /* selection on the side stream has its own buffer (the generic one is compute's) */
    const bool side = c->sel_stream != c->stream;
    float **buf = side ? &c->side_sc : &c->scratch;
    enum okv_status st = okv_cuda_grow_device(c->sel_stream, (void **)buf, side ? &c->side_sc_cap : &c->scratch_cap, n,
                                              sizeof(float), side ? "selection scores" : "device scratch");
    *out = *buf;
    return st;
}

/* ---- memory ---- */

static enum okv_status cuda_mem_alloc(okv_backend *be, size_t n, okv_bmem **out)
{
    *out = NULL;
    okv_bmem *m = (okv_bmem *)okv_calloc(1, sizeof *m, OKV_TAG_BACKEND);
    if (!m)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory");
    cudaError_t e = cudaMalloc((void **)&m->d, (n ? n : 1) * sizeof(float));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        okv_free(m);
        return okv_set_error(e == cudaErrorMemoryAllocation ? OKV_ERR_NO_MEMORY : OKV_ERR_BACKEND,
                             "cuda backend: cannot allocate an activation buffer of %zu floats: %s", n, cudaGetErrorString(e));
    }
    m->n = n;
    *out = m;
    return OKV_OK;
}

static void cuda_mem_free(okv_backend *be, okv_bmem *m)
{
    if (!m)
        return;
    /* the stream may still use it: cudaFree waits for the device */
    cudaFree(m->d);
    okv_free(m);
}

static enum okv_status cuda_mem_write(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n)
{
    if (off + n > m->n)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: write past buffer end (%zu + %zu > %zu)", off, n, m->n);
    /* from pageable memory: returns once src has been staged */
    OKV_CU(cudaMemcpyAsync(m->d + off, src, n * sizeof(float), cudaMemcpyHostToDevice, CTX(be)->stream), "mem_write");
    return OKV_OK;
}

static enum okv_status cuda_mem_read(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n)
{
    if (off + n > m->n)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: read past buffer end (%zu + %zu > %zu)", off, n, m->n);
    struct cuda_ctx *c = CTX(be);
    OKV_CU(cudaMemcpyAsync(dst, m->d + off, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream), "mem_read");
    OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "mem_read synchronize");
    return OKV_OK;
}

/* ---- weights ---- */

static enum okv_status wstage_init(struct cuda_ctx *c)
{
    if (c->wstage_cap)
        return OKV_OK;
    const size_t cap = (size_t)4 << 20;   /* floats: 16 MiB per buffer */
    for (int i = 0; i < 2; i++) {
        OKV_CU(cudaHostAlloc((void **)&c->wstage_h[i], cap * sizeof(float), cudaHostAllocDefault), "weight staging (pinned)");
        OKV_CU(cudaMalloc((void **)&c->wstage_d[i], cap * sizeof(float)), "weight staging (device)");
        OKV_CU(cudaEventCreateWithFlags(&c->wstage_ev[i], cudaEventDisableTiming), "weight staging event");
    }
    c->wstage_cap = cap;
    return OKV_OK;
}

static void wstage_free(struct cuda_ctx *c)
{
    for (int i = 0; i < 2; i++) {
        if (c->wstage_h[i])
            cudaFreeHost(c->wstage_h[i]);
        if (c->wstage_d[i])
            cudaFree(c->wstage_d[i]);
        if (c->wstage_ev[i])
            cudaEventDestroy(c->wstage_ev[i]);
        c->wstage_h[i] = NULL;
        c->wstage_d[i] = NULL;
        c->wstage_ev[i] = NULL;
    }
    c->wstage_cap = 0;
}

static void weight_release(okv_bweight *w)
{
    if (w->d)
        cudaFree(w->d);
    if (w->f)
        cudaFree(w->f);
    okv_free(w);
}

/* Convert the view to fp32 on the host chunk by chunk (double-buffered pinned
 * staging), upload, and convert to bf16 (and keep fp32 for vectors) on the GPU. */
static enum okv_status cuda_weight_load(okv_backend *be, const struct okv_tensor_view *t, okv_bweight **out)
{
    *out = NULL;
    struct cuda_ctx *c = CTX(be);
    const int64_t n = okv_tensor_nelements(t);
    if (n <= 0 || t->ne[0] <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: weight %s is empty", t->name);
    enum okv_status st = wstage_init(c);
    if (st != OKV_OK)
        return st;
    okv_bweight *w = (okv_bweight *)okv_calloc(1, sizeof *w, OKV_TAG_BACKEND);
    if (!w)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory");
    w->row_len = t->ne[0];
    w->rows = n / t->ne[0];
    cudaError_t e = cudaMalloc((void **)&w->d, (size_t)n * sizeof(okv_bf16));
    if (e == cudaSuccess && w->rows == 1)
        e = cudaMalloc((void **)&w->f, (size_t)n * sizeof(float));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        weight_release(w);
        return okv_set_error(e == cudaErrorMemoryAllocation ? OKV_ERR_NO_MEMORY : OKV_ERR_BACKEND,
                             "cuda backend: cannot allocate weight %s (%lld elements, %.1f MiB of bf16): %s", t->name,
                             (long long)n, (double)n * 2 / 1048576.0, cudaGetErrorString(e));
    }
    /* chunks of whole rows, and whole blocks (32 or 256 elements) for block types */
    int64_t chunk = (int64_t)c->wstage_cap;
    if (w->row_len <= chunk)
        chunk = chunk / w->row_len * w->row_len;
    else
        chunk = chunk / okv_dtype_block(t->dtype) * okv_dtype_block(t->dtype);
    int buf = 0;
    for (int64_t at = 0; at < n; at += chunk, buf ^= 1) {
        int64_t len = n - at < chunk ? n - at : chunk;
        e = cudaEventSynchronize(c->wstage_ev[buf]);   /* the staging buffer's last upload is done */
        if (e != cudaSuccess)
            break;
        if (okv_tensor_to_f32(t, at, len, c->wstage_h[buf]) != OKV_OK) {
            cudaStreamSynchronize(c->stream);
            weight_release(w);
            return okv_set_error(OKV_ERR_FORMAT, "cuda backend: cannot convert weight %s", t->name);
        }
        e = cudaMemcpyAsync(c->wstage_d[buf], c->wstage_h[buf], (size_t)len * sizeof(float), cudaMemcpyHostToDevice,
                            c->stream);
        if (e == cudaSuccess)
            e = okv_cuda_f32_to_bf16(c->stream, w->d + at, c->wstage_d[buf], (size_t)len);
        if (e == cudaSuccess && w->f)
            e = cudaMemcpyAsync(w->f + at, c->wstage_d[buf], (size_t)len * sizeof(float), cudaMemcpyDeviceToDevice,
                                c->stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(c->wstage_ev[buf], c->stream);
        if (e != cudaSuccess)
            break;
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        weight_release(w);
        return okv_cuda_err(e, "weight upload", __FILE__, __LINE__);
    }
    *out = w;
    return OKV_OK;
}

static void cuda_weight_free(okv_backend *be, okv_bweight *w)
{
    if (w)
        weight_release(w);
}

static size_t cuda_weight_bytes(const okv_bweight *w)
{
    size_t n = (size_t)(w->rows * w->row_len);
    return n * sizeof(okv_bf16) + (w->f ? n * sizeof(float) : 0);
}

/* ---- step ---- */

static enum okv_status cuda_step_begin(okv_backend *be, const struct okv_step_meta *meta)
{
    struct cuda_ctx *c = CTX(be);
    const int n = meta->n_tokens, ns = meta->n_seqs;
    if (n < 0 || ns < 0 || (n > 0 && (!meta->tok_seq || !meta->tok_pos || !meta->tok_slot)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda step_begin: bad metadata (%d tokens, %d sequences)", n, ns);
    for (int t = 0; t < n; t++)
        if (meta->tok_seq[t] < 0 || meta->tok_seq[t] >= ns)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda step_begin: row %d: sequence %d out of range", t, meta->tok_seq[t]);
    enum okv_status st = okv_cuda_kv_before_step(c);
    if (st != OKV_OK)
        return st;
    /* packed layout (int32 words): tok_seq, tok_pos, tok_slot, tok_host, seq_kv_len, seq_row_off, seq_rows */
    const size_t words = (size_t)4 * n + (size_t)ns + (size_t)(ns + 1) + (size_t)n;
    const size_t bytes = words * sizeof(int32_t);
    if (bytes > c->step_cap) {
        OKV_CU(cudaEventSynchronize(c->step_ev), "step metadata staging wait");
        OKV_CU(cudaStreamSynchronize(c->copy), "step metadata grow");
        OKV_CU(cudaStreamSynchronize(c->stream), "step metadata grow");
        if (c->step_h)
            cudaFreeHost(c->step_h);
        if (c->step_d)
            cudaFree(c->step_d);
        c->step_h = c->step_d = NULL;
        c->step_cap = 0;
        size_t cap = bytes * 2 + 4096;
        OKV_CU(cudaHostAlloc((void **)&c->step_h, cap, cudaHostAllocDefault), "step metadata staging (pinned)");
        OKV_CU(cudaMalloc((void **)&c->step_d, cap), "step metadata (device)");
        c->step_cap = cap;
    }
    OKV_CU_WAIT(c, cudaEventSynchronize(c->step_ev), "step metadata staging wait");
    int32_t *h = (int32_t *)c->step_h;
    memcpy(h, meta->tok_seq, sizeof(int32_t) * (size_t)n);
    memcpy(h + n, meta->tok_pos, sizeof(int32_t) * (size_t)n);
    memcpy(h + 2 * n, meta->tok_slot, sizeof(int32_t) * (size_t)n);
    if (meta->tok_host)
        memcpy(h + 3 * n, meta->tok_host, sizeof(int32_t) * (size_t)n);
    else
        memset(h + 3 * n, 0xff, sizeof(int32_t) * (size_t)n);
    int32_t *kvlen = h + 4 * n, *roff = kvlen + ns, *rows = roff + ns + 1;
    if (ns)
        memcpy(kvlen, meta->seq_kv_len, sizeof(int32_t) * (size_t)ns);
    /* rows grouped by sequence, in row order (counting sort) */
    for (int s = 0; s <= ns; s++)
        roff[s] = 0;
    for (int t = 0; t < n; t++)
        roff[meta->tok_seq[t] + 1]++;
    int maxr = 0;
    for (int s = 0; s < ns; s++) {
        if (roff[s + 1] > maxr)
            maxr = roff[s + 1];
        roff[s + 1] += roff[s];
    }
    for (int t = 0; t < n; t++) {
        int s = meta->tok_seq[t];
        rows[roff[s]++] = t;
    }
    for (int s = ns; s > 0; s--)
        roff[s] = roff[s - 1];
    roff[0] = 0;
    OKV_CU(cudaMemcpyAsync(c->step_d, c->step_h, bytes, cudaMemcpyHostToDevice, c->stream), "step metadata upload");
    OKV_CU(cudaEventRecord(c->step_ev, c->stream), "step metadata event");
    int32_t *d = (int32_t *)c->step_d;
    c->step.n_tokens = n;
    c->step.n_seqs = ns;
    c->step.tok_seq = d;
    c->step.tok_pos = d + n;
    c->step.tok_slot = d + 2 * n;
    c->step.tok_host = meta->tok_host ? d + 3 * n : NULL;
    c->step.seq_kv_len = d + 4 * n;
    c->step.seq_row_off = d + 4 * n + ns;
    c->step.seq_rows = d + 4 * n + 2 * ns + 1;
    c->step.max_rows_per_seq = maxr;
    c->step.h_row_off = roff;
    c->step.rope = NULL;
    c->step.rope_hd = 0;
    c->step.gen++;
    c->meta = *meta;
    return OKV_OK;
}

/* ---- ops ---- */

/* embed; prev (NULL: none) as embed_prev: rows with prev[t] >= 0 take id prev[t] of
 * sample_queue's slot, on the device (a sampled id is always below the vocabulary, which
 * the table covers) */
static enum okv_status embed_rows(struct cuda_ctx *c, okv_bmem *out, const okv_bweight *table, const int32_t *ids,
                                  const int32_t *prev, int slot, int n, int dim)
{
    if (n < 0 || out->n < (size_t)n * dim || table->row_len != dim || (prev && (slot < 0 || slot > 1)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda embed: bad shapes (%d rows of %d; table row %lld; slot %d)", n, dim,
                             (long long)table->row_len, slot);
    if (n == 0)
        return OKV_OK;
    for (int i = 0; i < n; i++) {
        if (prev && prev[i] >= c->qids_n[slot])
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda embed: row %d takes id %d of %d queued", i, prev[i],
                                 c->qids_n[slot]);
        if ((!prev || prev[i] < 0) && (ids[i] < 0 || ids[i] >= table->rows))
            return okv_set_error(OKV_ERR_INVALID_ARG, "token id %d out of range [0, %lld)", ids[i], (long long)table->rows);
    }
    const size_t bytes = sizeof(int32_t) * (size_t)n;
    void *h = NULL, *d = NULL;
    enum okv_status st = okv_cuda_ring_alloc(c, prev ? 2 * bytes : bytes, &h, &d);
    if (st != OKV_OK)
        return st;
    memcpy(h, ids, bytes);
    if (prev)
        memcpy((int32_t *)h + n, prev, bytes);
    OKV_CU(cudaMemcpyAsync(d, h, prev ? 2 * bytes : bytes, cudaMemcpyHostToDevice, c->stream), "embed ids upload");
    OKV_CU(okv_cuda_embed(c->stream, out->d, table->d, (const int32_t *)d, prev ? (const int32_t *)d + n : NULL,
                          prev ? c->qids_d[slot] : NULL, n, dim), "embed kernel");
    return okv_cuda_ring_commit(c, c->stream);
}

static enum okv_status cuda_embed(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids, int n, int dim)
{
    return embed_rows(CTX(be), out, table, ids, NULL, 0, n, dim);
}

static enum okv_status cuda_embed_prev(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids,
                                       const int32_t *prev, int slot, int n, int dim)
{
    return embed_rows(CTX(be), out, table, ids, prev, slot, n, dim);
}

static const float *vec_weight(const okv_bweight *w) { return w->f; }

/* The row count a pure op of n rows runs on: decode-sized batches (5 to 256 rows) are padded up
 * to a multiple of 8 (up to 64) or of 32, so that the few counts a server's changing batch takes
 * replay a few captured graphs (cuda_graph.cu captures a run per exact shape; with counts of
 * every size the table fills and is emptied over and over) instead of capturing each. The rows
 * past n are scratch: every buffer holds them (cap_rows, what the op's buffers hold, else n),
 * the ops treat rows independently, and only the engine's non-pure ops (KV writes, attention,
 * sampling) read rows, the first n. 1 to 4 rows keep their count (the GEMV kernel's), and so do
 * prefill-sized calls, whose GEMMs are bound by compute. Applied with graphs on or off, so that
 * both give the same numbers. */
static int pad_rows(struct cuda_ctx *c, int n, size_t cap_rows)
{
    if (n > 256)
        c->run_large = true;   /* a prefill-sized run: cuda_graph.cu launches it without remembering it */
    if (!c->pad_rows || n <= 4 || n > 256)
        return n;
    const int p = n <= 64 ? (n + 7) & ~7 : (n + 31) & ~31;
    return (size_t)p <= cap_rows ? p : n;
}

/* the element count add runs on: count padded as the step's rows are (pad_rows), where count
 * is a whole number of the step's rows (backend.h: the pure ops' rows past the step's are
 * scratch) */
static size_t pad_count(struct cuda_ctx *c, size_t count, size_t cap)
{
    const int t = c->meta.n_tokens;
    if (t <= 0 || count % (size_t)t)
        return count;
    const size_t per = count / (size_t)t, p = per * (size_t)pad_rows(c, t, cap / per);
    return p <= cap ? p : count;
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* The pure ops below check their arguments, prepare what their launch reads (the bf16
 * activation scratch, the step's RoPE table) and hand a okv_cuda_gop to
 * okv_cuda_graph_push, which launches it now or defers it into a graph-replayed run
 * (cuda_graph.cu); okv_cuda_gop_issue launches one. */
static struct okv_cuda_gop gop(int kind)
{
    struct okv_cuda_gop g;
    memset(&g, 0, sizeof g);
    g.kind = kind;
    return g;
}

static enum okv_status cuda_rmsnorm(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, int n, int dim,
                                    float eps)
{
    if (n < 0 || dim <= 0 || out->n < (size_t)n * dim || x->n < (size_t)n * dim || w->rows * w->row_len != dim || !w->f)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda rmsnorm: bad shapes (%d rows of %d)", n, dim);
    if (n == 0)
        return OKV_OK;
    struct okv_cuda_gop g = gop(OKV_GOP_RMSNORM);
    g.p[0] = out->d;
    g.p[1] = x->d;
    g.p[2] = vec_weight(w);
    g.i0 = pad_rows(CTX(be), n, min_sz(out->n, x->n) / (size_t)dim);
    g.i1 = dim;
    g.eps = eps;
    return okv_cuda_graph_push(CTX(be), &g);
}

static enum okv_status cuda_head_rmsnorm(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int heads, int hd, float eps)
{
    if (n < 0 || heads <= 0 || hd <= 0 || x->n < (size_t)n * heads * hd || w->rows * w->row_len != hd || !w->f)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda head_rmsnorm: bad shapes");
    if (n == 0)
        return OKV_OK;
    struct okv_cuda_gop g = gop(OKV_GOP_HEAD_RMSNORM);
    g.p[0] = x->d;
    g.p[1] = vec_weight(w);
    g.i0 = pad_rows(CTX(be), n, x->n / ((size_t)heads * hd)) * heads;
    g.i1 = hd;
    g.eps = eps;
    return okv_cuda_graph_push(CTX(be), &g);
}

/* the bf16 activation scratch holds at least count elements */
static enum okv_status act_reserve(struct cuda_ctx *c, size_t count)
{
    if (count <= c->act_cap)
        return OKV_OK;
    enum okv_status st = okv_cuda_graph_invalidate(c);   /* runs and graphs name the old buffer */
    if (st != OKV_OK)
        return st;
    return okv_cuda_grow_device(c->stream, (void **)&c->act_bf16, &c->act_cap, count, sizeof(okv_bf16),
                                "bf16 activation scratch");
}

static enum okv_status cuda_matmul(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w,
                                   const okv_bweight *bias, int n, int k, int m)
{
    struct cuda_ctx *c = CTX(be);
    if (n < 0 || w->row_len != k || w->rows != m || x->n < (size_t)n * k || out->n < (size_t)n * m ||
        (bias && (bias->rows * bias->row_len != m || !bias->f)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda matmul: bad shapes (n %d, k %d, m %d; weight %lld x %lld)", n, k, m,
                             (long long)w->rows, (long long)w->row_len);
    if (n == 0)
        return OKV_OK;
    n = pad_rows(c, n, min_sz(x->n / (size_t)k, out->n / (size_t)m));
    enum okv_status st = act_reserve(c, (size_t)n * k);
    if (st != OKV_OK)
        return st;
    struct okv_cuda_gop g = gop(OKV_GOP_MATMUL);
    g.p[0] = out->d;
    g.p[1] = x->d;
    g.p[2] = w->d;
    g.p[3] = bias ? bias->f : NULL;
    g.p[4] = c->act_bf16;
    g.i0 = n;
    g.i1 = k;
    g.i2 = m;
    return okv_cuda_graph_push(c, &g);
}

static enum okv_status cuda_rope(okv_backend *be, okv_bmem *x, int n, int heads, int hd, bool half_pairing)
{
    struct cuda_ctx *c = CTX(be);
    if (heads <= 0 || x->n < (size_t)n * heads * hd || n != c->meta.n_tokens || (hd & 1) || hd <= 0 || !c->meta.rope_cos_sin)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda rope: bad shapes (%d rows, %d heads of %d)", n, heads, hd);
    if (n == 0)
        return OKV_OK;
    if (c->step.rope_hd != hd) {   /* upload the step's table once per head size */
        /* queued ahead of the pending run (cuda_graph.cu): none of its ops reads the
         * table but this step's ropes, which all follow the upload */
        const size_t bytes = sizeof(float) * (size_t)n * hd;
        OKV_CU_WAIT(c, cudaEventSynchronize(c->rope_ev), "rope table staging wait");
        if (bytes > c->rope_cap) {
            enum okv_status st = okv_cuda_graph_invalidate(c);
            if (st != OKV_OK)
                return st;
            OKV_CU(cudaStreamSynchronize(c->stream), "rope table grow");
            if (c->rope_h)
                cudaFreeHost(c->rope_h);
            if (c->rope_d)
                cudaFree(c->rope_d);
            c->rope_h = c->rope_d = NULL;
            c->rope_cap = 0;
            OKV_CU(cudaHostAlloc((void **)&c->rope_h, bytes * 2, cudaHostAllocDefault), "rope table staging (pinned)");
            OKV_CU(cudaMalloc((void **)&c->rope_d, bytes * 2), "rope table (device)");
            c->rope_cap = bytes * 2;
        }
        memcpy(c->rope_h, c->meta.rope_cos_sin, bytes);
        OKV_CU(cudaMemcpyAsync(c->rope_d, c->rope_h, bytes, cudaMemcpyHostToDevice, c->stream), "rope table upload");
        OKV_CU(cudaEventRecord(c->rope_ev, c->stream), "rope table event");
        c->step.rope = c->rope_d;
        c->step.rope_hd = hd;
    }
    struct okv_cuda_gop g = gop(OKV_GOP_ROPE);
    g.p[0] = x->d;
    g.p[1] = c->step.rope;
    /* padded rows turn by whatever the table holds past the step's rows: within its allocation */
    g.i0 = pad_rows(c, n, min_sz(x->n / ((size_t)heads * hd), c->rope_cap / (sizeof(float) * (size_t)hd)));
    g.i1 = heads;
    g.i2 = hd;
    g.flag = half_pairing;
    return okv_cuda_graph_push(c, &g);
}

static enum okv_status cuda_swiglu(okv_backend *be, okv_bmem *out, const okv_bmem *gate, const okv_bmem *up, int n, int f)
{
    size_t cnt = (size_t)n * f;
    if (n < 0 || out->n < cnt || gate->n < cnt || up->n < cnt)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda swiglu: bad shapes");
    if (cnt == 0)
        return OKV_OK;
    struct okv_cuda_gop g = gop(OKV_GOP_SWIGLU);
    g.p[0] = out->d;
    g.p[1] = gate->d;
    g.p[2] = up->d;
    g.count = (int64_t)pad_rows(CTX(be), n, min_sz(out->n, min_sz(gate->n, up->n)) / (size_t)f) * f;
    return okv_cuda_graph_push(CTX(be), &g);
}

static enum okv_status cuda_add(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t count)
{
    if (x->n < count || y->n < count)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda add: bad shapes");
    if (count == 0)
        return OKV_OK;
    struct okv_cuda_gop g = gop(OKV_GOP_ADD);
    g.p[0] = x->d;
    g.p[1] = y->d;
    g.count = (int64_t)pad_count(CTX(be), count, min_sz(x->n, y->n));
    return okv_cuda_graph_push(CTX(be), &g);
}

/* byte ranges [a, a + na) and [b, b + nb) of device memory overlap */
static bool overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = (const char *)a, *y = (const char *)b;
    return x < y + nb && y < x + na;
}

static size_t gop_out_bytes(const struct okv_cuda_gop *g) { return sizeof(float) * (size_t)g->i0 * (size_t)g->i2; }
static size_t gop_in_bytes(const struct okv_cuda_gop *g) { return sizeof(float) * (size_t)g->i0 * (size_t)g->i1; }

/* a projection the GEMV kernel takes: few rows, aligned, not in place (its warps read x
 * while others write out; the cuBLAS path converts x first) */
static bool gemv_ok(const struct cuda_ctx *c, const struct okv_cuda_gop *g)
{
    return g->kind == OKV_GOP_MATMUL && g->i0 <= c->gemv_rows && okv_cuda_gemv_fits(g->i0, g->i1, g->p[1], g->p[2]) &&
           !overlap(g->p[0], gop_out_bytes(g), g->p[1], gop_in_bytes(g));
}

/* GEMV arguments for the nm (1 to 3) projections ops[0..nm) of one input */
static struct okv_cuda_gemv gemv_args(const struct okv_cuda_gop *ops, int nm)
{
    struct okv_cuda_gemv a;
    memset(&a, 0, sizeof a);
    a.x = (const float *)ops[0].p[1];
    a.n = ops[0].i0;
    a.k = ops[0].i1;
    a.nseg = nm;
    for (int i = 0; i < nm; i++)
        a.s[i] = (struct okv_cuda_gemv_seg){(const okv_bf16 *)ops[i].p[2], (const float *)ops[i].p[3], (float *)ops[i].p[0],
                                            NULL, ops[i].i2};
    return a;
}

/* a matmul op's input into the bf16 scratch p[4] */
static enum okv_status convert_input(struct cuda_ctx *c, const struct okv_cuda_gop *g)
{
    OKV_CU(okv_cuda_f32_to_bf16(c->stream, (okv_bf16 *)g->p[4], (const float *)g->p[1], (size_t)g->i0 * g->i1),
           "activation to bf16 kernel");
    return OKV_OK;
}

/* the GEMM (and bias) of a matmul op whose input is already in the bf16 scratch p[4] */
static enum okv_status gemm_converted(struct cuda_ctx *c, const struct okv_cuda_gop *g)
{
    const int n = g->i0, k = g->i1, m = g->i2;
    const float one = 1.0f, zero = 0.0f;
    /* column-major view: out^T [m][n] = W [k][m]^T . x^T [k][n] */
    OKV_BLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, g->p[2], CUDA_R_16BF, k, g->p[4], CUDA_R_16BF, k,
                          &zero, (float *)g->p[0], CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "GEMM (bf16 x bf16 -> fp32)");
    if (g->p[3])
        OKV_CU(okv_cuda_bias(c->stream, (float *)g->p[0], (const float *)g->p[3], n, m), "bias kernel");
    return OKV_OK;
}

/* Fusions of a pending run (cuda_graph.cu issues runs through this): projections of
 * the same input convert it to bf16 once (cuBLAS path); small-batch projections
 * (gemv_ok) of the same input merge into one launch, a projection followed
 * by the residual add of its result adds in the same kernel, and the gate and up
 * projections followed by their SwiGLU run as one pair launch. Each fusion writes every
 * buffer the separate ops write, with the same values bit for bit (cuda_gemv.cu), and
 * applies only where no op of the group reads what an earlier one of it writes. */
extern "C" enum okv_status okv_cuda_gop_issue_fused(struct cuda_ctx *c, const struct okv_cuda_gop *ops, int n, int *used)
{
    const struct okv_cuda_gop *g = &ops[0];
    *used = 1;
    if (g->kind != OKV_GOP_MATMUL)
        return okv_cuda_gop_issue(c, g);
    if (!gemv_ok(c, g)) {
        /* the cuBLAS path: projections of the same input share one conversion, unless an
         * earlier one of them writes the input */
        int nm = 1;
        while (nm < n && ops[nm].kind == OKV_GOP_MATMUL && !gemv_ok(c, &ops[nm]) && ops[nm].p[1] == g->p[1] &&
               ops[nm].i0 == g->i0 && ops[nm].i1 == g->i1 && ops[nm].p[4] == g->p[4] &&
               !overlap(ops[nm - 1].p[0], gop_out_bytes(&ops[nm - 1]), g->p[1], gop_in_bytes(g)))
            nm++;
        enum okv_status st = convert_input(c, g);
        for (int i = 0; i < nm && st == OKV_OK; i++)
            st = gemm_converted(c, &ops[i]);
        *used = nm;
        return st;
    }
    const int rows = g->i0, k = g->i1;
    const void *x = g->p[1];
    const size_t xb = gop_in_bytes(g);
    /* the projections that follow on the same input, none writing what the group reads */
    int nm = 1;
    while (nm < 3 && nm < n && gemv_ok(c, &ops[nm]) && ops[nm].p[1] == x && ops[nm].i0 == rows && ops[nm].i1 == k)
        nm++;
    for (int i = 0; i < nm; i++) {
        bool bad = overlap(ops[i].p[0], gop_out_bytes(&ops[i]), x, xb);
        for (int j = 0; j < i; j++)
            bad |= overlap(ops[i].p[0], gop_out_bytes(&ops[i]), ops[j].p[0], gop_out_bytes(&ops[j]));
        if (bad) {
            nm = i;
            break;
        }
    }
    struct okv_cuda_gemv a = gemv_args(ops, nm);
    /* gate, up, SwiGLU(out, gate, up) */
    if (nm >= 2 && n > 2 && ops[2].kind == OKV_GOP_SWIGLU && ops[0].i2 == ops[1].i2 && ops[2].p[1] == ops[0].p[0] &&
        ops[2].p[2] == ops[1].p[0] && ops[2].count == (int64_t)rows * ops[0].i2) {
        const void *o = ops[2].p[0];
        const size_t ob = gop_out_bytes(&ops[0]);
        if ((o == ops[0].p[0] || (!overlap(o, ob, ops[0].p[0], ob) && !overlap(o, ob, ops[1].p[0], ob))) &&
            !overlap(o, ob, x, xb)) {
            a.pair = 1;
            a.swi = (float *)ops[2].p[0];
            *used = 3;
            OKV_CU(okv_cuda_gemv(c->stream, &a), "gemv kernel (gate, up, SwiGLU)");
            return OKV_OK;
        }
    }
    /* one projection, then add(acc, its output) */
    if (nm == 1 && n > 1 && ops[1].kind == OKV_GOP_ADD && ops[1].p[1] == g->p[0] &&
        ops[1].count == (int64_t)rows * g->i2) {
        const size_t ob = gop_out_bytes(g);
        if (!overlap(ops[1].p[0], ob, g->p[0], ob) && !overlap(ops[1].p[0], ob, x, xb)) {
            a.s[0].acc = (float *)ops[1].p[0];
            *used = 2;
            OKV_CU(okv_cuda_gemv(c->stream, &a), "gemv kernel (+ residual)");
            return OKV_OK;
        }
    }
    *used = nm;
    OKV_CU(okv_cuda_gemv(c->stream, &a), "gemv kernel");
    return OKV_OK;
}

extern "C" enum okv_status okv_cuda_gop_issue(struct cuda_ctx *c, const struct okv_cuda_gop *g)
{
    float *p0 = (float *)g->p[0];
    const float *p1 = (const float *)g->p[1], *p2 = (const float *)g->p[2];
    switch (g->kind) {
    case OKV_GOP_RMSNORM:
        OKV_CU(okv_cuda_rmsnorm(c->stream, p0, p1, p2, g->i0, g->i1, g->eps), "rmsnorm kernel");
        return OKV_OK;
    case OKV_GOP_HEAD_RMSNORM:
        OKV_CU(okv_cuda_head_rmsnorm(c->stream, p0, p1, g->i0, g->i1, g->eps), "head_rmsnorm kernel");
        return OKV_OK;
    case OKV_GOP_MATMUL: {
        if (gemv_ok(c, g)) {
            const struct okv_cuda_gemv a = gemv_args(g, 1);
            OKV_CU(okv_cuda_gemv(c->stream, &a), "gemv kernel");
            return OKV_OK;
        }
        enum okv_status st = convert_input(c, g);
        return st != OKV_OK ? st : gemm_converted(c, g);
    }
    case OKV_GOP_ROPE:
        OKV_CU(okv_cuda_rope(c->stream, p0, p1, g->i0, g->i1, g->i2, g->flag != 0), "rope kernel");
        return OKV_OK;
    case OKV_GOP_SWIGLU:
        OKV_CU(okv_cuda_swiglu(c->stream, p0, p1, p2, (size_t)g->count), "swiglu kernel");
        return OKV_OK;
    case OKV_GOP_ADD:
        OKV_CU(okv_cuda_add(c->stream, p0, p1, (size_t)g->count), "add kernel");
        return OKV_OK;
    default:
        return okv_set_error(OKV_ERR_INTERNAL, "cuda: unknown deferred op %d", g->kind);
    }
}

static enum okv_status cuda_gather_rows(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows,
                                        int width)
{
    struct cuda_ctx *c = CTX(be);
    if (n_rows < 0 || width <= 0 || out->n < (size_t)n_rows * width)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda gather_rows: bad shapes");
    for (int i = 0; i < n_rows; i++)
        if (rows[i] < 0 || (size_t)(rows[i] + 1) * width > x->n)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda gather_rows: row %d out of range", rows[i]);
    if (n_rows == 0)
        return OKV_OK;
    void *d = NULL;
    enum okv_status st = okv_cuda_upload(c, c->stream, rows, sizeof(int32_t) * (size_t)n_rows, &d);
    if (st != OKV_OK)
        return st;
    if (out == x) {   /* in place: gather into scratch, then copy back */
        float *tmp = NULL;
        if ((st = okv_cuda_scratch(c, (size_t)n_rows * width, &tmp)) != OKV_OK)
            return st;
        OKV_CU(okv_cuda_gather_rows(c->stream, tmp, x->d, (const int32_t *)d, n_rows, width), "gather_rows kernel");
        OKV_CU(cudaMemcpyAsync(out->d, tmp, sizeof(float) * (size_t)n_rows * width, cudaMemcpyDeviceToDevice, c->stream),
               "gather_rows copy");
    } else {
        OKV_CU(okv_cuda_gather_rows(c->stream, out->d, x->d, (const int32_t *)d, n_rows, width), "gather_rows kernel");
    }
    return okv_cuda_ring_commit(c, c->stream);
}

static enum okv_status cuda_sync(okv_backend *be)
{
    struct cuda_ctx *c = CTX(be);
    if (c->sync_compute_only) {   /* the copy stream orders itself (okv_cuda_kv_before_step, fetch events) */
        OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "stream synchronize");
        return OKV_OK;
    }
    return okv_cuda_sync_all(c);
}

static double cuda_host_blocked_s(const okv_backend *be) { return ((const struct cuda_ctx *)be->ctx)->blocked_s; }

static void green_destroy(struct cuda_ctx *c);

static void cuda_destroy(okv_backend *be)
{
    struct cuda_ctx *c = CTX(be);
    cudaSetDevice(c->device);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->copy)
        cudaStreamSynchronize(c->copy);
    if (c->side)
        cudaStreamSynchronize(c->side);
    okv_cuda_graph_free(c);
    okv_cuda_sample_free(c);
    okv_cuda_attn_cache_free(c);
    wstage_free(c);
    ring_free(&c->ring);
    for (int i = 0; i < OKV_CUDA_RING_MARKS; i++)
        if (c->ring.ev_pool[i])
            cudaEventDestroy(c->ring.ev_pool[i]);
    if (c->step_h)
        cudaFreeHost(c->step_h);
    if (c->step_d)
        cudaFree(c->step_d);
    if (c->rope_h)
        cudaFreeHost(c->rope_h);
    if (c->rope_d)
        cudaFree(c->rope_d);
    if (c->act_bf16)
        cudaFree(c->act_bf16);
    if (c->scratch)
        cudaFree(c->scratch);
    if (c->sel_ev_made)
        cudaEventDestroy(c->sel_ev);
    if (c->sel_h)
        cudaFreeHost(c->sel_h);
    if (c->sel_scores_h)
        cudaFreeHost(c->sel_scores_h);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->blas_ws)
        cudaFree(c->blas_ws);
    cudaEvent_t evs[] = {c->ev_compute_mark, c->ev_copy_mark, c->ev_wt_last, c->step_ev, c->rope_ev};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            cudaEventDestroy(evs[i]);
    if (c->copy)
        cudaStreamDestroy(c->copy);
    if (c->side)
        cudaStreamDestroy(c->side);
    if (c->ev_side_mark)
        cudaEventDestroy(c->ev_side_mark);
    if (c->side_sc)
        cudaFree(c->side_sc);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    green_destroy(c);
    okv_free(c);
    okv_free(be);
}

static enum okv_status cuda_bind(okv_backend *be)
{
    cudaError_t e = cudaSetDevice(CTX(be)->device);
    return e == cudaSuccess ? OKV_OK : okv_cuda_err(e, "cudaSetDevice", __FILE__, __LINE__);
}

static enum okv_status cuda_device_mem(okv_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    enum okv_status st = cuda_bind(be);
    if (st != OKV_OK)
        return st;
    OKV_CU(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return OKV_OK;
}

static struct okv_backend_ops cuda_ops;
static bool cuda_ops_ready;

static void fill_ops(void)
{
    struct okv_backend_ops *o = &cuda_ops;
    o->name = "cuda";
    o->destroy = cuda_destroy;
    o->mem_alloc = cuda_mem_alloc;
    o->mem_free = cuda_mem_free;
    o->mem_write = cuda_mem_write;
    o->mem_read = cuda_mem_read;
    o->weight_load = cuda_weight_load;
    o->weight_free = cuda_weight_free;
    o->weight_bytes = cuda_weight_bytes;
    o->step_begin = cuda_step_begin;
    o->embed = cuda_embed;
    o->rmsnorm = cuda_rmsnorm;
    o->matmul = cuda_matmul;
    o->head_rmsnorm = cuda_head_rmsnorm;
    o->rope = cuda_rope;
    o->swiglu = cuda_swiglu;
    o->add = cuda_add;
    o->gather_rows = cuda_gather_rows;
    o->attention = okv_cuda_attention;
    o->select_blocks = okv_cuda_select_blocks;
    o->select_blocks_async = okv_cuda_select_blocks_async;
    o->select_wait = okv_cuda_select_wait;
    o->sample = okv_cuda_sample;
    o->sample_queue = okv_cuda_sample_queue;
    o->sample_collect = okv_cuda_sample_collect;
    o->embed_prev = cuda_embed_prev;
    o->sync = cuda_sync;
    o->host_blocked_s = cuda_host_blocked_s;
    o->bind = cuda_bind;
    o->device_mem = cuda_device_mem;
    okv_cuda_fill_kv_ops(o);
    okv_cuda_fill_resid_ops(o);
    okv_cuda_prof_wrap(o);
    okv_cuda_graph_wrap(o);   /* outermost: every op but the pure ones flushes their pending run */
    cuda_ops_ready = true;
}

/* Undo a partly built context (every field NULL or valid). */
/* OKV_GATHER_SMS=N: the SMs split in two green contexts, N (as rounded by the driver)
 * for the copy stream (the host-tier gather kernels) and the rest for the compute
 * stream, so that no compute kernel shares an SM with a gather waiting on PCIe.
 * Driver entry points through the runtime (no link to libcuda). Returns false, leaving
 * nothing behind, when the driver cannot. */
typedef CUresult (*pfn_get_res)(CUdevice, CUdevResource *, CUdevResourceType);
typedef CUresult (*pfn_split)(CUdevResource *, unsigned int *, const CUdevResource *, CUdevResource *, unsigned int,
                              unsigned int);
typedef CUresult (*pfn_desc)(CUdevResourceDesc *, CUdevResource *, unsigned int);
typedef CUresult (*pfn_gcreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
typedef CUresult (*pfn_gdestroy)(CUgreenCtx);
typedef CUresult (*pfn_gstream)(CUstream *, CUgreenCtx, unsigned int, int);

static void *driver_fn(const char *name, int version)
{
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, (unsigned)version, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return fn;
}

static void green_destroy(struct cuda_ctx *c)
{
    pfn_gdestroy gdestroy = (pfn_gdestroy)driver_fn("cuGreenCtxDestroy", 12040);
    for (int i = 0; i < 2; i++)
        if (c->green[i] && gdestroy)
            gdestroy((CUgreenCtx)c->green[i]);
    c->green[0] = c->green[1] = NULL;
}

static bool green_streams(struct cuda_ctx *c, int gather_sms)
{
    pfn_get_res get_res = (pfn_get_res)driver_fn("cuDeviceGetDevResource", 12040);
    pfn_split split = (pfn_split)driver_fn("cuDevSmResourceSplitByCount", 12040);
    pfn_desc desc = (pfn_desc)driver_fn("cuDevResourceGenerateDesc", 12040);
    pfn_gcreate gcreate = (pfn_gcreate)driver_fn("cuGreenCtxCreate", 12040);
    pfn_gstream gstream = (pfn_gstream)driver_fn("cuGreenCtxStreamCreate", 12050);
    if (!get_res || !split || !desc || !gcreate || !gstream)
        return false;
    CUdevResource all, part, rest;
    memset(&all, 0, sizeof all);
    memset(&part, 0, sizeof part);
    memset(&rest, 0, sizeof rest);
    unsigned int n = 1;
    CUdevResourceDesc d[2];
    CUgreenCtx g[2] = {NULL, NULL};
    CUstream st[2] = {NULL, NULL};
    if (get_res((CUdevice)c->device, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
        split(&part, &n, &all, &rest, 0, (unsigned)gather_sms) != CUDA_SUCCESS || n < 1 || rest.sm.smCount == 0 ||
        desc(&d[0], &part, 1) != CUDA_SUCCESS || desc(&d[1], &rest, 1) != CUDA_SUCCESS)
        return false;
    for (int i = 0; i < 2; i++)
        if (gcreate(&g[i], d[i], (CUdevice)c->device, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS ||
            gstream(&st[i], g[i], CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) {
            for (int j = 0; j < 2; j++)
                if (st[j])
                    cudaStreamDestroy((cudaStream_t)st[j]);
            c->green[0] = g[0];
            c->green[1] = g[1];
            green_destroy(c);
            (void)cudaGetLastError();
            return false;
        }
    c->green[0] = g[0];
    c->green[1] = g[1];
    c->green_sms[0] = (int)part.sm.smCount;
    c->green_sms[1] = (int)rest.sm.smCount;
    c->copy = (cudaStream_t)st[0];
    c->stream = (cudaStream_t)st[1];
    return true;
}

static enum okv_status create_fail(okv_backend *be, enum okv_status st)
{
    cuda_destroy(be);
    return st;
}

#define CREATE_CU(call, what)                                                               \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            return create_fail(be, okv_cuda_err(e_, (what), __FILE__, __LINE__));          \
    } while (0)

extern "C" int okv_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" enum okv_status okv_backend_cuda_create(const struct okv_backend_params *p, okv_backend **out)
{
    *out = NULL;
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda backend: no CUDA device (%s)",
                             e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    okv_backend *be = (okv_backend *)okv_calloc(1, sizeof *be, OKV_TAG_BACKEND);
    struct cuda_ctx *c = (struct cuda_ctx *)okv_calloc(1, sizeof *c, OKV_TAG_BACKEND);
    if (!be || !c) {
        okv_free(be);
        okv_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory");
    }
    if (!cuda_ops_ready)
        fill_ops();
    be->ops = &cuda_ops;
    be->ctx = c;
    c->device = p ? p->device : 0;
    if (c->device < 0 || c->device >= n_dev)
        return create_fail(be, okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: GPU %d does not exist (%d visible)",
                                             c->device, n_dev));
    CREATE_CU(cudaSetDevice(c->device), "cudaSetDevice");
    cudaDeviceProp prop;
    CREATE_CU(cudaGetDeviceProperties(&prop, c->device), "cudaGetDeviceProperties");
    if (prop.major < 8)
        return create_fail(be, okv_set_error(OKV_ERR_UNSUPPORTED, "cuda backend: %s (sm_%d%d) has no bf16 support; sm_80+ needed",
                                             prop.name, prop.major, prop.minor));
    c->n_sms = prop.multiProcessorCount;
    c->smem_optin = prop.sharedMemPerBlockOptin;
    {
        /* prefill attention kernel (cuda_prefill.cu), on by default with tiles of 128 query
         * vectors: on the warpgroup MMA on 9.0 devices (cuda_prefill_wg.cu, below), else
         * mma.sync in warps of 32 (H200, 8B shape at 32K: 421 / 323 TFLOPS against 239 with
         * warps of 16; bench/RESULTS.md section 18);
         * OKV_PREFILL_KERNEL=0 turns it off (the decode kernels take prefill too), 1 or 64
         * picks tiles of 64 (warps of 16), 256 tiles of 256 (warps of 32);
         * OKV_PREFILL_WARP_ROWS=16 warps of 16 vectors in tiles of 128. With neither set, a
         * call with few tiles splits the keys, or takes tiles of 64 or warps of 16;
         * OKV_PREFILL_SPLIT=N forces N key parts a tile (cuda_prefill.cu) */
        const char *pk = getenv("OKV_PREFILL_KERNEL");
        const int v = pk && *pk ? atoi(pk) : 128;
        c->prefill_kernel = v == 0 ? 0 : v == 1 || v == 64 ? 64 : v == 256 ? 256 : 128;
        const char *pw = getenv("OKV_PREFILL_WARP_ROWS");
        c->prefill_wrows = pw && *pw && atoi(pw) == 16 ? 16 : 32;
        c->prefill_auto = !(pk && *pk) && !(pw && *pw);
        const char *ps = getenv("OKV_PREFILL_SPLIT");
        c->prefill_split = ps && *ps && atoi(ps) > 0 ? atoi(ps) : 0;
        /* the warpgroup-MMA kernel (cuda_prefill_wg.cu) takes the default's tiles of 128 on a
         * 9.0 device (the sm_90a machine code): OKV_PREFILL_WGMMA=0 keeps mma.sync, =1 asks
         * for it beside the other switches */
        const char *pg = getenv("OKV_PREFILL_WGMMA");
        c->prefill_wgmma = (pg && *pg ? atoi(pg) == 1 : c->prefill_auto) && prop.major == 9 && prop.minor == 0 &&
                           okv_pf_wg_probe();
        /* and on it the warp-specialised kernel (a TMA producer warp, two consumer warpgroups taking
         * turns; cuda_prefill_ws.cu, bench/RESULTS.md section 34) for calls whose longest list has
         * OKV_PREFILL_WS_MIN_KEYS keys (default 2048; below, its start costs more than it gains in
         * whole small-model prefills, within their run-to-run noise): OKV_PREFILL_WS=2 for every
         * call, =1 for every call without the turns, =0 the wgmma kernel of two warpgroups */
        const char *pws = getenv("OKV_PREFILL_WS");
        c->prefill_ws = !c->prefill_wgmma ? 0 : pws && *pws ? (atoi(pws) == 1 ? 1 : atoi(pws) == 0 ? 0 : 2) : 2;
        c->prefill_ws_forced = pws && *pws && atoi(pws) != 0;
        const char *pwk = getenv("OKV_PREFILL_WS_MIN_KEYS");
        c->prefill_ws_min_keys = pwk && *pwk ? atoll(pwk) : 2048;
        c->tmap_encode = NULL;
        if (c->prefill_ws && !okv_pf_ws_regs_ok())
            c->prefill_ws = 0;
        if (c->prefill_ws) {   /* its copies are TMAs, described by tensor maps the driver encodes */
            enum cudaDriverEntryPointQueryResult q;
            if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &c->tmap_encode, 12000, cudaEnableDefault, &q) !=
                    cudaSuccess ||
                q != cudaDriverEntryPointSuccess) {
                (void)cudaGetLastError();
                c->tmap_encode = NULL;
                c->prefill_ws = 0;
            }
        }
    }
    {
        /* a step's final sync waits for the compute stream only (default), so the fetches
         * predicted at its last layers run on into the next step, which waits for each
         * layer's own fetches; host-tier reads (kv_host_read, kv_summary_read) wait for
         * both streams themselves. OKV_STEP_SYNC=both waits for both streams at every step
         * (8B shape b16: 51.7 vs 49.7 ms; trained target b128 6.21 vs 5.96 ms, serving
         * c256 12059 vs 12612 tok/s: bench/RESULTS.md section 12) */
        const char *ss = getenv("OKV_STEP_SYNC");
        c->sync_compute_only = !(ss && !strcmp(ss, "both"));
        /* OKV_FETCH_CTAS=N: CTAs of the host-tier gather kernel (default: by size, at most 32) */
        const char *fc = getenv("OKV_FETCH_CTAS");
        c->fetch_ctas_override = fc && atoi(fc) > 0 ? atoi(fc) : 0;
        /* OKV_GATHER_UNROLL=N: loads in flight per thread of the host-tier gather (1, 2, 4, 8;
         * default 2: trained target b128 sparse step 4.53 vs 4.96 ms at 4, bench/RESULTS.md) */
        const char *gu = getenv("OKV_GATHER_UNROLL");
        c->gather_unroll = gu && (atoi(gu) == 1 || atoi(gu) == 4 || atoi(gu) == 8) ? atoi(gu) : 2;
        /* OKV_GEMV_ROWS=N: projections of 1 to N rows (N <= 4) run as one GEMV kernel
         * (cuda_gemv.cu) instead of conversion + cuBLAS; 0 turns it off */
        const char *gr = getenv("OKV_GEMV_ROWS");
        const int grv = gr && *gr ? atoi(gr) : OKV_GEMV_MAX_ROWS;
        c->gemv_rows = grv < 0 ? 0 : grv > OKV_GEMV_MAX_ROWS ? OKV_GEMV_MAX_ROWS : grv;
        const char *pr = getenv("OKV_PAD_ROWS");
        c->pad_rows = !(pr && !strcmp(pr, "0"));
    }
    const char *gs = getenv("OKV_GATHER_SMS");
    if (gs && atoi(gs) > 0) {
        if (green_streams(c, atoi(gs)))
            fprintf(stderr, "oasiskv: cuda device %d: %d SMs for the host-tier gathers, %d for compute (OKV_GATHER_SMS)\n",
                    c->device, c->green_sms[0], c->green_sms[1]);
        else
            fprintf(stderr, "oasiskv: cuda device %d: OKV_GATHER_SMS=%s: the driver cannot split the SMs; one partition\n",
                    c->device, gs);
    }
    if (!c->stream)
        CREATE_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "compute stream");
    if (!c->copy)
        CREATE_CU(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking), "copy stream");
    {
        /* the device residency's selection, install and gathers start on their own stream
         * (default; OKV_SELECT_STREAM=0 keeps them on the compute stream) */
        const char *ss = getenv("OKV_SELECT_STREAM");
        if (!(ss && !strcmp(ss, "0"))) {
            CREATE_CU(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking), "selection stream");
            CREATE_CU(cudaEventCreateWithFlags(&c->ev_side_mark, cudaEventDisableTiming), "event");
        }
    }
    c->sel_stream = c->stream;
    CREATE_CU(cudaEventCreateWithFlags(&c->ev_compute_mark, cudaEventDisableTiming), "event");
    CREATE_CU(cudaEventCreateWithFlags(&c->ev_copy_mark, cudaEventDisableTiming), "event");
    CREATE_CU(cudaEventCreateWithFlags(&c->ev_wt_last, cudaEventDisableTiming), "event");
    CREATE_CU(cudaEventCreateWithFlags(&c->step_ev, cudaEventDisableTiming), "event");
    CREATE_CU(cudaEventCreateWithFlags(&c->rope_ev, cudaEventDisableTiming), "event");
    for (int i = 0; i < OKV_CUDA_RING_MARKS; i++)
        CREATE_CU(cudaEventCreateWithFlags(&c->ring.ev_pool[i], cudaEventDisableTiming), "ring event");
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        return create_fail(be, okv_cublas_err(bs, "cublasCreate", __FILE__, __LINE__));
    }
    c->blas_ws_bytes = (size_t)32 << 20;
    CREATE_CU(cudaMalloc(&c->blas_ws, c->blas_ws_bytes), "cuBLAS workspace");
    if ((bs = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetWorkspace(c->blas, c->blas_ws, c->blas_ws_bytes)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        return create_fail(be, okv_cublas_err(bs, "cuBLAS setup", __FILE__, __LINE__));
    enum okv_status gst = okv_cuda_graph_init(c);
    if (gst != OKV_OK)
        return create_fail(be, gst);
    *out = be;
    return OKV_OK;
}

/* ---- tuning hooks for bench/ (see cuda_bench.h) ---- */
extern "C" int okv_cuda_set_gemv_rows(okv_backend *be, int rows)
{
    struct cuda_ctx *c = CTX(be);
    (void)okv_cuda_graph_invalidate(c);   /* captured graphs hold the old choice */
    c->gemv_rows = rows < 0 ? 0 : rows > OKV_GEMV_MAX_ROWS ? OKV_GEMV_MAX_ROWS : rows;
    return c->gemv_rows;
}

extern "C" void okv_cuda_set_fetch_ctas(okv_backend *be, int ctas) { CTX(be)->fetch_ctas_override = ctas; }
extern "C" int okv_cuda_fetch_ctas_last(const okv_backend *be) { return CTX(be)->fetch_ctas_last; }
