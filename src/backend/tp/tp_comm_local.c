/* Host-staged collectives for the tensor-parallel backend: every rank's buffer is
 * read into host memory, combined there (sums in rank order) and written back. It
 * works over any backends; the CPU tests run the shards of a model in one process
 * with it, and GPU ranks can use it where NCCL is missing (slowly). */
#include "oasiskv/tp.h"

#include <pthread.h>
#include <string.h>

struct local_comm {
    int n;
    okv_backend *r[OKV_TP_MAX];
    float *a, *b;
    size_t cap;
    /* allreduce_rank: one host slot per rank, met at a barrier */
    pthread_barrier_t bar;
    float *slot[OKV_TP_MAX];
    size_t slot_cap[OKV_TP_MAX];
    enum okv_status slot_st[OKV_TP_MAX];
};

static enum okv_status bind(okv_backend *b) { return b->ops->bind ? b->ops->bind(b) : OKV_OK; }

static enum okv_status reserve(struct local_comm *c, size_t n)
{
    if (n <= c->cap)
        return OKV_OK;
    float *a = okv_realloc(c->a, sizeof(float) * n, OKV_TAG_BACKEND);
    if (a)
        c->a = a;
    float *b = okv_realloc(c->b, sizeof(float) * n, OKV_TAG_BACKEND);
    if (b)
        c->b = b;
    if (!a || !b)
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp comm: out of memory (%zu floats)", n);
    c->cap = n;
    return OKV_OK;
}

static enum okv_status local_allreduce(okv_tp_comm *cm, okv_bmem *const *bufs, size_t count)
{
    struct local_comm *c = cm->ctx;
    enum okv_status st = reserve(c, count ? count : 1);
    for (int r = 0; r < c->n && st == OKV_OK; r++) {
        okv_backend *b = c->r[r];
        if ((st = bind(b)) != OKV_OK || (st = b->ops->mem_read(b, bufs[r], 0, r ? c->b : c->a, count)) != OKV_OK)
            break;
        if (r)
            for (size_t i = 0; i < count; i++)
                c->a[i] += c->b[i];
    }
    for (int r = 0; r < c->n && st == OKV_OK; r++) {
        okv_backend *b = c->r[r];
        if ((st = bind(b)) == OKV_OK)
            st = b->ops->mem_write(b, bufs[r], 0, c->a, count);
    }
    return st;
}

static enum okv_status local_gather_cols(okv_tp_comm *cm, okv_bmem *dst, okv_bmem *const *srcs, int n_rows, const int *col_lo)
{
    struct local_comm *c = cm->ctx;
    const size_t w = (size_t)col_lo[c->n], total = (size_t)n_rows * w;
    enum okv_status st = reserve(c, total ? total : 1);
    for (int r = 0; r < c->n && st == OKV_OK; r++) {
        okv_backend *b = c->r[r];
        size_t wr = (size_t)(col_lo[r + 1] - col_lo[r]);
        if ((st = bind(b)) != OKV_OK || (st = b->ops->mem_read(b, srcs[r], 0, c->b, (size_t)n_rows * wr)) != OKV_OK)
            break;
        for (int i = 0; i < n_rows; i++)
            memcpy(c->a + (size_t)i * w + (size_t)col_lo[r], c->b + (size_t)i * wr, sizeof(float) * wr);
    }
    if (st == OKV_OK && (st = bind(c->r[0])) == OKV_OK)
        st = c->r[0]->ops->mem_write(c->r[0], dst, 0, c->a, total);
    return st;
}

/* Each rank reads its buffer into its slot; after the barrier every rank sums all the
 * slots in rank order (the same bits everywhere) into its own buffer; a second barrier
 * keeps the slots until all have read them. A rank that failed still meets both
 * barriers (its slot then holds zeros). */
static enum okv_status local_allreduce_rank(okv_tp_comm *cm, int r, okv_bmem *buf, size_t count)
{
    struct local_comm *c = cm->ctx;
    okv_backend *b = c->r[r];
    enum okv_status st = OKV_OK;
    if (count > c->slot_cap[r]) {
        float *p = okv_realloc(c->slot[r], sizeof(float) * count, OKV_TAG_BACKEND);
        if (p) {
            c->slot[r] = p;
            c->slot_cap[r] = count;
        } else {
            st = okv_set_error(OKV_ERR_NO_MEMORY, "tp comm: out of memory (%zu floats)", count);
        }
    }
    if (st == OKV_OK)
        st = b->ops->mem_read(b, buf, 0, c->slot[r], count);
    if (st != OKV_OK && c->slot_cap[r] >= count)
        memset(c->slot[r], 0, sizeof(float) * count);
    c->slot_st[r] = st;
    pthread_barrier_wait(&c->bar);
    bool all = true;
    for (int i = 0; i < c->n; i++)
        all = all && c->slot_st[i] == OKV_OK;
    float *sum = NULL;
    if (all && st == OKV_OK) {
        sum = okv_malloc(sizeof(float) * (count ? count : 1), OKV_TAG_BACKEND);
        if (!sum) {
            st = okv_set_error(OKV_ERR_NO_MEMORY, "tp comm: out of memory (%zu floats)", count);
        } else {
            memcpy(sum, c->slot[0], sizeof(float) * count);
            for (int i = 1; i < c->n; i++)
                for (size_t k = 0; k < count; k++)
                    sum[k] += c->slot[i][k];
        }
    } else if (st == OKV_OK) {
        st = okv_set_error(OKV_ERR_BACKEND, "tp comm: another rank failed before the all-reduce");
    }
    pthread_barrier_wait(&c->bar);
    if (sum) {
        st = b->ops->mem_write(b, buf, 0, sum, count);
        okv_free(sum);
    }
    return st;
}

static void local_destroy(okv_tp_comm *cm)
{
    struct local_comm *c = cm->ctx;
    pthread_barrier_destroy(&c->bar);
    for (int r = 0; r < c->n; r++)
        okv_free(c->slot[r]);
    okv_free(c->a);
    okv_free(c->b);
    okv_free(c);
    okv_free(cm);
}

static const struct okv_tp_comm_ops local_ops = {.name = "local", .allreduce_sum = local_allreduce,
                                                 .gather_cols = local_gather_cols, .allreduce_rank = local_allreduce_rank,
                                                 .destroy = local_destroy};

enum okv_status okv_tp_comm_local_create(okv_backend *const *ranks, int n, okv_tp_comm **out)
{
    *out = NULL;
    if (n < 1 || n > OKV_TP_MAX)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp comm: %d ranks (1 to %d)", n, OKV_TP_MAX);
    okv_tp_comm *cm = okv_calloc(1, sizeof *cm, OKV_TAG_BACKEND);
    struct local_comm *c = okv_calloc(1, sizeof *c, OKV_TAG_BACKEND);
    if (!cm || !c) {
        okv_free(cm);
        okv_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp comm: out of memory");
    }
    c->n = n;
    for (int r = 0; r < n; r++)
        c->r[r] = ranks[r];
    pthread_barrier_init(&c->bar, NULL, (unsigned)n);
    cm->ops = &local_ops;
    cm->ctx = c;
    *out = cm;
    return OKV_OK;
}

#ifndef OKV_HAVE_CUDA
enum okv_status okv_tp_comm_nccl_create(okv_backend *const *ranks, int n, okv_tp_comm **out)
{
    (void)ranks;
    (void)n;
    *out = NULL;
    return okv_set_error(OKV_ERR_UNSUPPORTED, "tensor parallelism over NCCL needs the CUDA backend (configure with -DOKV_CUDA=ON)");
}
#endif
