/* The tensor-parallel backend (see oasiskv/tp.h): every op of the backend interface
 * on N rank backends, with the model sharded over them. */
#include "oasiskv/tp.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct okv_bmem {
    okv_bmem *m[OKV_TP_MAX];
    size_t n;
    enum okv_shard cols;   /* OUT_* when the last op left each rank a slice of the columns */
    int width;             /* the global column count then */
};

struct tp;

struct okv_bweight {
    okv_bweight *w[OKV_TP_MAX];
    enum okv_shard shard;
    const struct tp *t;
};

struct okv_bkv {
    okv_bkv *kv[OKV_TP_MAX];
    struct okv_kv_geometry g;   /* global (all KV heads) */
    const struct tp *t;
};

struct tp {
    int n;
    okv_backend *rank[OKV_TP_MAX];
    okv_tp_comm *comm;
    int n_heads, n_kv, hd, dim, ffn, vocab;
    int qh_l;                  /* query heads per rank */
    int kv_l;                  /* KV heads per rank */
    int rep;                   /* ranks sharing one KV head (1: none) */
    int kv_h0[OKV_TP_MAX];     /* first KV head of each rank */
    int ffn_lo[OKV_TP_MAX + 1];
    int vocab_lo[OKV_TP_MAX + 1];
    int n_seqs;                /* of the current step */
    /* scratch */
    int32_t *rscr[OKV_TP_MAX]; /* per rank, used only by the thread running that rank's ops */
    size_t rscr_cap[OKV_TP_MAX];
    int32_t *sel[OKV_TP_MAX];  /* per-rank selection output */
    float *scores[OKV_TP_MAX];
    size_t sel_cap, score_cap;
    /* an asynchronous selection in flight */
    bool sel_pending;
    int32_t *sel_out;
    int *sel_k, *sel_c;        /* [n_reqs] ids and candidates per KV head of each request */
    int sel_n_reqs, sel_k_cap;
    okv_bmem *full;            /* rank 0: gathered logits */
    size_t full_cap;
    /* one worker thread per rank (n > 1): the step's ops are queued to them */
    bool threaded;
    struct rq *q;
    double spin_s;             /* how long a thread polls a queue before it sleeps (spin_budget) */
};

#define TP(be) ((struct tp *)(be)->ctx)

static enum okv_status bind(struct tp *t, int r)
{
    okv_backend *b = t->rank[r];
    return b->ops->bind ? b->ops->bind(b) : OKV_OK;
}

/* Run stmt for every rank, bound, stopping at the first failure. */
#define EACH(t, r, stmt)                                   \
    do {                                                   \
        for (int r = 0; r < (t)->n; r++) {                 \
            enum okv_status st_ = bind((t), r);            \
            if (st_ == OKV_OK)                             \
                st_ = (stmt);                              \
            if (st_ != OKV_OK)                             \
                return st_;                                \
        }                                                  \
    } while (0)

#define RK(t, r_) ((t)->rank[r_])
#define OPS(t, r_) ((t)->rank[r_]->ops)

/* ---- per-rank worker threads ----
 * With several ranks each has a worker thread that runs that rank's share of the ops
 * in order (one thread per GPU, its device bound once); the calling thread queues the
 * step's ops (one shared job each, host arrays copied in) and returns. Ops that return
 * data or touch memory management first wait until every queue is empty (drain) and
 * then run on the calling thread. A rank's first error is kept and reported by the
 * next drain; a failed rank keeps running its queue so that collectives never wait
 * on it forever. */
enum jop { J_STEP, J_EMBED, J_RMSNORM, J_MATMUL, J_HEADNORM, J_ROPE, J_SWIGLU, J_ADD, J_GATHER, J_KVWRITE, J_ATTN,
           J_FETCH, J_SELECT };

struct job {
    enum jop op;
    _Atomic int refs;
    okv_bmem *out;
    const okv_bmem *x, *y;
    const okv_bweight *w, *bias;
    okv_bkv *kv;
    int n, k, m, layer, heads, hd, n_seqs, n_reqs;
    size_t count;
    float eps, scale;
    bool half;
    bool reduce;                /* row-parallel matmul on workers: each rank joins the all-reduce */
    struct okv_step_meta meta;
    const int32_t *arr[3];      /* host arrays (copied in when queued) */
    uint64_t version;           /* attention: okv_attn_blocks.version of the lists */
    size_t arr_len[3];
    const struct okv_select_req *reqs;
    void *owned;                /* one allocation holding the copies */
};

struct rq {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    struct job **ring;
    unsigned cap, head;         /* head: next to run (worker only) */
    _Atomic unsigned tail;      /* next free slot (written under mu, polled by the spinning worker) */
    uint64_t submitted;
    _Atomic uint64_t completed; /* (written under mu, polled by a spinning drain) */
    bool sleeping;              /* the worker waits on cv_work (under mu) */
    int drainers;               /* threads waiting on cv_done (under mu) */
    enum okv_status err;
    char msg[512];
    bool stop, started;
    struct tp *t;
    int r;
};

/* How long a worker, or a thread waiting for the workers, polls before it sleeps: a
 * hand-off through a condition variable costs a futex wake and a context switch per op
 * (~10 us), which made a step launch-bound (8B shape at TP=2: 9.2 ms against 6.7 on one
 * GPU). Only where there are cores to spare (more than ranks + 1); else 0. */
static double spin_budget(int n)
{
    const char *e = getenv("OKV_TP_SPIN_US");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return e && *e ? atof(e) * 1e-6 : cpus > n + 1 ? 50e-6 : 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Poll until *p32 differs from v (a new op queued) or *p64 equals v (all done), or the budget runs out. */
static bool spin_until(_Atomic unsigned *p32, _Atomic uint64_t *p64, uint64_t v, double budget)
{
    if (budget <= 0)
        return false;
    double t0 = 0;
    for (unsigned i = 0;; i++) {
        bool done = p32 ? atomic_load_explicit(p32, memory_order_acquire) != (unsigned)v
                        : atomic_load_explicit(p64, memory_order_acquire) == v;
        if (done)
            return true;
        cpu_relax();
        if ((i & 63) == 63) {
            double now = okv_now();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 > budget)
                return false;
        }
    }
}

static enum okv_status run_job(struct tp *t, int r, const struct job *j);

static void job_release(struct job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1) {
        okv_free(j->owned);
        okv_free(j);
    }
}

static void *worker(void *arg)
{
    struct rq *q = arg;
    struct tp *t = q->t;
    const double spin = t->spin_s;
    bind(t, q->r);
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->head == atomic_load(&q->tail) && !q->stop && spin > 0) {
            pthread_mutex_unlock(&q->mu);
            spin_until(&q->tail, NULL, q->head, spin);
            pthread_mutex_lock(&q->mu);
        }
        while (q->head == atomic_load(&q->tail) && !q->stop) {
            q->sleeping = true;
            pthread_cond_wait(&q->cv_work, &q->mu);
            q->sleeping = false;
        }
        if (q->head == atomic_load(&q->tail) && q->stop)
            break;
        struct job *j = q->ring[q->head % q->cap];
        pthread_mutex_unlock(&q->mu);
        enum okv_status st = bind(t, q->r);
        if (st == OKV_OK)
            st = run_job(t, q->r, j);
        job_release(j);
        pthread_mutex_lock(&q->mu);
        if (st != OKV_OK && q->err == OKV_OK) {
            q->err = st;
            snprintf(q->msg, sizeof q->msg, "%s", okv_last_error());
        }
        q->head++;
        atomic_store_explicit(&q->completed, atomic_load(&q->completed) + 1, memory_order_release);
        if (q->drainers)
            pthread_cond_broadcast(&q->cv_done);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* With q->mu held: wait until the worker has run everything queued to it. */
