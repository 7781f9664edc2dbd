/* The engine: the forward pass of a Llama-family model over one flat batch of
 * tokens from many sequences (prefill chunks and decode tokens together), on any
 * backend, with a paged KV cache.
 *
 * A batch row appends one token to a sequence at that sequence's current length;
 * rows of one sequence are contiguous and in order. After a successful forward the
 * sequences' lengths include the batch's tokens. On error nothing is committed.
 *
 * Not thread-safe: one thread drives an engine. */
#ifndef OASISKV_ENGINE_H
#define OASISKV_ENGINE_H

#include "oasiskv/backend.h"
#include "oasiskv/kv.h"
#include "oasiskv/model.h"
#include "oasiskv/sampling.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_engine okv_engine;

/* Which queries choose the blocks of the next step (sparse mode). */
enum okv_predict {
    OKV_PREDICT_CURRENT = 0,   /* the queries of step t's own (non-draft) token */
    OKV_PREDICT_LOOKAHEAD,     /* the queries of step t's token and its drafted lookahead tokens */
    OKV_PREDICT_ORACLE,        /* step t+1's true queries, fetched synchronously (evaluation only) */
    OKV_PREDICT_LAYER_AHEAD,   /* step t's queries of layer l estimated from layer l-1's input (layer l's
                                  norm and query projection applied to it; layer 0 exact), chosen at layer
                                  l-1's start so that the fetch runs while l-1 computes (with
                                  okv_engine_params.ahead_after_attention: after l-1's attention) */
};

/* How the selections of several rows of one step become one (sparse mode). */
enum okv_merge {
    OKV_MERGE_AUTO = 0,   /* rank where a step selects with its own rows (a verify step with verify_inline; the
                             inline selections of layer-ahead and the oracle when the step has drafted rows),
                             share where drafted rows predict the next step's blocks (lookahead) */
    OKV_MERGE_SHARE,      /* half of the selection to the first row's own top blocks, the rest by the rows'
                             maximum score */
    OKV_MERGE_RANK,       /* each row's own top blocks taken by rank in turn (the rows' firsts, then their
                             seconds, ...), duplicates skipped */
};

/* "auto", "share" or "rank" */
const char *okv_merge_name(enum okv_merge m);

