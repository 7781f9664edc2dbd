/* Continuous batching over one engine (see include/oasiskv/sched.h).
 *
 * Ownership of the lists: `incoming`, `all` and the metrics snapshot are guarded by
 * s->mu and touched by any thread; `waiting` and `running` belong to the driving
 * thread alone. A request lives from okv_sched_submit until the driving thread has
 * called its on_finish and unlinked it from `all` (under the mutex), so that
 * okv_sched_cancel, which finds it in `all` under the mutex, never sees it freed. */
#include "oasiskv/sched.h"
#include "oasiskv/structured.h"
#include "oasiskv/spec.h"
#include "engine/stopstr.h"
#include "util/threadpool.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MASK_SLOTS 1024   /* structured output: masks kept by state */
#define HOST_THREADS 16   /* at most, sampling rows on the host */
#define PROBE_EVERY 16    /* adaptive drafts: where no request drafts, probes wait for every 16th step */
#define GATE_MIN_GAP 8    /* adaptive drafts, overlapped: the mode that measured lower tried for GATE_TRIAL steps
                             at least GATE_MIN_GAP decode steps apart, and further apart in time the further behind it
                             is, so that its trials cost at most GATE_COST of the throughput (gate_due) */
#define GATE_TRIAL 3
#define GATE_COST 0.02
#define GATE_FORGET 0.7   /* per observation: a trial mostly replaces its mode's rate */
#define GATE_BUCKETS 8    /* the rates kept apart by the batch's decoding requests: 1, 2-3, 4-7, ..., 128+ (a request's
                             rate falls as the batch grows, so rates measured at other sizes do not compare) */

