/* Segment graphs: the decode step's pure ops replayed as CUDA graphs.
 *
 * A decode step issues, per layer, some fifteen small kernels whose launches depend on
 * nothing but device addresses and shapes (the norms, the projections' conversion and
 * GEMM, RoPE, SwiGLU, the residual adds) between ops that carry host data (kv_write,
 * attention with its plan, the selection, sampling). The pure ops are not launched when
 * called: okv_cuda_graph_push appends them to a pending run, and the next op of any other
 * kind flushes the run first (every other entry of the ops table is wrapped below; code
 * that enqueues on the compute stream outside the table, NCCL, calls
 * okv_cuda_graph_flush itself). A flushed run is looked up by its exact contents (kinds,
 * shapes, device pointers): the first sighting is launched eagerly and remembered, the
 * second is captured into a graph (stream capture of the same launches, cuBLAS included)
 * and every later one launches that graph: one launch instead of fifteen to twenty, and no
 * gaps between the kernels on the device.
 *
 * A graph reads only memory named in its run (inputs, outputs, weights, the bf16
 * activation scratch, the step's RoPE table) plus the cuBLAS workspace, so a run with the
 * same contents may replay it whenever it occurs; buffers of the context that a run names
 * and that move (the activation scratch, the RoPE table) drop every graph before they are
 * freed (okv_cuda_graph_invalidate). Shapes are exact: a batch of another size is another
 * run (captured once it repeats), but cuda_backend.cu pads decode-sized batches (5 to 256 rows)
 * to a few row counts, and a run with a prefill-sized op (more rows) is launched without being
 * remembered. The table is bounded; when full it is emptied.
 * OKV_CUDA_GRAPHS=0 turns it off (every op launched when called), as does
 * OKV_CUDA_PROFILE=1 (its timing events wrap each op). A failed capture turns it off for
 * the context, with a note, and the run is launched eagerly. */
#include "backend/cuda/cuda_bench.h"
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define G_MAX_OPS 64        /* a pending run longer than this is flushed */
#define G_SLOTS 8192        /* hash table slots (power of two) */
#define G_MAX_ENTRIES 4096  /* runs remembered, captured or not */
#define G_MAX_EXECS 1024    /* captured graphs */

struct g_entry {
    uint64_t hash;
    int n;                        /* ops; 0: empty slot */
    struct okv_cuda_gop *ops;
    cudaGraphExec_t exec;         /* NULL: seen once, not captured */
};

struct cuda_graphs {
    bool on;
    struct okv_cuda_gop pend[G_MAX_OPS];
    int n_pend;
    bool pend_large;              /* an op of the pending run has more rows than a decode batch */
    struct g_entry *slot;         /* [G_SLOTS] */
    int n_entries, n_execs;
    long long launched, captured, eager_runs, eager_ops, cleared;
};

