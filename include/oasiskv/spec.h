/* Speculative decoding: drafters that propose lookahead tokens, the verification
 * of their drafts against the target model's distribution, and the statistics of
 * that verification (vLLM's definitions).
 *
 * A drafter sees the accepted history of one sequence (prompt + accepted tokens),
 * proposes up to k tokens that may follow it, and is told how many of them the
 * target accepted so it can roll its own state back. The generation loop
 * (okv_generate with okv_gen_params.drafter) runs one target forward over
 * [last accepted token, d1..dk] per step and calls okv_spec_verify on its logits.
 *
 * Drafters:
 *   ngram        prompt lookup: the tokens that followed the most recent earlier
 *                occurrence of the history's last n tokens (n from 3 down to 1).
 *   model:PATH   a smaller model with the same vocabulary, on its own engine with a
 *                streaming (sink + window) KV so that it never reads the whole context.
 *   self         the target's own weights on a second engine with a streaming KV
 *                (MagicDec-style self-speculation).
 *
 * A drafter serves one sequence at a time and is driven by one thread. */
#ifndef OASISKV_SPEC_H
#define OASISKV_SPEC_H

#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "oasiskv/sampling.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most draft tokens per step (okv_gen_params.spec_tokens). */
#define OKV_SPEC_MAX_TOKENS 32

/* Verification counters, as vLLM defines them. */
struct okv_spec_stats {
    int64_t drafts;                  /* verify steps that had >= 1 draft token */
    int64_t draft_tokens;            /* draft tokens verified */
    int64_t accepted_tokens;         /* of those, accepted */
    double acceptance_rate;          /* accepted_tokens / draft_tokens (0 when none) */
    double mean_acceptance_length;   /* 1 + (accepted_tokens - deferred) / drafts: tokens per verify step (1 when none) */
    int64_t pos_proposed[OKV_SPEC_MAX_TOKENS];   /* [i]: steps with a draft at position i (0-based) */
    int64_t pos_accepted[OKV_SPEC_MAX_TOKENS];   /* [i]: steps whose draft at position i was accepted */
    double draft_s;                  /* time spent in the drafter */
    int64_t deferred;                /* verify steps whose own token was dropped: it came from a row that read
                                        a stale predicted selection (okv_engine_seq_defer_own) */
};

/* Fill acceptance_rate and mean_acceptance_length from the counters. */
void okv_spec_stats_finish(struct okv_spec_stats *s);

typedef struct okv_drafter okv_drafter;

/* A drafter's function table; ctx is the drafter's own state. */
struct okv_drafter_i {
    const char *name;
    /* Propose up to k (>= 1) tokens to follow hist[0..n_hist) (prompt + accepted
     * tokens). Write them to tokens[0..*n_out) (*n_out may be 0). *probs: NULL when
     * each draft was a deterministic choice (point masses), else the distribution
     * each draft was sampled from, [*n_out][vocab] floats owned by the drafter and
     * valid until its next call. s and rng: the generation's sampling parameters and
     * the drafter's own generator. */
    enum okv_status (*propose)(void *ctx, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                               struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out);
    /* The first n_accepted tokens of the last proposal were accepted; the history
     * then goes on with one token of the target's. NULL: nothing to roll back. */
    void (*accept)(void *ctx, int n_accepted);
    /* End the current sequence and free what it holds (KV). NULL: stateless. */
    void (*reset)(void *ctx);
    /* The drafter's engine, if it runs one (tests read its KV counters). NULL: none. */
    okv_engine *(*engine)(void *ctx);
    void (*free)(void *ctx);
};

/* Wrap a function table and its state (custom drafters, tests). okv_drafter_free
 * calls iface->free(ctx). The caller owns *out. */
enum okv_status okv_drafter_create_custom(const struct okv_drafter_i *iface, void *ctx, okv_drafter **out);

struct okv_drafter_params {
    int kv_budget;          /* model drafters: streaming KV tokens (sink + window); default 256 */
    int block_size;         /* model drafters: KV block size; default 16 */
    int sink_blocks;        /* model drafters: default 1 */
    int max_ctx;            /* model drafters: positions to serve (the target's context); 0: the draft model's */
    int max_batch_tokens;   /* model drafters: prefill chunk; default 256 */
    int ngram_max;          /* ngram: longest suffix tried; default 3 */
    int ngram_min;          /* ngram: shortest suffix tried; default 1 */
};

/* Build a drafter from its name: "ngram", "self" or "model:PATH". target is the
 * target model (borrowed for the call: "self" copies its weights into the drafter's
 * engine, "model:" checks the vocabulary against it); be runs the drafter's engine
 * and must outlive the drafter. p may be NULL (defaults). The caller owns *out. */
enum okv_status okv_drafter_create(const char *spec, const struct okv_model *target, okv_backend *be,
                                   const struct okv_drafter_params *p, okv_drafter **out);
/* Prompt lookup (n-gram) drafter. */
enum okv_status okv_drafter_ngram_create(const struct okv_drafter_params *p, okv_drafter **out);
/* Model drafter over draft's weights (borrowed for the call) on a new streaming engine
 * on be. draft must have target_vocab tokens (OKV_ERR_INVALID_ARG otherwise). */
enum okv_status okv_drafter_model_create(const struct okv_model *draft, int target_vocab, okv_backend *be,
                                         const struct okv_drafter_params *p, okv_drafter **out);
void okv_drafter_free(okv_drafter *d);   /* NULL is fine */