static void wait_queue(struct rq *q)
{
    if (atomic_load(&q->completed) != q->submitted) {
        uint64_t want = q->submitted;
        pthread_mutex_unlock(&q->mu);
        spin_until(NULL, &q->completed, want, q->t->spin_s);
        pthread_mutex_lock(&q->mu);
    }
    while (atomic_load(&q->completed) != q->submitted) {
        q->drainers++;
        pthread_cond_wait(&q->cv_done, &q->mu);
        q->drainers--;
    }
}

/* Wait until every rank has run everything queued; report (and clear) the first error. */
static enum okv_status drain(struct tp *t)
{
    if (!t->threaded)
        return OKV_OK;
    enum okv_status st = OKV_OK;
    for (int r = 0; r < t->n; r++) {
        struct rq *q = &t->q[r];
        pthread_mutex_lock(&q->mu);
        wait_queue(q);
        if (q->err != OKV_OK && st == OKV_OK) {
            st = okv_set_error(q->err, "%s", q->msg);
        }
        q->err = OKV_OK;
        pthread_mutex_unlock(&q->mu);
    }
    return st;
}

/* Return the first queued error, if any, once every queue is empty. */
#define DRAINED(t)                                 \
    do {                                           \
        enum okv_status d_ = drain(t);             \
        if (d_ != OKV_OK)                          \
            return d_;                             \
    } while (0)

/* Wait until every queue is empty, leaving errors to the next drain. */
static void wait_idle(struct tp *t)
{
    if (!t->threaded)
        return;
    for (int r = 0; r < t->n; r++) {
        struct rq *q = &t->q[r];
        pthread_mutex_lock(&q->mu);
        wait_queue(q);
        pthread_mutex_unlock(&q->mu);
    }
}

/* Run a job on every rank: queued to the workers (arrays copied), or here in turn. */
static enum okv_status dispatch(struct tp *t, const struct job *jt)
{
    if (!t->threaded) {
        for (int r = 0; r < t->n; r++) {
            enum okv_status st = bind(t, r);
            if (st == OKV_OK)
                st = run_job(t, r, jt);
            if (st != OKV_OK)
                return st;
        }
        return OKV_OK;
    }
    size_t bytes = 0;
    for (int i = 0; i < 3; i++)
        bytes += sizeof(int32_t) * jt->arr_len[i];
    size_t req_rows = 0, req_cand = 0;
    for (int i = 0; i < jt->n_reqs; i++) {
        req_rows += (size_t)jt->reqs[i].n_rows;
        req_cand += (size_t)jt->reqs[i].n_cand;
    }
    bytes += sizeof(struct okv_select_req) * (size_t)jt->n_reqs + sizeof(int32_t) * (req_rows + req_cand);
    struct job *j = okv_malloc(sizeof *j, OKV_TAG_BACKEND);
    char *own = bytes ? okv_malloc(bytes, OKV_TAG_BACKEND) : NULL;
    if (!j || (bytes && !own)) {
        okv_free(j);
        okv_free(own);
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory queueing an op");
    }
    memcpy(j, jt, sizeof *j);
    j->owned = own;
    char *at = own;
    if (jt->n_reqs) {   /* requests first: they are the only struct-aligned part */
        struct okv_select_req *rq = (struct okv_select_req *)at;
        at += sizeof(struct okv_select_req) * (size_t)jt->n_reqs;
        for (int i = 0; i < jt->n_reqs; i++) {
            rq[i] = jt->reqs[i];
            memcpy(at, jt->reqs[i].rows, sizeof(int32_t) * (size_t)jt->reqs[i].n_rows);
            rq[i].rows = (const int32_t *)at;
            at += sizeof(int32_t) * (size_t)jt->reqs[i].n_rows;
            memcpy(at, jt->reqs[i].cand_host, sizeof(int32_t) * (size_t)jt->reqs[i].n_cand);
            rq[i].cand_host = (const int32_t *)at;
            at += sizeof(int32_t) * (size_t)jt->reqs[i].n_cand;
        }
        j->reqs = rq;
    }
    for (int i = 0; i < 3; i++) {
        if (!jt->arr_len[i])
            continue;
        memcpy(at, jt->arr[i], sizeof(int32_t) * jt->arr_len[i]);
        j->arr[i] = (const int32_t *)at;
        at += sizeof(int32_t) * jt->arr_len[i];
    }
    atomic_store(&j->refs, t->n);
    for (int r = 0; r < t->n; r++) {
        struct rq *q = &t->q[r];
        pthread_mutex_lock(&q->mu);
        while (atomic_load(&q->tail) - q->head == q->cap) {   /* full: wait for the worker */
            q->drainers++;
            pthread_cond_wait(&q->cv_done, &q->mu);
            q->drainers--;
        }
        unsigned tl = atomic_load(&q->tail);
        q->ring[tl % q->cap] = j;
        atomic_store_explicit(&q->tail, tl + 1, memory_order_release);
        q->submitted++;
        if (q->sleeping)
            pthread_cond_signal(&q->cv_work);
        pthread_mutex_unlock(&q->mu);
    }
    return OKV_OK;
}

static void workers_stop(struct tp *t)
{
    if (!t->q)
        return;
    for (int r = 0; r < t->n; r++) {
        struct rq *q = &t->q[r];
        if (!q->started)
            continue;
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_signal(&q->cv_work);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->th, NULL);
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv_work);
        pthread_cond_destroy(&q->cv_done);
        okv_free(q->ring);
    }
    okv_free(t->q);
    t->q = NULL;
    t->threaded = false;
}

static enum okv_status workers_start(struct tp *t)
{
    t->spin_s = spin_budget(t->n);
    t->q = okv_calloc((size_t)t->n, sizeof *t->q, OKV_TAG_BACKEND);
    if (!t->q)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    for (int r = 0; r < t->n; r++) {
        struct rq *q = &t->q[r];
        q->t = t;
        q->r = r;
        q->cap = 4096;
        q->ring = okv_malloc(sizeof(struct job *) * q->cap, OKV_TAG_BACKEND);
        if (!q->ring) {
            workers_stop(t);
            return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
        }
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->cv_work, NULL);
        pthread_cond_init(&q->cv_done, NULL);
        if (pthread_create(&q->th, NULL, worker, q) != 0) {
            okv_free(q->ring);
            pthread_mutex_destroy(&q->mu);
            pthread_cond_destroy(&q->cv_work);
            pthread_cond_destroy(&q->cv_done);
            workers_stop(t);
            return okv_set_error(OKV_ERR_BACKEND, "tp backend: cannot start the worker of rank %d", r);
        }
        q->started = true;
    }
    t->threaded = true;
    return OKV_OK;
}

/* The global [lo, hi) of the dimension that shard s splits, for rank r. */
static void range_of(const struct tp *t, enum okv_shard s, int r, int *lo, int *hi)
{
    switch (s) {
    case OKV_SHARD_OUT_Q:
    case OKV_SHARD_IN_Q:
        *lo = r * t->qh_l * t->hd;
        *hi = *lo + t->qh_l * t->hd;
        return;
    case OKV_SHARD_OUT_KV:
        *lo = t->kv_h0[r] * t->hd;
        *hi = *lo + t->kv_l * t->hd;
        return;
    case OKV_SHARD_OUT_FFN:
    case OKV_SHARD_IN_FFN:
        *lo = t->ffn_lo[r];
        *hi = t->ffn_lo[r + 1];
        return;
    case OKV_SHARD_OUT_VOCAB:
        *lo = t->vocab_lo[r];
        *hi = t->vocab_lo[r + 1];
        return;
    default:
        *lo = 0;
        *hi = -1;
        return;
    }
}