/* vLLM's histogram buckets, so that dashboards built for it read ours. */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                     1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_bounds[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
#define NB(a) ((int)(sizeof(a) / sizeof((a)[0])))

struct req {
    uint64_t id;
    struct req *next_all, *prev_all;   /* s->all, under s->mu */
    struct req *next, *prev;           /* incoming or waiting */
    atomic_int cancelled;

    int32_t *toks;          /* [cap] prompt, then generated tokens */
    int n_toks, cap;
    int n_prompt;           /* as submitted */
    int n_gen, max_tokens;
    int n_computed;         /* tokens whose KV is in the sequence */
    int seq;                /* engine sequence while running, else -1 */
    int need;               /* device-tier blocks at the peak */
    bool counted_prompt;
    int cached;             /* prompt tokens the prefix cache gave at the first admission */
    int n_preempt;

    struct okv_sampling sampling;
    struct okv_rng rng;
    struct okv_rng draft_rng;
    int32_t drafts[OKV_SPEC_MAX_TOKENS];   /* this step's drafts (speculative decoding) */
    int n_drafts;
    int n_lead;             /* of them, a carried own token (1) or none (0) */
    struct okv_spec_len spec_len;   /* spec_adaptive: its running acceptance */
    bool has_carry;         /* carry: the own token its last verify step dropped (verify_defer), the */
    int32_t carry;          /* first draft of its next step, whose fresh first row verifies it */
    bool ignore_eos;
    bool include_stop;      /* the stop string (or the stop token's text) ends the text */
    bool keep_special;      /* special tokens' text is part of the text */
    char **stop;
    int n_stop;
    /* sampling extras (okv_sched_request.adjust; bias arrays owned) and stop_token_ids */
    struct okv_logit_adjust adjust;
    int32_t *stop_ids;
    int n_stop_ids;
    int32_t *mask_ids;      /* masked while n_gen < min_tokens: the end-of-generation ids, then stop_ids */
    int n_mask;
    bool host_sample;       /* its logits come to the host and it samples there (adjust, min_p, json) */
    bool json;              /* structured output: its tokens keep js a prefix of a JSON object (or of schema's) */
    struct okv_json_state js;
    okv_json_schema *schema;
    struct schema_slot *shared;   /* schema is the scheduler's shared one of this slot (else its own) */
    pthread_mutex_t *shared_mu;

    struct okv_detok detok;
    char *text;             /* generated text so far */
    size_t text_len, text_cap, emitted;

    double t_arrival, t_first, t_last;
    int priority;           /* okv_sched_request.priority (with the priority policy: lower first) */
    okv_sched_token_fn on_token;
    okv_sched_finish_fn on_finish;
    void *user;

    /* log-probabilities: of generated tokens (lp_gen), of the prompt's (lp_prompt: the
     * rows of positions < n_prompt - 1 want logits only; plp_next is the next such
     * position not reported yet, a preempted request's recompute resumes there) */
    bool lp_gen, lp_prompt;
    int lp_top, plp_next;
    okv_sched_logprob_fn on_logprob;

    bool pending;           /* its newest token is the queued step's sample, not in toks yet */
    int q_idx;              /* its logit row in that step, while pending */
};

/* Compiled schemas shared by the requests that give the same one (the same JSON schema text, choices, regex or
 * grammar; a grammar's states, numbered as its requests reach them, are then shared too):
 * one schema id, so that the mask cache serves them all (a server whose requests share a schema walks its states
 * once, not once a request). A slot is reused, least recently used first, only when no request holds it. */
#define SCHEMA_SLOTS 16
struct schema_slot {
    char *key;                /* kind byte, then the text (choices separated by NUL); NULL: free */
    size_t key_len;
    okv_json_schema *sch;
    int refs;                 /* requests holding it */
    uint64_t used;            /* the clock at its last taking */
};

struct okv_sched {
    okv_engine *e;
    pthread_mutex_t schema_mu;   /* the shared schemas (a request's end gives its slot back under it) */
    struct schema_slot schemas[SCHEMA_SLOTS];
    uint64_t schema_clock;
    const okv_tokenizer *tok;
    okv_token_trie *trie;    /* the vocabulary's bytes, for structured output (built at the first such request, under mu) */
    okv_json_mask_cache *masks;   /* structured output's masks by state (with the trie; the engine thread uses it) */
    /* rows sampled on the host (logit adjustments, min_p, structured output, drafts' steps): their masks,
     * adjustments and draws run on a pool of threads (engine thread; made at the first step with two) */
    okv_threadpool *host_pool;
    bool host_pool_tried;
    int hs_workers;               /* scratch sets below (the pool's size) */
    float *hs_scratch;            /* [hs_workers][2 * vocab]: a row's adjusted logits, then the sampler's scratch */
    int *hs_counts;               /* [hs_workers][vocab] zeros: the adjustments' counts */
    const struct okv_json_state **mask_st;   /* [max_seqs] a step's structured states */
    struct hs_row { struct req *r; const float *lg; int i; } *hs_rows;   /* [max_seqs] this step's */
    int32_t *hs_id;               /* [max_seqs] by logit row i: the id drawn, -1: structured output ends the request */
    _Atomic int hs_next;          /* the next of hs_rows to take */
    int hs_n;
    int max_seqs, max_batch, vocab, max_ctx;
    int max_lp_rows;         /* prompt rows a step brings logits of (okv_sched_params.max_prompt_logit_rows) */
    bool prio;               /* okv_sched_params.priority_policy: waiting by (priority, arrival); the lowest preempted */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct req *incoming_head, *incoming_tail;   /* under mu */
    int n_incoming;
    struct req *all;                             /* under mu */
    bool cancel_pending;                         /* under mu */
    bool stopping, thread_running;
    pthread_t thread;
    uint64_t next_id;
    struct okv_sched_metrics m;                  /* under mu */

    /* driving thread only */
    struct req *wait_head, *wait_tail;
    int n_waiting;
    struct req **running;    /* [max_seqs], oldest admitted first */
    int n_running;
    int need_running;        /* sum of need over running */
    bool admit_hold;         /* after a preemption: admit nothing until a request finishes */

    /* step scratch */
    int32_t *b_tok, *b_seq;
    uint8_t *b_want;
    struct req **b_req;      /* [max_seqs] requests whose last row wants logits, in row order */
    struct req **b_all;      /* [max_seqs] requests in the batch, in row order */
    int *b_take;             /* [max_seqs] rows of each */
    okv_drafter *drafter;
    int spec_k;
    bool spec_adaptive;
    struct okv_spec_cost spec_cost;   /* spec_adaptive: the measured forward and draft costs */
    int last_rows;                    /* spec_adaptive: the rows of the last timed step */
    int last_decoders;                /* ... and its requests that sampled a token */
    unsigned spec_steps;              /* batches built (adaptive drafts' probe clock) */
    /* adaptive drafts with overlapped decoding: whether a step drafts at all (draft_now), from the tokens a
     * decoding request gets a second in the steps that drafted (mode 1: drained first, logits to the host)
     * and in those that did not (mode 0: overlapped, sampled on the device); sums with forgetting */
    bool draft_now;
    double gate_tok[2][GATE_BUCKETS], gate_time[2][GATE_BUCKETS], gate_n[2][GATE_BUCKETS];
    unsigned gate_steps;              /* decode steps since the other mode's last trial */
    double gate_trial_t;              /* when that trial ended */
    int gate_trial;                   /* steps of the other mode left in its trial */
    struct { bool valid, collected; int mode, decoders; double t; uint64_t gen0, tokens; } gate_prev;
    bool gate_after_prompt;           /* the step issued last had prompt rows */
    bool b_prefill;                   /* this step has prompt rows (its time is no decode step's: not timed) */
    uint8_t *b_draft;        /* [max_batch] is_draft of each row */
    int *b_first;            /* [max_seqs] first logit row of each logit request */
    int *b_row1;             /* [max_seqs] batch row of each logit request's first logit row */
    int *b_lidx;             /* [max_batch] logit row of each batch row that wants logits */
    float *v_logits;         /* [max_batch][vocab] logits of a step with drafts (host verification) */
    float *v_scratch;        /* [2 * vocab]; a host-sampled request's adjusted logits in the second half */
    int *a_counts;           /* [vocab] zeros: okv_logit_adjust_apply's scratch */
    int32_t *eog_ids;        /* the tokenizer's end-of-generation ids (min_tokens masks them) */
    int n_eog;
    int v_rows_cap;
    struct okv_sampling *b_params;   /* [max_seqs] sampling of each logit row */
    double *b_u;             /* [max_seqs] its uniform number */
    int32_t *b_copy;         /* [max_seqs] logit rows copied to the host in a mixed step */
    int32_t *b_ids;          /* [max_seqs] its sampled token (on the backend) */
    struct okv_rng *b_rng;   /* [max_seqs] generator states before the draw (restored on retry) */

    /* overlapped decoding (okv_engine_forward_queue; okv_sched_params.sync_steps) */
    bool ovl;                /* decode steps may be queued */
    bool all_rows;           /* OKV_SCHED_ALL_ROWS=1: a step with any host-sampled request brings every logit row
                                to the host and samples them all there (the path before mixed steps; tests) */
    bool inflight;           /* a queued step's ids are not collected yet */
    int q_n;                 /* its logit rows */
    struct req **q_req;      /* [max_batch] the request of each (NULL: finished since) */
    struct req **q_req2;     /* [max_batch] the next step's, while it is queued */
    int32_t *q_cp, *q_cp2;   /* [max_batch] of each row of those steps, its place among the step's logit rows copied
                                to the host (requests with logprobs), or -1 */
    float *q_logits;         /* [q_logits_rows][vocab] a collected step's copied rows */
    int q_logits_rows;
    int32_t *q_prev;         /* [max_batch] the queued step's logit row each row takes its token from */
};

const char *okv_finish_str(enum okv_finish f)
{
    switch (f) {
    case OKV_FINISH_STOP: return "stop";
    case OKV_FINISH_LENGTH: return "length";
    case OKV_FINISH_ABORT: return "abort";
    case OKV_FINISH_ERROR: return "error";
    default: return "?";
    }
}

static void hist_init(struct okv_hist *h, const double *b, int n)
{
    memset(h, 0, sizeof *h);
    h->bounds = b;
    h->n_bounds = n;
}

static void hist_add(struct okv_hist *h, double v)
{
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

static enum okv_status request_schema(okv_sched *s, const struct okv_sched_request *rq, struct req *r);

static void req_free(struct req *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_stop; i++)
        okv_free(r->stop[i]);
    okv_free(r->stop);
    okv_free((void *)r->adjust.bias_id);
    okv_free((void *)r->adjust.bias);
    okv_free((void *)r->adjust.allowed_id);
    if (r->shared) {   /* a shared schema: given back */
        pthread_mutex_lock(r->shared_mu);
        r->shared->refs--;
        pthread_mutex_unlock(r->shared_mu);
        r->schema = NULL;
    }
    okv_free((void *)r->adjust.bad_ids);
    okv_free((void *)r->adjust.bad_len);
    okv_free(r->stop_ids);
    okv_free(r->mask_ids);
    okv_free(r->toks);
    okv_free(r->text);
    okv_json_schema_free(r->schema);
    okv_free(r);
}

enum okv_status okv_sched_create(okv_engine *e, const okv_tokenizer *tok, const struct okv_sched_params *p,
                                 okv_sched **out)
{
    *out = NULL;
    struct okv_sched_params prm = p ? *p : (struct okv_sched_params){0};
    const int eng_batch = okv_engine_max_batch_tokens(e);
    if (prm.max_num_seqs <= 0)
        prm.max_num_seqs = 16;
    if (prm.max_num_batched_tokens <= 0 || prm.max_num_batched_tokens > eng_batch)
        prm.max_num_batched_tokens = eng_batch;
    struct okv_sched *s = okv_calloc(1, sizeof *s, OKV_TAG_SERVER);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->schema_mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->e = e;
    s->tok = tok;
    s->max_seqs = prm.max_num_seqs;
    s->max_batch = prm.max_num_batched_tokens;
    s->max_lp_rows = prm.max_prompt_logit_rows > 0 ? prm.max_prompt_logit_rows : 256;
    s->prio = prm.priority_policy;
    s->vocab = okv_engine_model_config(e)->vocab_size;
    s->max_ctx = okv_engine_max_ctx(e);
    s->next_id = 1;
    const size_t ns = (size_t)s->max_seqs, nb = (size_t)s->max_batch;
    s->running = okv_calloc(ns, sizeof *s->running, OKV_TAG_SERVER);
    s->b_req = okv_calloc(ns, sizeof *s->b_req, OKV_TAG_SERVER);
    s->hs_rows = okv_calloc(ns, sizeof *s->hs_rows, OKV_TAG_SERVER);
    s->hs_id = okv_calloc(ns, sizeof *s->hs_id, OKV_TAG_SERVER);
    s->mask_st = okv_calloc(ns, sizeof *s->mask_st, OKV_TAG_SERVER);
    s->b_all = okv_calloc(ns, sizeof *s->b_all, OKV_TAG_SERVER);
    s->b_take = okv_calloc(ns, sizeof *s->b_take, OKV_TAG_SERVER);
    s->b_tok = okv_calloc(nb, sizeof *s->b_tok, OKV_TAG_SERVER);
    s->b_seq = okv_calloc(nb, sizeof *s->b_seq, OKV_TAG_SERVER);
    s->b_want = okv_calloc(nb, 1, OKV_TAG_SERVER);
    s->drafter = prm.drafter;
    s->spec_k = prm.spec_tokens > 0 ? prm.spec_tokens : 4;
    if (s->spec_k > OKV_SPEC_MAX_TOKENS)
        s->spec_k = OKV_SPEC_MAX_TOKENS;
    s->spec_adaptive = prm.spec_adaptive;
    okv_spec_cost_init(&s->spec_cost);
    /* logit rows: one per request, or 1 + k per decoding request with drafts */
    s->b_params = okv_calloc(nb, sizeof *s->b_params, OKV_TAG_SERVER);
    s->b_u = okv_calloc(nb, sizeof *s->b_u, OKV_TAG_SERVER);
    s->b_copy = okv_calloc(nb, sizeof *s->b_copy, OKV_TAG_SERVER);
    s->b_ids = okv_calloc(nb, sizeof *s->b_ids, OKV_TAG_SERVER);
    s->b_rng = okv_calloc(ns > nb ? ns : nb, sizeof *s->b_rng, OKV_TAG_SERVER);
    s->b_draft = okv_calloc(nb, 1, OKV_TAG_SERVER);
    s->b_first = okv_calloc(ns, sizeof *s->b_first, OKV_TAG_SERVER);
    s->b_row1 = okv_calloc(ns, sizeof *s->b_row1, OKV_TAG_SERVER);
    s->b_lidx = okv_calloc(nb, sizeof *s->b_lidx, OKV_TAG_SERVER);
    s->v_scratch = okv_malloc(sizeof(float) * 2 * (size_t)s->vocab, OKV_TAG_SERVER);
    s->a_counts = okv_calloc((size_t)s->vocab, sizeof *s->a_counts, OKV_TAG_SERVER);
    if (tok) {
        const int k = okv_tokenizer_eog_ids(tok, s->vocab, NULL);
        if ((s->eog_ids = okv_calloc((size_t)k + 1, sizeof *s->eog_ids, OKV_TAG_SERVER)))
            s->n_eog = okv_tokenizer_eog_ids(tok, s->vocab, s->eog_ids);
    }
    s->q_req = okv_calloc(nb, sizeof *s->q_req, OKV_TAG_SERVER);
    s->q_req2 = okv_calloc(nb, sizeof *s->q_req2, OKV_TAG_SERVER);
    s->q_cp = okv_calloc(nb, sizeof *s->q_cp, OKV_TAG_SERVER);
    s->q_cp2 = okv_calloc(nb, sizeof *s->q_cp2, OKV_TAG_SERVER);
    s->q_prev = okv_calloc(nb, sizeof *s->q_prev, OKV_TAG_SERVER);
    /* with a drafter, steps overlap only where the adaptive length decides, step by step, that the batch drafts
     * nothing (a drafted step needs its requests' last tokens: it lets the queued step land first) */
    s->ovl = !prm.sync_steps && (!prm.drafter || prm.spec_adaptive) && okv_engine_can_queue(e);
    s->draft_now = true;
    {
        const char *ar = getenv("OKV_SCHED_ALL_ROWS");
        s->all_rows = ar && !strcmp(ar, "1");
    }
    if (!s->running || !s->b_req || !s->b_all || !s->b_take || !s->b_tok || !s->b_seq || !s->b_want || !s->b_params ||
        !s->b_u || !s->b_copy || !s->b_ids || !s->b_rng || !s->b_draft || !s->b_first || !s->b_row1 || !s->b_lidx ||
        !s->v_scratch || !s->a_counts || (tok && !s->eog_ids) || !s->q_req || !s->q_req2 || !s->q_cp || !s->q_cp2 || !s->q_prev ||
        !s->hs_rows || !s->hs_id || !s->mask_st) {
        okv_sched_free(s);
        return okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory");
    }
    hist_init(&s->m.ttft, ttft_bounds, NB(ttft_bounds));
    hist_init(&s->m.itl, itl_bounds, NB(itl_bounds));
    hist_init(&s->m.e2e, e2e_bounds, NB(e2e_bounds));
    s->m.kv_blocks_total = okv_engine_blocks_total(e);
    *out = s;
    return OKV_OK;
}

/* ---- text and finishing (driving thread) ---- */

static bool text_append(struct req *r, const char *p, size_t n)
{
    if (r->text_len + n + 1 > r->text_cap) {
        size_t cap = r->text_cap ? r->text_cap : 256;
        while (cap < r->text_len + n + 1)
            cap *= 2;
        char *t = okv_realloc(r->text, cap, OKV_TAG_SERVER);
        if (!t)
            return false;
        r->text = t;
        r->text_cap = cap;
    }
    memcpy(r->text + r->text_len, p, n);
    r->text_len += n;
    r->text[r->text_len] = 0;
    return true;
}

/* Free the request's KV, tell its owner, unlink and free it. The request must be
 * out of the waiting queue; it may still be in the running set (removed here). */
static void finish(struct okv_sched *s, struct req *r, enum okv_finish reason, const char *err)
{
    /* a queued step's row of it is dropped when collected; its sequence may go now: the
     * device runs that step before any later step that reuses the sequence's blocks */
    for (int i = 0; i < s->q_n; i++)
        if (s->q_req[i] == r)
            s->q_req[i] = NULL;
    if (r->seq >= 0) {
        okv_engine_seq_free(s->e, r->seq);
        r->seq = -1;
        for (int i = 0; i < s->n_running; i++)
            if (s->running[i] == r) {
                memmove(s->running + i, s->running + i + 1, sizeof *s->running * (size_t)(s->n_running - i - 1));
                s->n_running--;
                s->need_running -= r->need;
                s->admit_hold = false;
                break;
            }
    }
    if (reason == OKV_FINISH_LENGTH && s->tok) {
        char piece[64];
        int w = okv_detok_flush(&r->detok, piece, sizeof piece);
        if (w > 0)
            text_append(r, piece, (size_t)w);
    }
    if ((reason == OKV_FINISH_STOP || reason == OKV_FINISH_LENGTH) && r->on_token && r->text_len > r->emitted)
        r->on_token(r->user, -1, r->text + r->emitted, r->text_len - r->emitted);
    r->emitted = r->text_len;
    double now = okv_now();
    struct okv_sched_result res = {
        .reason = reason, .prompt_tokens = r->n_prompt, .completion_tokens = r->n_gen,
        .n_preemptions = r->n_preempt, .cached_tokens = r->cached, .ttft_s = r->t_first > 0 ? r->t_first - r->t_arrival : 0,
        .e2e_s = now - r->t_arrival, .error = err,
    };
    if (r->on_finish)
        r->on_finish(r->user, &res);
    pthread_mutex_lock(&s->mu);
    if (r->prev_all)
        r->prev_all->next_all = r->next_all;
    else
        s->all = r->next_all;
    if (r->next_all)
        r->next_all->prev_all = r->prev_all;
    s->m.requests_finished[reason]++;
    if (reason == OKV_FINISH_STOP || reason == OKV_FINISH_LENGTH)
        hist_add(&s->m.e2e, res.e2e_s);
    pthread_mutex_unlock(&s->mu);
    req_free(r);
}

static void wait_unlink(struct okv_sched *s, struct req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        s->wait_head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        s->wait_tail = r->prev;
    r->next = r->prev = NULL;
    s->n_waiting--;
}

static void wait_push_front(struct okv_sched *s, struct req *r)
{
    r->prev = NULL;
    r->next = s->wait_head;
    if (s->wait_head)
        s->wait_head->prev = r;
    else
        s->wait_tail = r;
    s->wait_head = r;
    s->n_waiting++;
}

/* r comes before q in the priority policy's order: (priority, arrival) */
static bool prio_before(const struct req *r, const struct req *q)
{
    return r->priority < q->priority || (r->priority == q->priority && r->t_arrival < q->t_arrival);
}

/* The priority policy: r into the waiting queue at its place (after the requests that come before it). */
static void wait_insert(struct okv_sched *s, struct req *r)
{
    struct req *after = s->wait_tail;
    while (after && prio_before(r, after))
        after = after->prev;
    r->prev = after;
    r->next = after ? after->next : s->wait_head;
    if (r->next)
        r->next->prev = r;
    else
        s->wait_tail = r;
    if (after)
        after->next = r;
    else
        s->wait_head = r;
    s->n_waiting++;
}

/* Recompute preemption: drop the youngest running request's KV and queue it first (the priority policy: the one
 * that comes last in its order, queued at its place). */
static void preempt_youngest(struct okv_sched *s)
{
    if (s->prio) {   /* the victim to the end of running */
        int v = s->n_running - 1;
        for (int i = s->n_running - 2; i >= 0; i--)
            if (prio_before(s->running[v], s->running[i]))
                v = i;
        struct req *victim = s->running[v];
        memmove(s->running + v, s->running + v + 1, sizeof *s->running * (size_t)(s->n_running - v - 1));
        s->running[s->n_running - 1] = victim;
    }
    struct req *r = s->running[--s->n_running];
    /* step() lands a queued step before it preempts; were one queued, its token of r would
     * be dropped here and r recomputed without it */
    for (int i = 0; i < s->q_n; i++)
        if (s->q_req[i] == r)
            s->q_req[i] = NULL;
    r->pending = false;
    s->need_running -= r->need;
    okv_engine_seq_free(s->e, r->seq);
    r->seq = -1;
    r->n_computed = 0;
    r->n_preempt++;
    if (s->prio)
        wait_insert(s, r);
    else
        wait_push_front(s, r);
    s->admit_hold = true;
    pthread_mutex_lock(&s->mu);
    s->m.num_preemptions_total++;
    pthread_mutex_unlock(&s->mu);
    OKV_LOG_INFO("scheduler: preempted request %llu (%d tokens to recompute)", (unsigned long long)r->id, r->n_toks);
}

static void update_snapshot(struct okv_sched *s)
{
    int used = okv_kv_used_slots(okv_engine_kv(s->e));
    struct okv_engine_stats es;
    okv_engine_stats_get(s->e, &es);
    pthread_mutex_lock(&s->mu);
    s->m.engine = es;
    s->m.num_running = s->n_running;
    s->m.num_waiting = s->n_waiting + s->n_incoming;
    s->m.kv_blocks_used = used;
    /* dense while room borrows the idle selection quotas too: the group slots are full then */
    s->m.kv_usage = s->m.kv_blocks_total > 0 ? (used < s->m.kv_blocks_total ? (double)used / s->m.kv_blocks_total : 1.0) : 0;
    pthread_mutex_unlock(&s->mu);
}

/* Take new submissions into the waiting queue and finish cancelled requests. */
static void take_queue(struct okv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    struct req *in = s->incoming_head;
    int n_in = s->n_incoming;
    s->incoming_head = s->incoming_tail = NULL;
    s->n_incoming = 0;
    bool cancels = s->cancel_pending;
    s->cancel_pending = false;
    if (in && s->prio) {   /* each at its place */
        for (struct req *r = in, *nx; r; r = nx) {
            nx = r->next;
            r->next = r->prev = NULL;
            wait_insert(s, r);
        }
    } else if (in) {
        in->prev = s->wait_tail;
        if (s->wait_tail)
            s->wait_tail->next = in;
        else
            s->wait_head = in;
        struct req *t = in;
        while (t->next)
            t = t->next;
        s->wait_tail = t;
        s->n_waiting += n_in;
    }
    pthread_mutex_unlock(&s->mu);
    if (!cancels)
        return;
    for (struct req *r = s->wait_head, *nx; r; r = nx) {
        nx = r->next;
        if (atomic_load(&r->cancelled)) {
            wait_unlink(s, r);
            finish(s, r, OKV_FINISH_ABORT, NULL);
        }
    }
    for (int i = s->n_running - 1; i >= 0; i--)
        if (i < s->n_running && atomic_load(&s->running[i]->cancelled))
            finish(s, s->running[i], OKV_FINISH_ABORT, NULL);
}

static void admit(struct okv_sched *s)
{
    const int total = okv_engine_blocks_total(s->e);
    while (s->wait_head && s->n_running < s->max_seqs) {
        struct req *r = s->wait_head;
        if (s->admit_hold && s->n_running > 0)
            break;
        if (s->n_running > 0 && s->need_running + r->need > total)
            break;   /* FCFS: the head waits, and so does everyone behind it */
        int seq;
        enum okv_status st = okv_engine_seq_create(s->e, &seq);
        if (st != OKV_OK) {
            wait_unlink(s, r);
            finish(s, r, OKV_FINISH_ERROR, okv_last_error());
            continue;
        }
        wait_unlink(s, r);
        r->seq = seq;
        /* prefix caching (dense engines): the blocks cached for the same leading tokens are
         * attached, not computed; not for prompt log-probabilities, whose rows need logits */
        r->n_computed = r->lp_prompt ? 0 : okv_engine_prefix_attach(s->e, seq, r->toks, r->n_toks);
        s->running[s->n_running++] = r;
        s->need_running += r->need;
        s->admit_hold = false;
        if (!r->counted_prompt) {
            r->counted_prompt = true;
            r->cached = r->n_computed < r->n_prompt ? r->n_computed : r->n_prompt;
            pthread_mutex_lock(&s->mu);
            s->m.prompt_tokens_total += (uint64_t)r->n_prompt;
            pthread_mutex_unlock(&s->mu);
        }
    }
}

/* Fill the step's batch: decode rows first (every running request with exactly
 * one token to feed), then prefill chunks in admission order. Returns the rows. */
static int build_batch(struct okv_sched *s, int *n_logit_reqs, int *n_reqs)
{
    int n = 0, nl = 0, nr = 0;
    bool step_drafts = false;   /* a request drafts in this step (adaptive drafts: probes may join it) */
    s->spec_steps++;
    int lp_rows = s->max_lp_rows;   /* rows of prompt logprobs left this step */
    s->b_prefill = false;
    /* sparse prefills whose older blocks left the device read them through the staging buffer:
     * chunks past its capacity wait for a later step (sequences attached to a long cached prefix
     * each start that way) */
    int stage_left = okv_engine_stage_capacity(s->e);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->n_running && n < s->max_batch; i++) {
            struct req *r = s->running[i];
            /* a pending request's next row is the token the queued step samples: a row that
             * takes it on the device (overlapped decoding), unless that token is its last */
            const int avail = r->n_toks + (r->pending ? 1 : 0);
            const int todo = avail - r->n_computed;   /* rows not computed yet */
            bool decode = todo == 1 && r->n_computed > 0;
            if (todo <= 0 || decode != (pass == 0))
                continue;
            s->b_prefill |= !decode;
            if (r->pending && (r->n_gen + 1 >= r->max_tokens || r->n_toks + 1 >= s->max_ctx))
                continue;
            const int stage = okv_engine_stage_need(s->e, r->seq);
            if (stage > stage_left)
                continue;
            int take = todo < s->max_batch - n ? todo : s->max_batch - n;
            if (r->lp_prompt && !decode && r->n_computed < r->n_prompt - 1) {
                /* each of these rows brings vocab logits to the host: a bounded number a step */
                const int lp_end = r->n_prompt - 1, lp_from = r->n_computed > r->plp_next ? r->n_computed : r->plp_next;
                const int want = r->n_computed + take < lp_end ? r->n_computed + take - lp_from : lp_end - lp_from;
                if (want > lp_rows) {
                    if (lp_rows == 0)
                        continue;
                    take = lp_from + lp_rows - r->n_computed;
                }
            }
            stage_left -= stage;
            for (int k = 0; k < take; k++) {
                const int pos = r->n_computed + k;
                const bool queued = r->pending && pos == r->n_toks;
                s->b_tok[n + k] = queued ? 0 : r->toks[pos];
                s->q_prev[n + k] = queued ? r->q_idx : -1;
                s->b_seq[n + k] = r->seq;
                /* prompt logprobs: row pos predicts prompt token pos + 1 */
                s->b_want[n + k] = r->lp_prompt && pos >= r->plp_next && pos < r->n_prompt - 1 ? 2 : 0;
                lp_rows -= s->b_want[n + k] == 2;
                s->b_draft[n + k] = 0;
            }
            n += take;
            const int prev_drafts = r->n_drafts;
            r->n_drafts = 0;
            if (decode && s->drafter && !r->host_sample && s->draft_now && !r->pending) {
                /* draft what may follow, within max_tokens, the context and the batch */
                int k = s->spec_k, room = r->max_tokens - r->n_gen - 1, ctx_room = s->max_ctx - r->n_toks - 1;
                k = k < room ? k : room;
                k = k < ctx_room ? k : ctx_room;
                k = k < s->max_batch - n ? k : s->max_batch - n;
                const float *q = NULL;
                const int lead = k > 0 && r->has_carry;
                if (lead)   /* toks has room: a token is still to come */
                    r->drafts[0] = r->toks[r->n_toks] = r->carry;
                r->has_carry = false;
                if (s->spec_adaptive && k > lead) {
                    /* the step's rows without its drafts (the last step's, less its drafts then), and the
                     * tokens it yields for the other requests (one each at least, as many as the last step's) */
                    const int base = s->last_rows - prev_drafts > 1 + lead ? s->last_rows - prev_drafts : 1 + lead;
                    const double others = s->last_decoders > 1 ? (double)(s->last_decoders - 1) : 0.0;
                    /* a probe (one draft where none pays) sends the whole step through the drafted steps'
                     * path (logits to the host, no overlap): probes run on steps that draft anyway, or on
                     * every PROBE_EVERY-th decode step, where all the requests due probe together */
                    const bool probe_ok = step_drafts || s->ovl || s->spec_steps % PROBE_EVERY == 0;
                    k = lead + okv_spec_len_choose(&r->spec_len, &s->spec_cost, base, others, k - lead, probe_ok);
                }
                const double td = s->spec_adaptive ? okv_now() : 0.0;
                if (k > lead && okv_drafter_propose(s->drafter, r->toks, r->n_toks + lead, k - lead, &r->sampling,
                                                    &r->draft_rng, r->drafts + lead, &q, &r->n_drafts) != OKV_OK)
                    r->n_drafts = 0;
                if (s->spec_adaptive)
                    okv_spec_cost_draft(&s->spec_cost, r->n_drafts, okv_now() - td);
                r->n_drafts += lead;   /* 0 before, unless proposed */
                step_drafts |= r->n_drafts > 0;
                r->n_lead = lead;
                for (int d = 0; d < r->n_drafts; d++) {
                    s->b_tok[n] = r->drafts[d];
                    s->b_seq[n] = r->seq;
                    s->b_want[n] = 1;
                    s->b_draft[n] = 1;
                    n++;
                }
                take += r->n_drafts;
            }
            s->b_take[nr] = take;
            s->b_all[nr++] = r;
            if (r->n_computed + take == avail + r->n_drafts) {
                s->b_want[n - 1 - r->n_drafts] = 1;
                s->b_row1[nl] = n - 1 - r->n_drafts;
                s->b_req[nl++] = r;
            }
        }
    *n_logit_reqs = nl;
    *n_reqs = nr;
    return n;
}

