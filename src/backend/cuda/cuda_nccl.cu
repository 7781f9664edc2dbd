/* NCCL collectives for the tensor-parallel backend over CUDA ranks (one GPU each,
 * driven from one thread: group calls). NCCL is loaded at run time, so a build
 * with the CUDA backend runs without it until tensor parallelism is asked for.
 * NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set before the
 * communicators are made. */
#include "cuda_internal.h"
#include "oasiskv/tp.h"

#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

struct nccl_api {
    void *lib;
    ncclResult_t (*comm_init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*error_string)(ncclResult_t);
};

struct nccl_comm {
    int n;
    okv_backend *r[OKV_TP_MAX];
    ncclComm_t comm[OKV_TP_MAX];
    struct nccl_api api;
    float *recv0;        /* rank 0: the other ranks' column slices */
    size_t recv_cap;     /* floats */
};

static enum okv_status nccl_err(const struct nccl_comm *c, ncclResult_t e, const char *what)
{
    return okv_set_error(OKV_ERR_BACKEND, "NCCL %s: %s", what, c->api.error_string ? c->api.error_string(e) : "error");
}

static enum okv_status load_api(struct nccl_api *a)
{
    const char *names[] = {"libnccl.so.2", "libnccl.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !a->lib; i++)
        a->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!a->lib)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "tensor parallelism: cannot load NCCL (libnccl.so.2): %s", dlerror());
#define SYM(field, name)                                                                                          \
    do {                                                                                                          \
        *(void **)&a->field = dlsym(a->lib, name);                                                                \
        if (!a->field)                                                                                            \
            return okv_set_error(OKV_ERR_UNSUPPORTED, "tensor parallelism: NCCL lacks %s", name);                  \
    } while (0)
    SYM(comm_init_all, "ncclCommInitAll");
    SYM(comm_destroy, "ncclCommDestroy");
    SYM(all_reduce, "ncclAllReduce");
    SYM(send, "ncclSend");
    SYM(recv, "ncclRecv");
    SYM(group_start, "ncclGroupStart");
    SYM(group_end, "ncclGroupEnd");
    SYM(error_string, "ncclGetErrorString");
#undef SYM
    return OKV_OK;
}

static enum okv_status bind(okv_backend *b) { return b->ops->bind ? b->ops->bind(b) : OKV_OK; }

static enum okv_status nccl_allreduce(okv_tp_comm *cm, okv_bmem *const *bufs, size_t count)
{
    struct nccl_comm *c = (struct nccl_comm *)cm->ctx;
    if (c->n == 1)
        return OKV_OK;
    ncclResult_t e = c->api.group_start();
    if (e != ncclSuccess)
        return nccl_err(c, e, "group start");
    enum okv_status st = OKV_OK;
    for (int r = 0; r < c->n; r++) {
        if ((st = bind(c->r[r])) != OKV_OK || (st = okv_cuda_graph_flush(OKV_CUDA_CTX(c->r[r]))) != OKV_OK)
            break;
        float *p = bufs[r]->d;
        e = c->api.all_reduce(p, p, count, ncclFloat32, ncclSum, c->comm[r], OKV_CUDA_CTX(c->r[r])->stream);
        if (e != ncclSuccess) {
            st = nccl_err(c, e, "all-reduce");
            break;
        }
    }
    e = c->api.group_end();
    if (st == OKV_OK && e != ncclSuccess)
        st = nccl_err(c, e, "group end");
    return st;
}

