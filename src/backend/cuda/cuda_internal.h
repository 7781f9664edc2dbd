/* Private state of the CUDA backend, shared by its .cu files.
 *
 * Streams: every op runs on ctx->stream (compute). KV traffic between the host tier
 * and the device runs on ctx->copy (the copy stream): kv_fetch gathers, and the
 * write-through of kv_write. Cross-stream order is kept with events:
 *  - kv_write records an event on compute; the write-through waits on it and reads
 *    the device group slots it just wrote (so the activations may be overwritten);
 *    kv_write of the same layer in a later step waits on that layer's write-through
 *    before it overwrites group slots again, and step_begin waits on the last
 *    write-through before it replaces the step metadata the write-through reads.
 *  - kv_fetch waits on compute's position at the call (ops enqueued earlier, such as
 *    an attention still reading a unit being replaced, finish first) and records a
 *    per-layer event; kv_fetch_wait makes compute wait on it.
 * Host arrays (step metadata, block lists, ids) reach the device through a ring of
 * pinned staging memory mirrored in device memory: one cudaMemcpyAsync per op. */
#ifndef OKV_BACKEND_CUDA_INTERNAL_H
#define OKV_BACKEND_CUDA_INTERNAL_H

#include "oasiskv/backend.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

typedef __nv_bfloat16 okv_bf16;

/* ---- error handling: every CUDA call goes through these ---- */
enum okv_status okv_cuda_err(cudaError_t e, const char *what, const char *file, int line);
enum okv_status okv_cublas_err(cublasStatus_t e, const char *what, const char *file, int line);

/* Evaluate a CUDA runtime call; on failure set the error and return from the function. */
#define OKV_CU(call, what)                                                                  \
    do {                                                                                    \
        cudaError_t okv_e_ = (call);                                                        \
        if (okv_e_ != cudaSuccess)                                                          \
            return okv_cuda_err(okv_e_, (what), __FILE__, __LINE__);                        \
    } while (0)
/* A call that blocks the host until the device reaches some point (a stream or event
 * synchronize): its time goes to c->blocked_s, so that a step's host time splits into
 * the host's own work and its waits for the device (okv_backend_ops.host_blocked_s). */
#define OKV_CU_WAIT(c, call, what)                                                          \
    do {                                                                                    \
        const double okv_w0_ = okv_now();                                                   \
        cudaError_t okv_e_ = (call);                                                        \
        (c)->blocked_s += okv_now() - okv_w0_;                                              \
        if (okv_e_ != cudaSuccess)                                                          \
            return okv_cuda_err(okv_e_, (what), __FILE__, __LINE__);                        \
    } while (0)
/* After a kernel launch: the launch's own error. */
#define OKV_LAUNCHED(what) OKV_CU(cudaGetLastError(), (what))

/* ---- handles ---- */
struct okv_bmem {
    float *d;          /* device, n floats */
    size_t n;
};

struct okv_bweight {
    okv_bf16 *d;       /* matrices: bf16 [rows][row_len] */
    float *f;          /* vectors (rows == 1: norm weights, biases): fp32 */
    int64_t rows;
    int64_t row_len;
};

/* pinned, mapped host memory (cuda_pin.cu): registered from a populated mapping, or
 * from cudaHostAlloc where that is refused */
struct okv_cuda_pinned {
    void *h, *d;             /* host address, device alias */
    size_t bytes;
    void *map;               /* the mapping (registered), else NULL */
    size_t map_bytes;
    bool registered;
    double seconds;          /* allocation time */
};
enum okv_status okv_cuda_host_pin_alloc(size_t bytes, struct okv_cuda_pinned *out);
void okv_cuda_host_pin_free(struct okv_cuda_pinned *p);

#ifdef __CUDACC__
#include <cuda_fp8.h>
/* FP8 E4M3 of an fp8 host tier (backend.h host_fp8): round to nearest even, saturating at +-448,
 * the bytes of okv_bf16_to_e4m3 (test_cuda_ops compares every bf16 pattern) */
