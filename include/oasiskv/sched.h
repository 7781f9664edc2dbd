/* The scheduler: continuous batching of many requests over one engine.
 *
 * Requests wait in a first-come-first-served queue and run up to max_num_seqs at a
 * time. Each step builds ONE flat batch of at most max_num_batched_tokens rows: a
 * decode row for every running request that has a sampled token to feed, then
 * chunks of the prompts still being prefilled, oldest first. A request is admitted
 * only while the device-tier blocks that the running requests need at their peak
 * (okv_engine_blocks_needed of prompt + max_tokens) stay within
 * okv_engine_blocks_total; should a forward still fail with OKV_ERR_NO_KV_SPACE, the
 * youngest running request is preempted by recompute: its sequence is freed and it
 * goes back to the head of the queue with its generated tokens appended to its
 * prompt (its stream continues where it was). Finished and cancelled requests free
 * all their KV at once.
 *
 * Thread model: one thread drives the engine, either the scheduler's own engine
 * thread (okv_sched_start) or a caller looping on okv_sched_step. okv_sched_submit,
 * okv_sched_cancel, okv_sched_cancel_all and okv_sched_metrics may be called from
 * any thread at any time (a mutex and a condition variable guard the queue). The
 * per-request callbacks run on the driving thread: they must be quick, must not
 * block on the scheduler and must not call back into it. */
#ifndef OASISKV_SCHED_H
#define OASISKV_SCHED_H

#include "oasiskv/engine.h"
#include "oasiskv/sampling.h"
#include "oasiskv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_sched okv_sched;

typedef struct okv_drafter okv_drafter;

struct okv_sched_params {
    int max_num_seqs;             /* requests running at once; default 16 */
    int max_num_batched_tokens;   /* rows of one step; default (and at most) the engine's max batch */
    /* Speculative decoding: a drafter that keeps no per-sequence state (n-gram prompt
     * lookup), borrowed; NULL: none. Each decode row becomes [token, d1..dk] with
     * is_draft set on the drafts, verified with okv_spec_verify. */
    okv_drafter *drafter;
    int spec_tokens;              /* k; default 4 */
    bool spec_adaptive;           /* each request drafts 0..k a step (okv_spec_len: its acceptance, the step's cost) */
    /* Prompt logprobs: prompt rows whose logits one step brings to the host, at most
     * (each is vocab floats; default 256: 128 MB of a 128K vocabulary); a longer prompt
     * spreads over several steps. */
    int max_prompt_logit_rows;
    /* true: each step runs to its end before the next is prepared. Otherwise (when the
     * engine can, and without a drafter) decode steps overlap: the next step is queued,
     * its rows taking the tokens the device just sampled, before the host collects and
     * streams those tokens (okv_engine_forward_queue); a request that stops is seen one
     * step late, and that step's row of it is dropped. */
    bool sync_steps;
    /* vLLM's --scheduling-policy priority: requests wait in the order of (okv_sched_request.priority,
     * arrival), lower first, and the one last in that order is preempted when the KV pool runs out
     * (otherwise first come, first served, and the youngest is preempted). */
    bool priority_policy;
};

enum okv_finish {
    OKV_FINISH_STOP = 0,   /* end-of-generation token or stop string */
    OKV_FINISH_LENGTH,     /* max_tokens (or the context) reached */
    OKV_FINISH_ABORT,      /* cancelled, or the scheduler stopped */
    OKV_FINISH_ERROR,      /* the engine failed on this request */
    OKV_FINISH_COUNT
};
/* "stop", "length", "abort", "error". */
const char *okv_finish_str(enum okv_finish f);

struct okv_sched_result {
    enum okv_finish reason;
    int prompt_tokens;        /* of the request as submitted */
    int completion_tokens;    /* generated tokens (an end-of-generation token is not counted) */
    int n_preemptions;
    int cached_tokens;        /* prompt tokens read from the prefix cache when it was first admitted, not computed */
    double ttft_s;            /* submit to first token; 0 if none */
    double e2e_s;             /* submit to finish */
    const char *error;        /* OKV_FINISH_ERROR: what failed; valid during the callback only */
};