/* A token's log-probability from its logits row, to the request's owner. */
static void report_logprob(struct okv_sched *s, struct req *r, const float *lg, int32_t token, bool prompt)
{
    struct okv_token_logprob lp;
    okv_token_logprob(lg, s->vocab, token, r->lp_top, &lp);
    lp.prompt = prompt;
    r->on_logprob(r->user, &lp);
}

/* The prompt's first token, which nothing predicts: an entry without a log-probability. */
static void report_first_prompt(struct req *r)
{
    struct okv_token_logprob lp = {.prompt = true, .token = r->toks[0], .logprob = NAN};
    r->plp_next = 1;
    r->on_logprob(r->user, &lp);
}

/* One sampled token of request r: stream it, and finish r when it is done. lg: the
 * logits row it was drawn from when the step brought logits to the host (NULL: none). */
/* One pool worker of host_sample_rows: rows taken in turn, with scratch set w. */
static void hs_worker(void *ctx, int64_t w)
{
    okv_sched *s = ctx;
    float *adj = s->hs_scratch + (size_t)w * 2 * (size_t)s->vocab, *scratch = adj + s->vocab;
    int *counts = s->hs_counts + (size_t)w * (size_t)s->vocab;
    for (int j; (j = atomic_fetch_add(&s->hs_next, 1)) < s->hs_n;) {
        struct req *r = s->hs_rows[j].r;
        const float *ls = s->hs_rows[j].lg;
        const bool adjust = okv_logit_adjust_active(&r->adjust);
        int32_t id = 0;
        if (adjust || r->json) {   /* on a copy: log-probabilities stay the model's */
            memcpy(adj, ls, sizeof(float) * (size_t)s->vocab);
            if (adjust)
                okv_logit_adjust_apply(&r->adjust, adj, s->vocab, r->toks, r->n_prompt, r->n_gen, r->mask_ids, r->n_mask,
                                       counts);
            /* structured output: only tokens that keep the JSON going, end of generation once it is complete;
             * nothing left (complete with ignore_eos, or min_tokens holding the end back): the request ends */
            if (r->json) {
                const int n_eog = r->ignore_eos ? 0 : s->n_eog;
                int allowed = okv_json_mask_lookup(s->masks, &r->js, n_eog, adj, s->vocab);
                if (allowed < 0)   /* its slot taken by another state of this step: walked here */
                    allowed = okv_json_mask(&r->js, s->trie, s->eog_ids, n_eog, adj, s->vocab);
                if (allowed == 0)
                    id = -1;
            }
            ls = adj;
        }
        s->hs_id[s->hs_rows[j].i] = id < 0 ? -1 : okv_sample(ls, s->vocab, &r->sampling, &r->rng, scratch);
    }
}