static __device__ __forceinline__ uint8_t e4m3_enc(okv_bf16 x)
{
    return (uint8_t)__nv_cvt_bfloat16raw_to_fp8((__nv_bfloat16_raw)x, __NV_SATFINITE, __NV_E4M3);
}

static __device__ __forceinline__ okv_bf16 e4m3_dec(uint8_t b)
{
    return __float2bfloat16_rn(__half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3))));
}

/* two codes (low byte first) to two bf16: one e4m3x2 -> f16x2 conversion (exact), then via f32 */
static __device__ __forceinline__ __nv_bfloat162 e4m3x2_dec(unsigned short b2)
{
    const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)b2, __NV_E4M3));
    return __float22bfloat162_rn(__half22float2(h));
}
#endif

#define OKV_CUDA_FETCH_EVENTS 8

struct okv_bkv {
    struct okv_kv_geometry g;
    size_t unit_elems;       /* 2 * block_size * head_dim: K then V of one unit, bf16 */
    size_t *layer_units;     /* [n_layers] */
    size_t *layer_off;       /* [n_layers] first unit of the layer */
    size_t total_units;      /* of all layers; the 2 * n_stage_units staging units follow them */
    int slot_ids;            /* group slot ids kv_write and kv_move may name: the group slots, then the whole
                                slots of the sparse region that every layer has (kv.h: lending) */
    okv_bf16 *dev;           /* device tier [total_units + 2*n_stage_units][2][block_size][head_dim] */
    uint8_t *host;           /* host tier, pinned + mapped: [n_layers][n_host_blocks][n_kv_heads][2][bs][hd] of bf16,
                                or of FP8 E4M3 bytes when g.host_fp8 */
    uint8_t *host_d;         /* device alias of host */
    size_t host_unit_bytes;  /* unit_elems * (2 bf16, 1 fp8) */
    struct okv_cuda_pinned host_mem;   /* its allocation (cuda_pin.cu) */
    okv_bf16 *summ;          /* HBM: [n_layers][n_host_blocks][n_kv_heads][2][hd] kmin, kmax (bf16: the keys are) */
    uint8_t *codes;          /* HBM: [n_layers][n_host_blocks][n_kv_heads][okv_key_code_bytes] per-token key codes
                                (backend.h), or NULL */
    /* per layer: fetch events not yet waited for, and the units each covers */
    /* fetches of a layer go to one of two event sets, swapped at each kv_fetch_wait, so
     * that the round before can be measured afterwards (timing events): fetch_ev and
     * fetch_units [2][n_layers][OKV_CUDA_FETCH_EVENTS], ready_ev [2][n_layers] (the
     * compute stream reaching the layer's wait) */
    cudaEvent_t *fetch_ev;
    int *fetch_units;
    int *fetch_count;        /* [n_layers] events of the current set */
    int *fetch_set;          /* [n_layers] the current set */
    int *meas_count;         /* [n_layers] events of the other set still to measure */
    cudaEvent_t *ready_ev;
    cudaEvent_t *wt_ev;      /* [n_layers] write-through done (copy stream) */
    cudaEvent_t *attn_ev;    /* [n_layers] recorded behind the layer's last attention: a fetch into the layer's
                                own units waits for it alone, not for everything queued before the fetch */
    bool *attn_rec;          /* [n_layers] attn_ev has been recorded */
    bool *wt_pending;        /* [n_layers] wt_ev recorded and not yet waited by kv_write */
    bool kvw_scalar;         /* OKV_KVW_SCALAR: kv_write one element a thread, never 16-byte pieces */
    struct cuda_resid *resid;   /* device-side residency (cuda_resid.cu), or NULL */
};