/* A generated token and the new text it completes: always whole UTF-8 characters,
 * with text that may start a stop string held back (len may be 0). token is -1 for
 * the last flush of held-back text at the end. text is valid during the call only. */
typedef void (*okv_sched_token_fn)(void *user, int32_t token, const char *text, size_t len);
/* Called exactly once per submitted request; the scheduler does not touch user after it. */
typedef void (*okv_sched_finish_fn)(void *user, const struct okv_sched_result *r);
/* A token's log-probability (struct okv_token_logprob, sampling.h): the prompt's tokens in
 * order first (with prompt_logprobs; the first one with logprob NAN), then each generated
 * token's just before its on_token call (with logprobs). lp is valid during the call only. */
typedef void (*okv_sched_logprob_fn)(void *user, const struct okv_token_logprob *lp);

struct okv_sched_request {
    const int32_t *prompt;        /* [n_prompt], copied */
    int n_prompt;
    int max_tokens;               /* > 0; capped to what the context length leaves */
    struct okv_sampling sampling; /* seeded per request: same seed, same tokens */
    const char *const *stop;      /* stop strings, copied; not part of the text */
    int n_stop;
    bool ignore_eos;
    /* vLLM's include_stop_str_in_output: the stop string that ended the text stays in it (and the
     * end-of-generation or stop token's text: empty for a special token unless keep_special_tokens);
     * keep_special_tokens (vLLM's skip_special_tokens false): special tokens' text is part of the text */
    bool include_stop_str_in_output, keep_special_tokens;
    int priority;                 /* with okv_sched_params.priority_policy: lower is served first (vLLM's) */
    /* vLLM's sampling extras: penalties, min_tokens and logit_bias (copied), applied on the
     * host (such a request's steps bring its logits there and it is not drafted for); with
     * sampling.min_p > 0 it samples on the host too. stop_token_ids (copied) end the
     * generation as end-of-generation does (not part of the text), ignore_eos or not. */
    struct okv_logit_adjust adjust;
    const int32_t *stop_token_ids;
    int n_stop_token_ids;
    okv_sched_token_fn on_token;  /* may be NULL */
    okv_sched_finish_fn on_finish;/* may be NULL */
    void *user;
    /* Log-probabilities (the OpenAI API's logprobs / echo): of each generated token with
     * logprobs, of each prompt token with prompt_logprobs, with the top_logprobs
     * (0..OKV_MAX_TOP_LOGPROBS) most likely alternatives, through on_logprob. A step that
     * serves such a request brings its logits to the host and samples there (the same
     * draws as on the backend). */
    bool logprobs, prompt_logprobs;
    int top_logprobs;
    okv_sched_logprob_fn on_logprob;
    /* Structured output (the OpenAI API's response_format {"type": "json_object"}): every
     * token keeps the text a prefix of a JSON object (include/oasiskv/structured.h) and the
     * generation ends once the object is complete; sampled on the host, not drafted for.
     * Needs the scheduler's tokenizer. */
    bool json_object;
    /* ... or a JSON value following this JSON schema (response_format json_schema, vLLM's guided_json):
     * its text (json_schema_len bytes), compiled at submission (okv_json_schema_compile: a schema
     * outside the supported subset fails the submission, naming the keyword); NULL: none */
    const char *json_schema;
    size_t json_schema_len;
    /* ... or one of these strings, the whole text (vLLM's guided_choice; copied at submission) */
    const char *const *choices;
    int n_choices;
    /* ... or text that fully matches this regular expression (vLLM's guided_regex; regex_len bytes, compiled at
     * submission: okv_json_regex_compile); NULL: none */
    const char *regex;
    size_t regex_len;
    /* ... or text that is a sentence of this GBNF grammar, start rule root (vLLM's guided_grammar; grammar_len bytes,
     * compiled at submission: okv_json_grammar_compile); NULL: none */
    const char *grammar;
    size_t grammar_len;
};

/* Histogram with fixed upper bounds (Prometheus "le"); counts are per bucket, not
 * cumulative, the last one being +Inf. */