struct okv_engine_params {
    int block_size;        /* tokens per KV block; default 16 */
    int kv_slots;          /* device group slots; 0: sized from max_seqs and max_ctx */
    int max_seqs;          /* sequences the tiers are sized for; default 1 */
    int max_ctx;           /* context length to serve; 0: the model's */
    int max_batch_tokens;  /* rows of one forward; default 512 */
    /* sparse mode (OasisKV): kv_budget > 0 */
    int kv_budget;         /* tokens of sink + window + selected blocks per (sequence, layer, KV head); 0: dense */
    int sink_blocks;       /* default 1 */
    int window_blocks;     /* local window, including the block being filled; default 4 */
    int dense_layers;      /* the first N layers select every block */
    enum okv_predict predict;
    enum okv_merge merge;  /* a selection made with several rows. By rank the rows' lookups each keep their best
                              blocks, where the half share lets high-scoring rows crowd out the others': chainlong1's
                              chain_long at 4K with n-gram drafts and verify_inline, 9 / 15 / 17 / 17 of 32 at
                              budgets 256-2048 against 2 / 2 / 4 (dense 18); as predictions from drafted rows on
                              SmolLM2's free text the share is closer to dense at 256 (KL 0.028 against 0.031) and
                              rank at 1024 (0.003 against 0.004), rank fetching a third less; as verify_inline's
                              rule there, 0.034 against 0.030 at 256, 0.0028 against 0.0030 at 1024
                              (bench/ACCURACY.md).
                              With residency on either side (the backends' select_install: okv_resid_item.by_rank).
                              Default OKV_MERGE_AUTO; OKV_LOOKAHEAD_MERGE=rank/share overrides */
    bool ahead_after_attention; /* layer-ahead: layer l's queries estimated after layer l-1's attention, from its
                                   input with that attention's output added (only l-1's MLP missing), and its
                                   blocks chosen there, so that their fetch runs behind l-1's MLP alone. The
                                   estimate at l-1's start misses l-1's attention, which on a shallow model is
                                   what carries a lookup's key: chainlong1 (2 layers) at 4K, budget 512, 17 of
                                   32 against 0 at the start (the oracle: 18; bench/ACCURACY.md). Default
                                   false; OKV_LA_MID=0/1 overrides (A/B runs) */
    bool predict_from_prompt;   /* the prompt's last token predicts the first decode step's blocks, like any
                                   other step. Default false: the first decode step selects with its own
                                   queries and waits for that selection (once per request), because the last
                                   prompt token's query is a poor guide to the first answer token's (a needle
                                   question: 8K context, budget 512, 0.75 -> 1.00 of dense, bench/ACCURACY.md) */
    bool verify_inline;    /* speculative decoding in sparse mode: a verify step (a sequence with drafted rows)
                              selects its blocks before each layer's attention with its own rows' queries,
                              instead of reading the set its previous step predicted. Those rows stand up to
                              k + 1 positions past the queries that predicted the set, and the token an accepted
                              draft's row writes is chosen from that stale set (run 10's chain at 4K, budget 1024:
                              lookahead with its draft 3/12, with n-gram drafts 2/12, no drafts 9/12, either
                              kind of draft with this 12/12; bench/ACCURACY.md). The prediction
                              still runs and prefetches, so the step fetches only what it missed, and waits for
                              that. Default false; OKV_VERIFY_INLINE=0/1 overrides (A/B runs) */
    bool verify_defer;     /* speculative decoding in sparse mode, greedy: when a verify step's drafted rows read
                              the set predicted before them (verify_inline off), the token the target chose itself
                              (the correction, or the bonus after every draft) comes from such a row, so the
                              decode loop drops it, keeps the accepted drafts, runs the last of them again as the
                              next step's first row, on a fresh prediction (okv_engine_seq_defer_own), and
                              drafts the dropped token again there first, for that row to verify. No wait, one
                              row recomputed; a step whose first draft is rejected is unchanged (its own token
                              comes from the first row, as without drafts). Run 10's chain at 4K, budget 1024:
                              lookahead + its draft 3/12 -> 11/12, n-gram drafts 2/12 -> 10/12 (no drafts 9/12,
                              verify_inline 12/12). Sampled requests (temperature > 0) are not affected.
                              Default false here; the oasiskv command (generate, serve, eval) turns it on
                              (--no-kv-verify-defer: off). OKV_VERIFY_DEFER=0/1 overrides both */
    int successor_blocks;  /* predictions: the blocks right after the best this many of each head's selection
                              replace its lowest-ranked entries (text read forward, e.g. a value copied out of a
                              needle, crosses into the next block); 0: the default, 1; < 0: off. The environment
                              variable OKV_SUCCESSOR_BLOCKS overrides it (experiments). bench/ACCURACY.md */
    bool track_recall;     /* also score each step with its true queries to measure prediction recall (of the
                              step-ahead prediction; with layer-ahead, of each layer's estimate from layer 1 on) */
    bool host_residency;   /* keep the residency maps on the host even when the backend can hold them
                              (tests and A/B runs; also OKV_DEVICE_RESID=0). Recall tracking and the
                              oracle always keep them on the host. */
    bool tight_device;     /* a sequence holds no more than its budget on the device: selection starts as soon
                              as the context passes sink + window (reading every block while they fit the
                              selection, exactly as dense) instead of running dense up to the budget. For
                              servers, where the device tier is shared; default false: the dense fast path */
    int host_blocks;       /* host-tier capacity in blocks; 0: max_seqs full contexts */
    float cache_factor;    /* device units per selected block (>= 1; default 1): with 2, a sequence keeps twice
                              its selection resident and a block that drops out and comes back is often still
                              there (HiSparse keeps top-2048 of a 4096-token buffer) */
    float sticky;          /* sticky selection (0: off; at most 0.5): a prediction selects k + sticky*k blocks and
                              keeps the best k - sticky*k plus, of the rest, those the device already holds
                              first, so that blocks near the cut do not displace resident ones of about the
                              same score: fewer fetches per step (not with lookahead's drafted rows).
                              OKV_STICKY overrides it (experiments). bench/ACCURACY.md */
    int key_code_bits;     /* sparse mode: 0 (default) scores blocks by Quest's bound from the min/max summaries;
                              1, 2 or 4: also keeps per-token key codes of that many bits a channel on the device
                              (2 bits: as many bytes again as the summaries, 1/16 of the KV) and scores blocks by
                              half their keys' max product as the codes see them and half Quest's bound
                              (backend.h; both backends) */
    bool prefix_caching;   /* full blocks are cached by a hash of their tokens and of the blocks before them,
                              and a sequence starting with cached blocks attaches them (okv_engine_prefix_attach)
                              instead of computing them; see include/oasiskv/kv.h. Dense: the group slots are
                              shared. Sparse: the host blocks are (with their summaries and key codes); the
                              attaching sequence gets its own group slots for the sinks and the local window,
                              copied from the host tier. Ignored in streaming mode */
    bool host_fp8;         /* sparse mode: the host tier holds K and V as FP8 E4M3 (backend.h's host_fp8): half
                              the host memory and half the PCIe bytes a fetch moves; the device tier keeps its
                              precision (bench/ACCURACY.md measures what the rounding costs) */
    bool dense_while_room; /* sparse mode: a sequence keeps every block on the device and reads them all (dense
                              attention, nothing selected or fetched) until the device tier runs short; then the
                              sequences holding the most blocks turn sparse, one at a time, giving back all but
                              their sinks and window (the host tier has every block). The device units of the
                              selection quotas that no sparse sequence holds serve as those blocks' slots
                              (kv.h: lending), so the room is the pool sparse serving sizes anyway. Needs a
                              backend with kv_move and the same quota in every layer (no dense_layers);
                              otherwise ignored. Off by default (eval and benchmarks of the sparse step) */
    size_t device_bytes_limit;   /* the device tier's byte budget (--kv-device-mb, --kv-pool-gb); 0: none.
                                    Dense: sizes the group slots; sparse: an error if the tier needs more */
    /* streaming (StreamingLLM-style bounded KV, for drafters): with kv_budget > 0,
     * attention reads the sink blocks and a window filling the rest of the budget;
     * blocks leaving the window are dropped (no host tier, no selection). */
    bool streaming;
};