/* ring of staging memory: pinned host + device mirror */
#define OKV_CUDA_RING_MARKS 256
struct cuda_ring_mark { size_t beg, end; cudaEvent_t ev; };
struct cuda_ring {
    char *h;                 /* pinned host */
    char *d;                 /* device */
    size_t cap, head;
    struct cuda_ring_mark marks[OKV_CUDA_RING_MARKS];
    int m_first, m_count;
    int n_open;              /* marks allocated since the last commit (each gets the commit's event) */
    cudaEvent_t ev_pool[OKV_CUDA_RING_MARKS];
};

/* device copy of the current step's metadata (see step_begin) */
struct cuda_step {
    int n_tokens, n_seqs;
    int32_t *tok_seq, *tok_pos, *tok_slot, *tok_host;   /* device, tok_host NULL without host tier */
    int32_t *seq_kv_len;                                /* device [n_seqs] */
    int32_t *seq_row_off;                               /* device [n_seqs+1] rows grouped by sequence */
    int32_t *seq_rows;                                  /* device [n_tokens] */
    int max_rows_per_seq;
    const int32_t *h_row_off;                           /* host copy of seq_row_off (pinned staging) */
    float *rope;                                        /* device [n_tokens][rope_hd] when rope_hd > 0 */
    int rope_hd;
    uint64_t gen;                                       /* step counter */
};

struct cuda_attn_cache {
    /* inputs of the last uploaded attention plan */
    uint64_t gen;
    uint64_t version;                         /* okv_attn_blocks.version of its lists */
    int n_heads;
    int n_lists, n_blocks;
    const struct okv_bkv *kv;                 /* the KV the lists were checked against */
    int32_t max_unit;                         /* largest layer unit of the lists (staging units aside) */
    int32_t *h_start, *h_unit, *h_index;     /* host copies (okv_malloc) */
    size_t h_cap;                             /* capacity of h_unit/h_index in entries */
    size_t h_start_cap, h_index_cap;
    /* device plan */
    char *d_plan;
    size_t d_cap;
    int n_work, n_merge, n_parts;
    int slots;                                /* resident CTAs the plan was made for (0: SIMT kernel policy) */
    int pf_min_rows;                          /* sequences of this many rows went to the prefill kernel (INT_MAX: none) */
    size_t off_start, off_unit, off_index, off_work, off_merge, off_cnt;
    bool valid;
};