#define OKV_HIST_MAX_BOUNDS 24
struct okv_hist {
    int n_bounds;
    const double *bounds;          /* static */
    uint64_t counts[OKV_HIST_MAX_BOUNDS + 1];
    uint64_t count;
    double sum;
};

struct okv_sched_metrics {
    int num_running, num_waiting;
    int kv_blocks_used, kv_blocks_total;
    double kv_usage;                     /* used / total device-tier blocks, 0..1 */
    uint64_t prompt_tokens_total;        /* prompt tokens of admitted requests (first admission) */
    uint64_t generation_tokens_total;
    uint64_t num_preemptions_total;
    uint64_t steps_total;
    uint64_t steps_overlapped_total;     /* of which queued behind the step before (overlapped decoding) */
    uint64_t steps_host_rows_total;      /* of which sampled on the backend but for some requests' rows, whose logits
                                            came to the host (logit adjustments, min_p, log-probabilities) */
    uint64_t requests_finished[OKV_FINISH_COUNT];
    struct okv_hist ttft, itl, e2e;      /* seconds */
    uint64_t spec_drafts_total;          /* verify steps with >= 1 draft (vLLM's num_drafts) */
    uint64_t spec_draft_tokens_total;
    uint64_t spec_accepted_tokens_total;
    uint64_t spec_deferred_total;        /* verify steps whose own token was dropped (verify_defer) */
    uint64_t host_sampled_rows_total;    /* rows sampled on the host without drafts (adjustments, min_p, structure) */
    double host_sampling_seconds;        /* the engine thread's time on them (masks, adjustments, draws; on a pool) */
    uint64_t structured_masks_total;     /* structured output: masks applied */
    uint64_t structured_walks_total;     /* masks made by walking the vocabulary's trie once a step (the rest: cached) */
    struct okv_engine_stats engine;      /* the engine's counters after the last step */
};

/* Build a scheduler over an engine (borrowed: the caller frees it after the
 * scheduler, and drives it no other way meanwhile). tok may be NULL (no text, no
 * stop strings, no end-of-generation detection). The caller owns *out. */
enum okv_status okv_sched_create(okv_engine *e, const okv_tokenizer *tok, const struct okv_sched_params *p,
                                 okv_sched **out);
/* Stop the engine thread if running, finish every request left with
 * OKV_FINISH_ABORT, free. NULL is fine. */
void okv_sched_free(okv_sched *s);

/* Whether decode steps overlap (okv_sched_params.sync_steps off, no drafter, and an engine
 * that can queue steps). */
bool okv_sched_overlaps(const okv_sched *s);

/* Start the engine thread that runs steps while there is work. */
enum okv_status okv_sched_start(okv_sched *s);
/* Stop and join the engine thread; requests left are finished with OKV_FINISH_ABORT. */
void okv_sched_stop(okv_sched *s);

/* Queue a request; *id names it for okv_sched_cancel. Fails (and calls no
 * callback) on a bad request: empty prompt, max_tokens <= 0, bad sampling
 * parameters, a prompt that leaves no room in the context (OKV_ERR_CONTEXT), a
 * request whose KV could never fit the pool (OKV_ERR_NO_KV_SPACE), or a stopped
 * scheduler. */
enum okv_status okv_sched_submit(okv_sched *s, const struct okv_sched_request *r, uint64_t *id);
/* Cancel a request (unknown or finished ids are ignored): it finishes with
 * OKV_FINISH_ABORT and frees its KV at the next step. */
void okv_sched_cancel(okv_sched *s, uint64_t id);
void okv_sched_cancel_all(okv_sched *s);

/* Run one step on the calling thread (only when okv_sched_start was not called):
 * take submissions and cancellations, admit, one forward, sample. *busy is set
 * while requests remain. Errors of single requests finish them; the return value
 * is OKV_OK unless the scheduler itself cannot go on. */
enum okv_status okv_sched_step(okv_sched *s, bool *busy);

/* A consistent snapshot of the counters. */
void okv_sched_metrics(okv_sched *s, struct okv_sched_metrics *m);

#ifdef __cplusplus
}
#endif
#endif
