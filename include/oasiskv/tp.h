/* Tensor parallelism: one backend that shards the model over N rank backends (one
 * per GPU) and runs every op of the backend interface on all of them, so the engine,
 * the scheduler and admission stay as they are (global, in one process).
 *
 * Sharding (Megatron-style): query heads, KV heads (replicated when there are fewer
 * KV heads than ranks) and the MLP's intermediate dimension are split; wq, wk, wv,
 * w_gate, w_up are column-parallel (each rank computes its slice of the outputs),
 * wo and w_down row-parallel (each rank reads its slice of the inputs; one all-reduce
 * after attention and one after the MLP); the LM head is split by vocabulary rows and
 * the logits gathered on rank 0, which samples. Embedding and norms are replicated;
 * the residual stream is the same on every rank.
 *
 * KV: each rank holds the tiers (device units, host tier, summaries, staging) of its
 * KV heads only, scores and selects blocks for them with its own queries, and
 * gathers them from its own host tier. The engine's unit numbering is global
 * (unit = slot * n_kv_heads + head in every region); a rank's local unit is
 * slot * heads_per_rank + (head - its first head).
 *
 * Each rank has its own worker thread (one thread per GPU, its device bound): the
 * calling thread queues the step's ops to all of them (host arrays copied in) and goes
 * on; ops that return data wait until the queues are empty. OKV_TP_THREADS=0 runs
 * every rank on the calling thread instead. The collectives come from a
 * communicator: NCCL between GPUs, or a host-staged one (any backend; the CPU tests
 * run the shards in one process and sum them this way). */
#ifndef OASISKV_TP_H
#define OASISKV_TP_H

#include "oasiskv/backend.h"
#include "oasiskv/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OKV_TP_MAX 16

typedef struct okv_tp_comm okv_tp_comm;
struct okv_tp_comm_ops {
    const char *name;
    /* In place sum over ranks of bufs[r][0 .. count) (each rank's own buffer). */
    enum okv_status (*allreduce_sum)(okv_tp_comm *c, okv_bmem *const *bufs, size_t count);
    /* dst (rank 0) [n_rows][col_lo[n]] = the column slices srcs[r] [n_rows][col_lo[r+1] - col_lo[r]]
     * side by side. */
    enum okv_status (*gather_cols)(okv_tp_comm *c, okv_bmem *dst, okv_bmem *const *srcs, int n_rows, const int *col_lo);
    /* Rank r's part of an in-place all-reduce (sum), called by every rank's own thread
     * with its buffer; returns once its buffer holds the sum (or the sum is queued). */
    enum okv_status (*allreduce_rank)(okv_tp_comm *c, int r, okv_bmem *buf, size_t count);
    void (*destroy)(okv_tp_comm *c);
};
struct okv_tp_comm {
    const struct okv_tp_comm_ops *ops;
    void *ctx;
};

/* Host-staged collectives over any backends (reads and writes through mem_read /
 * mem_write; sums in rank order). ranks are borrowed. */
enum okv_status okv_tp_comm_local_create(okv_backend *const *ranks, int n, okv_tp_comm **out);
/* NCCL collectives over CUDA rank backends (GPU r = ranks[r]); NCCL is loaded at run
 * time (libnccl.so.2). OKV_ERR_UNSUPPORTED without CUDA or NCCL. ranks are borrowed. */
enum okv_status okv_tp_comm_nccl_create(okv_backend *const *ranks, int n, okv_tp_comm **out);

/* The tensor-parallel backend over n rank backends for models of configuration cfg.
 * Takes ownership of the ranks and the communicator (freed with it, also on error).
 * OKV_ERR_UNSUPPORTED when the model cannot be split n ways (query heads not
 * divisible by n, or KV heads neither a multiple nor a divisor of n). */
enum okv_status okv_backend_tp_create(okv_backend **ranks, int n, okv_tp_comm *comm, const struct okv_model_config *cfg,
                                      okv_backend **out);

/* Convenience: n rank backends of kind name ("cpu", "cuda": GPUs 0..n-1) with params
 * p, NCCL between CUDA ranks (the host-staged communicator when OKV_TP_COMM=local or
 * for CPU ranks), wrapped in the tensor-parallel backend. */
enum okv_status okv_backend_create_tp(const char *name, const struct okv_backend_params *p, int n,
                                      const struct okv_model_config *cfg, okv_backend **out);

#ifdef __cplusplus
}
#endif
#endif