struct cuda_ctx {
    int device;
    int n_sms;
    size_t smem_optin;
    cudaStream_t stream;     /* compute */
    cudaStream_t copy;       /* host tier <-> device */
    /* the selection stream (default; OKV_SELECT_STREAM=0 off): the device residency's selection
     * and install run on their own stream beside the rest of the layer (cuda_resid.cu);
     * sel_stream is where select work goes (stream, or side during an install) */
    cudaStream_t side;
    cudaStream_t sel_stream;
    double blocked_s;              /* host seconds blocked in OKV_CU_WAIT calls, cumulative */
    cudaEvent_t ev_side_mark;      /* side position, for the copy stream to wait on */
    float *side_sc;                /* selection scores on the side stream (the generic scratch is compute's) */
    size_t side_sc_cap;            /* floats */
    void *green[2];          /* OKV_GATHER_SMS: green contexts (CUgreenCtx) of copy and compute, else NULL */
    int green_sms[2];        /* their SMs */
    cublasHandle_t blas;
    void *blas_ws;
    size_t blas_ws_bytes;
    cudaEvent_t ev_compute_mark;   /* compute position, for the copy stream to wait on */
    cudaEvent_t ev_copy_mark;      /* copy position, for compute to wait on */
    cudaEvent_t ev_wt_last;        /* last write-through */
    bool wt_last_pending;
    struct cuda_ring ring;
    struct cuda_step step;
    char *step_h;            /* pinned staging of step metadata */
    char *step_d;
    size_t step_cap;
    cudaEvent_t step_ev;     /* step metadata upload done */
    float *rope_h, *rope_d;  /* the step's cos/sin table: pinned staging, device */
    size_t rope_cap;         /* bytes */
    cudaEvent_t rope_ev;
    struct okv_step_meta meta;   /* borrowed host arrays */
    /* overlapped decoding (sample_queue): per slot the sampled ids on the device, their
     * pinned copy, the event behind that copy, the ids held and the capacity */
    int32_t *qids_d[2], *qids_h[2];
    cudaEvent_t qids_ev[2];
    int qids_n[2], qids_cap[2];
    float *qrows_h[2];          /* sample_queue's copied logit rows (pinned) */
    size_t qrows_cap[2];        /* floats */
    int qrows_n[2], qrows_vocab[2];
    /* scratch */
    okv_bf16 *act_bf16;      /* activations converted for GEMM */
    size_t act_cap;          /* elements */
    float *scratch;          /* generic device scratch (gather_rows in place, partials) */
    size_t scratch_cap;      /* floats */
    /* weight upload staging */
    float *wstage_h[2];
    float *wstage_d[2];
    cudaEvent_t wstage_ev[2];
    size_t wstage_cap;       /* floats per buffer */
    struct cuda_attn_cache attn;
    /* select: pinned result staging */
    int32_t *sel_h;
    float *sel_scores_h;
    size_t sel_cap;          /* entries of each */
    cudaEvent_t sel_ev;      /* an asynchronous selection's ids have reached sel_h */
    bool sel_ev_made;
    bool sel_pending;
    int32_t *sel_out;        /* where select_wait copies them */
    size_t sel_n;
    int attn_variant;        /* attention kernel: 0 default, -1 SIMT, k > 0 tuning variant (cuda_bench.h) */
    int attn_kpi;            /* attention keys per work item forced (0: policy) */
    /* kernel attributes are per device: what this context (one device) has set */
    struct { const void *fn; size_t smem; int occ; } attn_seen[32];
    int attn_n_seen;
    /* prefill attention (cuda_prefill.cu), read at context creation: prefill_kernel is
     * OKV_PREFILL_KERNEL's tile of query vectors (0 off, 64, 128, 256), prefill_wrows
     * OKV_PREFILL_WARP_ROWS's vectors a warp (16, 32), prefill_auto neither set (the call's
     * tile count against the SMs then picks the kernel); and the kernels whose attributes
     * this context has set */
    int prefill_kernel, prefill_wrows;
    bool prefill_auto;
    int prefill_split;       /* OKV_PREFILL_SPLIT: key parts a tile forced (0: by the call's tiles) */
    bool prefill_wgmma;      /* OKV_PREFILL_WGMMA=1: tiles of 128 on the warpgroup MMA (cuda_prefill_wg.cu) */
    int prefill_ws;          /* with it, the warp-specialised kernel (cuda_prefill_ws.cu): 2 (default) with its
                              * consumers taking turns, 1 without (OKV_PREFILL_WS=1), 0 off */
    void *tmap_encode;       /* the driver's cuTensorMapEncodeTiled, for that kernel's TMA copies (or NULL) */
    bool prefill_ws_forced;  /* OKV_PREFILL_WS set to 1 or 2: that kernel for every call, else for calls whose
                              * longest list has at least prefill_ws_min_keys keys (OKV_PREFILL_WS_MIN_KEYS) */
    long long prefill_ws_min_keys;
    bool sync_compute_only;   /* sync() leaves the copy stream running (default; OKV_STEP_SYNC=both: not) */
    const void *pf_seen[16];
    int pf_n_seen;
    size_t topk_smem_set;    /* the top-k kernel's dynamic shared memory limit raised so far */
    int fetch_ctas_override;
    int fetch_ctas_last;
    int gather_unroll;       /* loads in flight per thread of the host-tier gather (OKV_GATHER_UNROLL, default 2) */
    int gemv_rows;           /* projections of at most this many rows take cuda_gemv.cu (OKV_GEMV_ROWS, default 4; 0 off) */
    bool pad_rows;           /* the pure ops of 5 to 256 rows run on a few padded row counts (pad_rows in
                                cuda_backend.cu; OKV_PAD_ROWS=0: exact counts) */
    bool run_large;          /* the op being prepared has more rows than a decode batch (set by pad_rows, taken
                                by okv_cuda_graph_push: its run is launched without being remembered) */
    struct cuda_prof *prof;   /* OKV_CUDA_PROFILE=1 (cuda_prof.cu), else NULL */
    struct cuda_graphs *graphs;   /* segment graphs (cuda_graph.cu), NULL when off */
};