static bool is_out(enum okv_shard s) { return s >= OKV_SHARD_OUT_Q && s <= OKV_SHARD_OUT_VOCAB; }
static bool is_in(enum okv_shard s) { return s == OKV_SHARD_IN_Q || s == OKV_SHARD_IN_FFN; }

/* the first rank holding KV head h */
static int owner(const struct tp *t, int h) { return t->rep > 1 ? h * t->rep : h / t->kv_l; }

static int local_heads(const struct tp *t, int heads)
{
    if (heads == t->n_heads)
        return t->qh_l;
    if (heads == t->n_kv)
        return t->kv_l;
    return -1;
}

/* A global unit (any region, staging too) to rank-local numbering. */
static int32_t unit_local(const struct tp *t, int32_t u, int h0)
{
    int32_t stage = u & OKV_UNIT_STAGE, i = u & ~OKV_UNIT_STAGE;
    return stage | ((i / t->n_kv) * t->kv_l + (i % t->n_kv - h0));
}

/* ---- memory ---- */

static void tp_mem_free(okv_backend *be, okv_bmem *m)
{
    struct tp *t = TP(be);
    wait_idle(t);
    if (!m)
        return;
    for (int r = 0; r < t->n; r++)
        if (m->m[r] && bind(t, r) == OKV_OK)
            OPS(t, r)->mem_free(RK(t, r), m->m[r]);
    okv_free(m);
}

static enum okv_status tp_mem_alloc(okv_backend *be, size_t n, okv_bmem **out)
{
    struct tp *t = TP(be);
    DRAINED(t);
    *out = NULL;
    okv_bmem *m = okv_calloc(1, sizeof *m, OKV_TAG_BACKEND);
    if (!m)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    m->n = n;
    for (int r = 0; r < t->n; r++) {
        enum okv_status st = bind(t, r);
        if (st == OKV_OK)
            st = OPS(t, r)->mem_alloc(RK(t, r), n, &m->m[r]);
        if (st != OKV_OK) {
            tp_mem_free(be, m);
            return st;
        }
    }
    *out = m;
    return OKV_OK;
}

static enum okv_status tp_mem_write(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n)
{
    struct tp *t = TP(be);
    DRAINED(t);
    EACH(t, r, OPS(t, r)->mem_write(RK(t, r), m->m[r], off, src, n));
    m->cols = OKV_SHARD_NONE;
    return OKV_OK;
}

/* Reading a column-sharded buffer assembles the rows from the ranks' slices. */
static enum okv_status tp_mem_read(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n)
{
    struct tp *t = TP(be);
    DRAINED(t);
    if (m->cols == OKV_SHARD_NONE) {
        enum okv_status st = bind(t, 0);
        return st != OKV_OK ? st : OPS(t, 0)->mem_read(RK(t, 0), m->m[0], off, dst, n);
    }
    const size_t w = (size_t)m->width;
    if (off % w || n % w)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: a read of a sharded buffer must cover whole rows");
    const size_t row0 = off / w, rows = n / w;
    float *tmp = okv_malloc(sizeof(float) * (n ? n : 1), OKV_TAG_BACKEND);
    if (!tmp)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    enum okv_status st = OKV_OK;
    for (int r = 0; r < t->n && st == OKV_OK; r++) {
        int lo, hi;
        range_of(t, m->cols, r, &lo, &hi);
        size_t wr = (size_t)(hi - lo);
        if ((st = bind(t, r)) == OKV_OK)
            st = OPS(t, r)->mem_read(RK(t, r), m->m[r], row0 * wr, tmp, rows * wr);
        for (size_t i = 0; st == OKV_OK && i < rows; i++)
            memcpy(dst + i * w + (size_t)lo, tmp + i * wr, sizeof(float) * wr);
    }
    okv_free(tmp);
    return st;
}

/* ---- weights ---- */

/* A view of rows [lo, hi) of a matrix (or elements of a vector): contiguous. */
static bool slice_rows(const struct okv_tensor_view *t, int64_t lo, int64_t hi, struct okv_tensor_view *v)
{
    *v = *t;
    if (t->scale.data)   /* FP8 or packed integers with a scale grid: rows_f32 converts them */
        return false;
    if (t->n_dims <= 1 || t->ne[1] == 1) {   /* vector */
        const int64_t bk = okv_dtype_block(t->dtype);
        if (lo % bk || hi % bk)
            return false;
        size_t off = okv_dtype_nbytes(t->dtype, lo);
        v->ne[0] = hi - lo;
        v->data = (const char *)t->data + off;
        v->nbytes = okv_dtype_nbytes(t->dtype, hi - lo);
        return true;
    }
    size_t row = okv_dtype_nbytes(t->dtype, t->ne[0]);
    v->ne[1] = hi - lo;
    v->data = (const char *)t->data + (size_t)lo * row;
    v->nbytes = (size_t)(hi - lo) * row;
    return true;
}

/* Rows [lo, hi) of a matrix whose rows cannot be viewed in place (FP8 and packed integers:
 * their scale grids and words do not slice with the rows), converted to float32 into *buf. */
static enum okv_status rows_f32(const struct okv_tensor_view *t, int64_t lo, int64_t hi, struct okv_tensor_view *v,
                                float **buf)
{
    const int64_t ne0 = t->ne[0];
    float *out = okv_malloc(sizeof(float) * (size_t)((hi - lo) * ne0), OKV_TAG_BACKEND);
    if (!out)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory slicing %s", t->name);
    enum okv_status st = okv_tensor_to_f32(t, lo * ne0, (hi - lo) * ne0, out);
    if (st != OKV_OK) {
        okv_free(out);
        return st;
    }
    *v = *t;
    memset(&v->scale, 0, sizeof v->scale);
    v->dtype = OKV_DTYPE_F32;
    v->ne[1] = hi - lo;
    v->data = out;
    v->nbytes = sizeof(float) * (size_t)((hi - lo) * ne0);
    *buf = out;
    return OKV_OK;
}

/* Columns [lo, hi) of a matrix (or elements of a vector that cannot be sliced in
 * place), converted to float32 into *buf (the caller frees it). */
static enum okv_status slice_cols(const struct okv_tensor_view *t, int64_t lo, int64_t hi, struct okv_tensor_view *v,
                                  float **buf)
{
    const int64_t ne0 = t->ne[0], rows = okv_tensor_nelements(t) / ne0, w = hi - lo;
    float *row = okv_malloc(sizeof(float) * (size_t)ne0, OKV_TAG_BACKEND);
    float *out = okv_malloc(sizeof(float) * (size_t)(rows * w), OKV_TAG_BACKEND);
    if (!row || !out) {
        okv_free(row);
        okv_free(out);
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory slicing %s", t->name);
    }
    for (int64_t i = 0; i < rows; i++) {
        enum okv_status st = okv_tensor_to_f32(t, i * ne0, ne0, row);
        if (st != OKV_OK) {
            okv_free(row);
            okv_free(out);
            return st;
        }
        memcpy(out + i * w, row + lo, sizeof(float) * (size_t)w);
    }
    okv_free(row);
    *v = *t;
    memset(&v->scale, 0, sizeof v->scale);
    v->dtype = OKV_DTYPE_F32;
    v->ne[0] = w;
    v->data = out;
    v->nbytes = sizeof(float) * (size_t)(rows * w);
    *buf = out;
    return OKV_OK;
}

static void tp_weight_free(okv_backend *be, okv_bweight *w)
{
    struct tp *t = TP(be);
    wait_idle(t);
    if (!w)
        return;
    for (int r = 0; r < t->n; r++)
        if (w->w[r] && bind(t, r) == OKV_OK)
            OPS(t, r)->weight_free(RK(t, r), w->w[r]);
    okv_free(w);
}

