/* The backend interface: every operation of the forward pass, behind a table of
 * function pointers. The engine calls these and never branches on the backend.
 *
 * Memory model: a backend hands out opaque handles.
 *  - okv_bmem: a buffer of activations in the backend's memory, float32 elements.
 *  - okv_bweight: a weight converted to the backend's working precision (CPU: fp32;
 *    CUDA: bf16), built from a file's tensor view.
 *  - okv_bkv: the KV tiers of all layers (device units, host tier, summaries; see
 *    struct okv_kv_geometry). One (block, KV head) is contiguous: the unit that
 *    selection and prefetch move.
 * Activation tensors are row-major with the token as the outer dimension.
 *
 * Step metadata (positions, slot mappings, block lists) is given as host arrays in
 * struct okv_step_meta; a backend copies what it needs to its memory in
 * okv_backend_ops.step_begin, before any op of the step.
 *
 * Thread safety: one thread drives a backend at a time. */
#ifndef OASISKV_BACKEND_H
#define OASISKV_BACKEND_H

#include "oasiskv/common.h"
#include "oasiskv/sampling.h"
#include "oasiskv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_backend okv_backend;
typedef struct okv_bmem okv_bmem;
typedef struct okv_bweight okv_bweight;
typedef struct okv_bkv okv_bkv;

/* KV storage geometry. The device tier of each layer is an array of units, one unit
 * being one KV head's block: K [block_size][head_dim] and V likewise. Units
 * [0, n_group_slots*n_kv_heads) form group slots (all KV heads of one block: unit
 * g*n_kv_heads + h), allocated in every layer at once for blocks being written
 * (dense sequences, sinks, local windows). Units past them form the sparse region
 * of the layer (its size may differ per layer), into which selected blocks are
 * fetched one KV head at a time.
 * The host tier holds n_host_blocks blocks (all heads, all layers) in host memory
 * that the backend can read asynchronously (pinned on CUDA); every KV write goes
 * through to it. Block summaries (element-wise min and max of the keys of each
 * host block and KV head) live beside the device tier.
 *
 * Staging: two buffers of n_stage_units units shared by all layers, addressed as
 * OKV_UNIT_STAGE | (buffer * n_stage_units + i). A long prefill whose older blocks
 * live in the host tier alone fetches them, one layer at a time, into the staging
 * buffer layer % 2, so the device never holds the whole prompt of every layer. */
#define OKV_UNIT_STAGE 0x40000000
struct okv_kv_geometry {
    int n_layers;
    int n_group_slots;
    int n_sparse_units;   /* per layer, unless layer_sparse_units is set */
    const int32_t *layer_sparse_units;   /* [n_layers] or NULL; copied at kv_alloc (dense layers need more) */
    int n_host_blocks;    /* 0: no host tier (dense serving) */
    int n_stage_units;    /* units of each of the two staging buffers (layer-by-layer prefill); 0: none */
    int block_size;       /* tokens per block */
    int n_kv_heads;
    int head_dim;
    int key_code_bits;    /* 0: none; 1, 2 or 4: per-token key codes beside the summaries (see below) */
    bool host_fp8;        /* the host tier stores K and V as FP8 E4M3 (okv_bf16_to_e4m3 of their bfloat16
                             values: 1 byte an element, half of bf16 over PCIe and in host memory); fetched
                             units are decoded into the device tier's precision. The summaries and key codes
                             are built from the stored (decoded) keys, so they bound what attention reads. */
};