/* A deferred pure op (cuda_graph.cu): a kernel (or a conversion and a GEMM) over device
 * buffers whose launch depends on nothing but these fields. Compared bytewise: built
 * from a zeroed struct. */
enum okv_cuda_gop_kind { OKV_GOP_RMSNORM = 1, OKV_GOP_HEAD_RMSNORM, OKV_GOP_MATMUL, OKV_GOP_ROPE, OKV_GOP_SWIGLU, OKV_GOP_ADD };
struct okv_cuda_gop {
    int32_t kind;
    int32_t i0, i1, i2;      /* shapes (per kind: see okv_cuda_gop_issue) */
    int64_t count;
    float eps;
    int32_t flag;
    const void *p[5];        /* device pointers */
};

/* global unit index in kv->dev of a layer's unit or a staging unit (OKV_UNIT_STAGE) */
#ifdef __CUDACC__
static __host__ __device__ __forceinline__ long long okv_cuda_unit_global(int32_t u, long long layer_off, long long stage_off)
{
    return (u & OKV_UNIT_STAGE) ? stage_off + (long long)(u & ~OKV_UNIT_STAGE) : layer_off + (long long)u;
}
/* Programmatic dependent launch (sm_90): a kernel that a small-batch projection follows lets
 * it launch early (cuda_gemv.cu; OKV_PDL=0 turns it off): the projection loads its first
 * weights, which nothing writes, and waits for this grid's completion before it reads
 * anything else. Only kernels launched with the attribute are affected; elsewhere this does
 * nothing. */
static __device__ __forceinline__ void okv_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/* ... and the dependent's side: wait for the grid it was launched behind (a no-op when it was
 * launched without the attribute) */
static __device__ __forceinline__ void okv_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#endif
static inline bool okv_cuda_unit_valid(const struct okv_bkv *kv, int layer, int32_t u)
{
    if (u & OKV_UNIT_STAGE)
        return (int64_t)(u & ~OKV_UNIT_STAGE) < 2 * (int64_t)kv->g.n_stage_units;
    return u >= 0 && (size_t)u < kv->layer_units[layer];
}

#define OKV_CUDA_CTX(be) ((struct cuda_ctx *)(be)->ctx)

#ifdef __cplusplus
extern "C" {
#endif

/* ring staging: reserve n bytes, returns host and device pointers of one region. After
 * enqueuing the copy and its consumers on stream s, call okv_cuda_ring_commit(s). */
enum okv_status okv_cuda_ring_alloc(struct cuda_ctx *c, size_t n, void **h, void **d);
/* grow the ring to at least cap bytes (waits for all queued work when it grows; does
 * nothing while regions reserved since the last commit are open) */
enum okv_status okv_cuda_ring_reserve(struct cuda_ctx *c, size_t cap);
enum okv_status okv_cuda_ring_commit(struct cuda_ctx *c, cudaStream_t s);
/* Upload n bytes of host data through the ring on stream s; *d receives the device copy
 * (valid for ops enqueued on s before the next commit wraps around; the caller commits). */
enum okv_status okv_cuda_upload(struct cuda_ctx *c, cudaStream_t s, const void *src, size_t n, void **d);

/* grow-only device scratch of at least n floats (synchronises when it grows) */
enum okv_status okv_cuda_scratch(struct cuda_ctx *c, size_t n, float **out);
enum okv_status okv_cuda_sync_all(struct cuda_ctx *c);

/* kv (cuda_kv.cu) */
enum okv_status okv_cuda_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out);
void okv_cuda_kv_free(okv_backend *be, okv_bkv *kv);
void okv_cuda_fill_kv_ops(struct okv_backend_ops *ops);
/* before step metadata changes: compute waits for the last write-through */
enum okv_status okv_cuda_kv_before_step(struct cuda_ctx *c);