/* The draws of a step's rows sampled on the host without drafts (logit adjustments, structured output's
 * masks, the sampler; each request's own random numbers, so the same draws in any order), into
 * hs_id[i] by logit row i, on the host pool: first the structured masks this step lacks, each distinct
 * state walked once (okv_json_mask_cache_fill), then the rows, taken in turn by the pool's workers. */
static void host_sample_rows(okv_sched *s, int nl, bool host, bool mixed)
{
    const double t0 = okv_now();
    int nh = 0, n_json = 0;
    for (int i = 0, k = 0; i < nl; i++) {   /* each row's logits: as the collecting loop finds them */
        struct req *r = s->b_req[i];
        const bool copied = host || (mixed && (r->lp_gen || r->host_sample));
        const int li = host ? s->b_first[i] : copied ? k++ : -1;
        if ((host || (mixed && r->host_sample)) && r->n_drafts == 0) {
            s->hs_rows[nh++] = (struct hs_row){r, s->v_logits + (size_t)li * (size_t)s->vocab, i};
            n_json += r->json;
        }
    }
    if (nh == 0)
        return;
    if (nh > 1 && !s->host_pool_tried) {   /* the pool, at the first step with two such rows */
        s->host_pool_tried = true;
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        const char *ev = getenv("OKV_HOST_THREADS");   /* for measuring: 1 samples on the engine thread alone */
        if (ev && atol(ev) > 0)
            nc = atol(ev);
        const int nt = nc < 1 ? 1 : nc > HOST_THREADS ? HOST_THREADS : (int)nc;
        float *sc = nt > 1 ? okv_malloc(sizeof(float) * 2 * (size_t)s->vocab * (size_t)nt, OKV_TAG_SERVER) : NULL;
        int *cn = sc ? okv_calloc((size_t)s->vocab * (size_t)nt, sizeof(int), OKV_TAG_SERVER) : NULL;
        if (cn && okv_threadpool_create(nt, &s->host_pool) == OKV_OK) {
            s->hs_scratch = sc;
            s->hs_counts = cn;
            s->hs_workers = nt;
        } else {   /* one worker: the engine thread, with the scheduler's own scratch */
            okv_free(sc);
            okv_free(cn);
            s->host_pool = NULL;
        }
    }
    if (!s->host_pool) {
        s->hs_scratch = s->v_scratch;   /* [2 * vocab] */
        s->hs_counts = s->a_counts;
        s->hs_workers = 1;
    }
    int walks = 0;
    if (n_json && s->masks)
        for (int eos = 0; eos < 2; eos++) {
            int ns = 0;
            for (int j = 0; j < nh; j++)
                if (s->hs_rows[j].r->json && s->hs_rows[j].r->ignore_eos == !eos)
                    s->mask_st[ns++] = &s->hs_rows[j].r->js;
            walks += okv_json_mask_cache_fill(s->masks, s->mask_st, ns, s->trie, s->eog_ids, eos ? s->n_eog : 0,
                                              s->host_pool);
        }
    s->hs_n = nh;
    atomic_store(&s->hs_next, 0);
    okv_parallel_for(s->host_pool, nh < s->hs_workers ? nh : s->hs_workers, hs_worker, s);
    pthread_mutex_lock(&s->mu);
    s->m.host_sampled_rows_total += (uint64_t)nh;
    s->m.host_sampling_seconds += okv_now() - t0;
    s->m.structured_masks_total += (uint64_t)n_json;
    s->m.structured_walks_total += (uint64_t)walks;
    pthread_mutex_unlock(&s->mu);
}