/* Per-token key codes (key_code_bits B > 0): for every full host block, layer and KV head, each
 * channel d of each key t rounded to one of L = 2^B - 1 steps of the block's [kmin_d, kmax_d]:
 * code c_td = round((k_td - kmin_d) / (kmax_d - kmin_d) * L) (0 where the range is empty), packed
 * B bits each, t-major then d, low bits first (no code crosses a byte); okv_key_code_bytes per
 * (block, head). They are built when a block's last token is written (kv_write, in row order) and by
 * kv_summary_rebuild of a full block. With them, selection scores a block by
 * max_t sum_d q_d (kmin_d + c_td (kmax_d - kmin_d) / L), the max of q.k over its keys as the
 * codes see them, instead of Quest's bound (bench/ACCURACY.md: the bound is what separates
 * sparse from dense at 32K): computed as q.kmin + s * sum_d iw_d c_td, with the weights
 * w_d = (q_d (1 / L)) (kmax_d - kmin_d) rounded to integers iw_d = round(w_d (127 / m)) in
 * [-127, 127], m = max_d |w_d|, s = m / 127, so that the GPU sums them with 8-bit integer dot
 * products; both backends take the same float steps and so compute the same integers.
 * The block's score is then (1 - b) * that max + b * Quest's bound (computed from the same
 * weights: q.kmin + L sum_d max(w_d, 0)), b = OKV_KEY_CODE_BLEND (0.5; the OKV_CODES_BLEND
 * variable overrides it for studies): the max alone finds single needles the bound misses, and
 * loses multi-hop chains the bound keeps (bench/ACCURACY.md, 32K: niah 99 / vt 48 with the max,
 * 95 / 72 with the bound, 99 / 73 with half of each; dense 99 / 81). */
#define OKV_KEY_CODE_BLEND 0.5f
/* the blend b in force: OKV_CODES_BLEND (clamped to 0..1) when set, else OKV_KEY_CODE_BLEND; both
 * backends read it at each select_blocks call (tests switch it) */
float okv_key_code_blend(void);
static inline bool okv_key_code_bits_valid(int bits) { return bits == 0 || bits == 1 || bits == 2 || bits == 4; }
static inline size_t okv_key_code_bytes(const struct okv_kv_geometry *g)
{
    return ((size_t)g->block_size * (size_t)g->head_dim * (size_t)g->key_code_bits + 7) / 8;
}

/* One step's metadata, host arrays; valid from step_begin until the next step_begin. */
struct okv_step_meta {
    int n_tokens;                 /* rows of the flat batch */
    int n_seqs;
    const int32_t *tok_seq;       /* [n_tokens] batch-local sequence index of each row */
    const int32_t *tok_pos;       /* [n_tokens] absolute position of each row */
    const int32_t *tok_slot;      /* [n_tokens] device destination: group_slot*block_size + offset */
    const int32_t *tok_host;      /* [n_tokens] host destination: host_block*block_size + offset; NULL without host tier */
    const float *rope_cos_sin;    /* [n_tokens][head_dim/2][2] cos, sin of each row's angles */
    const int32_t *seq_kv_len;    /* [n_seqs] valid KV tokens of each sequence after this step */
};

/* The blocks attention reads for one layer: one list per (sequence, KV head).
 * List (s, h) is blk_unit[blk_start[s*n_kv_heads+h] .. blk_start[s*n_kv_heads+h+1]),
 * device units of this layer; blk_index gives each block's logical number (its
 * tokens are positions blk_index*block_size ...). A query at position p reads key
 * positions kp with kp <= p and kp < seq_kv_len[s]. */
struct okv_attn_blocks {
    const int32_t *blk_start;     /* [n_seqs*n_kv_heads + 1] */
    const int32_t *blk_unit;      /* device unit in this layer */
    const int32_t *blk_index;     /* logical block number */
    /* Device-side residency (resid_init): NULL, or [n_seqs*n_kv_heads][3] (pos, chunk,
     * k): list i's entries [pos, pos + k) are placeholders that the backend replaces
     * with the selection last installed for (chunk, this layer, head i % n_kv_heads),
     * in block order (pos < 0: none). */
    const int32_t *sel_fill;
    /* 0, or a number the caller changes whenever the lists' contents change: within a
     * step, a backend may take lists of the same nonzero version as those it saw last
     * without comparing them (the dense lists of a step are the same at every layer) */
    uint64_t version;
};

/* Device-side residency (optional backend ops resid_init ... resid_take_stats): the
 * backend keeps, per quota chunk (one sparse sequence) and layer, the residency map
 * of resid.h (block -> unit per KV head, unit -> block, LRU stamps) and the current
 * selection, in its own memory, so that a selection is installed and its missing
 * units gathered without its ids ever coming back to the host. Same policy as
 * okv_resid_apply: units are assigned identically. */