/* attention (cuda_attention.cu) */
enum okv_status okv_cuda_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                   const struct okv_attn_blocks *blocks, int n_heads, float scale);
void okv_cuda_attn_cache_free(struct cuda_ctx *c);

/* prefill attention (cuda_prefill.cu): flash-attention-2 tiles of many query vectors,
 * used by okv_cuda_attention for prefill-shaped calls when enabled */
struct okv_cuda_prefill_call {
    float *out;
    const float *q;
    const struct okv_bkv *kv;
    int layer;
    const int32_t *d_start, *d_unit, *d_index;   /* the block lists on the device (attention plan) */
    const int32_t *h_start;                       /* blk_start on the host */
    int n_heads;
    float scale;
    int min_rows;                                 /* the sequences of at least this many rows */
};
/* The rows from which a sequence of this step is prefill-shaped (rows * group >= 64) and
 * goes to the prefill kernel, the others to the decode kernel; INT_MAX when the kernel is
 * off, the head_dim unsupported or no sequence of the step qualifies. */
int okv_cuda_prefill_min_rows(const struct cuda_ctx *c, int head_dim, int group);
enum okv_status okv_cuda_prefill_attention(struct cuda_ctx *c, const struct okv_cuda_prefill_call *p);

/* select (cuda_select.cu): every request of the call in one pass, one copy back */
enum okv_status okv_cuda_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                       const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores);
/* sample (cuda_sample.cu): one token per row, one copy back */
enum okv_status okv_cuda_select_blocks_async(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q,
                                             int n_heads, const struct okv_select_req *reqs, int n_reqs, int32_t *out);
enum okv_status okv_cuda_select_wait(okv_backend *be);
/* device-side residency: scoring and top-k queued on the compute stream, the ids written
 * to d_ids on the device; *d_cand receives the device copy of the candidates (NULL when
 * there are none; tab->d_tab when tab is given). Ring memory: the caller commits once
 * its consumers are queued. */
/* candidates already in HBM: request r's ids start at d_tab + off[r] (off: host array) */
struct okv_cuda_cand_tab {
    const int32_t *d_tab;
    const int32_t *off;
};
/* host bytes that travel in the same upload as the requests (one copy instead of two);
 * d: their device address, in the ring region the caller commits */
struct okv_cuda_blob {
    const void *h;
    size_t bytes;
    const void *d;
};
enum okv_status okv_cuda_select_to_device(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                          const struct okv_select_req *reqs, int n_reqs, int32_t *d_ids,
                                          const int32_t **d_cand, const struct okv_cuda_cand_tab *tab,
                                          struct okv_cuda_blob *extra);
/* Segment graphs (cuda_graph.cu). The pure ops (rmsnorm, head_rmsnorm, matmul, rope,
 * swiglu, add) are deferred with okv_cuda_graph_push; every other op of the table first
 * flushes them (okv_cuda_graph_wrap), as must any code that enqueues on the compute
 * stream outside the table (NCCL). A flushed run of pure ops seen before is launched as
 * one CUDA graph, captured on its second sighting. */
/* small-batch projections (cuda_gemv.cu): 1 to OKV_GEMV_MAX_ROWS rows of fp32 x times
 * bf16 weights, up to three projections of the same x per launch (segments), or the gate
 * and up projections with SwiGLU (pair: s[0] gate, s[1] up, swi = silu(gate) * up) */