static void on_sampled(struct okv_sched *s, struct req *r, int32_t id, const float *lg)
{
    double now = okv_now();
    if (r->lp_gen && lg)   /* an end-of-generation token too (as vLLM: scoring relies on it) */
        report_logprob(s, r, lg, id, false);
    bool stop_id = s->tok && !r->ignore_eos && okv_tokenizer_is_eog(s->tok, id);
    for (int i = 0; i < r->n_stop_ids && !stop_id; i++)
        stop_id = id == r->stop_ids[i];
    if (stop_id) {
        if (r->include_stop && s->tok) {   /* its text too (empty for a special token unless they are kept) */
            char piece[256];
            const int w = okv_detok_push(s->tok, &r->detok, id, !r->keep_special, piece, sizeof piece);
            if (w > 0 && !text_append(r, piece, (size_t)w)) {
                finish(s, r, OKV_FINISH_ERROR, "scheduler: out of memory");
                return;
            }
        }
        finish(s, r, OKV_FINISH_STOP, NULL);
        return;
    }
    r->toks[r->n_toks++] = id;
    r->n_gen++;
    pthread_mutex_lock(&s->mu);
    s->m.generation_tokens_total++;
    if (r->n_gen == 1)
        hist_add(&s->m.ttft, now - r->t_arrival);
    else
        hist_add(&s->m.itl, now - r->t_last);
    pthread_mutex_unlock(&s->mu);
    if (r->n_gen == 1)
        r->t_first = now;
    r->t_last = now;

    bool stop = false;
    size_t upto = r->text_len;
    if (s->tok) {
        char piece[256];
        int w = okv_detok_push(s->tok, &r->detok, id, !r->keep_special, piece, sizeof piece);
        if (w > 0 && !text_append(r, piece, (size_t)w)) {
            finish(s, r, OKV_FINISH_ERROR, "scheduler: out of memory");
            return;
        }
        /* stop strings count once more than min_tokens tokens exist (as vLLM) */
        const bool stop_ok = r->n_gen > r->adjust.min_tokens;
        size_t stop_len = 0;
        long at = stop_ok ? okv_stop_find(r->text ? r->text : "", r->text_len, r->emitted, (const char *const *)r->stop,
                                          r->n_stop, &stop_len)
                          : -1;
        if (at >= 0) {
            r->text_len = (size_t)at + (r->include_stop ? stop_len : 0);
            r->text[r->text_len] = 0;
            upto = r->text_len;
            stop = true;
        } else if (r->text && stop_ok) {
            upto = r->text_len - okv_stop_holdback(r->text, r->text_len, (const char *const *)r->stop, r->n_stop);
        }
    }
    if (upto < r->emitted)
        upto = r->emitted;
    if (r->on_token)
        r->on_token(r->user, id, r->text ? r->text + r->emitted : "", upto - r->emitted);
    r->emitted = upto;
    if (stop)
        finish(s, r, OKV_FINISH_STOP, NULL);
    else if (r->n_gen >= r->max_tokens || r->n_toks >= s->max_ctx)
        finish(s, r, OKV_FINISH_LENGTH, NULL);
}

/* ---- overlapped decoding ---- */

/* room for rows x vocab floats of logits in *buf (*cap rows now) */
static enum okv_status grow_rows(float **buf, int *cap, int rows, int vocab)
{
    if (rows <= *cap)
        return OKV_OK;
    float *v = okv_realloc(*buf, sizeof(float) * (size_t)rows * (size_t)vocab, OKV_TAG_SERVER);
    if (!v)
        return okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory for %d rows of logits on the host", rows);
    *buf = v;
    *cap = rows;
    return OKV_OK;
}

/* The tokens of a collected step: each request of its logit rows gets its own, as after a
 * step run to its end (a request gone since, NULL, is skipped). */
static void take_ids(struct okv_sched *s, struct req **list, const int32_t *cp, int n, const int32_t *ids)
{
    for (int i = 0; i < n; i++) {
        struct req *r = list[i];
        if (!r)
            continue;
        r->pending = false;
        /* may finish (and free) r; a request with logprobs reads them from its copied row */
        on_sampled(s, r, ids[i], cp[i] >= 0 ? s->q_logits + (size_t)cp[i] * (size_t)s->vocab : NULL);
    }
}

/* Collect the oldest queued step, whose logit rows belong to list[0..n) (cp: their copied
 * rows): hand each request its token, or finish them all with the engine's error. */
static void collect_step(struct okv_sched *s, struct req **list, const int32_t *cp, int n)
{
    int got = 0;
    /* always collected (the engine's queue and this one stay in step): the rows dropped if
     * there is no room for them (the buffer grew when the step was queued: not expected) */
    const bool room = grow_rows(&s->q_logits, &s->q_logits_rows, okv_engine_collect_n_rows(s->e), s->vocab) == OKV_OK;
    enum okv_status st = okv_engine_collect_rows(s->e, s->b_ids, &got, room ? s->q_logits : NULL);
    if (st == OKV_OK && !room)
        st = okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory for a queued step's logprobs rows");
    if (st == OKV_OK && got != n)
        st = okv_set_error(OKV_ERR_INTERNAL, "scheduler: the queued step gave %d ids for %d rows", got, n);
    if (st == OKV_OK) {
        take_ids(s, list, cp, n, s->b_ids);
        return;
    }
    char msg[256];
    snprintf(msg, sizeof msg, "engine: %s", okv_last_error());
    OKV_LOG_ERROR("scheduler: a queued step failed: %s", msg);
    for (int i = 0; i < n; i++) {
        struct req *r = list[i];
        if (r) {
            r->pending = false;
            finish(s, r, OKV_FINISH_ERROR, msg);
        }
    }
}

/* Collect the queued step and hand its tokens out. */
static void drain(struct okv_sched *s)
{
    if (!s->inflight)
        return;
    s->inflight = false;
    collect_step(s, s->q_req, s->q_cp, s->q_n);
    s->q_n = 0;
}

/* One step. With overlapped decoding the step is queued while the one before still runs
 * (its rows take that step's samples on the device: build_batch), and only then is the
 * one before collected and its tokens handed out, so that the host's work of a step (the
 * batch, the engine's lists and launches, streaming the tokens) overlaps the device's. A
 * step that needs logits on the host, or that cannot be queued, first lets the queued
 * one land. */
/* Adaptive drafts with overlapped decoding: whether this step drafts at all. The mode with the higher measured
 * rate (a decoding request's tokens a second) at the batch's size (GATE_BUCKETS: rates measured with 60 requests
 * say nothing of a batch of 3, where drafting pays more), the other one tried for GATE_TRIAL steps now and
 * then (gate_due); a mode not measured yet at that size is tried first (drafting first: it is what the server was asked
 * for). */
static int gate_bucket(int decoders)
{
    int b = 0;
    while (decoders > 1 && b < GATE_BUCKETS - 1) {
        decoders >>= 1;
        b++;
    }
    return b;
}

/* Whether the mode that measured lower is due a trial. A trial costs its GATE_TRIAL steps at the lower rate, and
 * a drafted step is long (session 43, H100, c64 of 4K prompts: 6-7 ms drafting 4-5 tokens a request against 1.1 ms
 * for one overlapped): trials every 24 steps spent ~45% of the time drafting, and adaptive gave 37,200 tok/s against
 * no drafts' 45,800. So trials are spaced in time: a share f of the time in the lower mode loses f x gap of the
 * throughput (gap = 1 - lower / higher), held to GATE_COST (f at most 30%, at least 3% so that a mode far behind is
 * still looked at every few hundred of its step times). */
static bool gate_due(const struct okv_sched *s, int b, int lo, double r_lo, double r_hi, double now)
{
    if (s->gate_steps < GATE_MIN_GAP)
        return false;
    const double gap = r_hi > 0.0 ? 1.0 - r_lo / r_hi : 0.0;
    double f = gap > 0.0 ? GATE_COST / gap : 0.3;
    f = f > 0.3 ? 0.3 : f < 0.03 ? 0.03 : f;
    const double step_lo = s->gate_n[lo][b] > 0.0 ? s->gate_time[lo][b] / s->gate_n[lo][b] : 0.0;
    return now - s->gate_trial_t >= GATE_TRIAL * step_lo * (1.0 / f - 1.0);
}

static bool gate_decide(struct okv_sched *s)
{
    const int decoders = s->n_running;   /* called only where no prompt is being computed: all of them decode */
    const int b = gate_bucket(decoders);
    if (s->gate_time[1][b] <= 0.0)
        return true;
    if (s->gate_time[0][b] <= 0.0)
        return false;
    const double r1 = s->gate_tok[1][b] / s->gate_time[1][b], r0 = s->gate_tok[0][b] / s->gate_time[0][b];
    const bool best = r1 > r0;
    const double now = okv_now();
    if (s->gate_trial > 0) {
        if (--s->gate_trial == 0)
            s->gate_trial_t = now;
        return !best;
    }
    s->gate_steps++;
    if (gate_due(s, b, !best, best ? r0 : r1, best ? r1 : r0, now)) {
        OKV_LOG_DEBUG("scheduler: %d decoding: drafted steps %.1f tokens/s a request (%.2f ms), overlapped steps without "
                      "drafts %.1f (%.2f ms); trying %s after %u steps",
                      decoders, r1, 1e3 * s->gate_time[1][b] / s->gate_n[1][b], r0,
                      1e3 * s->gate_time[0][b] / s->gate_n[0][b], best ? "no drafts" : "drafts", s->gate_steps);
        s->gate_steps = 0;
        s->gate_trial = GATE_TRIAL - 1;   /* (GATE_TRIAL > 1: the trial's last step stamps gate_trial_t) */
        return !best;
    }
    return best;
}

/* A decode step issued at t, in mode 1 where drafts were allowed (the gate's arm, whether or not a request
 * drafted): the step before it is measured from its issue to this one's (its tokens a decoding request over
 * that time: counted when the step was collected within its call, else one a request). A step with prompt rows
 * is not measured, nor the decode step before it (its time then holds the admission of new requests, or, queued
 * behind it, next to nothing), nor the decode step after it: overlapped, the step after a prompt step is issued
 * before that step lands, and the next issue waits for it, so its time holds the prompt's computation
 * (session 46, c64 of 4K prompts on an H100: overlapped steps without drafts measured at 2.0 ms against 1.1-1.4,
 * which flipped the gate to drafting). */
static void gate_issue(struct okv_sched *s, bool prefill, int mode, int decoders, double t, bool collected)
{
    if (s->gate_prev.valid && !prefill && t > s->gate_prev.t && s->gate_prev.decoders > 0) {
        const int m = s->gate_prev.mode;
        const uint64_t tok = s->gate_prev.tokens;
        const int b = gate_bucket(s->gate_prev.decoders);
        s->gate_tok[m][b] = s->gate_tok[m][b] * GATE_FORGET + (double)tok / (double)s->gate_prev.decoders;
        s->gate_time[m][b] = s->gate_time[m][b] * GATE_FORGET + (t - s->gate_prev.t);
        s->gate_n[m][b] = s->gate_n[m][b] * GATE_FORGET + 1.0;
    }
    s->gate_prev.valid = !prefill && decoders > 0 && !s->gate_after_prompt;
    s->gate_after_prompt = prefill;
    s->gate_prev.collected = collected;
    s->gate_prev.mode = mode;
    s->gate_prev.decoders = decoders;
    s->gate_prev.t = t;
    pthread_mutex_lock(&s->mu);
    s->gate_prev.gen0 = s->m.generation_tokens_total;
    pthread_mutex_unlock(&s->mu);
    s->gate_prev.tokens = (uint64_t)decoders;
}