struct okv_resid_geometry {
    int max_seqs;                 /* quota chunks */
    int max_blocks;               /* logical blocks of the longest sequence */
    int base_unit;                /* first unit of the sparse region */
    const int32_t *quota;         /* [n_layers] units per chunk (a multiple of n_kv_heads) */
};

/* One sequence of a select_install call. */
struct okv_resid_item {
    int chunk;                    /* its quota chunk */
    int sink;                     /* logical block of candidate 0 (candidates are [sink, sink + n_cand)) */
    uint32_t stamp;               /* > 0, fresh per installation (resid.h) */
    int keep;                     /* 0: install the request's k blocks per head; else keep this many of them, the
                                     sticky cut (kv/select_rules.h) with the blocks the chunk holds as held
                                     (req.k <= 2 keep; not with own) */
    bool by_rank;                 /* the rank merge (okv_engine_params.merge): each of the request's rows
                                     chooses req.k blocks per head alone and the rows' lists are taken by rank in
                                     turn (okv_sel_merge_rank: the rows' firsts, then their seconds, ...),
                                     duplicates skipped; own NULL and keep 0 */
};

/* A block-selection request for one sequence at one layer: score the candidate
 * host blocks with the Quest bound sum_d max(q_d*kmin_d, q_d*kmax_d) (or the key codes'
 * max, above) for each KV head, maximised over the query heads of its GQA group and over
 * the given rows, and return the top k per KV head. */
struct okv_select_req {
    const int32_t *rows;          /* [n_rows] rows of q (current step) to score with */
    int n_rows;
    const int32_t *cand_host;     /* [n_cand] candidate host blocks */
    int n_cand;
    int k;                        /* blocks to keep per KV head (<= n_cand) */
};

struct okv_backend_ops {
    const char *name;
    void (*destroy)(okv_backend *be);

    /* memory */
    enum okv_status (*mem_alloc)(okv_backend *be, size_t n_floats, okv_bmem **out);
    void (*mem_free)(okv_backend *be, okv_bmem *m);
    enum okv_status (*mem_write)(okv_backend *be, okv_bmem *m, size_t off, const float *src, size_t n);
    enum okv_status (*mem_read)(okv_backend *be, const okv_bmem *m, size_t off, float *dst, size_t n);
    enum okv_status (*weight_load)(okv_backend *be, const struct okv_tensor_view *t, okv_bweight **out);
    void (*weight_free)(okv_backend *be, okv_bweight *w);
    size_t (*weight_bytes)(const okv_bweight *w);
    enum okv_status (*kv_alloc)(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out);
    void (*kv_free)(okv_backend *be, okv_bkv *kv);
    size_t (*kv_unit_bytes)(const okv_bkv *kv);        /* K+V of one unit (one head's block, one layer) */
    size_t (*kv_device_bytes)(const okv_bkv *kv);      /* device tier incl. summaries */
    size_t (*kv_host_bytes)(const okv_bkv *kv);        /* host tier */
    size_t (*kv_host_unit_bytes)(const okv_bkv *kv);   /* one unit in the host tier: what a fetch moves
                                                           (NULL: kv_unit_bytes) */
    /* Read one device unit / one host block's head (K and V [block_size][head_dim],
     * float32): for tests and the host tier's checks. */
    enum okv_status (*kv_unit_read)(okv_backend *be, const okv_bkv *kv, int layer, int32_t unit, float *k, float *v);
    enum okv_status (*kv_host_read)(okv_backend *be, const okv_bkv *kv, int layer, int host_block, int head, float *k, float *v);
    /* Summary (kmin, kmax [head_dim] each) of one host block and head. */
    enum okv_status (*kv_summary_read)(okv_backend *be, const okv_bkv *kv, int layer, int host_block, int head,
                                       float *kmin, float *kmax);
    /* Recompute the summaries of host_block (all layers, all heads) from its first
     * n_valid tokens in the host tier (after speculative rejection). */
    enum okv_status (*kv_summary_rebuild)(okv_backend *be, okv_bkv *kv, int host_block, int n_valid);
    /* Benchmarks: fill a host block (every layer and head, K and V) with uniform
     * random values in [-scale, scale] from seed, and rebuild its summaries. */
    enum okv_status (*kv_host_randomize)(okv_backend *be, okv_bkv *kv, int host_block, uint64_t seed, float scale);
    /* Enqueue an asynchronous gather of n units of one layer from the host tier
     * (src_host[i] = host_block*n_kv_heads + head) into device units dst_unit[i].
     * Destinations may be staging units (OKV_UNIT_STAGE). Returns at once; the copy
     * overlaps the ops that follow. It must not overwrite a unit before the
     * attention calls issued before it have read it (a GPU backend orders the copy
     * after an event recorded behind the layer's last attention, or behind
     * everything queued when staging units are written). */
    enum okv_status (*kv_fetch)(okv_backend *be, okv_bkv *kv, int layer, int n, const int32_t *src_host,
                                const int32_t *dst_unit);
    /* Make later ops of this layer wait for its enqueued fetches. *pending receives how
     * many units were late, *stall_s the seconds spent waiting. The CPU backend blocks
     * the caller and reports this call; the CUDA backend makes its compute stream wait
     * and reports the layer's previous call, measured with timing events (how long the
     * stream waited there, and for how many units), so totals over many steps count
     * what the device did. */
    enum okv_status (*kv_fetch_wait)(okv_backend *be, okv_bkv *kv, int layer, int *pending, double *stall_s);
    /* Copy group slot src[i] to group slot dst[i], i < n (every layer and KV head: K and V), ordered
     * with the ops before and after it as a kernel of the step would be. Slots are counted over the
     * group slots and then the sparse units (a slot id past n_group_slots names the units
     * (id*n_kv_heads + h) - n_group_slots*n_kv_heads of the sparse region, in a layout whose layers
     * all have at least that many). Sparse engines move blocks out of a selection chunk they claim
     * (kv.h: lending). NULL: not supported. */
    enum okv_status (*kv_move)(okv_backend *be, okv_bkv *kv, int n, const int32_t *src_slot, const int32_t *dst_slot);