const char *okv_drafter_name(const okv_drafter *d);
/* See struct okv_drafter_i. */
enum okv_status okv_drafter_propose(okv_drafter *d, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                                    struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out);
void okv_drafter_accept(okv_drafter *d, int n_accepted);
void okv_drafter_reset(okv_drafter *d);
okv_engine *okv_drafter_engine(okv_drafter *d);   /* NULL when the drafter runs no engine */

/* Verify k drafts against the target. logits: [k + 1][vocab] rows of the target's
 * forward over [last token, d1..dk] (row i is the distribution after d1..di).
 * q: the drafter's distributions [k][vocab], or NULL for point masses on the drafts.
 * Greedy (temperature <= 0): the longest prefix where the target's argmax equals the
 * draft. Otherwise exact speculative rejection sampling: d_i is accepted with
 * probability min(1, p(d_i) / q(d_i)) where p is okv_sampling_probs of row i-1; on
 * rejection the next token is drawn from norm(max(0, p - q)); so the tokens follow
 * the target's sampling distribution. Returns the number accepted (0..k); *next is
 * the token after them (the correction, or the bonus token from row k).
 * scratch needs 2 * vocab floats. */
int okv_spec_verify(const float *logits, int vocab, const int32_t *drafts, const float *q, int k,
                    const struct okv_sampling *s, struct okv_rng *rng, float *scratch, int32_t *next);

/* Adaptive draft length (src/spec/spec_len.c): each step drafts the k in [0, k_max]
 * that maximizes the expected tokens a step over its cost, (1 - a^(k+1)) / (1 - a)
 * over T + k * (row + draft), where a is the running per-token acceptance of this
 * sequence (okv_spec_len) and T, row, draft the measured costs of the loop that runs
 * the target (okv_spec_cost: a least-squares line of forward seconds against rows,
 * and the drafter's seconds a token), both with exponential forgetting (~33 steps).
 * A weak draft (low a) or a costly one (a model drafter on a fast target) drafts
 * fewer tokens (none, but for a probe every few steps, when none pays); a good one
 * drafts up to k_max. */
struct okv_spec_len {
    int k_min, k_max;
    double trials, accepted;   /* forgetting sums of the drafts reached and accepted */
    int64_t steps;
    unsigned n_chosen;         /* choices at 1 and more (the dither's phase) */
    unsigned idle;             /* choices at 0 since the last probe */
};
#define OKV_SPEC_COST_WARM_ROWS 64
struct okv_spec_cost {
    double w, sx, sy, sxx, sxy;   /* forgetting sums of (rows, forward seconds) */
    double draft_n, draft_s;      /* forgetting sums of drafted tokens and their seconds */
    uint8_t seen[OKV_SPEC_COST_WARM_ROWS + 1];   /* forwards seen of each row count up to 64 (the first two of a
                                                    count are left out: a GPU's one-time costs of a new shape) */
    double rw[OKV_SPEC_COST_WARM_ROWS + 1], rs[OKV_SPEC_COST_WARM_ROWS + 1];   /* forgetting weight and seconds of
                                                    each row count's forwards: a GPU's step is not linear in its rows
                                                    (padded sizes, other kernels), so a count measured often enough
                                                    is priced by its own mean */
};
/* k_min: 0, or 1 where drafted rows also choose the blocks (okv_engine_drafts_select). */
void okv_spec_len_init(struct okv_spec_len *c, int k_min, int k_max);
/* A verify step drafted k tokens; the target accepted the first `accepted`. */
void okv_spec_len_observe(struct okv_spec_len *c, int k, int accepted);
double okv_spec_len_alpha(const struct okv_spec_len *c);   /* the running per-token acceptance */
void okv_spec_cost_init(struct okv_spec_cost *c);
/* A target forward of `rows` rows (all sequences of a batch) took `seconds`. */
void okv_spec_cost_forward(struct okv_spec_cost *c, int rows, double seconds);
/* Whether a forward of `rows` rows is one to measure: false for the first two of each row count up to
 * OKV_SPEC_COST_WARM_ROWS (counted here), whose time holds a backend's one-time costs of a new shape (kernels
 * loaded, graphs captured: an 8-row step took 52 ms once on an H100 where it then takes 0.7 ms). */
bool okv_spec_cost_settled(struct okv_spec_cost *c, int rows);
/* The drafter proposed `tokens` tokens in `seconds`. */
void okv_spec_cost_draft(struct okv_spec_cost *c, int tokens, double seconds);
/* The fitted line: a forward costs t0 + row * rows seconds (0, 0 before any forward). */
void okv_spec_cost_line(const struct okv_spec_cost *c, double *t0, double *row);
/* The length that maximizes tokens over cost, k_min..min(k_max, k_cap). base_rows: the
 * rows the step has without this sequence's drafts (1 for one sequence; in a batch,
 * every sequence's rows). others: the tokens the step yields for the other sequences
 * (0 for one sequence), which a draft row delays as well. */
int okv_spec_len_best(const struct okv_spec_len *c, const struct okv_spec_cost *cost, int base_rows, double others,
                      int k_cap);
/* okv_spec_len_best, dithered by one every few steps so that the cost line keeps two
 * row counts to fit, and at 0 a one-token probe every 8 to 64 steps (under 3% of the
 * time) so that the acceptance stays measured; use this one in a decode loop. A probe
 * that is due waits while probe_ok is false (in a batch: a step that drafts for no other
 * sequence, where one probe would send every row through the drafted steps' path). */
int okv_spec_len_choose(struct okv_spec_len *c, const struct okv_spec_cost *cost, int base_rows, double others,
                        int k_cap, bool probe_ok);

#ifdef __cplusplus
}
#endif
#endif