static enum okv_status step(struct okv_sched *s, bool *busy)
{
    take_queue(s);
    admit(s);
    const bool gate = s->drafter && s->spec_adaptive && s->ovl;
    if (gate) {   /* the step drafts: its requests' last tokens first (the queued step lands) */
        /* not while a prompt is being computed: such a step is not measured (its prompt rows would be charged
         * to the decoding requests), so the gate would stay wherever it was, and a drafted step gives up the
         * overlap for all its prompt rows (session 41, H100, c64 of 4K prompts: 46% of the steps drafted, the
         * gate's measured rate 660 tokens/s a request drafting against 930 overlapped) */
        bool prompting = false;
        for (int i = 0; i < s->n_running && !prompting; i++) {
            const struct req *r = s->running[i];
            prompting = r->n_toks + (r->pending ? 1 : 0) - r->n_computed > 1 || r->n_computed == 0;
        }
        s->draft_now = !prompting && gate_decide(s);
        if (s->draft_now)
            drain(s);
    }
    enum okv_status st = OKV_OK;
    int nl = 0, nr = 0, n = 0;
    bool host = false;   /* every logit row comes to the host (drafts' verification, prompt log-probabilities) */
    bool mixed = false;  /* only the rows of requests sampled or scored on the host come (logit adjustments, min_p,
                            log-probabilities of generated tokens); the backend samples the others */
    bool qrows = false;  /* queued with the rows of requests with logprobs copied behind the ids */
    int n_copy = 0;
    for (;;) {
        n = build_batch(s, &nl, &nr);
        if (n == 0)
            break;
        struct okv_batch b = {.n_tokens = n, .tokens = s->b_tok, .seq = s->b_seq, .want_logits = s->b_want,
                              .is_draft = s->b_draft};
        /* logit rows in row order (a request with drafts has 1 + n_drafts of them, rows of
         * prompt logprobs come before their request's last one) */
        int rows = 0;
        host = mixed = false;
        for (int t = 0; t < n; t++) {
            s->b_lidx[t] = rows;
            rows += s->b_want[t] != 0;
            host |= s->b_want[t] == 2;
        }
        bool need_hs = false, need_lp = false;
        for (int i = 0; i < nl; i++) {
            s->b_first[i] = s->b_lidx[s->b_row1[i]];
            host |= s->b_req[i]->n_drafts > 0;
            need_hs |= s->b_req[i]->host_sample;
            need_lp |= s->b_req[i]->lp_gen;
        }
        if (s->all_rows)
            host |= need_hs || need_lp;
        /* sampled on the host: a step of its own; logprobs alone: queued like any other
         * step, with the rows copied behind the ids (collected with them) */
        mixed = !host && (need_hs || (need_lp && !s->ovl));
        qrows = !host && !mixed && need_lp;
        if ((host || mixed || !s->ovl) && s->inflight) {   /* the queued step's tokens first, then build again */
            drain(s);
            continue;
        }
        const double tf = okv_now();
        if (host) {
            /* verification and log-probabilities need the distributions on the host */
            if ((st = grow_rows(&s->v_logits, &s->v_rows_cap, rows, s->vocab)) != OKV_OK)
                goto failed;
            st = okv_engine_forward(s->e, &b, s->v_logits);
        } else {
            /* sample on the backend: each request's next uniform number, in order. A request
             * sampled on the host draws its own there (as in the path above), and its row on
             * the backend is greedy and ignored; without drafts and prompt log-probabilities
             * request i owns logit row i */
            n_copy = 0;
            for (int i = 0; i < nl; i++) {
                struct req *r = s->b_req[i];
                s->b_rng[i] = r->rng;
                s->b_params[i] = r->sampling;
                const bool cp = (mixed || qrows) && (r->lp_gen || r->host_sample);
                if (!mixed)
                    s->q_cp2[i] = cp ? n_copy : -1;
                if (cp)
                    s->b_copy[n_copy++] = s->b_first[i];
                if (mixed && r->host_sample) {
                    s->b_params[i].temperature = 0.0f;
                    s->b_u[i] = 0.0;
                } else {
                    s->b_u[i] = r->sampling.temperature > 0.0f ? okv_rng_uniform(&r->rng) : 0.0;
                }
            }
            if ((mixed && (st = grow_rows(&s->v_logits, &s->v_rows_cap, n_copy, s->vocab)) != OKV_OK) ||
                (qrows && (st = grow_rows(&s->q_logits, &s->q_logits_rows, n_copy, s->vocab)) != OKV_OK))
                goto failed;
            st = mixed    ? okv_engine_forward_sample_rows(s->e, &b, s->b_params, s->b_u, s->b_ids, s->b_copy, n_copy,
                                                           s->v_logits)
                 : s->ovl ? okv_engine_forward_queue_rows(s->e, &b, s->inflight ? s->q_prev : NULL, s->b_params, s->b_u,
                                                          s->b_copy, n_copy)
                          : okv_engine_forward_sample(s->e, &b, s->b_params, s->b_u, s->b_ids, NULL);
        }
        /* adaptive drafts: a synchronous decode step's cost against its rows (with a drafter steps do not overlap) */
        if (st == OKV_OK && gate)
            gate_issue(s, s->b_prefill, s->draft_now, nl, tf, host || mixed);
        if (st == OKV_OK && s->spec_adaptive && !s->b_prefill && (host || (!s->ovl && !mixed))) {
            if (okv_spec_cost_settled(&s->spec_cost, n))
                okv_spec_cost_forward(&s->spec_cost, n, okv_now() - tf);
            s->last_rows = n;
            s->last_decoders = nl;
        }
        if (st == OKV_OK)
            break;
        if (host)
            goto retry;
        for (int i = 0; i < nl; i++)   /* the step did not happen: undraw */
            s->b_req[i]->rng = s->b_rng[i];
        if (s->inflight) {   /* the queued step may finish requests and free room: land it, build again */
            if (st != OKV_ERR_NO_KV_SPACE)
                OKV_LOG_WARN("scheduler: queueing a step failed (%s: %s); it runs again after the queued one",
                             okv_status_str(st), okv_last_error());
            drain(s);
            continue;
        }
    retry:
        if (st == OKV_ERR_NO_KV_SPACE && s->n_running > 1) {
            preempt_youngest(s);
            continue;
        }
    failed:
        /* a failure we cannot schedule around: fail the batch's requests */
        char msg[256];
        snprintf(msg, sizeof msg, "engine: %s", okv_last_error());
        OKV_LOG_ERROR("scheduler: step failed (%s): %s", okv_status_str(st), msg);
        for (int i = 0; i < nr; i++)
            finish(s, s->b_all[i], OKV_FINISH_ERROR, msg);
        n = 0;
        break;
    }
    if (n > 0) {
        /* the prompt's log-probabilities first (rows in order, request by request) */
        for (int i = 0, row = 0; i < nr; row += s->b_take[i], i++) {
            struct req *r = s->b_all[i];
            for (int k = 0; k < s->b_take[i]; k++) {
                if (s->b_want[row + k] != 2)
                    continue;
                const int pos = r->n_computed + k;
                if (r->plp_next == 0)
                    report_first_prompt(r);
                report_logprob(s, r, s->v_logits + (size_t)s->b_lidx[row + k] * (size_t)s->vocab, r->toks[pos + 1], true);
                r->plp_next = pos + 1;
            }
        }
        for (int i = 0; i < nr; i++) {
            struct req *r = s->b_all[i];
            r->n_computed += s->b_take[i];
            /* full blocks of accepted tokens join the prefix cache (drafts past n_toks wait for verification) */
            okv_engine_prefix_register(s->e, r->seq, r->toks, r->n_computed < r->n_toks ? r->n_computed : r->n_toks);
        }
        host_sample_rows(s, nl, host, mixed);
        for (int i = 0, k = 0; i < nl; i++) {
            struct req *r = s->b_req[i];
            if (r->lp_prompt && r->plp_next == 0)   /* a one-token prompt: its entry before the first generated one */
                report_first_prompt(r);
            if (!host && !mixed && s->ovl) {   /* queued: its token comes when the step is collected */
                s->q_req2[i] = r;
                continue;
            }
            if (!host && !(mixed && (r->lp_gen || r->host_sample))) {
                on_sampled(s, r, s->b_ids[i], NULL);
                continue;
            }
            /* its logits are on the host: all rows (host), or its own copied row (mixed) */
            const float *lg = s->v_logits + (size_t)(host ? s->b_first[i] : k++) * (size_t)s->vocab;
            if (!host && !r->host_sample) {   /* sampled on the backend; the row gives its log-probabilities */
                on_sampled(s, r, s->b_ids[i], lg);
                continue;
            }
            if (r->n_drafts == 0) {   /* sampled by host_sample_rows */
                if (s->hs_id[i] < 0) {   /* structured output with nothing left to allow: the request ends here */
                    if (r->json && okv_json_overflowed(&r->js) && !okv_json_complete(&r->js))
                        finish(s, r, OKV_FINISH_ERROR, "structured output: the grammar's parses outgrew their limits "
                                                       "(nesting deeper than 64 rules, or more than 65,534 parse states)");
                    else
                        finish(s, r, OKV_FINISH_STOP, NULL);
                    continue;
                }
                const int32_t id = s->hs_id[i];
                if (r->json) {
                    int nb = 0;
                    const uint8_t *b = okv_token_trie_bytes(s->trie, id, &nb);
                    okv_json_feed_n(&r->js, b, (size_t)nb);   /* the mask let only continuations through */
                }
                on_sampled(s, r, id, lg);
                continue;
            }
            /* verify: keep the accepted drafts' KV, drop the rest */
            int32_t next;
            int acc = okv_spec_verify(lg, s->vocab, r->drafts, NULL, r->n_drafts, &r->sampling, &r->rng, s->v_scratch, &next);
            /* the target's own token came from a row that read a stale set (verify_defer): keep the
             * accepted drafts, drop it, and let the last draft run again as the next step's row */
            const bool defer = acc > 0 && r->sampling.temperature <= 0.0f && okv_engine_seq_defer_own(s->e, r->seq);
            int keep = r->n_computed - r->n_drafts + acc - defer;   /* n_computed counted the drafts */
            okv_engine_seq_truncate(s->e, r->seq, keep);
            r->n_computed = keep;
            pthread_mutex_lock(&s->mu);
            s->m.spec_drafts_total++;
            s->m.spec_draft_tokens_total += (uint64_t)r->n_drafts;
            s->m.spec_accepted_tokens_total += (uint64_t)acc;
            s->m.spec_deferred_total += defer;
            pthread_mutex_unlock(&s->mu);
            if (acc >= r->n_lead)   /* the drafter's own tokens (a carried token is the target's) */
                okv_spec_len_observe(&r->spec_len, r->n_drafts - r->n_lead, acc - r->n_lead);
            r->has_carry = defer;
            r->carry = next;
            int32_t toks[OKV_SPEC_MAX_TOKENS + 1];
            memcpy(toks, r->drafts, sizeof(int32_t) * (size_t)acc);
            toks[acc] = next;
            for (int d = 0; d <= acc - defer; d++) {
                /* on_sampled finishes (and frees) the request when it is done: look
                 * for the pointer among the running ones without touching it (no
                 * request is admitted during this loop, so it cannot come back) */
                bool running = false;
                for (int k = 0; k < s->n_running; k++)
                    running |= s->running[k] == r;
                if (!running)
                    break;
                on_sampled(s, r, toks[d], lg + (size_t)d * (size_t)s->vocab);
            }
        }
        const bool overlapped = !host && !mixed && s->ovl && s->inflight;
        if (!host && !mixed && s->ovl) {
            /* this step is queued: collect the one before it (its requests' tokens, some of them
             * finishing: finish() drops their rows from this step's list), then this step's
             * requests wait for its tokens */
            struct req **older = s->q_req;
            int32_t *older_cp = s->q_cp;
            const int older_n = s->q_n;
            const bool had = s->inflight;
            s->q_req = s->q_req2;
            s->q_req2 = older;
            s->q_cp = s->q_cp2;
            s->q_cp2 = older_cp;
            s->q_n = nl;
            s->inflight = true;
            if (had)
                collect_step(s, older, older_cp, older_n);
            for (int i = 0; i < s->q_n; i++) {
                struct req *r = s->q_req[i];
                if (!r)
                    continue;
                r->pending = true;
                r->q_idx = i;
                okv_engine_prefix_register(s->e, r->seq, r->toks, r->n_computed < r->n_toks ? r->n_computed : r->n_toks);
            }
        }
        pthread_mutex_lock(&s->mu);
        s->m.steps_total++;
        s->m.steps_overlapped_total += overlapped;
        s->m.steps_host_rows_total += mixed || qrows;
        pthread_mutex_unlock(&s->mu);
    } else {
        drain(s);   /* nothing new to run: let the queued step land */
    }
    if (gate && s->gate_prev.valid && s->gate_prev.collected) {   /* collected within its call: its tokens */
        pthread_mutex_lock(&s->mu);
        s->gate_prev.tokens = s->m.generation_tokens_total - s->gate_prev.gen0;
        pthread_mutex_unlock(&s->mu);
    }
    update_snapshot(s);
    *busy = s->n_running > 0 || s->n_waiting > 0 || s->inflight;
    return OKV_OK;
}