static enum okv_status tp_weight_load(okv_backend *be, const struct okv_tensor_view *tv, okv_bweight **out)
{
    struct tp *t = TP(be);
    DRAINED(t);
    *out = NULL;
    okv_bweight *w = okv_calloc(1, sizeof *w, OKV_TAG_BACKEND);
    if (!w)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    w->shard = tv->shard;
    w->t = t;
    const bool vec = tv->n_dims <= 1 || tv->ne[1] == 1;
    const int64_t dim_len = is_in(tv->shard) || vec ? tv->ne[0] : tv->ne[1];
    enum okv_status st = OKV_OK;
    for (int r = 0; r < t->n && st == OKV_OK; r++) {
        struct okv_tensor_view v = *tv;
        float *buf = NULL;
        if (tv->shard != OKV_SHARD_NONE) {
            int lo, hi;
            range_of(t, tv->shard, r, &lo, &hi);
            if (hi > dim_len) {
                st = okv_set_error(OKV_ERR_FORMAT, "tp backend: weight %s has %lld %s, rank %d needs up to %d", tv->name,
                                   (long long)dim_len, is_in(tv->shard) ? "columns" : "rows", r, hi);
                break;
            }
            if (lo == 0 && hi == dim_len)
                v = *tv;   /* the whole weight (one rank): as stored, as the plain backend loads it */
            else if (is_in(tv->shard))
                st = slice_cols(tv, lo, hi, &v, &buf);
            else if (!slice_rows(tv, lo, hi, &v))
                st = tv->scale.data && !vec ? rows_f32(tv, lo, hi, &v, &buf) : slice_cols(tv, lo, hi, &v, &buf);
        }
        if (st == OKV_OK && (st = bind(t, r)) == OKV_OK)
            st = OPS(t, r)->weight_load(RK(t, r), &v, &w->w[r]);
        okv_free(buf);
    }
    if (st != OKV_OK) {
        tp_weight_free(be, w);
        return st;
    }
    *out = w;
    return OKV_OK;
}

/* bytes on all ranks together */
static size_t tp_weight_bytes(const okv_bweight *w)
{
    size_t b = 0;
    for (int r = 0; r < w->t->n; r++)
        b += w->t->rank[r]->ops->weight_bytes(w->w[r]);
    return b;
}

/* ---- KV ---- */

static void tp_kv_free(okv_backend *be, okv_bkv *kv)
{
    struct tp *t = TP(be);
    wait_idle(t);
    if (!kv)
        return;
    for (int r = 0; r < t->n; r++)
        if (kv->kv[r] && bind(t, r) == OKV_OK)
            OPS(t, r)->kv_free(RK(t, r), kv->kv[r]);
    okv_free(kv);
}

static enum okv_status tp_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out)
{
    struct tp *t = TP(be);
    DRAINED(t);
    *out = NULL;
    if (g->n_kv_heads != t->n_kv)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: KV geometry of %d heads for a model of %d", g->n_kv_heads,
                             t->n_kv);
    if (g->n_stage_units % g->n_kv_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: staging units not a multiple of the KV heads");
    okv_bkv *kv = okv_calloc(1, sizeof *kv, OKV_TAG_BACKEND);
    int32_t *units = g->layer_sparse_units ? okv_malloc(sizeof(int32_t) * (size_t)g->n_layers, OKV_TAG_BACKEND) : NULL;
    if (!kv || (g->layer_sparse_units && !units)) {
        okv_free(kv);
        okv_free(units);
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    }
    kv->g = *g;
    kv->g.layer_sparse_units = NULL;
    kv->t = t;
    struct okv_kv_geometry gl = *g;
    gl.n_kv_heads = t->kv_l;
    gl.n_sparse_units = g->n_sparse_units / t->n_kv * t->kv_l;
    gl.n_stage_units = g->n_stage_units / t->n_kv * t->kv_l;
    enum okv_status st = OKV_OK;
    if (units) {
        for (int l = 0; l < g->n_layers; l++) {
            if (g->layer_sparse_units[l] % t->n_kv)
                st = okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: sparse units of layer %d not a multiple of the KV heads", l);
            units[l] = g->layer_sparse_units[l] / t->n_kv * t->kv_l;
        }
        gl.layer_sparse_units = units;
    } else if (g->n_sparse_units % t->n_kv) {
        st = okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: sparse units not a multiple of the KV heads");
    }
    for (int r = 0; r < t->n && st == OKV_OK; r++)
        if ((st = bind(t, r)) == OKV_OK)
            st = OPS(t, r)->kv_alloc(RK(t, r), &gl, &kv->kv[r]);
    okv_free(units);
    if (st != OKV_OK) {
        tp_kv_free(be, kv);
        return st;
    }
    *out = kv;
    return OKV_OK;
}

static size_t tp_kv_unit_bytes(const okv_bkv *kv) { return kv->t->rank[0]->ops->kv_unit_bytes(kv->kv[0]); }
static size_t tp_kv_host_unit_bytes(const okv_bkv *kv) { return okv_backend_host_unit_bytes(kv->t->rank[0], kv->kv[0]); }

/* the device tier of one GPU: the largest rank's (they are equal) */
static size_t tp_kv_device_bytes(const okv_bkv *kv)
{
    size_t b = 0;
    for (int r = 0; r < kv->t->n; r++) {
        size_t x = kv->t->rank[r]->ops->kv_device_bytes(kv->kv[r]);
        b = x > b ? x : b;
    }
    return b;
}

/* host memory of all ranks' host tiers */
static size_t tp_kv_host_bytes(const okv_bkv *kv)
{
    size_t b = 0;
    for (int r = 0; r < kv->t->n; r++)
        b += kv->t->rank[r]->ops->kv_host_bytes(kv->kv[r]);
    return b;
}

/* Drained, the rank holding KV head `head` bound in *r. */
static enum okv_status head_rank(struct tp *t, int head, int *r)
{
    DRAINED(t);
    if (head < 0 || head >= t->n_kv)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: KV head %d out of range", head);
    *r = owner(t, head);
    return bind(t, *r);
}

static enum okv_status tp_kv_unit_read(okv_backend *be, const okv_bkv *kv, int layer, int32_t unit, float *k, float *v)
{
    struct tp *t = TP(be);
    int r;
    enum okv_status st = head_rank(t, (unit & ~OKV_UNIT_STAGE) % t->n_kv, &r);
    return st != OKV_OK ? st : OPS(t, r)->kv_unit_read(RK(t, r), kv->kv[r], layer, unit_local(t, unit, t->kv_h0[r]), k, v);
}

static enum okv_status tp_kv_host_read(okv_backend *be, const okv_bkv *kv, int layer, int host_block, int head, float *k,
                                       float *v)
{
    struct tp *t = TP(be);
    int r;
    enum okv_status st = head_rank(t, head, &r);
    return st != OKV_OK ? st : OPS(t, r)->kv_host_read(RK(t, r), kv->kv[r], layer, host_block, head - t->kv_h0[r], k, v);
}

static enum okv_status tp_kv_summary_read(okv_backend *be, const okv_bkv *kv, int layer, int host_block, int head,
                                          float *kmin, float *kmax)
{
    struct tp *t = TP(be);
    int r;
    enum okv_status st = head_rank(t, head, &r);
    return st != OKV_OK ? st
                        : OPS(t, r)->kv_summary_read(RK(t, r), kv->kv[r], layer, host_block, head - t->kv_h0[r], kmin, kmax);
}