#define OKV_GEMV_MAX_ROWS 4
struct okv_cuda_gemv_seg {
    const okv_bf16 *w;       /* [m][k] */
    const float *bias;       /* [m] or NULL */
    float *out;              /* [n][m] */
    float *acc;              /* [n][m] += out, or NULL */
    int m;
};
struct okv_cuda_gemv {
    const float *x;          /* [n][k], 16-byte aligned */
    int n, k, nseg, pair;
    float *swi;
    struct okv_cuda_gemv_seg s[3];
};
bool okv_cuda_gemv_fits(int n, int k, const void *x, const void *w);
/* a grow-only device buffer (*buf, *cap elements of elem bytes) made to hold n; before it
 * is replaced the stream `drain`, whose queued work may read it, is synchronized */
enum okv_status okv_cuda_grow_device(cudaStream_t drain, void **buf, size_t *cap, size_t n, size_t elem, const char *what);
cudaError_t okv_cuda_gemv(cudaStream_t s, const struct okv_cuda_gemv *a);
/* issue ops[0..] as one launch where a fusion applies (cuda_backend.cu); *used: ops taken */
enum okv_status okv_cuda_gop_issue_fused(struct cuda_ctx *c, const struct okv_cuda_gop *ops, int n, int *used);
enum okv_status okv_cuda_graph_push(struct cuda_ctx *c, const struct okv_cuda_gop *op);
enum okv_status okv_cuda_graph_flush(struct cuda_ctx *c);
/* launch one pure op now (cuda_backend.cu) */
enum okv_status okv_cuda_gop_issue(struct cuda_ctx *c, const struct okv_cuda_gop *op);
/* a buffer that captured graphs point to is about to be freed: flush, then drop them */
enum okv_status okv_cuda_graph_invalidate(struct cuda_ctx *c);
void okv_cuda_graph_free(struct cuda_ctx *c);
enum okv_status okv_cuda_graph_init(struct cuda_ctx *c);
void okv_cuda_graph_wrap(struct okv_backend_ops *ops);
/* OKV_CUDA_PROFILE=1: wrap the hot ops with timing events (cuda_prof.cu) */
void okv_cuda_prof_wrap(struct okv_backend_ops *ops);
/* residency (cuda_resid.cu) */
void okv_cuda_fill_resid_ops(struct okv_backend_ops *ops);
void okv_cuda_resid_free(okv_bkv *kv);
size_t okv_cuda_resid_bytes(const okv_bkv *kv);
/* attention lists: replace the placeholders of blocks->sel_fill in the plan's device
 * unit / index arrays (compute stream) */
enum okv_status okv_cuda_resid_fill(struct cuda_ctx *c, const okv_bkv *kv, int layer, const struct okv_attn_blocks *blocks,
                                    int n_lists, int32_t *d_unit, int32_t *d_index);
/* gather from a device-written list (cuda_kv.cu): d_src / d_dst as kv_fetch's, d_count[0]
 * entries, at most n_bound of them; d_count[1] starts at 0; the gather resets both */
enum okv_status okv_cuda_kv_fetch_order(struct cuda_ctx *c, okv_bkv *kv, int layer);
enum okv_status okv_cuda_kv_fetch_device(struct cuda_ctx *c, okv_bkv *kv, int layer, const int32_t *d_src,
                                         const int32_t *d_dst, int *d_count, int n_bound);
enum okv_status okv_cuda_sample_queue(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                      const struct okv_sampling *params, const double *u, int slot, const int32_t *copy_rows,
                                      int n_copy);
enum okv_status okv_cuda_sample_collect(okv_backend *be, int slot, int32_t *out, int n_rows, float *rows_out, int n_copy);
void okv_cuda_sample_free(struct cuda_ctx *c);
enum okv_status okv_cuda_sample(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                const struct okv_sampling *params, const double *u, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