static uint64_t run_hash(const struct okv_cuda_gop *ops, int n)
{
    const unsigned char *b = (const unsigned char *)ops;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *ops * (size_t)n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void clear_table(struct cuda_graphs *g)
{
    for (int i = 0; i < G_SLOTS; i++) {
        struct g_entry *e = &g->slot[i];
        if (e->exec)
            cudaGraphExecDestroy(e->exec);   /* an exec still in flight is freed on completion */
        okv_free(e->ops);
        memset(e, 0, sizeof *e);
    }
    if (g->n_entries)
        g->cleared++;
    g->n_entries = g->n_execs = 0;
}

extern "C" enum okv_status okv_cuda_graph_init(struct cuda_ctx *c)
{
    const char *v = getenv("OKV_CUDA_GRAPHS");
    const char *pv = getenv("OKV_CUDA_PROFILE");
    struct cuda_graphs *g = (struct cuda_graphs *)okv_calloc(1, sizeof *g, OKV_TAG_BACKEND);
    if (!g)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory (graph table)");
    g->slot = (struct g_entry *)okv_calloc(G_SLOTS, sizeof *g->slot, OKV_TAG_BACKEND);
    if (!g->slot) {
        okv_free(g);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory (graph table)");
    }
    g->on = !(v && !strcmp(v, "0")) && !(pv && !strcmp(pv, "1"));
    c->graphs = g;
    return OKV_OK;
}

extern "C" void okv_cuda_graph_free(struct cuda_ctx *c)
{
    struct cuda_graphs *g = c->graphs;
    if (!g)
        return;
    clear_table(g);
    okv_free(g->slot);
    okv_free(g);
    c->graphs = NULL;
}

/* a run's ops, fused where cuda_backend.cu finds a fusion (the same decisions at every
 * issue of the same run: they depend on its contents alone) */
static enum okv_status issue_all(struct cuda_ctx *c, const struct okv_cuda_gop *ops, int n)
{
    for (int i = 0; i < n;) {
        int used = 1;
        enum okv_status st = okv_cuda_gop_issue_fused(c, ops + i, n - i, &used);
        if (st != OKV_OK)
            return st;
        i += used;
    }
    return OKV_OK;
}

/* the slot holding this run, or the empty slot where it would go */
static struct g_entry *find(struct cuda_graphs *g, uint64_t h, const struct okv_cuda_gop *ops, int n)
{
    for (int i = 0; i < G_SLOTS; i++) {
        struct g_entry *e = &g->slot[(h + (uint64_t)i) & (G_SLOTS - 1)];
        if (e->n == 0)
            return e;
        if (e->hash == h && e->n == n && !memcmp(e->ops, ops, sizeof *ops * (size_t)n))
            return e;
    }
    return NULL;   /* not reached: the table is emptied at G_MAX_ENTRIES < G_SLOTS */
}

/* capture the run into a graph; on failure the context's graphs go off (the stream is
 * left out of capture mode) and the caller launches the run eagerly */
static bool capture(struct cuda_ctx *c, const struct okv_cuda_gop *ops, int n, cudaGraphExec_t *out)
{
    struct cuda_graphs *g = c->graphs;
    *out = NULL;
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    enum okv_status st = OKV_OK;
    if (e == cudaSuccess) {
        st = issue_all(c, ops, n);
        cudaGraph_t graph = NULL;
        cudaError_t e2 = cudaStreamEndCapture(c->stream, &graph);
        if (st == OKV_OK && e2 == cudaSuccess && graph) {
            e = cudaGraphInstantiate(out, graph, 0);
            if (e != cudaSuccess)
                *out = NULL;
        } else if (e2 != cudaSuccess) {
            e = e2;
        }
        if (graph)
            cudaGraphDestroy(graph);
    }
    if (*out)
        return true;
    (void)cudaGetLastError();
    g->on = false;
    fprintf(stderr, "oasiskv: cuda device %d: CUDA graph capture failed (%s); launching ops one by one\n", c->device,
            e != cudaSuccess ? cudaGetErrorString(e) : okv_last_error());
    return false;
}

extern "C" enum okv_status okv_cuda_graph_flush(struct cuda_ctx *c)
{
    struct cuda_graphs *g = c->graphs;
    if (!g || g->n_pend == 0)
        return OKV_OK;
    const int n = g->n_pend;
    const bool large = g->pend_large;
    g->n_pend = 0;
    g->pend_large = false;
    /* a run of prefill-sized ops is launched as it is: its row counts seldom repeat, its kernels
     * are long enough that launches cost nothing, and remembering such runs filled the table,
     * which then dropped the decode steps' graphs with it (bench/RESULTS.md section 31) */
    if (!g->on || n < 2 || large) {
        g->eager_runs++;
        g->eager_ops += n;
        return issue_all(c, g->pend, n);
    }
    const uint64_t h = run_hash(g->pend, n);
    struct g_entry *e = find(g, h, g->pend, n);   /* never NULL: the table empties before it fills */
    if (e->n && !e->exec) {   /* second sighting: capture, or start over when the graphs are at their cap */
        if (g->n_execs >= G_MAX_EXECS)
            clear_table(g);
        else if (capture(c, g->pend, n, &e->exec)) {
            g->n_execs++;
            g->captured++;
        }
    } else if (!e->n) {       /* first sighting: remember the run */
        if (g->n_entries >= G_MAX_ENTRIES) {
            clear_table(g);
            e = find(g, h, g->pend, n);
        }
        struct okv_cuda_gop *copy = (struct okv_cuda_gop *)okv_malloc(sizeof *copy * (size_t)n, OKV_TAG_BACKEND);
        if (copy) {   /* without memory the run is simply not remembered */
            memcpy(copy, g->pend, sizeof *copy * (size_t)n);
            *e = (struct g_entry){h, n, copy, NULL};
            g->n_entries++;
        }
    }
    if (e->n && e->exec) {
        OKV_CU(cudaGraphLaunch(e->exec, c->stream), "CUDA graph launch");
        g->launched++;
        return OKV_OK;
    }
    g->eager_runs++;
    g->eager_ops += n;
    return issue_all(c, g->pend, n);
}

extern "C" enum okv_status okv_cuda_graph_push(struct cuda_ctx *c, const struct okv_cuda_gop *op)
{
    struct cuda_graphs *g = c->graphs;
    const bool large = c->run_large;   /* set by this op's pad_rows: it belongs to the run the op joins */
    c->run_large = false;
    if (!g || !g->on)
        return okv_cuda_gop_issue(c, op);
    if (g->n_pend == G_MAX_OPS) {
        enum okv_status st = okv_cuda_graph_flush(c);
        if (st != OKV_OK)
            return st;
    }
    g->pend[g->n_pend++] = *op;
    g->pend_large |= large;
    return OKV_OK;
}

extern "C" enum okv_status okv_cuda_graph_invalidate(struct cuda_ctx *c)
{
    enum okv_status st = okv_cuda_graph_flush(c);
    if (c->graphs)
        clear_table(c->graphs);
    return st;
}

/* ---- hooks for tests and bench/ (cuda_bench.h) ---- */
extern "C" enum okv_status okv_cuda_set_graphs(okv_backend *be, bool on)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    enum okv_status st = okv_cuda_graph_invalidate(c);
    if (c->graphs)
        c->graphs->on = on;
    return st;
}