/* Counters since creation (or the last reset). */
struct okv_engine_stats {
    int64_t steps;
    int64_t prefix_query_tokens; /* prompt tokens looked up in the prefix cache */
    int64_t prefix_hit_tokens;   /* of which found cached (attached, not computed) */
    int64_t units_fetched;       /* (block, KV head, layer) units copied host -> device */
    int64_t fetch_bytes;
    int64_t units_selected;      /* selected units read by attention */
    int64_t units_in_time;       /* of those, resident when the attention started */
    double stall_s;              /* time attention waited for fetches */
    int64_t demotions;           /* dense while room: sequences turned sparse */
    int64_t blocks_moved;        /* ... and blocks moved out of the quota chunks they claimed */
    int dense_phase_seqs;        /* ... sequences in their dense phase now (okv_engine_stats_get fills it) */
    /* host time of the steps (where a GPU step goes: with asynchronous kernels the host
     * issuing them is the bound when issue time nears the step time) */
    double host_issue_s;         /* from a step's start to its final device sync */
    double host_blocked_s;       /* of which blocked waiting for the device (the sampled tokens'
                                    copy, staging buffers' reuse): issue - blocked is host work */
    double host_sparse_s;        /* of which the sparse bookkeeping: selection launches and waits,
                                    residency, fetch issue, prediction merging */
    double host_lists_s;         /* of which building the attention block lists */
    double sync_wait_s;          /* waiting for the device at the end of the steps */
    int64_t inline_selections;   /* (sequence, step) selections chosen before attention with the step's own
                                    queries, not predicted: a sequence's first decode step, every step of the
                                    oracle, verify steps with verify_inline */
    int64_t recall_hits;         /* predicted units that the true queries also selected */
    int64_t recall_total;        /* units the true queries selected */
    size_t device_bytes;         /* device tier in use now (group slots, sparse quotas, summaries) */
    size_t device_bytes_peak;
    size_t device_bytes_capacity;
    size_t host_bytes;           /* host tier in use now */
    size_t host_bytes_peak;
    bool device_residency;       /* the residency maps live on the backend (select_install) */
};

/* Build an engine: converts the model's weights into the backend (the model may be
 * freed afterwards) and allocates the KV pool and scratch. The caller owns *out. */
enum okv_status okv_engine_create(const struct okv_model *m, okv_backend *be, const struct okv_engine_params *p,
                                  okv_engine **out);
void okv_engine_free(okv_engine *e);   /* NULL is fine; does not free the backend */

const struct okv_model_config *okv_engine_model_config(const okv_engine *e);
int okv_engine_max_ctx(const okv_engine *e);
int okv_engine_max_batch_tokens(const okv_engine *e);
okv_kv_cache *okv_engine_kv(okv_engine *e);
/* Bytes of the weights as the backend holds them. */
size_t okv_engine_weight_bytes(const okv_engine *e);

/* Admission accounting for schedulers. A request that will hold n_tokens tokens at
 * most (prompt + max new) needs okv_engine_blocks_needed(e, n_tokens) device-tier
 * blocks at its peak: all of its blocks when dense; sink + window + the prefill
 * working set + its selection budget when sparse. okv_engine_blocks_total is the
 * device tier's capacity in the same unit. A scheduler that admits requests while
 * the sum of their needs stays within the total never sees OKV_ERR_NO_KV_SPACE. */