static enum okv_status tp_kv_summary_rebuild(okv_backend *be, okv_bkv *kv, int host_block, int n_valid)
{
    struct tp *t = TP(be);
    DRAINED(t);
    EACH(t, r, OPS(t, r)->kv_summary_rebuild(RK(t, r), kv->kv[r], host_block, n_valid));
    return OKV_OK;
}

static enum okv_status tp_kv_host_randomize(okv_backend *be, okv_bkv *kv, int host_block, uint64_t seed, float scale)
{
    struct tp *t = TP(be);
    DRAINED(t);
    /* each rank's heads get their own stream: the KV heads of the whole model differ */
    EACH(t, r, OPS(t, r)->kv_host_randomize(RK(t, r), kv->kv[r], host_block, seed + 0x9e3779b97f4a7c15ull * (uint64_t)t->kv_h0[r],
                                            scale));
    return OKV_OK;
}

static enum okv_status tp_kv_fetch(okv_backend *be, okv_bkv *kv, int layer, int n, const int32_t *src_host,
                                   const int32_t *dst_unit)
{
    struct job j = {.op = J_FETCH, .kv = kv, .layer = layer, .n = n, .arr = {src_host, dst_unit},
                    .arr_len = {(size_t)n, (size_t)n}};
    return n > 0 ? dispatch(TP(be), &j) : OKV_OK;
}

/* Rank r's scratch of at least n entries (its lists in its own numbering). */
static int32_t *rank_scratch(struct tp *t, int r, size_t n)
{
    if (n > t->rscr_cap[r]) {
        int32_t *p = okv_realloc(t->rscr[r], sizeof(int32_t) * (n + n / 2), OKV_TAG_BACKEND);
        if (!p)
            return NULL;
        t->rscr[r] = p;
        t->rscr_cap[r] = n + n / 2;
    }
    return t->rscr[r];
}

/* rank r's share of a fetch: the units of its heads, in its numbering */
static enum okv_status run_fetch(struct tp *t, int r, const struct job *j)
{
    const int h0 = t->kv_h0[r], n = j->n;
    int32_t *src = rank_scratch(t, r, (size_t)(2 * n + 2));
    if (!src)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    int32_t *dst = src + n + 1;
    int m = 0;
    for (int i = 0; i < n; i++) {
        int h = j->arr[0][i] % t->n_kv;
        if (h < h0 || h >= h0 + t->kv_l)
            continue;
        src[m] = j->arr[0][i] / t->n_kv * t->kv_l + (h - h0);
        dst[m] = unit_local(t, j->arr[1][i], h0);
        m++;
    }
    return m ? OPS(t, r)->kv_fetch(RK(t, r), j->kv->kv[r], j->layer, m, src, dst) : OKV_OK;
}

static enum okv_status tp_kv_fetch_wait(okv_backend *be, okv_bkv *kv, int layer, int *pending, double *stall_s)
{
    struct tp *t = TP(be);
    enum okv_status st = drain(t);
    if (st != OKV_OK)
        return st;
    int pend = 0;
    double stall = 0;
    for (int r = 0; r < t->n; r++) {
        int p = 0;
        double s = 0;
        st = bind(t, r);
        if (st == OKV_OK)
            st = OPS(t, r)->kv_fetch_wait(RK(t, r), kv->kv[r], layer, &p, &s);
        if (st != OKV_OK)
            return st;
        pend += p;
        if (s > stall)
            stall = s;
    }
    *pending = pend / t->rep;   /* replicated heads are fetched by each of their ranks */
    *stall_s = stall;
    return OKV_OK;
}

/* ---- step and ops ---- */

static enum okv_status tp_step_begin(okv_backend *be, const struct okv_step_meta *meta)
{
    struct tp *t = TP(be);
    t->n_seqs = meta->n_seqs;
    struct job j = {.op = J_STEP, .meta = *meta};
    return dispatch(t, &j);
}

static enum okv_status tp_embed(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids, int n, int dim)
{
    struct job j = {.op = J_EMBED, .out = out, .w = table, .n = n, .k = dim, .arr = {ids}, .arr_len = {(size_t)n}};
    out->cols = OKV_SHARD_NONE;
    return dispatch(TP(be), &j);
}

static enum okv_status tp_rmsnorm(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, int n, int dim,
                                  float eps)
{
    struct job j = {.op = J_RMSNORM, .out = out, .x = x, .w = w, .n = n, .k = dim, .eps = eps};
    out->cols = OKV_SHARD_NONE;
    return dispatch(TP(be), &j);
}

static enum okv_status tp_matmul(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w,
                                 const okv_bweight *bias, int n, int k, int m)
{
    struct tp *t = TP(be);
    /* row-parallel: partial products of each rank's input slice, summed (a bias once);
     * with workers each rank joins the all-reduce itself, else it follows here */
    struct job j = {.op = J_MATMUL, .out = out, .x = x, .w = w, .bias = bias, .n = n, .k = k, .m = m,
                    .reduce = is_in(w->shard) && t->threaded, .count = (size_t)n * (size_t)m};
    enum okv_status st = dispatch(t, &j);
    if (st != OKV_OK)
        return st;
    out->cols = is_out(w->shard) ? w->shard : OKV_SHARD_NONE;
    out->width = m;
    if (is_in(w->shard) && !t->threaded)
        return t->comm->ops->allreduce_sum(t->comm, out->m, (size_t)n * (size_t)m);
    return OKV_OK;
}