extern "C" void okv_cuda_graph_info(const okv_backend *be, struct okv_cuda_graph_info *out)
{
    const struct cuda_graphs *g = OKV_CUDA_CTX(be)->graphs;
    memset(out, 0, sizeof *out);
    if (!g)
        return;
    out->on = g->on;
    out->launched = g->launched;
    out->captured = g->captured;
    out->eager_runs = g->eager_runs;
    out->eager_ops = g->eager_ops;
    out->cleared = g->cleared;
    out->graphs = g->n_execs;
}

/* ---- every other op of the table flushes the pending run first ---- */
static struct okv_backend_ops inner;

#define FLUSH_OR_RETURN(be)                                                      \
    do {                                                                         \
        enum okv_status fst_ = okv_cuda_graph_flush(OKV_CUDA_CTX(be));           \
        if (fst_ != OKV_OK)                                                      \
            return fst_;                                                         \
    } while (0)

static void f_destroy(okv_backend *be)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    if (c) {
        cudaSetDevice(c->device);
        (void)okv_cuda_graph_flush(c);   /* the graphs themselves go with the context (cuda_destroy) */
        const char *gs = getenv("OKV_CUDA_GRAPH_STATS");
        const struct cuda_graphs *g = c->graphs;
        if (g && gs && !strcmp(gs, "1"))   /* how well the runs found their graphs (benchmarks) */
            fprintf(stderr, "oasiskv: cuda device %d: graphs: %lld launched, %lld captured, %lld runs launched op by op "
                            "(%lld ops), table emptied %lld times, %d graphs at the end\n",
                    c->device, g->launched, g->captured, g->eager_runs, g->eager_ops, g->cleared, g->n_execs);
    }
    inner.destroy(be);
}
static enum okv_status f_mem_alloc(okv_backend *be, size_t n, okv_bmem **out)
{
    FLUSH_OR_RETURN(be);
    return inner.mem_alloc(be, n, out);
}
static void f_mem_free(okv_backend *be, okv_bmem *m)
{
    (void)okv_cuda_graph_flush(OKV_CUDA_CTX(be));   /* an error stays set for the next call to report */
    inner.mem_free(be, m);
}
static enum okv_status f_mem_write(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n)
{
    FLUSH_OR_RETURN(be);
    return inner.mem_write(be, m, off, src, n);
}
static enum okv_status f_mem_read(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n)
{
    FLUSH_OR_RETURN(be);
    return inner.mem_read(be, m, off, dst, n);
}
static enum okv_status f_weight_load(okv_backend *be, const struct okv_tensor_view *t, okv_bweight **out)
{
    FLUSH_OR_RETURN(be);
    return inner.weight_load(be, t, out);
}
static void f_weight_free(okv_backend *be, okv_bweight *w)
{
    (void)okv_cuda_graph_flush(OKV_CUDA_CTX(be));
    inner.weight_free(be, w);
}
static enum okv_status f_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_alloc(be, g, out);
}
static void f_kv_free(okv_backend *be, okv_bkv *kv)
{
    (void)okv_cuda_graph_flush(OKV_CUDA_CTX(be));
    inner.kv_free(be, kv);
}
static enum okv_status f_kv_unit_read(okv_backend *be, const okv_bkv *kv, int layer, int32_t unit, float *k, float *v)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_unit_read(be, kv, layer, unit, k, v);
}
static enum okv_status f_kv_host_read(okv_backend *be, const okv_bkv *kv, int layer, int hb, int head, float *k, float *v)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_host_read(be, kv, layer, hb, head, k, v);
}
static enum okv_status f_kv_summary_read(okv_backend *be, const okv_bkv *kv, int layer, int hb, int head, float *kmin,
                                         float *kmax)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_summary_read(be, kv, layer, hb, head, kmin, kmax);
}
static enum okv_status f_kv_summary_rebuild(okv_backend *be, okv_bkv *kv, int hb, int n_valid)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_summary_rebuild(be, kv, hb, n_valid);
}
static enum okv_status f_kv_host_randomize(okv_backend *be, okv_bkv *kv, int hb, uint64_t seed, float scale)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_host_randomize(be, kv, hb, seed, scale);
}
static enum okv_status f_kv_fetch(okv_backend *be, okv_bkv *kv, int layer, int n, const int32_t *src, const int32_t *dst)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_fetch(be, kv, layer, n, src, dst);
}
static enum okv_status f_kv_fetch_wait(okv_backend *be, okv_bkv *kv, int layer, int *pending, double *stall_s)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_fetch_wait(be, kv, layer, pending, stall_s);
}
static enum okv_status f_step_begin(okv_backend *be, const struct okv_step_meta *meta)
{
    FLUSH_OR_RETURN(be);
    return inner.step_begin(be, meta);
}
static enum okv_status f_embed(okv_backend *be, okv_bmem *out, const okv_bweight *t, const int32_t *ids, int n, int dim)
{
    FLUSH_OR_RETURN(be);
    return inner.embed(be, out, t, ids, n, dim);
}
static enum okv_status f_gather_rows(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows, int width)
{
    FLUSH_OR_RETURN(be);
    return inner.gather_rows(be, out, x, rows, n_rows, width);
}
static enum okv_status f_kv_move(okv_backend *be, okv_bkv *kv, int n, const int32_t *src, const int32_t *dst)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_move(be, kv, n, src, dst);
}
static enum okv_status f_kv_write(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v)
{
    FLUSH_OR_RETURN(be);
    return inner.kv_write(be, kv, layer, k, v);
}
static enum okv_status f_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                       const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores)
{
    FLUSH_OR_RETURN(be);
    return inner.select_blocks(be, kv, layer, q, n_heads, reqs, n_reqs, out, scores);
}
static enum okv_status f_select_async(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                      const struct okv_select_req *reqs, int n_reqs, int32_t *out)
{
    FLUSH_OR_RETURN(be);
    return inner.select_blocks_async(be, kv, layer, q, n_heads, reqs, n_reqs, out);
}
static enum okv_status f_select_wait(okv_backend *be)
{
    FLUSH_OR_RETURN(be);
    return inner.select_wait(be);
}
static enum okv_status f_resid_init(okv_backend *be, okv_bkv *kv, const struct okv_resid_geometry *g)
{
    FLUSH_OR_RETURN(be);
    return inner.resid_init(be, kv, g);
}
static enum okv_status f_resid_reset(okv_backend *be, okv_bkv *kv, int chunk)
{
    FLUSH_OR_RETURN(be);
    return inner.resid_reset(be, kv, chunk);
}
static enum okv_status f_select_install(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                        const struct okv_select_req *reqs, const struct okv_select_req *own,
                                        const struct okv_resid_item *items, int n_items, int succ)
{
    FLUSH_OR_RETURN(be);
    return inner.select_install(be, kv, layer, q, n_heads, reqs, own, items, n_items, succ);
}
static enum okv_status f_resid_take_stats(okv_backend *be, okv_bkv *kv, int64_t *units)
{
    FLUSH_OR_RETURN(be);
    return inner.resid_take_stats(be, kv, units);
}
static enum okv_status f_resid_read(okv_backend *be, okv_bkv *kv, int chunk, int layer, int k, int32_t *blocks, int32_t *units)
{
    FLUSH_OR_RETURN(be);
    return inner.resid_read(be, kv, chunk, layer, k, blocks, units);
}
static enum okv_status f_sample(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab, const struct okv_sampling *params,
                                const double *u, int32_t *out)
{
    FLUSH_OR_RETURN(be);
    return inner.sample(be, logits, n_rows, vocab, params, u, out);
}
static enum okv_status f_sample_queue(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                      const struct okv_sampling *params, const double *u, int slot, const int32_t *copy_rows,
                                      int n_copy)
{
    FLUSH_OR_RETURN(be);
    return inner.sample_queue(be, logits, n_rows, vocab, params, u, slot, copy_rows, n_copy);
}
static enum okv_status f_sample_collect(okv_backend *be, int slot, int32_t *out, int n_rows, float *rows_out, int n_copy)
{
    FLUSH_OR_RETURN(be);
    return inner.sample_collect(be, slot, out, n_rows, rows_out, n_copy);
}
static enum okv_status f_embed_prev(okv_backend *be, okv_bmem *out, const okv_bweight *t, const int32_t *ids,
                                    const int32_t *prev, int slot, int n, int dim)
{
    FLUSH_OR_RETURN(be);
    return inner.embed_prev(be, out, t, ids, prev, slot, n, dim);
}
static enum okv_status f_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                   const struct okv_attn_blocks *b, int n_heads, float scale)
{
    FLUSH_OR_RETURN(be);
    return inner.attention(be, out, q, kv, layer, b, n_heads, scale);
}
static enum okv_status f_sync(okv_backend *be)
{
    FLUSH_OR_RETURN(be);
    return inner.sync(be);
}