int okv_engine_blocks_needed(const okv_engine *e, int n_tokens);
int okv_engine_blocks_total(const okv_engine *e);
int okv_engine_block_size(const okv_engine *e);

enum okv_status okv_engine_seq_create(okv_engine *e, int *seq);
/* Prefix caching (okv_engine_params.prefix_caching). okv_engine_prefix_attach: give a new, empty
 * sequence the cached blocks that begin tokens[0..n) (whole blocks, never the last token, whose
 * logits must be computed); returns the tokens attached (0 when caching is off, or when a sparse
 * engine has no device block free for the sinks and window), which the caller then does not
 * forward. okv_engine_prefix_register: cache the sequence's full blocks among its first
 * n tokens (tokens[0..n), committed) not cached yet; call it as the sequence grows. A sequence cannot
 * be truncated into its attached or registered blocks. */
bool okv_engine_prefix_caching(const okv_engine *e);
/* Sparse engines: the staging units a prefill chunk of seq needs (its blocks that left the device,
 * read layer by layer through the staging buffer; 0 for decode rows and dense engines), and the
 * units a step has. A scheduler keeps a step's prefill chunks within the capacity (several
 * sequences attached to a long cached prefix each start with such a need). */
int okv_engine_stage_need(const okv_engine *e, int seq);
int okv_engine_stage_capacity(const okv_engine *e);
int okv_engine_prefix_attach(okv_engine *e, int seq, const int32_t *tokens, int n);
void okv_engine_prefix_register(okv_engine *e, int seq, const int32_t *tokens, int n);
void okv_engine_seq_free(okv_engine *e, int seq);
/* Dense while room (okv_engine_params.dense_while_room): turn a dense-phase sequence sparse now
 * (what the engine does by itself when the device tier runs short; no-op otherwise), whether it
 * is in its dense phase, and how many are. */
enum okv_status okv_engine_seq_demote(okv_engine *e, int seq);
bool okv_engine_seq_dense_phase(const okv_engine *e, int seq);
int okv_engine_dense_phase_seqs(const okv_engine *e);
bool okv_engine_dense_while_room(const okv_engine *e);   /* in effect (params asked, backend and layout allow) */
int okv_engine_seq_len(const okv_engine *e, int seq);
/* Whether the decode loop should drop the token a sequence's last verify step chose itself
 * (okv_engine_params.verify_defer): the switch is on and that step's rows after the first read a
 * set predicted before they existed, so every row that could choose that token read a stale
 * selection. Callers apply it to greedy sequences that accepted at least one draft. */
bool okv_engine_seq_defer_own(const okv_engine *e, int seq);
/* Drop tokens past len (speculative rejection, or regenerating). In sparse mode the
 * cut must stay inside the local window: OKV_ERR_INVALID_ARG otherwise. */
enum okv_status okv_engine_seq_truncate(okv_engine *e, int seq, int len);

/* Benchmarks only: append n positions to a sequence without running the model, as
 * if a prompt had been prefilled. Dense: the KV left in the device tier is whatever
 * it held. Sparse: the host tier gets random keys and values (and summaries), the
 * blocks past the window leave the device; the sequence is then in decode phase
 * and its first step reads every block (through staging) and predicts. */
enum okv_status okv_engine_seq_fill_random(okv_engine *e, int seq, int n, uint64_t seed);

/* Sizing before creation: the bytes of one KV unit (one head's block, K and V) on a
 * backend (0 on failure), and the device tier an engine with these parameters
 * would allocate (an estimate within a few percent). */
size_t okv_engine_unit_bytes(okv_backend *be, const struct okv_model_config *c, int block_size);
/* Bytes of one unit in the host tier (fp8: one a K or V element; else the device unit's); 0 when
 * the backend cannot allocate a probe of the tier (message set). */
size_t okv_engine_host_unit_bytes(okv_backend *be, const struct okv_model_config *c, int block_size, bool fp8);
size_t okv_engine_estimate_device_bytes(const struct okv_model_config *c, size_t unit_bytes, const struct okv_engine_params *p);

void okv_engine_stats_get(const okv_engine *e, struct okv_engine_stats *out);
void okv_engine_stats_reset(okv_engine *e);
bool okv_engine_sparse(const okv_engine *e);
/* Sparse, and drafted rows take part in choosing blocks (lookahead prediction, or verify steps that select with
 * their own rows): a step without drafts then selects as `current` would, so an adaptive draft length keeps >= 1. */