enum okv_status okv_sched_step(okv_sched *s, bool *busy)
{
    if (s->thread_running)
        return okv_set_error(OKV_ERR_INVALID_ARG, "scheduler: okv_sched_step while the engine thread runs");
    return step(s, busy);
}

static void *engine_thread(void *arg)
{
    struct okv_sched *s = arg;
    bool busy = false;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !busy && !s->incoming_head && !s->cancel_pending)
            pthread_cond_wait(&s->cv, &s->mu);
        bool stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        step(s, &busy);
    }
    return NULL;
}

bool okv_sched_overlaps(const okv_sched *s) { return s->ovl; }

enum okv_status okv_sched_start(okv_sched *s)
{
    if (s->thread_running)
        return OKV_OK;
    s->stopping = false;
    if (pthread_create(&s->thread, NULL, engine_thread, s) != 0)
        return okv_set_error(OKV_ERR_INTERNAL, "scheduler: cannot start the engine thread");
    s->thread_running = true;
    return OKV_OK;
}

/* Finish everything left with ABORT (driving thread, or after it stopped). */
static void abort_all(struct okv_sched *s)
{
    drain(s);
    take_queue(s);
    while (s->n_running > 0)
        finish(s, s->running[s->n_running - 1], OKV_FINISH_ABORT, NULL);
    while (s->wait_head) {
        struct req *r = s->wait_head;
        wait_unlink(s, r);
        finish(s, r, OKV_FINISH_ABORT, NULL);
    }
    update_snapshot(s);
}

void okv_sched_stop(okv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_running) {
        pthread_join(s->thread, NULL);
        s->thread_running = false;
    }
    abort_all(s);
}

void okv_sched_free(okv_sched *s)
{
    if (!s)
        return;
    if (s->running && s->b_take && s->b_rng)   /* fully constructed */
        okv_sched_stop(s);
    pthread_mutex_destroy(&s->mu);
    for (int i = 0; i < SCHEMA_SLOTS; i++) {
        okv_free(s->schemas[i].key);
        okv_json_schema_free(s->schemas[i].sch);
    }
    pthread_mutex_destroy(&s->schema_mu);
    pthread_cond_destroy(&s->cv);
    okv_free(s->running);
    okv_free(s->b_req);
    okv_free(s->b_all);
    okv_free(s->b_take);
    okv_free(s->b_tok);
    okv_free(s->b_seq);
    okv_free(s->b_want);
    okv_free(s->b_draft);
    okv_free(s->b_first);
    okv_free(s->b_row1);
    okv_free(s->b_lidx);
    okv_free(s->v_logits);
    okv_threadpool_free(s->host_pool);
    if (s->hs_scratch != s->v_scratch)   /* the pool's own (without a pool: the scheduler's scratch) */
        okv_free(s->hs_scratch);
    if (s->hs_counts != s->a_counts)
        okv_free(s->hs_counts);
    okv_free(s->v_scratch);
    okv_free(s->a_counts);
    okv_free(s->eog_ids);
    okv_free(s->b_params);
    okv_free(s->b_u);
    okv_free(s->b_copy);
    okv_free(s->b_ids);
    okv_free(s->b_rng);
    okv_free(s->q_req);
    okv_free(s->q_req2);
    okv_free(s->q_cp);
    okv_free(s->q_cp2);
    okv_free(s->q_logits);
    okv_free(s->q_prev);
    okv_token_trie_free(s->trie);
    okv_json_mask_cache_free(s->masks);
    okv_free(s->mask_st);
    okv_free(s->hs_rows);
    okv_free(s->hs_id);
    okv_free(s);
}