extern "C" void okv_cuda_graph_wrap(struct okv_backend_ops *o)
{
    inner = *o;
#define W(field, fn)   \
    if (o->field)      \
        o->field = fn;
    W(destroy, f_destroy)
    W(mem_alloc, f_mem_alloc)
    W(mem_free, f_mem_free)
    W(mem_write, f_mem_write)
    W(mem_read, f_mem_read)
    W(weight_load, f_weight_load)
    W(weight_free, f_weight_free)
    W(kv_alloc, f_kv_alloc)
    W(kv_free, f_kv_free)
    W(kv_unit_read, f_kv_unit_read)
    W(kv_host_read, f_kv_host_read)
    W(kv_summary_read, f_kv_summary_read)
    W(kv_summary_rebuild, f_kv_summary_rebuild)
    W(kv_host_randomize, f_kv_host_randomize)
    W(kv_fetch, f_kv_fetch)
    W(kv_fetch_wait, f_kv_fetch_wait)
    W(step_begin, f_step_begin)
    W(embed, f_embed)
    W(gather_rows, f_gather_rows)
    W(kv_write, f_kv_write)
    W(kv_move, f_kv_move)
    W(select_blocks, f_select_blocks)
    W(select_blocks_async, f_select_async)
    W(select_wait, f_select_wait)
    W(resid_init, f_resid_init)
    W(resid_reset, f_resid_reset)
    W(select_install, f_select_install)
    W(resid_take_stats, f_resid_take_stats)
    W(resid_read, f_resid_read)
    W(sample, f_sample)
    W(sample_queue, f_sample_queue)
    W(sample_collect, f_sample_collect)
    W(embed_prev, f_embed_prev)
    W(attention, f_attention)
    W(sync, f_sync)
#undef W
}