bool okv_engine_drafts_select(const okv_engine *e);

struct okv_batch {
    int n_tokens;
    const int32_t *tokens;       /* [n_tokens] */
    const int32_t *seq;          /* [n_tokens] sequence of each row */
    const uint8_t *want_logits;  /* [n_tokens] 1: return this row's logits; 2: the same, but the row
                                  * is inside a prompt (prompt logprobs): it never ends the
                                  * prefill, and okv_engine_forward_sample refuses it */
    const uint8_t *is_draft;     /* [n_tokens] 1: a drafted lookahead token; NULL: none */
};

/* Run one forward pass. logits receives vocab floats per row with want_logits set,
 * in row order. A sequence's prefill ends with the first forward whose last row of
 * that sequence wants logits; from then on (sparse mode, context past the budget)
 * each step selects the blocks of the next one. OKV_ERR_NO_KV_SPACE when the pool cannot take the new tokens,
 * OKV_ERR_CONTEXT when a sequence would pass max_ctx; the state is unchanged then. */
enum okv_status okv_engine_forward(okv_engine *e, const struct okv_batch *b, float *logits);

/* Append n tokens to one sequence in forwards of at most chunk rows (<= 0: the
 * engine's max batch); logits receives the last token's row. On error the chunks
 * already run stay in the sequence. */
enum okv_status okv_engine_prefill(okv_engine *e, int seq, const int32_t *tokens, int n, int chunk, float *logits);

/* As okv_engine_forward, but the rows that want logits are sampled on the backend
 * (no logits cross to the host unless logits is not NULL): params[i] and u[i] (a
 * uniform number in [0, 1) from the sequence's generator; see okv_sample_u) for the
 * i-th such row, its token in tokens[i]. */
enum okv_status okv_engine_forward_sample(okv_engine *e, const struct okv_batch *b, const struct okv_sampling *params,
                                          const double *u, int32_t *tokens, float *logits);

/* As okv_engine_forward_sample, but only the logit rows listed in copy_rows (n_copy indices
 * among the step's logit rows) cross to the host, into logits in that order: for requests
 * sampled or scored on the host (logit adjustments, log-probabilities) in a batch whose
 * other rows are sampled on the backend. */
enum okv_status okv_engine_forward_sample_rows(okv_engine *e, const struct okv_batch *b, const struct okv_sampling *params,
                                               const double *u, int32_t *tokens, const int32_t *copy_rows, int n_copy,
                                               float *logits);

/* Overlapped decoding: okv_engine_forward_queue runs a step as okv_engine_forward_sample
 * does, but returns once the step is queued on the backend, so that the host prepares
 * the next step while the device computes this one. A row t with prev[t] >= 0 (prev may
 * be NULL) takes as its token the id sampled for logit row prev[t] of the step queued
 * last (okv_engine_forward calls in between do not count), which need not have reached
 * the host (b->tokens[t] is ignored). A step without logit rows is queued and collected
 * like any other (with no ids). At most
 * two steps are queued and not collected: okv_engine_collect waits for the older one and
 * gives its ids (*n_ids of them, in logit-row order). The engine's lengths advance when a
 * step is queued; a failed queue leaves the state as it was. okv_engine_can_queue: whether
 * the backend overlaps steps (otherwise okv_engine_forward_queue is refused). */
bool okv_engine_can_queue(const okv_engine *e);
enum okv_status okv_engine_forward_queue(okv_engine *e, const struct okv_batch *b, const int32_t *prev,
                                         const struct okv_sampling *params, const double *u);
enum okv_status okv_engine_collect(okv_engine *e, int32_t *ids, int *n_ids);
/* The same with logit rows: okv_engine_forward_queue_rows also copies the n_copy logit rows
 * listed in copy_rows (indices among the step's logit rows; their values before sampling) to
 * the host, and okv_engine_collect_rows gives them (n_copy x vocab floats into rows, in that
 * order) with the ids; okv_engine_collect_n_rows says how many the step to be collected next
 * copies (rows NULL: they are dropped). */
enum okv_status okv_engine_forward_queue_rows(okv_engine *e, const struct okv_batch *b, const int32_t *prev,
                                              const struct okv_sampling *params, const double *u, const int32_t *copy_rows,
                                              int n_copy);
int okv_engine_collect_n_rows(const okv_engine *e);
enum okv_status okv_engine_collect_rows(okv_engine *e, int32_t *ids, int *n_ids, float *rows);
/* steps queued and not collected yet (0, 1 or 2) */
int okv_engine_queued(const okv_engine *e);

#ifdef __cplusplus
}
#endif
#endif