static enum okv_status nccl_gather_cols(okv_tp_comm *cm, okv_bmem *dst, okv_bmem *const *srcs, int n_rows, const int *col_lo)
{
    struct nccl_comm *c = (struct nccl_comm *)cm->ctx;
    const size_t w = (size_t)col_lo[c->n];
    enum okv_status st = OKV_OK;
    for (int r = c->n - 1; r >= 0 && st == OKV_OK; r--)   /* ranks' pending runs first (cuda_graph.cu) */
        if ((st = bind(c->r[r])) == OKV_OK)
            st = okv_cuda_graph_flush(OKV_CUDA_CTX(c->r[r]));
    if (st != OKV_OK)
        return st;
    size_t need = (size_t)n_rows * (w - (size_t)(col_lo[1] - col_lo[0]));
    if (c->n > 1 && need > c->recv_cap) {
        cudaStream_t s0 = OKV_CUDA_CTX(c->r[0])->stream;
        cudaStreamSynchronize(s0);
        if (c->recv0)
            cudaFree(c->recv0);
        c->recv0 = NULL;
        c->recv_cap = 0;
        cudaError_t ce = cudaMalloc((void **)&c->recv0, need * sizeof(float));
        if (ce != cudaSuccess)
            return okv_cuda_err(ce, "gather buffer", __FILE__, __LINE__);
        c->recv_cap = need;
    }
    if (c->n > 1) {
        ncclResult_t e = c->api.group_start();
        if (e != ncclSuccess)
            return nccl_err(c, e, "group start");
        size_t at = 0;
        for (int r = 1; r < c->n && st == OKV_OK; r++) {
            size_t cnt = (size_t)n_rows * (size_t)(col_lo[r + 1] - col_lo[r]);
            if ((st = bind(c->r[r])) != OKV_OK)
                break;
            if ((e = c->api.send(srcs[r]->d, cnt, ncclFloat32, 0, c->comm[r], OKV_CUDA_CTX(c->r[r])->stream)) != ncclSuccess) {
                st = nccl_err(c, e, "send");
                break;
            }
            if ((st = bind(c->r[0])) != OKV_OK)
                break;
            if ((e = c->api.recv(c->recv0 + at, cnt, ncclFloat32, r, c->comm[0], OKV_CUDA_CTX(c->r[0])->stream)) != ncclSuccess) {
                st = nccl_err(c, e, "receive");
                break;
            }
            at += cnt;
        }
        e = c->api.group_end();
        if (st == OKV_OK && e != ncclSuccess)
            st = nccl_err(c, e, "group end");
        if (st != OKV_OK)
            return st;
    }
    if ((st = bind(c->r[0])) != OKV_OK)
        return st;
    cudaStream_t s0 = OKV_CUDA_CTX(c->r[0])->stream;
    size_t at = 0;
    for (int r = 0; r < c->n; r++) {
        size_t wr = (size_t)(col_lo[r + 1] - col_lo[r]);
        const float *src = r == 0 ? srcs[0]->d : c->recv0 + at;
        if (r)
            at += (size_t)n_rows * wr;
        cudaError_t ce = cudaMemcpy2DAsync(dst->d + col_lo[r], w * sizeof(float), src, wr * sizeof(float), wr * sizeof(float),
                                           (size_t)n_rows, cudaMemcpyDeviceToDevice, s0);
        if (ce != cudaSuccess)
            return okv_cuda_err(ce, "gather columns", __FILE__, __LINE__);
    }
    return OKV_OK;
}

/* Called by rank r's own thread (its device bound): no group needed. */
static enum okv_status nccl_allreduce_rank(okv_tp_comm *cm, int r, okv_bmem *buf, size_t count)
{
    struct nccl_comm *c = (struct nccl_comm *)cm->ctx;
    if (c->n == 1)
        return OKV_OK;
    enum okv_status st = okv_cuda_graph_flush(OKV_CUDA_CTX(c->r[r]));
    if (st != OKV_OK)
        return st;
    ncclResult_t e = c->api.all_reduce(buf->d, buf->d, count, ncclFloat32, ncclSum, c->comm[r], OKV_CUDA_CTX(c->r[r])->stream);
    return e == ncclSuccess ? OKV_OK : nccl_err(c, e, "all-reduce");
}

static void nccl_destroy(okv_tp_comm *cm)
{
    struct nccl_comm *c = (struct nccl_comm *)cm->ctx;
    for (int r = 0; r < c->n; r++)
        if (c->comm[r]) {
            bind(c->r[r]);
            c->api.comm_destroy(c->comm[r]);
        }
    if (c->recv0) {
        bind(c->r[0]);
        cudaFree(c->recv0);
    }
    /* the library stays loaded: NCCL keeps threads and handlers of its own */
    okv_free(c);
    okv_free(cm);
}

static const struct okv_tp_comm_ops nccl_ops = {"nccl", nccl_allreduce, nccl_gather_cols, nccl_allreduce_rank, nccl_destroy};

extern "C" enum okv_status okv_tp_comm_nccl_create(okv_backend *const *ranks, int n, okv_tp_comm **out)
{
    *out = NULL;
    if (n < 1 || n > OKV_TP_MAX)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tp comm: %d ranks (1 to %d)", n, OKV_TP_MAX);
    for (int r = 0; r < n; r++)
        if (strcmp(ranks[r]->ops->name, "cuda") != 0)
            return okv_set_error(OKV_ERR_INVALID_ARG, "tp comm: NCCL needs CUDA ranks (rank %d is %s)", r, ranks[r]->ops->name);
    okv_tp_comm *cm = (okv_tp_comm *)okv_calloc(1, sizeof *cm, OKV_TAG_BACKEND);
    struct nccl_comm *c = (struct nccl_comm *)okv_calloc(1, sizeof *c, OKV_TAG_BACKEND);
    if (!cm || !c) {
        okv_free(cm);
        okv_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "tp comm: out of memory");
    }
    enum okv_status st = load_api(&c->api);
    if (st != OKV_OK) {
        okv_free(cm);
        okv_free(c);
        return st;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);   /* never NVLink multicast */
    c->n = n;
    int devs[OKV_TP_MAX];
    for (int r = 0; r < n; r++) {
        c->r[r] = ranks[r];
        devs[r] = OKV_CUDA_CTX(ranks[r])->device;
    }
    ncclResult_t e = c->api.comm_init_all(c->comm, n, devs);
    if (e != ncclSuccess) {
        st = nccl_err(c, e, "communicator setup");
        memset(c->comm, 0, sizeof c->comm);
        okv_free(c);
        okv_free(cm);
        return st;
    }
    cm->ops = &nccl_ops;
    cm->ctx = c;
    *out = cm;
    return OKV_OK;
}