enum okv_status okv_sched_submit(okv_sched *s, const struct okv_sched_request *rq, uint64_t *id)
{
    enum okv_status st;
    *id = 0;
    if (!rq->prompt || rq->n_prompt <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "request: the prompt is empty");
    if (rq->max_tokens <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "request: max_tokens %d must be positive", rq->max_tokens);
    if ((st = okv_sampling_check(&rq->sampling)) != OKV_OK || (st = okv_logit_adjust_check(&rq->adjust, s->vocab)) != OKV_OK)
        return st;
    if (rq->n_stop_token_ids < 0 || (rq->n_stop_token_ids > 0 && !rq->stop_token_ids))
        return okv_set_error(OKV_ERR_INVALID_ARG, "request: bad stop_token_ids");
    for (int i = 0; i < rq->n_stop_token_ids; i++)
        if (rq->stop_token_ids[i] < 0 || rq->stop_token_ids[i] >= s->vocab)
            return okv_set_error(OKV_ERR_INVALID_ARG, "request: stop token id %d is out of the vocabulary (size %d)",
                                 rq->stop_token_ids[i], s->vocab);
    if (rq->top_logprobs < 0 || rq->top_logprobs > OKV_MAX_TOP_LOGPROBS)
        return okv_set_error(OKV_ERR_INVALID_ARG, "request: top_logprobs %d is outside 0..%d", rq->top_logprobs,
                             OKV_MAX_TOP_LOGPROBS);
    for (int i = 0; i < rq->n_prompt; i++)
        if (rq->prompt[i] < 0 || rq->prompt[i] >= s->vocab)
            return okv_set_error(OKV_ERR_INVALID_ARG, "request: prompt token %d is out of the vocabulary (size %d)",
                                 rq->prompt[i], s->vocab);
    if (rq->n_prompt >= s->max_ctx)
        return okv_set_error(OKV_ERR_CONTEXT, "request: the prompt has %d tokens; the context length is %d "
                             "(it must leave room for at least one generated token)", rq->n_prompt, s->max_ctx);
    int max_new = rq->max_tokens;
    if (max_new > s->max_ctx - rq->n_prompt)
        max_new = s->max_ctx - rq->n_prompt;
    int need = okv_engine_blocks_needed(s->e, rq->n_prompt + max_new);
    if (need > okv_engine_blocks_total(s->e))
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "request: %d prompt + %d new tokens need %d KV blocks; the pool has %d",
                             rq->n_prompt, max_new, need, okv_engine_blocks_total(s->e));

    struct req *r = okv_calloc(1, sizeof *r, OKV_TAG_SERVER);
    if (!r)
        return okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory");
    r->cap = rq->n_prompt + max_new;
    r->toks = okv_malloc(sizeof(int32_t) * (size_t)r->cap, OKV_TAG_SERVER);
    r->stop = rq->n_stop > 0 ? okv_calloc((size_t)rq->n_stop, sizeof *r->stop, OKV_TAG_SERVER) : NULL;
    if (!r->toks || (rq->n_stop > 0 && !r->stop))
        goto oom;
    for (int i = 0; i < rq->n_stop; i++) {
        if (!(r->stop[i] = okv_strdup(rq->stop[i] ? rq->stop[i] : "", OKV_TAG_SERVER)))
            goto oom;
        r->n_stop = i + 1;
    }
    r->adjust = rq->adjust;
    r->adjust.bias_id = NULL;
    r->adjust.bias = NULL;
    r->adjust.n_bias = 0;
    r->adjust.allowed_id = NULL;
    r->adjust.n_allowed = 0;
    r->adjust.bad_ids = NULL;
    r->adjust.bad_len = NULL;
    r->adjust.n_bad = 0;
    if (rq->adjust.n_bad > 0) {
        int total = 0;
        for (int k = 0; k < rq->adjust.n_bad; k++)
            total += rq->adjust.bad_len[k];
        int32_t *bi = okv_malloc(sizeof(int32_t) * (size_t)total, OKV_TAG_SERVER);
        int *bl = okv_malloc(sizeof(int) * (size_t)rq->adjust.n_bad, OKV_TAG_SERVER);
        r->adjust.bad_ids = bi;
        r->adjust.bad_len = bl;
        if (!bi || !bl)
            goto oom;
        memcpy(bi, rq->adjust.bad_ids, sizeof(int32_t) * (size_t)total);
        memcpy(bl, rq->adjust.bad_len, sizeof(int) * (size_t)rq->adjust.n_bad);
        r->adjust.n_bad = rq->adjust.n_bad;
    }
    if (rq->adjust.n_allowed > 0) {
        int32_t *al = okv_malloc(sizeof(int32_t) * (size_t)rq->adjust.n_allowed, OKV_TAG_SERVER);
        r->adjust.allowed_id = al;
        if (!al)
            goto oom;
        memcpy(al, rq->adjust.allowed_id, sizeof(int32_t) * (size_t)rq->adjust.n_allowed);
        r->adjust.n_allowed = rq->adjust.n_allowed;
    }
    if (rq->adjust.n_bias > 0) {
        int32_t *bi = okv_malloc(sizeof(int32_t) * (size_t)rq->adjust.n_bias, OKV_TAG_SERVER);
        float *bv = okv_malloc(sizeof(float) * (size_t)rq->adjust.n_bias, OKV_TAG_SERVER);
        r->adjust.bias_id = bi;
        r->adjust.bias = bv;
        if (!bi || !bv)
            goto oom;
        memcpy(bi, rq->adjust.bias_id, sizeof(int32_t) * (size_t)rq->adjust.n_bias);
        memcpy(bv, rq->adjust.bias, sizeof(float) * (size_t)rq->adjust.n_bias);
        r->adjust.n_bias = rq->adjust.n_bias;
    }
    if (rq->n_stop_token_ids > 0) {
        if (!(r->stop_ids = okv_malloc(sizeof(int32_t) * (size_t)rq->n_stop_token_ids, OKV_TAG_SERVER)))
            goto oom;
        memcpy(r->stop_ids, rq->stop_token_ids, sizeof(int32_t) * (size_t)rq->n_stop_token_ids);
        r->n_stop_ids = rq->n_stop_token_ids;
    }
    if (rq->adjust.min_tokens > 0) {   /* what min_tokens keeps from being drawn (end of generation too with ignore_eos, as vLLM) */
        const int ne = s->n_eog;
        if (!(r->mask_ids = okv_malloc(sizeof(int32_t) * (size_t)(ne + r->n_stop_ids + 1), OKV_TAG_SERVER)))
            goto oom;
        if (ne)
            memcpy(r->mask_ids, s->eog_ids, sizeof(int32_t) * (size_t)ne);
        if (r->n_stop_ids)
            memcpy(r->mask_ids + ne, r->stop_ids, sizeof(int32_t) * (size_t)r->n_stop_ids);
        r->n_mask = ne + r->n_stop_ids;
    }
    r->host_sample = okv_logit_adjust_active(&r->adjust) || rq->sampling.min_p > 0.0f;
    if (rq->json_object || rq->json_schema || rq->n_choices > 0 || rq->regex || rq->grammar) {
        if (!s->tok) {
            req_free(r);
            return okv_set_error(OKV_ERR_INVALID_ARG, "scheduler: structured output needs a tokenizer");
        }
        const enum okv_status cs = request_schema(s, rq, r);
        if (cs != OKV_OK) {
            req_free(r);
            return cs;
        }
        pthread_mutex_lock(&s->mu);
        enum okv_status ts = s->trie ? OKV_OK : okv_token_trie_build(s->tok, &s->trie);
        if (ts == OKV_OK && !s->masks)
            ts = okv_json_mask_cache_create(s->vocab, MASK_SLOTS, &s->masks);

        pthread_mutex_unlock(&s->mu);
        if (ts != OKV_OK) {
            req_free(r);
            return ts;
        }
        r->json = true;
        if (r->schema)
            okv_json_init_schema(&r->js, r->schema);
        else
            okv_json_init(&r->js, true);
        r->host_sample = true;
    }
    memcpy(r->toks, rq->prompt, sizeof(int32_t) * (size_t)rq->n_prompt);
    r->n_toks = r->n_prompt = rq->n_prompt;
    r->max_tokens = max_new;
    r->seq = -1;
    r->need = need;
    r->sampling = rq->sampling;
    okv_rng_seed(&r->rng, rq->sampling.seed);
    okv_rng_seed(&r->draft_rng, rq->sampling.seed ^ 0x5bd1e995u);
    okv_spec_len_init(&r->spec_len, okv_engine_drafts_select(s->e) ? 1 : 0, s->spec_k);
    r->ignore_eos = rq->ignore_eos;
    r->include_stop = rq->include_stop_str_in_output;
    r->keep_special = rq->keep_special_tokens;
    r->on_token = rq->on_token;
    r->on_finish = rq->on_finish;
    r->user = rq->user;
    r->on_logprob = rq->on_logprob;
    r->lp_gen = rq->logprobs && rq->on_logprob;
    r->lp_prompt = rq->prompt_logprobs && rq->on_logprob;
    r->lp_top = rq->top_logprobs;
    r->t_arrival = okv_now();
    r->priority = rq->priority;
    atomic_init(&r->cancelled, 0);

    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        req_free(r);
        return okv_set_error(OKV_ERR_INVALID_ARG, "scheduler: shutting down");
    }
    r->id = s->next_id++;
    r->next_all = s->all;
    if (s->all)
        s->all->prev_all = r;
    s->all = r;
    if (s->incoming_tail)
        s->incoming_tail->next = r;
    else
        s->incoming_head = r;
    r->prev = s->incoming_tail;
    s->incoming_tail = r;
    s->n_incoming++;
    s->m.num_waiting++;
    *id = r->id;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return OKV_OK;
oom:
    req_free(r);
    return okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory");
}

/* The key of a request's schema: kind byte and text (NULL with *n 0: none; NULL with *n 1: out of memory) */
static char *schema_key(const struct okv_sched_request *rq, size_t *n)
{
    size_t len = 1;
    const char kind = rq->json_schema ? 'S' : rq->n_choices > 0 ? 'C' : rq->regex ? 'R' : rq->grammar ? 'G' : 0;
    *n = 0;
    if (!kind)
        return NULL;
    if (kind == 'S')
        len += rq->json_schema_len;
    else if (kind == 'R')
        len += rq->regex_len;
    else if (kind == 'G')
        len += rq->grammar_len;
    else
        for (int i = 0; i < rq->n_choices; i++)
            len += strlen(rq->choices[i]) + 1;
    char *k = okv_malloc(len, OKV_TAG_SERVER);
    *n = k ? len : 1;
    if (!k)
        return NULL;
    k[0] = kind;
    if (kind == 'S')
        memcpy(k + 1, rq->json_schema, rq->json_schema_len);
    else if (kind == 'R')
        memcpy(k + 1, rq->regex, rq->regex_len);
    else if (kind == 'G')
        memcpy(k + 1, rq->grammar, rq->grammar_len);
    else
        for (int i = 0, at = 1; i < rq->n_choices; i++) {
            const size_t l = strlen(rq->choices[i]) + 1;
            memcpy(k + at, rq->choices[i], l);
            at += (int)l;
        }
    return k;
}

/* r's schema (JSON schema, choices, regex or grammar; none for JSON mode): the shared one of the same text, else compiled
 * and shared from a slot no request holds (else kept as r's own). */
static enum okv_status request_schema(okv_sched *s, const struct okv_sched_request *rq, struct req *r)
{
    size_t kn;
    char *key = schema_key(rq, &kn);
    if (!key)
        return kn ? okv_set_error(OKV_ERR_NO_MEMORY, "scheduler: out of memory") : OKV_OK;
    pthread_mutex_lock(&s->schema_mu);
    for (int i = 0; i < SCHEMA_SLOTS; i++) {
        struct schema_slot *sl = &s->schemas[i];
        if (sl->key && sl->key_len == kn && !memcmp(sl->key, key, kn)) {
            sl->refs++;
            sl->used = ++s->schema_clock;
            r->schema = sl->sch;
            r->shared = sl;
            r->shared_mu = &s->schema_mu;
            pthread_mutex_unlock(&s->schema_mu);
            okv_free(key);
            return OKV_OK;
        }
    }
    pthread_mutex_unlock(&s->schema_mu);
    const enum okv_status cs = key[0] == 'S' ? okv_json_schema_compile(rq->json_schema, rq->json_schema_len, &r->schema)
                               : key[0] == 'C' ? okv_json_choice_compile(rq->choices, rq->n_choices, &r->schema)
                               : key[0] == 'R' ? okv_json_regex_compile(rq->regex, rq->regex_len, &r->schema)
                                               : okv_json_grammar_compile(rq->grammar, rq->grammar_len, &r->schema);
    if (cs != OKV_OK) {
        okv_free(key);
        return cs;
    }
    pthread_mutex_lock(&s->schema_mu);
    struct schema_slot *free_sl = NULL;   /* an empty slot, else the least recently used one no request holds */
    for (int i = 0; i < SCHEMA_SLOTS; i++) {
        struct schema_slot *sl = &s->schemas[i];
        if (!sl->key) {
            free_sl = sl;
            break;
        }
        if (sl->refs == 0 && (!free_sl || sl->used < free_sl->used))
            free_sl = sl;
    }
    if (free_sl) {
        okv_free(free_sl->key);
        okv_json_schema_free(free_sl->sch);
        *free_sl = (struct schema_slot){.key = key, .key_len = kn, .sch = r->schema, .refs = 1, .used = ++s->schema_clock};
        r->shared = free_sl;
        r->shared_mu = &s->schema_mu;
        key = NULL;
    }
    pthread_mutex_unlock(&s->schema_mu);
    okv_free(key);
    return OKV_OK;
}

void okv_sched_cancel(okv_sched *s, uint64_t id)
{
    pthread_mutex_lock(&s->mu);
    for (struct req *r = s->all; r; r = r->next_all)
        if (r->id == id) {
            atomic_store(&r->cancelled, 1);
            s->cancel_pending = true;
            pthread_cond_signal(&s->cv);
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

void okv_sched_cancel_all(okv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    for (struct req *r = s->all; r; r = r->next_all)
        atomic_store(&r->cancelled, 1);
    s->cancel_pending = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void okv_sched_metrics(okv_sched *s, struct okv_sched_metrics *m)
{
    pthread_mutex_lock(&s->mu);
    *m = s->m;
    pthread_mutex_unlock(&s->mu);
}