    /* step */
    enum okv_status (*step_begin)(okv_backend *be, const struct okv_step_meta *meta);

    /* ops on the current step's rows (n = meta->n_tokens unless stated). The pure ops below
     * (rmsnorm, matmul, head_rmsnorm, rope, swiglu, add) may also compute rows past n, up to
     * what their buffers hold: a buffer's rows past the step's are scratch. (The CUDA backend
     * pads decode-sized batches to a few row counts so that its CUDA graphs replay; add's count
     * is then taken as a whole number of the step's rows. bench/RESULTS.md section 31.) */
    /* out[n][dim] = embedding rows of ids[n] (host array) */
    enum okv_status (*embed)(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids, int n, int dim);
    /* out[n][dim] = x / rms(x) * w; out may equal x */
    enum okv_status (*rmsnorm)(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, int n, int dim, float eps);
    /* out[n][m] = x[n][k] . W[m][k]^T (+ bias[m] when bias is not NULL) */
    enum okv_status (*matmul)(okv_backend *be, okv_bmem *out, const okv_bmem *x, const okv_bweight *w, const okv_bweight *bias, int n, int k, int m);
    /* In place RMSNorm of each head vector x[n][heads][hd] with weight w[hd] (q/k norm) */
    enum okv_status (*head_rmsnorm)(okv_backend *be, okv_bmem *x, const okv_bweight *w, int n, int heads, int hd, float eps);
    /* In place RoPE of x[n][heads][hd] with the step's cos/sin table; half_pairing
     * pairs (i, i+hd/2), else (2i, 2i+1) */
    enum okv_status (*rope)(okv_backend *be, okv_bmem *x, int n, int heads, int hd, bool half_pairing);
    /* out[n][f] = silu(gate) * up */
    enum okv_status (*swiglu)(okv_backend *be, okv_bmem *out, const okv_bmem *gate, const okv_bmem *up, int n, int f);
    /* x[i] += y[i] for i < count */
    enum okv_status (*add)(okv_backend *be, okv_bmem *x, const okv_bmem *y, size_t count);
    /* out[i][:] = x[rows[i]][:] for i < n_rows (rows: host array) */
    enum okv_status (*gather_rows)(okv_backend *be, okv_bmem *out, const okv_bmem *x, const int32_t *rows, int n_rows, int width);
    /* Store k[n][n_kv_heads][hd], v[...] of the step's rows into the layer's device
     * group slots at tok_slot and, with a host tier, into the host tier at tok_host,
     * widening the host blocks' summaries. */
    enum okv_status (*kv_write)(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v);
    /* Select blocks for several sequences of the current step at once (one request
     * each, see okv_select_req), in one pass: out receives, request after request,
     * [n_kv_heads][req.k] host block ids, best first (ties to the lower id); scores,
     * if not NULL, request after request, [n_kv_heads][req.n_cand] the bound of every
     * candidate. q is [n][n_heads][hd]. A GPU backend scores and sorts on the device
     * and copies back only the ids (one copy for all requests). */
    enum okv_status (*select_blocks)(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                     const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores);
    /* Asynchronous form of select_blocks (no scores): returns once the work is
     * queued behind the ops issued so far; out must stay untouched until
     * select_wait, which fills it. One selection in flight at a time. NULL when the
     * backend has no asynchronous path (the engine then calls select_blocks). */
    enum okv_status (*select_blocks_async)(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q,
                                           int n_heads, const struct okv_select_req *reqs, int n_reqs, int32_t *out);
    enum okv_status (*select_wait)(okv_backend *be);
    /* Device-side residency (NULL when the backend has none; see okv_resid_geometry).
     * resid_init sizes the state (OKV_ERR_UNSUPPORTED when the backend cannot hold it:
     * the engine then keeps residency on the host); resid_reset forgets chunk's
     * mappings (a sequence attached, cleared or failed). */
    enum okv_status (*resid_init)(okv_backend *be, okv_bkv *kv, const struct okv_resid_geometry *g);
    enum okv_status (*resid_reset)(okv_backend *be, okv_bkv *kv, int chunk);
    /* Select as select_blocks and install the result, all queued on the device:
     * reqs[i].k blocks per head, best first; with own (the same requests scoring the
     * real token alone, own[i].k <= reqs[i].k), own's blocks come first and reqs'
     * fill the rest, duplicates skipped (lookahead); items[i].by_rank: the rows'
     * own selections merged by rank instead (own NULL); then, for succ > 0, the
     * successor of each of the best min(succ, k/2) blocks replaces the lowest-ranked
     * entries unless already selected or past the candidates (with items[i].keep,
     * first the sticky cut to keep blocks, and keep is the k that follows); then the
     * selection of (items[i].chunk, layer) becomes these k blocks per head (okv_resid_apply's
     * policy), and the missing units are gathered from the host tier like kv_fetch
     * (kv_fetch_wait waits for them). */
    enum okv_status (*select_install)(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                      const struct okv_select_req *reqs, const struct okv_select_req *own,
                                      const struct okv_resid_item *items, int n_items, int succ);
    /* Units gathered by select_install since the last call (after sync). */
    enum okv_status (*resid_take_stats)(okv_backend *be, okv_bkv *kv, int64_t *units_fetched);
    /* Tests: the selection of (chunk, layer) in block order, [n_kv_heads][k] blocks and
     * their units (blocking). */
    enum okv_status (*resid_read)(okv_backend *be, okv_bkv *kv, int chunk, int layer, int k, int32_t *blocks,
                                  int32_t *units);
    /* Sample one token per row of logits [n_rows][vocab], on the backend: argmax
     * (lowest id on ties) when params[i].temperature <= 0; otherwise the candidates
     * are the top_k largest logits (all when top_k <= 0), then the smallest prefix of
     * them, by decreasing logit, whose softmax(logit / temperature) mass reaches
     * top_p; renormalised, walked in increasing id order, the first id whose
     * cumulative probability exceeds u[i] is chosen (okv_sample_u is the reference).
     * u[i] in [0, 1) comes from the caller's per-sequence generator, so a seed gives
     * the same tokens on every backend (up to float rounding at ties). out: host. */
    enum okv_status (*sample)(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                              const struct okv_sampling *params, const double *u, int32_t *out);
    /* Overlapped decoding (all three, or none: NULL when the backend cannot; the engine
     * then runs each step to its end). sample_queue samples like sample, but keeps the
     * ids in the backend's id buffer `slot` (0 or 1) and returns without waiting for
     * them; sample_collect waits for the step that queued `slot` and copies its n_rows
     * ids out (host). embed_prev embeds like embed, except that a row t with prev[t] >= 0
     * takes the id prev[t] of buffer `slot` (so a step can be queued before the tokens of
     * the step before it reach the host); ids[t] is then ignored. sample_queue also copies
     * the n_copy logit rows listed in copy_rows (their values before sampling) to the host
     * with the ids, and sample_collect hands them over in that order: n_copy x vocab floats
     * into rows_out (n_copy as queued; rows_out NULL: dropped). */
    enum okv_status (*sample_queue)(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                    const struct okv_sampling *params, const double *u, int slot, const int32_t *copy_rows,
                                    int n_copy);
    enum okv_status (*sample_collect)(okv_backend *be, int slot, int32_t *out, int n_rows, float *rows_out, int n_copy);
    enum okv_status (*embed_prev)(okv_backend *be, okv_bmem *out, const okv_bweight *table, const int32_t *ids,
                                  const int32_t *prev, int slot, int n, int dim);
    /* out[n][n_heads][hd] = softmax(q k^T * scale) v over the given blocks, causal by position. */
    enum okv_status (*attention)(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                 const struct okv_attn_blocks *blocks, int n_heads, float scale);
    /* Wait for all queued work (no-op on the CPU). */
    enum okv_status (*sync)(okv_backend *be);
    /* Seconds the host has spent blocked waiting for the device (stream and event
     * synchronizes inside ops, sync included), cumulative since creation; NULL when
     * the backend never waits (the CPU). With it, a step's host time splits into the
     * host's own work and its waits. */
    double (*host_blocked_s)(const okv_backend *be);