static enum okv_status tp_head_rmsnorm(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int heads, int hd, float eps)
{
    struct tp *t = TP(be);
    int hl = local_heads(t, heads);
    if (hl < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: head norm over %d heads", heads);
    struct job j = {.op = J_HEADNORM, .out = x, .w = w, .n = n, .heads = hl, .hd = hd, .eps = eps};
    return dispatch(t, &j);
}

static enum okv_status tp_rope(okv_backend *be, okv_bmem *x, int n, int heads, int hd, bool half_pairing)
{
    struct tp *t = TP(be);
    int hl = local_heads(t, heads);
    if (hl < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: RoPE over %d heads", heads);
    struct job j = {.op = J_ROPE, .out = x, .n = n, .heads = hl, .hd = hd, .half = half_pairing};
    return dispatch(t, &j);
}

static enum okv_status tp_swiglu(okv_backend *be, okv_bmem *out, const okv_bmem *gate, const okv_bmem *up, int n, int f)
{
    struct tp *t = TP(be);
    if (f != t->ffn)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: SwiGLU of width %d (the model's is %d)", f, t->ffn);
    struct job j = {.op = J_SWIGLU, .out = out, .x = gate, .y = up, .n = n};
    out->cols = OKV_SHARD_OUT_FFN;
    out->width = f;
    return dispatch(t, &j);
}

static enum okv_status tp_add(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t count)
{
    struct job j = {.op = J_ADD, .out = x, .y = y, .count = count};
    return dispatch(TP(be), &j);
}

static enum okv_status tp_gather_rows(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows,
                                      int width)
{
    struct job j = {.op = J_GATHER, .out = out, .x = x, .n = n_rows, .k = width, .arr = {rows}, .arr_len = {(size_t)n_rows}};
    out->cols = OKV_SHARD_NONE;
    return dispatch(TP(be), &j);
}

static enum okv_status tp_kv_write(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v)
{
    struct job j = {.op = J_KVWRITE, .kv = kv, .layer = layer, .x = k, .y = v};
    return dispatch(TP(be), &j);
}

static enum okv_status tp_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                    const struct okv_attn_blocks *blocks, int n_heads, float scale)
{
    struct tp *t = TP(be);
    if (n_heads != t->n_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: attention over %d heads (the model has %d)", n_heads, t->n_heads);
    const int S = t->n_seqs;
    const size_t total = (size_t)blocks->blk_start[S * t->n_kv];
    struct job j = {.op = J_ATTN, .out = out, .x = q, .kv = (okv_bkv *)kv, .layer = layer, .n_seqs = S, .scale = scale,
                    .arr = {blocks->blk_start, blocks->blk_unit, blocks->blk_index},
                    .arr_len = {(size_t)S * t->n_kv + 1, total, total}, .version = blocks->version};
    out->cols = OKV_SHARD_OUT_Q;
    out->width = t->n_heads * t->hd;
    return dispatch(t, &j);
}

/* rank r's attention: the lists of its KV heads, in its unit numbering */
static enum okv_status run_attention(struct tp *t, int r, const struct job *j)
{
    const int nkv = t->n_kv, S = j->n_seqs, h0 = t->kv_h0[r];
    const int32_t *gs = j->arr[0], *gu = j->arr[1], *gi = j->arr[2];
    const size_t total = (size_t)gs[S * nkv];
    int32_t *ls = rank_scratch(t, r, (size_t)S * t->kv_l + 1 + 2 * total + 2);
    if (!ls)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    int32_t *lu = ls + (size_t)S * t->kv_l + 1, *li = lu + total + 1;
    int at = 0;
    for (int s = 0; s < S; s++)
        for (int hl = 0; hl < t->kv_l; hl++) {
            int g = s * nkv + h0 + hl;
            ls[s * t->kv_l + hl] = at;
            for (int i = gs[g]; i < gs[g + 1]; i++) {
                lu[at] = unit_local(t, gu[i], h0);
                li[at++] = gi[i];
            }
        }
    ls[S * t->kv_l] = at;
    /* a rank's lists follow from the global ones: the same version */
    struct okv_attn_blocks lb = {ls, lu, li, NULL, j->version};
    return OPS(t, r)->attention(RK(t, r), j->out->m[r], j->x->m[r], j->kv->kv[r], j->layer, &lb, t->qh_l, j->scale);
}

static enum okv_status run_job(struct tp *t, int r, const struct job *j)
{
    okv_backend *b = RK(t, r);
    const struct okv_backend_ops *o = b->ops;
    int lo, hi;
    switch (j->op) {
    case J_STEP:
        return o->step_begin(b, &j->meta);
    case J_EMBED:
        return o->embed(b, j->out->m[r], j->w->w[r], j->arr[0], j->n, j->k);
    case J_RMSNORM:
        return o->rmsnorm(b, j->out->m[r], j->x->m[r], j->w->w[r], j->n, j->k, j->eps);
    case J_MATMUL:
        if (is_out(j->w->shard)) {
            range_of(t, j->w->shard, r, &lo, &hi);
            return o->matmul(b, j->out->m[r], j->x->m[r], j->w->w[r], j->bias ? j->bias->w[r] : NULL, j->n, j->k, hi - lo);
        }
        if (is_in(j->w->shard)) {
            range_of(t, j->w->shard, r, &lo, &hi);
            enum okv_status st = o->matmul(b, j->out->m[r], j->x->m[r], j->w->w[r], j->bias && r == 0 ? j->bias->w[r] : NULL,
                                           j->n, hi - lo, j->m);
            if (j->reduce)   /* threaded: this rank's part of the all-reduce, even after a failure */
                st = t->comm->ops->allreduce_rank(t->comm, r, j->out->m[r], j->count) != OKV_OK && st == OKV_OK
                         ? okv_set_error(OKV_ERR_BACKEND, "%s", okv_last_error())
                         : st;
            return st;
        }
        return o->matmul(b, j->out->m[r], j->x->m[r], j->w->w[r], j->bias ? j->bias->w[r] : NULL, j->n, j->k, j->m);
    case J_HEADNORM:
        return o->head_rmsnorm(b, j->out->m[r], j->w->w[r], j->n, j->heads, j->hd, j->eps);
    case J_ROPE:
        return o->rope(b, j->out->m[r], j->n, j->heads, j->hd, j->half);
    case J_SWIGLU:
        return o->swiglu(b, j->out->m[r], j->x->m[r], j->y->m[r], j->n, t->ffn_lo[r + 1] - t->ffn_lo[r]);
    case J_ADD:
        return o->add(b, j->out->m[r], j->y->m[r], j->count);
    case J_GATHER:
        return o->gather_rows(b, j->out->m[r], j->x->m[r], j->arr[0], j->n, j->k);
    case J_KVWRITE:
        return o->kv_write(b, j->kv->kv[r], j->layer, j->x->m[r], j->y->m[r]);
    case J_ATTN:
        return run_attention(t, r, j);
    case J_FETCH:
        return run_fetch(t, r, j);
    case J_SELECT:
        return o->select_blocks_async ? o->select_blocks_async(b, j->kv->kv[r], j->layer, j->x->m[r], t->qh_l, j->reqs,
                                                               j->n_reqs, t->sel[r])
                                      : o->select_blocks(b, j->kv->kv[r], j->layer, j->x->m[r], t->qh_l, j->reqs, j->n_reqs,
                                                         t->sel[r], NULL);
    }
    return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: unknown queued op %d", (int)j->op);
}

/* ---- selection ---- */

static enum okv_status sel_scratch(struct tp *t, const struct okv_select_req *reqs, int n_reqs, bool scores)
{
    size_t ids = 1, sc = 1;
    for (int i = 0; i < n_reqs; i++) {
        ids += (size_t)t->kv_l * (size_t)reqs[i].k;
        sc += (size_t)t->kv_l * (size_t)reqs[i].n_cand;
    }
    if (ids > t->sel_cap) {
        for (int r = 0; r < t->n; r++) {
            int32_t *p = okv_realloc(t->sel[r], sizeof(int32_t) * ids * 2, OKV_TAG_BACKEND);
            if (!p)
                return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
            t->sel[r] = p;
        }
        t->sel_cap = ids * 2;
    }
    if (scores && sc > t->score_cap) {
        for (int r = 0; r < t->n; r++) {
            float *p = okv_realloc(t->scores[r], sizeof(float) * sc * 2, OKV_TAG_BACKEND);
            if (!p)
                return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
            t->scores[r] = p;
        }
        t->score_cap = sc * 2;
    }
    if (n_reqs > t->sel_k_cap) {
        int *p = okv_realloc(t->sel_k, sizeof(int) * (size_t)n_reqs * 2, OKV_TAG_BACKEND);
        if (p)
            t->sel_k = p;
        int *c = okv_realloc(t->sel_c, sizeof(int) * (size_t)n_reqs * 2, OKV_TAG_BACKEND);
        if (c)
            t->sel_c = c;
        if (!p || !c)
            return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
        t->sel_k_cap = n_reqs * 2;
    }
    for (int i = 0; i < n_reqs; i++) {
        t->sel_k[i] = reqs[i].k;
        t->sel_c[i] = reqs[i].n_cand;
    }
    t->sel_n_reqs = n_reqs;
    return OKV_OK;
}

/* The ranks' per-head rows ([kv_l][width] for each request, one after another) to the
 * global [n_kv][width] layout, each KV head from the first rank holding it. */
static void assemble_heads(const struct tp *t, char *out, char *const *per_rank, size_t elem, const int *width)
{
    size_t g = 0, l = 0;
    for (int i = 0; i < t->sel_n_reqs; i++) {
        const size_t w = (size_t)width[i] * elem;
        for (int h = 0; h < t->n_kv; h++) {
            int r = owner(t, h);
            memcpy(out + g + (size_t)h * w, per_rank[r] + l + (size_t)(h - t->kv_h0[r]) * w, w);
        }
        g += (size_t)t->n_kv * w;
        l += (size_t)t->kv_l * w;
    }
}

static void sel_assemble(struct tp *t, int32_t *out)
{
    assemble_heads(t, (char *)out, (char *const *)t->sel, sizeof(int32_t), t->sel_k);
}

/* Replicated KV heads: the ranks sharing a head each hold part of its query group,
 * and the Quest bound is a max over the whole group. So every rank returns its
 * scores, the max over the sharing ranks is taken here, and the top k (best first,
 * ties to the lower block id) chosen on the host. */
static const float *g_topk_score;
static const int32_t *g_topk_id;
static int by_score(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    float x = g_topk_score[i], y = g_topk_score[j];
    if (x != y)
        return x > y ? -1 : 1;
    return (g_topk_id[i] > g_topk_id[j]) - (g_topk_id[i] < g_topk_id[j]);
}

static enum okv_status select_replicated(struct tp *t, const okv_bkv *kv, int layer, const okv_bmem *q,
                                         const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores)
{
    DRAINED(t);   /* the queries and summaries come from ops still queued to the workers */
    enum okv_status st = sel_scratch(t, reqs, n_reqs, true);
    if (st != OKV_OK)
        return st;
    EACH(t, r, OPS(t, r)->select_blocks(RK(t, r), kv->kv[r], layer, q->m[r], t->qh_l, reqs, n_reqs, t->sel[r], t->scores[r]));
    int max_cand = 1;
    for (int i = 0; i < n_reqs; i++)
        max_cand = reqs[i].n_cand > max_cand ? reqs[i].n_cand : max_cand;
    float *merged = okv_malloc(sizeof(float) * (size_t)max_cand, OKV_TAG_BACKEND);
    int *order = okv_malloc(sizeof(int) * (size_t)max_cand, OKV_TAG_BACKEND);
    if (!merged || !order) {
        okv_free(merged);
        okv_free(order);
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    }
    size_t go = 0, gs = 0, ls = 0;   /* global id / score offsets, local (one head per rank) score offset */
    for (int i = 0; i < n_reqs; i++) {
        const int c = reqs[i].n_cand, k = reqs[i].k;
        for (int h = 0; h < t->n_kv; h++) {
            for (int x = 0; x < c; x++) {
                float m = -INFINITY;
                for (int r = h * t->rep; r < (h + 1) * t->rep; r++)
                    m = t->scores[r][ls + x] > m ? t->scores[r][ls + x] : m;
                merged[x] = m;
                order[x] = x;
            }
            g_topk_score = merged;
            g_topk_id = reqs[i].cand_host;
            qsort(order, (size_t)c, sizeof(int), by_score);
            for (int x = 0; x < k; x++)
                out[go + (size_t)h * k + x] = reqs[i].cand_host[order[x]];
            if (scores)
                memcpy(scores + gs + (size_t)h * c, merged, sizeof(float) * (size_t)c);
        }
        go += (size_t)t->n_kv * k;
        gs += (size_t)t->n_kv * c;
        ls += (size_t)c;
    }
    okv_free(merged);
    okv_free(order);
    return OKV_OK;
}

static enum okv_status tp_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                        const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores)
{
    struct tp *t = TP(be);
    DRAINED(t);
    if (n_heads != t->n_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: selection over %d heads (the model has %d)", n_heads, t->n_heads);
    if (t->rep > 1)
        return select_replicated(t, kv, layer, q, reqs, n_reqs, out, scores);
    enum okv_status st = sel_scratch(t, reqs, n_reqs, scores != NULL);
    if (st != OKV_OK)
        return st;
    EACH(t, r, OPS(t, r)->select_blocks(RK(t, r), kv->kv[r], layer, q->m[r], t->qh_l, reqs, n_reqs, t->sel[r],
                                        scores ? t->scores[r] : NULL));
    sel_assemble(t, out);
    if (scores)
        assemble_heads(t, (char *)scores, (char *const *)t->scores, sizeof(float), t->sel_c);
    return OKV_OK;
}

static enum okv_status tp_select_blocks_async(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                              const struct okv_select_req *reqs, int n_reqs, int32_t *out)
{
    struct tp *t = TP(be);
    if (n_heads != t->n_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: selection over %d heads (the model has %d)", n_heads, t->n_heads);
    if (t->sel_pending)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: a selection is already in flight");
    if (t->rep > 1)   /* synchronous: the scores of the sharing ranks meet on the host */
        return select_replicated(t, kv, layer, q, reqs, n_reqs, out, NULL);
    enum okv_status st = drain(t);   /* the rank buffers may move */
    if (st == OKV_OK)
        st = sel_scratch(t, reqs, n_reqs, false);
    if (st != OKV_OK)
        return st;
    struct job j = {.op = J_SELECT, .kv = (okv_bkv *)kv, .layer = layer, .x = q, .reqs = reqs, .n_reqs = n_reqs};
    if ((st = dispatch(t, &j)) != OKV_OK)
        return st;
    t->sel_pending = true;
    t->sel_out = out;
    return OKV_OK;
}

static enum okv_status tp_select_wait(okv_backend *be)
{
    struct tp *t = TP(be);
    DRAINED(t);
    if (!t->sel_pending)
        return OKV_OK;
    t->sel_pending = false;
    for (int r = 0; r < t->n; r++) {
        okv_backend *b = RK(t, r);
        if (!b->ops->select_wait)
            continue;
        enum okv_status st = bind(t, r);
        if (st == OKV_OK)
            st = b->ops->select_wait(b);
        if (st != OKV_OK)
            return st;
    }
    sel_assemble(t, t->sel_out);
    return OKV_OK;
}

/* ---- sampling, sync ---- */

static enum okv_status tp_sample(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                 const struct okv_sampling *params, const double *u, int32_t *out)
{
    struct tp *t = TP(be);
    DRAINED(t);
    enum okv_status st = bind(t, 0);
    if (st != OKV_OK)
        return st;
    okv_bmem *rows = logits->m[0];   /* replicated logits: rank 0 has them all */
    if (logits->cols != OKV_SHARD_NONE) {
        if (logits->cols != OKV_SHARD_OUT_VOCAB || vocab != t->vocab)
            return okv_set_error(OKV_ERR_INVALID_ARG, "tp backend: sampling from a buffer sharded otherwise than by vocabulary");
        size_t need = (size_t)n_rows * (size_t)vocab;
        if (need > t->full_cap) {
            if (t->full)
                OPS(t, 0)->mem_free(RK(t, 0), t->full);
            t->full = NULL;
            t->full_cap = 0;
            if ((st = OPS(t, 0)->mem_alloc(RK(t, 0), need, &t->full)) != OKV_OK)
                return st;
            t->full_cap = need;
        }
        if ((st = t->comm->ops->gather_cols(t->comm, t->full, logits->m, n_rows, t->vocab_lo)) != OKV_OK ||
            (st = bind(t, 0)) != OKV_OK)
            return st;
        rows = t->full;
    }
    return OPS(t, 0)->sample(RK(t, 0), rows, n_rows, vocab, params, u, out);
}

static enum okv_status tp_sync(okv_backend *be)
{
    struct tp *t = TP(be);
    DRAINED(t);
    EACH(t, r, OPS(t, r)->sync(RK(t, r)));
    return OKV_OK;
}

static int tp_shards(const okv_backend *be) { return TP(be)->n; }

static void tp_destroy(okv_backend *be)
{
    struct tp *t = TP(be);
    wait_idle(t);
    workers_stop(t);
    if (t->full && bind(t, 0) == OKV_OK)
        OPS(t, 0)->mem_free(RK(t, 0), t->full);
    if (t->comm)
        t->comm->ops->destroy(t->comm);
    for (int r = 0; r < t->n; r++) {
        if (t->rank[r]) {
            bind(t, r);
            okv_backend_free(t->rank[r]);
        }
        okv_free(t->sel[r]);
        okv_free(t->rscr[r]);
        okv_free(t->scores[r]);
    }
    okv_free(t->sel_k);
    okv_free(t->sel_c);
    okv_free(t);
    okv_free(be);
}

static const struct okv_backend_ops tp_ops = {
    .name = "tp",
    .destroy = tp_destroy,
    .mem_alloc = tp_mem_alloc,
    .mem_free = tp_mem_free,
    .mem_write = tp_mem_write,
    .mem_read = tp_mem_read,
    .weight_load = tp_weight_load,
    .weight_free = tp_weight_free,
    .weight_bytes = tp_weight_bytes,
    .kv_alloc = tp_kv_alloc,
    .kv_free = tp_kv_free,
    .kv_unit_bytes = tp_kv_unit_bytes,
    .kv_host_unit_bytes = tp_kv_host_unit_bytes,
    .kv_device_bytes = tp_kv_device_bytes,
    .kv_host_bytes = tp_kv_host_bytes,
    .kv_unit_read = tp_kv_unit_read,
    .kv_host_read = tp_kv_host_read,
    .kv_summary_read = tp_kv_summary_read,
    .kv_summary_rebuild = tp_kv_summary_rebuild,
    .kv_host_randomize = tp_kv_host_randomize,
    .kv_fetch = tp_kv_fetch,
    .kv_fetch_wait = tp_kv_fetch_wait,
    .step_begin = tp_step_begin,
    .embed = tp_embed,
    .rmsnorm = tp_rmsnorm,
    .matmul = tp_matmul,
    .head_rmsnorm = tp_head_rmsnorm,
    .rope = tp_rope,
    .swiglu = tp_swiglu,
    .add = tp_add,
    .gather_rows = tp_gather_rows,
    .kv_write = tp_kv_write,
    .select_blocks = tp_select_blocks,
    .select_blocks_async = tp_select_blocks_async,
    .select_wait = tp_select_wait,
    .sample = tp_sample,
    .attention = tp_attention,
    .sync = tp_sync,
    .bind = NULL,
    .shards = tp_shards,
};

/* Rank r's share of [0, len) split n ways as evenly as possible. */
static void split(int len, int n, int *lo)
{
    for (int r = 0; r <= n; r++)
        lo[r] = (int)((int64_t)len * r / n);
}

enum okv_status okv_backend_tp_create(okv_backend **ranks, int n, okv_tp_comm *comm, const struct okv_model_config *cfg,
                                      okv_backend **out)
{
    *out = NULL;
    enum okv_status st = OKV_OK;
    if (n < 1 || n > OKV_TP_MAX)
        st = okv_set_error(OKV_ERR_INVALID_ARG, "tensor parallel size %d: 1 to %d supported", n, OKV_TP_MAX);
    else if (cfg->n_heads % n)
        st = okv_set_error(OKV_ERR_UNSUPPORTED, "tensor parallel size %d does not divide the %d attention heads", n, cfg->n_heads);
    else if (cfg->n_kv_heads % n && n % cfg->n_kv_heads)
        st = okv_set_error(OKV_ERR_UNSUPPORTED,
                           "tensor parallel size %d: the %d KV heads are neither a multiple nor a divisor of it", n,
                           cfg->n_kv_heads);
    else if (cfg->ffn_dim < n || cfg->vocab_size < n)
        st = okv_set_error(OKV_ERR_UNSUPPORTED, "tensor parallel size %d: the model is too small to split", n);
    okv_backend *be = NULL;
    struct tp *t = NULL;
    if (st == OKV_OK) {
        be = okv_calloc(1, sizeof *be, OKV_TAG_BACKEND);
        t = okv_calloc(1, sizeof *t, OKV_TAG_BACKEND);
        if (!be || !t)
            st = okv_set_error(OKV_ERR_NO_MEMORY, "tp backend: out of memory");
    }
    if (st != OKV_OK) {
        okv_free(be);
        okv_free(t);
        if (comm)
            comm->ops->destroy(comm);
        for (int r = 0; r < n && r < OKV_TP_MAX; r++)
            okv_backend_free(ranks[r]);
        return st;
    }
    t->n = n;
    for (int r = 0; r < n; r++)
        t->rank[r] = ranks[r];
    t->comm = comm;
    t->n_heads = cfg->n_heads;
    t->n_kv = cfg->n_kv_heads;
    t->hd = cfg->head_dim;
    t->dim = cfg->dim;
    t->ffn = cfg->ffn_dim;
    t->vocab = cfg->vocab_size;
    t->qh_l = cfg->n_heads / n;
    if (t->n_kv >= n) {
        t->kv_l = t->n_kv / n;
        t->rep = 1;
        for (int r = 0; r < n; r++)
            t->kv_h0[r] = r * t->kv_l;
    } else {
        t->kv_l = 1;
        t->rep = n / t->n_kv;
        for (int r = 0; r < n; r++)
            t->kv_h0[r] = r / t->rep;
    }
    split(t->ffn, n, t->ffn_lo);
    split(t->vocab, n, t->vocab_lo);
    be->ops = &tp_ops;
    be->ctx = t;
    /* one thread per rank unless OKV_TP_THREADS=0 (then the calling thread runs every rank) */
    const char *th = getenv("OKV_TP_THREADS");
    if (n > 1 && !(th && !strcmp(th, "0")) && (st = workers_start(t)) != OKV_OK) {
        tp_destroy(be);
        return st;
    }
    *out = be;
    return OKV_OK;
}

enum okv_status okv_backend_create_tp(const char *name, const struct okv_backend_params *p, int n,
                                      const struct okv_model_config *cfg, okv_backend **out)
{
    *out = NULL;
    if (n < 1 || n > OKV_TP_MAX)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tensor parallel size %d: 1 to %d supported", n, OKV_TP_MAX);
    okv_backend *ranks[OKV_TP_MAX] = {0};
    enum okv_status st = OKV_OK;
    /* OKV_TP_DEVICES=0,0 places ranks on given GPUs (tests: several ranks on one GPU,
     * with the host-staged communicator, since NCCL wants one rank per GPU) */
    int dev[OKV_TP_MAX];
    const char *map = getenv("OKV_TP_DEVICES");
    for (int r = 0; r < n; r++) {
        dev[r] = r;
        if (map && *map) {
            char *end;
            long d = strtol(map, &end, 10);
            if (end == map || d < 0 || d > 1024)
                return okv_set_error(OKV_ERR_INVALID_ARG, "OKV_TP_DEVICES: bad list '%s'", getenv("OKV_TP_DEVICES"));
            dev[r] = (int)d;
            map = *end == ',' ? end + 1 : end;
        }
    }
    for (int r = 0; r < n && st == OKV_OK; r++) {
        struct okv_backend_params rp = p ? *p : (struct okv_backend_params){0};
        rp.device = dev[r];
        st = okv_backend_create(name, &rp, &ranks[r]);
    }
    okv_tp_comm *comm = NULL;
    if (st == OKV_OK) {
        const char *want = getenv("OKV_TP_COMM");
        bool gpu = strcmp(name ? name : okv_backend_default_name(), "cpu") != 0;
        if (gpu && !(want && !strcmp(want, "local")))
            st = okv_tp_comm_nccl_create(ranks, n, &comm);
        else
            st = okv_tp_comm_local_create(ranks, n, &comm);
    }
    if (st != OKV_OK) {
        for (int r = 0; r < n; r++)
            okv_backend_free(ranks[r]);
        return st;
    }
    return okv_backend_tp_create(ranks, n, comm, cfg, out);
}