    /* Make this backend current for the calling thread (a GPU backend selects its
     * device). NULL when there is nothing to do. One thread that drives several
     * backends (tensor parallelism) calls it before each one's ops. */
    enum okv_status (*bind)(okv_backend *be);
    /* Ranks the model is sharded over (tensor parallelism); NULL: 1. */
    int (*shards)(const okv_backend *be);
    /* The device's memory now: free and total bytes (serve --gpu-memory-utilization). NULL:
     * a backend without memory of its own to share out (the CPU's). */
    enum okv_status (*device_mem)(okv_backend *be, size_t *free_bytes, size_t *total_bytes);
};

struct okv_backend {
    const struct okv_backend_ops *ops;
    void *ctx;
};

struct okv_backend_params {
    int n_threads;      /* CPU threads; <= 0: all cores */
    int device;         /* GPU index (CUDA) */
};

/* Create the CPU backend (threads + OpenBLAS). The caller owns *out (okv_backend_free). */
enum okv_status okv_backend_cpu_create(const struct okv_backend_params *p, okv_backend **out);
/* Create a backend by name ("cpu", "cuda"; NULL: okv_backend_default_name());
 * OKV_ERR_UNSUPPORTED when not built in. */
enum okv_status okv_backend_create(const char *name, const struct okv_backend_params *p, okv_backend **out);
void okv_backend_free(okv_backend *be);   /* NULL is fine */
/* The backend a command uses unless told: "cuda" when built with it and a GPU is
 * present, else "cpu". */
const char *okv_backend_default_name(void);
/* Ranks the backend shards the model over (1 unless tensor-parallel). */
int okv_backend_shards(const okv_backend *be);
/* bytes of one unit in the host tier (kv_host_unit_bytes, else kv_unit_bytes) */
size_t okv_backend_host_unit_bytes(const okv_backend *be, const okv_bkv *kv);
/* KV heads each device holds of a model with n_kv_heads: n_kv_heads / ranks, or 1
 * when KV heads are replicated (fewer KV heads than ranks). Device-memory sizing
 * counts these. */
int okv_backend_kv_heads_per_device(const okv_backend *be, int n_kv_heads);

#ifdef __cplusplus
}
#endif
#endif
