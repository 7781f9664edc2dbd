/* label: unit */
/* (With a CUDA build on a GPU machine the overlapped-decoding part runs on the CUDA backend
 * too; elsewhere it says so and skips it.)
 *
 * The scheduler under memory pressure: the host tier is sized so that the running
 * requests cannot all finish; a forward then fails with OKV_ERR_NO_KV_SPACE and the
 * scheduler preempts (frees the youngest request and recomputes it later) instead
 * of failing. Every request must finish with the greedy tokens it gets alone, the
 * preemption counter must move, and every block must be free at the end.
 *
 * Log-probabilities (the OpenAI API's logprobs and echo): okv_token_logprob on known
 * rows (ties, clamping); a request's generated tokens with logprobs against the
 * engine's own logits of the same prompt; and its prompt + generated tokens
 * resubmitted with prompt logprobs over several prefill chunks: each prompt entry k
 * must equal log softmax of row k-1 of one forward over the whole prompt, and the
 * entries of the resubmitted generated tokens their logprobs when generated. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/sched.h"
#include "oasiskv/tokenizer.h"
#include "oasiskv/model.h"
#include "synth_model.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

#define NREQ 4
#define PROMPT 50
#define GEN 60

#define OUT_CAP 160
struct out {
    int32_t toks[OUT_CAP];
    int n;
    bool done;
    enum okv_finish reason;
    int preempt;
    int order;   /* 1 + the requests that finished before it */
};
static int finish_seq;

static void on_token(void *user, int32_t token, const char *text, size_t len)
{
    struct out *o = user;
    if (token >= 0 && o->n < OUT_CAP)
        o->toks[o->n++] = token;
}

static void on_finish(void *user, const struct okv_sched_result *r)
{
    struct out *o = user;
    o->done = true;
    o->reason = r->reason;
    o->preempt = r->n_preemptions;
    o->order = ++finish_seq;
}

/* ---- log-probabilities ---- */

#define LP_GEN 6
#define LP_MAX (PROMPT + LP_GEN + 8)
struct lp_out {
    struct okv_token_logprob v[LP_MAX];
    int n;
    int32_t toks[LP_GEN + 2];
    int n_toks;
    bool done;
};

static void lp_on_token(void *user, int32_t token, const char *text, size_t len)
{
    struct lp_out *o = user;
    (void)text;
    (void)len;
    if (token >= 0 && o->n_toks < LP_GEN + 2)
        o->toks[o->n_toks++] = token;
}

static void lp_on_logprob(void *user, const struct okv_token_logprob *lp)
{
    struct lp_out *o = user;
    if (o->n < LP_MAX)
        o->v[o->n++] = *lp;
}

static void lp_on_finish(void *user, const struct okv_sched_result *r)
{
    (void)r;
    ((struct lp_out *)user)->done = true;
}

static void lp_run(okv_engine *e, const int32_t *prompt, int n_prompt, int max_tokens, bool gen, bool prompt_lp, int chunk,
                   struct lp_out *o)
{
    /* prompt logprobs: 7 rows of logits a step at most, so that chunks of 16 rows split */
    struct okv_sched_params sp = {.max_num_seqs = 2, .max_num_batched_tokens = chunk, .max_prompt_logit_rows = 7};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (!s)
        return;
    struct okv_sched_request rq = {.prompt = prompt, .n_prompt = n_prompt, .max_tokens = max_tokens, .ignore_eos = true,
                                   .on_token = lp_on_token, .on_finish = lp_on_finish, .user = o, .logprobs = gen,
                                   .prompt_logprobs = prompt_lp, .top_logprobs = 3, .on_logprob = lp_on_logprob};
    uint64_t id;
    CHECK(okv_sched_submit(s, &rq, &id) == OKV_OK, "submit: %s", okv_last_error());
    rq.top_logprobs = OKV_MAX_TOP_LOGPROBS + 1;
    CHECK(okv_sched_submit(s, &rq, &id) == OKV_ERR_INVALID_ARG, "top_logprobs past %d is refused", OKV_MAX_TOP_LOGPROBS);
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++)
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    okv_sched_free(s);
}

static bool near(float a, float b, float tol) { return fabsf(a - b) <= tol * (1.0f + fabsf(b)); }

static int32_t lp_all[PROMPT + LP_GEN];
static struct lp_out lp_dense;   /* the prompt entries on the dense engine */

static void test_logprobs(okv_engine *e, const struct okv_model_config *c, const int32_t *prompt)
{
    /* okv_token_logprob on a known row: ties keep the lower id first, n_top is clamped */
    const float row[6] = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f, 3.0f};
    struct okv_token_logprob lp;
    okv_token_logprob(row, 6, 4, 4, &lp);
    double z = 0;
    for (int i = 0; i < 6; i++)
        z += exp(row[i]);
    CHECK(lp.n_top == 4 && lp.top_id[0] == 1 && lp.top_id[1] == 2 && lp.top_id[2] == 5 && lp.top_id[3] == 0,
          "top ids by value, lower id first on ties: %d %d %d %d", lp.top_id[0], lp.top_id[1], lp.top_id[2], lp.top_id[3]);
    CHECK(near(lp.logprob, (float)(0.5 - log(z)), 1e-6f) && near(lp.top_logprob[0], (float)(3.0 - log(z)), 1e-6f),
          "logprob %g and top %g against log softmax", lp.logprob, lp.top_logprob[0]);
    okv_token_logprob(row, 6, 0, 99, &lp);
    CHECK(lp.n_top == 6 && lp.top_id[5] == 3, "n_top clamped to the vocabulary: %d", lp.n_top);

    /* the engine's own logits over the whole prompt + generated tokens, one forward */
    static struct lp_out a, b;
    lp_run(e, prompt, PROMPT, LP_GEN, true, false, 64, &a);
    CHECK(a.done && a.n_toks == LP_GEN && a.n == LP_GEN, "generated logprobs: %d tokens, %d entries", a.n_toks, a.n);
    int32_t *all = lp_all;
    memcpy(all, prompt, sizeof(int32_t) * PROMPT);
    memcpy(all + PROMPT, a.toks, sizeof(int32_t) * LP_GEN);
    const int n_all = PROMPT + LP_GEN;
    static float logits[(PROMPT + LP_GEN) * 256];
    CHECK(c->vocab_size <= 256, "test model vocabulary %d", c->vocab_size);
    int seq = -1;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "%s", okv_last_error());
    int32_t seqs[PROMPT + LP_GEN];
    uint8_t want[PROMPT + LP_GEN];
    for (int t = 0; t < n_all; t++) {
        seqs[t] = seq;
        want[t] = 1;
    }
    struct okv_batch bt = {.n_tokens = n_all, .tokens = all, .seq = seqs, .want_logits = want};
    CHECK(okv_engine_forward(e, &bt, logits) == OKV_OK, "reference forward: %s", okv_last_error());
    okv_engine_seq_free(e, seq);
    float worst = 0;
    for (int i = 0; i < a.n && i < LP_GEN; i++) {
        const struct okv_token_logprob *v = &a.v[i];
        struct okv_token_logprob r;
        okv_token_logprob(logits + (size_t)(PROMPT - 1 + i) * c->vocab_size, c->vocab_size, a.toks[i], 3, &r);
        CHECK(!v->prompt && v->token == a.toks[i] && v->n_top == 3, "generated entry %d: token %d (%d)", i, v->token,
              a.toks[i]);
        CHECK(v->top_id[0] == a.toks[i] && v->logprob == v->top_logprob[0] && v->logprob <= 0,
              "entry %d: greedy, so the chosen token is the top one", i);
        worst = fmaxf(worst, fabsf(v->logprob - r.logprob));
        CHECK(near(v->logprob, r.logprob, 1e-3f) && v->top_id[1] == r.top_id[1], "entry %d: logprob %g, reference %g", i,
              v->logprob, r.logprob);
    }
    /* prompt + generated resubmitted with prompt logprobs, in chunks of 16 rows */
    lp_run(e, all, n_all, 1, true, true, 16, &b);
    CHECK(b.done && b.n == n_all + 1, "prompt logprobs: %d entries for %d prompt tokens + 1", b.n, n_all);
    CHECK(b.v[0].prompt && isnan(b.v[0].logprob) && b.v[0].token == all[0] && b.v[0].n_top == 0,
          "the first prompt entry has no log-probability");
    for (int k = 1; k < n_all && k < b.n; k++) {
        struct okv_token_logprob r;
        okv_token_logprob(logits + (size_t)(k - 1) * c->vocab_size, c->vocab_size, all[k], 3, &r);
        worst = fmaxf(worst, fabsf(b.v[k].logprob - r.logprob));
        if (!(b.v[k].prompt && b.v[k].token == all[k] && near(b.v[k].logprob, r.logprob, 1e-3f) &&
              b.v[k].top_id[0] == r.top_id[0]))
            CHECK(false, "prompt entry %d: token %d logprob %g, reference %d %g", k, b.v[k].token, b.v[k].logprob, all[k],
                  r.logprob);
        if (k >= PROMPT)
            CHECK(near(b.v[k].logprob, a.v[k - PROMPT].logprob, 1e-3f), "prompt entry %d = generated entry %d: %g vs %g", k,
                  k - PROMPT, b.v[k].logprob, a.v[k - PROMPT].logprob);
    }
    CHECK(b.n == n_all + 1 && !b.v[n_all].prompt, "the generated token's entry comes last");
    lp_dense = b;
    printf("  logprobs: %d generated and %d prompt entries, largest difference from one forward %.2e\n", a.n, n_all,
           (double)worst);
}

/* ---- sampling extras (vLLM's penalties, logit_bias, min_tokens, min_p, stop_token_ids) ---- */

#define EX_GEN 12

static void ex_run(okv_engine *e, const struct okv_sched_request *proto, struct out *o)
{
    struct okv_sched_params sp = {.max_num_seqs = 2, .max_num_batched_tokens = 64};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (!s)
        return;
    memset(o, 0, sizeof *o);
    struct okv_sched_request rq = *proto;
    rq.on_token = on_token;
    rq.on_finish = on_finish;
    rq.user = o;
    uint64_t id;
    CHECK(okv_sched_submit(s, &rq, &id) == OKV_OK, "submit: %s", okv_last_error());
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++)
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    okv_sched_free(s);
}

static enum okv_status ex_submit_status(okv_engine *e, const struct okv_sched_request *rq)
{
    struct okv_sched_params sp = {.max_num_seqs = 2, .max_num_batched_tokens = 64};
    okv_sched *s = NULL;
    if (okv_sched_create(e, NULL, &sp, &s) != OKV_OK)
        return OKV_ERR_INTERNAL;
    uint64_t id;
    enum okv_status st = okv_sched_submit(s, rq, &id);
    okv_sched_free(s);
    return st;
}

static void test_extras(okv_engine *e, const struct okv_model_config *c, const int32_t *prompt)
{
    /* the adjustment on a known row: bias, the min_tokens mask, repetition over prompt and
     * output (once an id), frequency x count and presence over the output */
    float row[5] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
    const int32_t toks[5] = {0, 3, 1, 1, 2};   /* prompt 0 3, generated 1 1 2 */
    const int32_t bid[1] = {4}, eog[1] = {3};
    const float bv[1] = {1.0f};
    struct okv_logit_adjust a = {.presence_penalty = 0.25f, .frequency_penalty = 0.5f, .repetition_penalty = 2.0f,
                                 .min_tokens = 5, .bias_id = bid, .bias = bv, .n_bias = 1};
    int counts[5] = {0};
    okv_logit_adjust_apply(&a, row, 5, toks, 2, 3, eog, 1, counts);
    const float want[5] = {1.0f, -3.25f, -0.5f, -INFINITY, -1.0f};
    bool same = true, zero = true;
    for (int i = 0; i < 5; i++) {
        same &= row[i] == want[i];
        zero &= counts[i] == 0;
    }
    CHECK(same && zero, "logit adjust on a known row: %g %g %g %g %g (want 1 -3.25 -0.5 -inf -1), scratch left zero %d",
          row[0], row[1], row[2], row[3], row[4], zero);
    float row2[5] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
    const int32_t toks7[7] = {0, 3, 1, 1, 2, 2, 2};   /* 5 generated: no mask (id 3 in the prompt only: 3 / 2) */
    okv_logit_adjust_apply(&a, row2, 5, toks7, 2, 5, eog, 1, counts);
    CHECK(row2[3] == 1.5f, "min_tokens reached: the end-of-generation id is not masked (%g)", row2[3]);
    CHECK(okv_logit_adjust_check(&a, 5) == OKV_OK && okv_logit_adjust_check(&a, 4) == OKV_ERR_INVALID_ARG,
          "logit_bias ids are checked against the vocabulary");
    /* allowed_token_ids: the others masked after the rest (bias on an allowed id kept), scratch left zero */
    float row3[5] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
    const int32_t allow[3] = {4, 1, 4};
    struct okv_logit_adjust aa = {.bias_id = bid, .bias = bv, .n_bias = 1, .allowed_id = allow, .n_allowed = 3};
    okv_logit_adjust_apply(&aa, row3, 5, toks, 2, 3, eog, 1, counts);
    zero = true;
    for (int i = 0; i < 5; i++)
        zero &= counts[i] == 0;
    CHECK(row3[0] == -INFINITY && row3[1] == -1.0f && row3[2] == -INFINITY && row3[3] == -INFINITY && row3[4] == -1.0f &&
          zero && okv_logit_adjust_active(&aa), "allowed_token_ids {4, 1}: %g %g %g %g %g (want -inf -1 -inf -inf -1)",
          row3[0], row3[1], row3[2], row3[3], row3[4]);
    /* bad_words: {2} always, {1, 2, 0} after generated "1 2" (masks 0), {3, 4} not after "... 2" */
    float row4[5] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
    const int32_t bad_ids[6] = {4, 1, 2, 0, 3, 4};
    const int bad_len[3] = {1, 3, 2};
    const int32_t gen5[5] = {0, 3, 1, 1, 2};   /* prompt 0 3, generated 1 1 2 */
    struct okv_logit_adjust ab = {.bad_ids = bad_ids, .bad_len = bad_len, .n_bad = 3};
    okv_logit_adjust_apply(&ab, row4, 5, gen5, 2, 3, eog, 1, counts);
    CHECK(row4[0] == -INFINITY && row4[1] == -1.0f && row4[2] == 0.5f && row4[3] == 3.0f && row4[4] == -INFINITY &&
          okv_logit_adjust_active(&ab) && okv_logit_adjust_check(&ab, 5) == OKV_OK,
          "bad_words: %g %g %g %g %g (want -inf -1 0.5 3 -inf)", row4[0], row4[1], row4[2], row4[3], row4[4]);
    float row5[5] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
    okv_logit_adjust_apply(&ab, row5, 5, gen5, 4, 1, eog, 1, counts);   /* generated "2" only: "1 2" not there */
    CHECK(row5[0] == 2.0f && row5[4] == -INFINITY, "bad_words: a sequence's lead in the prompt does not count (%g)",
          row5[0]);
    const int bad_len0[1] = {0};
    CHECK(okv_logit_adjust_check(&(struct okv_logit_adjust){.bad_ids = bad_ids, .bad_len = bad_len0, .n_bad = 1}, 5) ==
          OKV_ERR_INVALID_ARG, "an empty bad_words sequence is refused");
    const int32_t allow_bad[1] = {5};
    CHECK(okv_logit_adjust_check(&(struct okv_logit_adjust){.allowed_id = allow_bad, .n_allowed = 1}, 5) ==
          OKV_ERR_INVALID_ARG, "an allowed id out of the vocabulary is refused");
    struct okv_logit_adjust bad = {.repetition_penalty = 2.5f};
    CHECK(okv_logit_adjust_check(&bad, 5) == OKV_ERR_INVALID_ARG, "repetition_penalty past 2 is refused");
    CHECK(!okv_logit_adjust_active(&(struct okv_logit_adjust){.repetition_penalty = 1.0f}), "defaults change nothing");
    /* min_p: relative probabilities 1, 0.5, 0.2, 0.1 at temperature 1, min_p 0.3 keeps the first two */
    const float lg[4] = {0.0f, logf(0.5f), logf(0.2f), logf(0.1f)};
    float pr[4];
    struct okv_sampling mp = {.temperature = 1.0f, .top_p = 1.0f, .min_p = 0.3f};
    okv_sampling_probs(lg, 4, &mp, pr);
    CHECK(near(pr[0], 2.0f / 3, 1e-5f) && near(pr[1], 1.0f / 3, 1e-5f) && pr[2] == 0 && pr[3] == 0,
          "min_p 0.3: probabilities %g %g %g %g", pr[0], pr[1], pr[2], pr[3]);
    mp.min_p = 1.5f;
    CHECK(okv_sampling_check(&mp) == OKV_ERR_INVALID_ARG, "min_p past 1 is refused");

    /* through the scheduler: greedy with penalties and a bias equals a greedy loop that adjusts
     * the engine's logits of the whole sequence each step */
    const int V = c->vocab_size;
    struct okv_sched_request base = {.prompt = prompt, .n_prompt = PROMPT, .max_tokens = EX_GEN, .ignore_eos = true};
    static struct out plain, adj, stopped, held;
    ex_run(e, &base, &plain);
    const int32_t b_id[2] = {plain.toks[1], 7};
    const float b_val[2] = {-3.0f, 1.5f};
    struct okv_sched_request rq = base;
    rq.adjust = (struct okv_logit_adjust){.presence_penalty = 0.3f, .frequency_penalty = 0.4f, .repetition_penalty = 1.3f,
                                          .bias_id = b_id, .bias = b_val, .n_bias = 2};
    ex_run(e, &rq, &adj);
    int32_t seqtok[PROMPT + EX_GEN], seqs[PROMPT + EX_GEN], ref[EX_GEN];
    uint8_t wantl[PROMPT + EX_GEN];
    static float logits[256];
    int *cnt = calloc((size_t)V, sizeof(int));
    memcpy(seqtok, prompt, sizeof(int32_t) * PROMPT);
    for (int g = 0; g < EX_GEN; g++) {
        const int n = PROMPT + g;
        int seq = -1;
        CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "%s", okv_last_error());
        for (int t = 0; t < n; t++) {
            seqs[t] = seq;
            wantl[t] = t == n - 1;
        }
        struct okv_batch bt = {.n_tokens = n, .tokens = seqtok, .seq = seqs, .want_logits = wantl};
        CHECK(okv_engine_forward(e, &bt, logits) == OKV_OK, "reference forward: %s", okv_last_error());
        okv_engine_seq_free(e, seq);
        okv_logit_adjust_apply(&rq.adjust, logits, V, seqtok, PROMPT, g, NULL, 0, cnt);
        ref[g] = seqtok[n] = okv_argmax(logits, V);
    }
    free(cnt);
    int differ = 0;
    for (int g = 0; g < EX_GEN; g++)
        differ += plain.toks[g] != adj.toks[g];
    CHECK(adj.done && adj.n == EX_GEN && !memcmp(adj.toks, ref, sizeof ref),
          "penalties and logit_bias through the scheduler = the adjusted greedy loop (%d tokens)", adj.n);
    CHECK(differ > 0, "the adjustments changed the greedy tokens (%d of %d differ)", differ, EX_GEN);

    /* four requests sampled on the host in one step (penalties, min_p: drawn on the host pool, each with its
     * own random numbers): each one's tokens equal the same request run alone */
    {
        struct okv_sched_request four[4];
        static struct out alone[4], together[4];
        for (int i = 0; i < 4; i++) {
            four[i] = base;
            four[i].sampling = (struct okv_sampling){.temperature = i % 2 ? 0.9f : 0.0f, .top_p = i == 3 ? 0.8f : 1.0f,
                                                     .seed = 11u + (uint64_t)i, .min_p = i % 2 ? 0.02f : 0.0f};
            four[i].adjust = (struct okv_logit_adjust){.frequency_penalty = 0.2f * (float)(i + 1)};
            four[i].on_token = on_token;
            four[i].on_finish = on_finish;
            ex_run(e, &four[i], &alone[i]);
        }
        struct okv_sched_params sp = {.max_num_seqs = 4, .max_num_batched_tokens = 64};
        okv_sched *s = NULL;
        CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
        uint64_t id;
        for (int i = 0; s && i < 4; i++) {
            memset(&together[i], 0, sizeof together[i]);
            four[i].user = &together[i];
            CHECK(okv_sched_submit(s, &four[i], &id) == OKV_OK, "submit: %s", okv_last_error());
        }
        bool busy = s != NULL;
        for (int step = 0; busy && step < 5000; step++)
            CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
        struct okv_sched_metrics mt = {0};
        if (s)
            okv_sched_metrics(s, &mt);
        okv_sched_free(s);
        int same = 0;
        for (int i = 0; i < 4; i++)
            same += together[i].done && together[i].n == EX_GEN && alone[i].n == EX_GEN &&
                    !memcmp(together[i].toks, alone[i].toks, sizeof(int32_t) * EX_GEN);
        CHECK(same == 4, "host-sampled requests together equal each alone (%d of 4)", same);
        CHECK(mt.host_sampled_rows_total >= 4 * EX_GEN, "the rows were sampled on the host (%llu)",
              (unsigned long long)mt.host_sampled_rows_total);
    }

    /* stop_token_ids end the generation at that id (not part of the output) ... (on the adjusted
     * request: this model's plain greedy output repeats one id) */
    int first = 2;   /* the first id, from the third on, not generated before it */
    for (bool seen = true; seen && first < EX_GEN - 1; first += seen) {
        seen = false;
        for (int g = 0; g < first; g++)
            seen |= adj.toks[g] == adj.toks[first];
    }
    const int32_t stop_id = adj.toks[first];
    CHECK(first >= 2 && first < EX_GEN - 1, "a stop id generated first at step %d", first);
    struct okv_sched_request pen = rq;
    rq = pen;
    rq.stop_token_ids = &stop_id;
    rq.n_stop_token_ids = 1;
    ex_run(e, &rq, &stopped);
    CHECK(stopped.done && stopped.reason == OKV_FINISH_STOP && stopped.n == first &&
              !memcmp(stopped.toks, adj.toks, sizeof(int32_t) * (size_t)first),
          "stop_token_ids: stopped after %d tokens (want %d), reason %d", stopped.n, first, stopped.reason);
    /* ... and min_tokens keeps them from being drawn before it */
    rq.adjust.min_tokens = first + 4;
    ex_run(e, &rq, &held);
    bool early = false;
    for (int g = 0; g < held.n && g < first + 4; g++)
        early |= held.toks[g] == stop_id;
    CHECK(held.done && held.n >= first + 4 && !early && !memcmp(held.toks, adj.toks, sizeof(int32_t) * (size_t)first),
          "min_tokens %d: %d tokens, the stop id not among the first %d", first + 4, held.n, first + 4);

    /* bad values are refused at submission */
    rq = base;
    rq.adjust.repetition_penalty = 3.0f;
    CHECK(ex_submit_status(e, &rq) == OKV_ERR_INVALID_ARG, "submit: repetition_penalty 3 is refused");
    rq = base;
    const int32_t far_id = V + 5;
    rq.stop_token_ids = &far_id;
    rq.n_stop_token_ids = 1;
    CHECK(ex_submit_status(e, &rq) == OKV_ERR_INVALID_ARG, "submit: a stop token id past the vocabulary is refused");
    rq = base;
    rq.adjust.bias_id = &far_id;
    rq.adjust.bias = b_val;
    rq.adjust.n_bias = 1;
    CHECK(ex_submit_status(e, &rq) == OKV_ERR_INVALID_ARG, "submit: a logit_bias id past the vocabulary is refused");
    printf("  sampling extras: penalties + logit_bias = the adjusted greedy loop (%d of %d tokens changed), "
           "stop_token_ids stop after %d, min_tokens holds it to %d\n", differ, EX_GEN, stopped.n, held.n);
}

/* prio: the requests' priorities under the priority policy (NULL: first come, first served) */
static void run_prio(okv_engine *e, int32_t prompts[NREQ][PROMPT], int first, int count, struct out *outs, const int *prio)
{
    struct okv_sched_params sp = {.max_num_seqs = NREQ, .max_num_batched_tokens = 64, .priority_policy = prio != NULL};
    finish_seq = 0;
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (!s)
        return;
    for (int i = first; i < first + count; i++) {
        struct okv_sched_request rq = {.prompt = prompts[i], .n_prompt = PROMPT, .max_tokens = GEN,
                                       .ignore_eos = true, .on_token = on_token, .on_finish = on_finish, .user = &outs[i],
                                       .priority = prio ? prio[i] : 0};
        uint64_t id;
        CHECK(okv_sched_submit(s, &rq, &id) == OKV_OK, "submit: %s", okv_last_error());
    }
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++)
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    CHECK(!busy, "the scheduler did not finish");
    okv_sched_free(s);
}

static void run(okv_engine *e, int32_t prompts[NREQ][PROMPT], int first, int count, struct out *outs)
{
    run_prio(e, prompts, first, count, outs, NULL);
}

/* ---- overlapped decoding (okv_sched_params.sync_steps false, the default) ---- */

#define OV_N 6
#define OV_CANCEL 2

/* OV_N requests of different prompt lengths, max_tokens and sampling (odd ones at
 * temperature 0.8, seeded) through `slots` slots (3: requests finish at different steps
 * and others are admitted); request OV_CANCEL is cancelled at step cancel_at (< 0: never). */
static long long ov_run(okv_engine *e, int32_t prompts[][PROMPT], bool sync, int cancel_at, int extra, int slots,
                        struct out *o, long long *steps)
{
    struct okv_sched_params sp = {.max_num_seqs = slots, .max_num_batched_tokens = 32, .sync_steps = sync};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (!s)
        return -1;
    memset(o, 0, sizeof(struct out) * OV_N);
    uint64_t ids[OV_N];
    for (int i = 0; i < OV_N; i++) {
        struct okv_sched_request rq = {.prompt = prompts[i % NREQ], .n_prompt = PROMPT - 3 * i, .max_tokens = 8 + 9 * i + extra,
                                       .ignore_eos = true, .on_token = on_token, .on_finish = on_finish, .user = &o[i]};
        if (i & 1) {
            rq.sampling.temperature = 0.8f;
            rq.sampling.seed = 100 + (uint64_t)i;
        }
        CHECK(okv_sched_submit(s, &rq, &ids[i]) == OKV_OK, "submit %d: %s", i, okv_last_error());
    }
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++) {
        if (step == cancel_at)
            okv_sched_cancel(s, ids[OV_CANCEL]);
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    }
    struct okv_sched_metrics m;
    okv_sched_metrics(s, &m);
    *steps = (long long)m.steps_total;
    okv_sched_free(s);
    CHECK(okv_engine_queued(e) == 0, "a step is still queued after the scheduler stopped");
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0 && okv_kv_used_host_blocks(okv_engine_kv(e)) == 0,
          "%s: blocks left in use", sync ? "synchronous" : "overlapped");
    return (long long)m.steps_overlapped_total;
}

/* Overlapped against synchronous steps on one engine: the same tokens. With admissions
 * (slots < OV_N) the two modes batch differently (an overlapped step is queued before the
 * finished request's slot frees), which a GPU's GEMMs may round differently: there the
 * test gives every request a slot from the start, so that both modes run the same batches. */
static void test_overlap(okv_backend *be, const struct okv_model *m, int32_t prompts[][PROMPT], int block, int budget,
                         int slots)
{
    const int extra = block > 4 ? 60 : 0;   /* blocks of 16: long enough to pass the budget */
    struct okv_engine_params prm = {.block_size = block, .max_ctx = 256, .max_seqs = slots, .max_batch_tokens = 64,
                                    .kv_budget = budget};
    okv_engine *e = NULL;
    CHECK(okv_engine_create(m, be, &prm, &e) == OKV_OK, "%s", okv_last_error());
    if (!e)
        return;
    CHECK(okv_engine_can_queue(e), "the CPU backend queues steps");
    static struct out sync_o[OV_N], ovl_o[OV_N];
    for (int pass = 0; pass < 2; pass++) {
        const int cancel_at = pass ? 12 : -1;
        long long steps_sync = 0, steps_ovl = 0;
        long long n_sync = ov_run(e, prompts, true, cancel_at, extra, slots, sync_o, &steps_sync);
        long long n_ovl = ov_run(e, prompts, false, cancel_at, extra, slots, ovl_o, &steps_ovl);
        /* every step but the first follows a queued one */
        CHECK(n_sync == 0 && n_ovl == steps_ovl - 1, "budget %d: %lld of %lld steps overlapped (synchronous: %lld)", budget,
              n_ovl, steps_ovl, n_sync);
        int same = 0;
        for (int i = 0; i < OV_N; i++) {
            if (pass && i == OV_CANCEL) {
                CHECK(sync_o[i].done && ovl_o[i].done && sync_o[i].reason == OKV_FINISH_ABORT &&
                      ovl_o[i].reason == OKV_FINISH_ABORT, "budget %d: the cancelled request finished %d / %d", budget,
                      sync_o[i].reason, ovl_o[i].reason);
                continue;
            }
            const int want = 8 + 9 * i + extra;
            same += ovl_o[i].done && ovl_o[i].reason == OKV_FINISH_LENGTH && ovl_o[i].n == want && sync_o[i].n == want &&
                    !memcmp(ovl_o[i].toks, sync_o[i].toks, sizeof(int32_t) * (size_t)want);
        }
        CHECK(same == OV_N - pass, "budget %d%s: %d of %d requests give the same tokens overlapped and synchronous", budget,
              pass ? ", one cancelled" : "", same, OV_N - pass);
        printf("  overlapped decoding (%s), budget %d, %d slots%s: %lld of the steps overlapped, %d requests equal to "
               "synchronous steps\n", be->ops->name, budget, slots, pass ? ", a request cancelled mid-run" : "", n_ovl, same);
    }
    /* the engine's own rules: a third queued step, a row taking a sampled row that does not exist */
    int seq;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "%s", okv_last_error());
    int32_t tok = 5, prev = 0, ids[4], n_ids = 0;
    uint8_t want = 1;
    struct okv_sampling greedy = {0};
    double u = 0;
    struct okv_batch b = {1, &tok, &seq, &want, NULL};
    CHECK(okv_engine_collect(e, ids, &n_ids) == OKV_ERR_INVALID_ARG, "collect with nothing queued is refused");
    CHECK(okv_engine_forward_queue(e, &b, NULL, &greedy, &u) == OKV_OK, "%s", okv_last_error());
    prev = 1;
    CHECK(okv_engine_forward_queue(e, &b, &prev, &greedy, &u) == OKV_ERR_INVALID_ARG,
          "a row taking sampled row 1 of a one-row step is refused");
    prev = 0;
    CHECK(okv_engine_forward_queue(e, &b, &prev, &greedy, &u) == OKV_OK, "%s", okv_last_error());
    CHECK(okv_engine_forward_queue(e, &b, &prev, &greedy, &u) == OKV_ERR_INVALID_ARG, "a third queued step is refused");
    int32_t first = -1;
    CHECK(okv_engine_collect(e, &first, &n_ids) == OKV_OK && n_ids == 1, "%s", okv_last_error());
    CHECK(okv_engine_collect(e, ids, &n_ids) == OKV_OK && n_ids == 1 && okv_engine_queued(e) == 0, "%s", okv_last_error());
    {   /* a queued step without logit rows (a prefill chunk) is collected too, with no ids */
        int sq;
        int32_t pre[3] = {7, 8, 9};
        int32_t sqs[3];
        uint8_t none[3] = {0, 0, 0};
        CHECK(okv_engine_seq_create(e, &sq) == OKV_OK, "%s", okv_last_error());
        sqs[0] = sqs[1] = sqs[2] = sq;
        struct okv_batch bp = {3, pre, sqs, none, NULL};
        CHECK(okv_engine_forward_queue(e, &bp, NULL, &greedy, &u) == OKV_OK, "prefill-only queue: %s", okv_last_error());
        n_ids = -1;
        CHECK(okv_engine_collect(e, ids, &n_ids) == OKV_OK && n_ids == 0 && okv_engine_queued(e) == 0,
              "a queued step without logit rows collects with no ids (%d): %s", n_ids, okv_last_error());
        okv_engine_seq_free(e, sq);
    }
    /* the second step's row took the first's sample on the backend: the same as feeding it */
    okv_engine_seq_free(e, seq);
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "%s", okv_last_error());
    int32_t a = -1, c2 = -1;
    CHECK(okv_engine_forward_sample(e, &b, &greedy, &u, &a, NULL) == OKV_OK, "%s", okv_last_error());
    CHECK(a == first, "the queued step sampled %d, the synchronous one %d", first, a);
    struct okv_batch b2 = {1, &a, &seq, &want, NULL};
    CHECK(okv_engine_forward_sample(e, &b2, &greedy, &u, &c2, NULL) == OKV_OK && c2 == ids[0],
          "a row fed the sampled token gives %d; the row that took it on the backend %d", c2, ids[0]);
    okv_engine_seq_free(e, seq);
    okv_engine_free(e);
}

/* ---- overlapped decoding on text: stop strings, end of generation, prefix caching, and a
 * request with logprobs (whose steps need logits on the host) among them ---- */

#define TX_N 8
struct tout {
    int32_t toks[OUT_CAP];
    int n;
    char text[2048];
    size_t len;
    bool done;
    enum okv_finish reason;
    int n_lp;
    double lp_sum;   /* of the chosen tokens' logprobs: equal runs give equal sums, bit for bit */
};

static void tx_on_token(void *user, int32_t token, const char *text, size_t len)
{
    struct tout *o = user;
    if (token >= 0 && o->n < OUT_CAP)
        o->toks[o->n++] = token;
    if (o->len + len < sizeof o->text) {
        memcpy(o->text + o->len, text, len);
        o->len += len;
        o->text[o->len] = 0;
    }
}

static void tx_on_finish(void *user, const struct okv_sched_result *r)
{
    struct tout *o = user;
    o->done = true;
    o->reason = r->reason;
}

static void tx_on_logprob(void *user, const struct okv_token_logprob *lp)
{
    ((struct tout *)user)->n_lp++;
    ((struct tout *)user)->lp_sum += lp->logprob;
}

/* TX_N requests through 3 slots (admissions while a step is queued), sharing a prompt prefix
 * (prefix caching attaches it), request 5 with logprobs; stops[i] non-empty: its stop string */
static long long n_mixed[3];   /* steps with some rows on the host, of the last run synchronous, overlapped, all rows */
static long long tx_steps;     /* steps of the last run */
static int tx_cancel_at = -1;  /* request TX_CANCEL is cancelled at this step (< 0: never) */
#define TX_CANCEL 7

/* hs: requests 3 and 6 are sampled on the host (min_p; a presence penalty), else only request 5's
 * logprobs need a row on the host */
static long long tx_run(okv_engine *e, const okv_tokenizer *tok, int32_t *prompts[], const size_t *np,
                        char stops[][64], bool sync, struct tout *o, bool hs)
{
    struct okv_sched_params sp = {.max_num_seqs = 3, .max_num_batched_tokens = 32, .sync_steps = sync};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, tok, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (!s)
        return -1;
    memset(o, 0, sizeof(struct tout) * TX_N);
    uint64_t ids[TX_N] = {0};
    for (int i = 0; i < TX_N; i++) {
        const char *sv[1] = {stops[i]};
        struct okv_sched_request rq = {.prompt = prompts[i], .n_prompt = (int)np[i], .max_tokens = 30 + 9 * i,
                                       .on_token = tx_on_token, .on_finish = tx_on_finish, .user = &o[i]};
        if (stops[i][0]) {
            rq.stop = sv;
            rq.n_stop = 1;
        }
        if (i == 5) {
            rq.logprobs = true;
            rq.top_logprobs = 2;
            rq.on_logprob = tx_on_logprob;
        }
        if (i & 1) {
            rq.sampling.temperature = 0.9f;
            rq.sampling.seed = 7 + (uint64_t)i;
        }
        if (i == 3 && hs)   /* sampled on the host (min_p), drawing its own numbers there */
            rq.sampling.min_p = 0.05f;
        if (i == 6 && hs)   /* greedy on adjusted logits */
            rq.adjust.presence_penalty = 1.5f;
        CHECK(okv_sched_submit(s, &rq, &ids[i]) == OKV_OK, "submit %d: %s", i, okv_last_error());
    }
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++) {
        if (step == tx_cancel_at)
            okv_sched_cancel(s, ids[TX_CANCEL]);
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    }
    struct okv_sched_metrics m;
    okv_sched_metrics(s, &m);
    okv_sched_free(s);
    {
        const char *ar = getenv("OKV_SCHED_ALL_ROWS");
        n_mixed[ar ? 2 : sync ? 0 : 1] = (long long)m.steps_host_rows_total;
        tx_steps = (long long)m.steps_total;
    }
    CHECK(okv_engine_queued(e) == 0 && okv_kv_used_slots(okv_engine_kv(e)) == 0, "%s: a step queued or blocks in use",
          sync ? "synchronous" : "overlapped");
    return (long long)m.steps_overlapped_total;
}

static void test_overlap_text(okv_backend *be)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/models/llama_gqa.Q8_0.gguf", tu_src_dir());
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    okv_engine *e = NULL;
    int32_t *prompts[TX_N] = {0};
    size_t np[TX_N] = {0};
    if (okv_model_load(path, &m) != OKV_OK || okv_tokenizer_from_gguf(m->gguf, &tok) != OKV_OK) {
        CHECK(0, "load %s: %s", path, okv_last_error());
        goto done;
    }
    struct okv_engine_params prm = {.block_size = 16, .max_ctx = 256, .max_seqs = 3, .max_batch_tokens = 64,
                                    .prefix_caching = true};
    CHECK(okv_engine_create(m, be, &prm, &e) == OKV_OK, "%s", okv_last_error());
    if (!e)
        goto done;
    for (int i = 0; i < TX_N; i++) {
        char text[256];
        snprintf(text, sizeof text, "A long shared preface about rivers, mountains, towns and the roads between "
                 "them, told twice: rivers, mountains, towns and roads. Question %d: what comes next?", i);
        CHECK(okv_tokenizer_encode(tok, text, strlen(text), true, false, &prompts[i], &np[i]) == OKV_OK, "encode");
    }
    static struct tout base[TX_N], a[TX_N], b[TX_N];
    static char stops[TX_N][64];
    memset(stops, 0, sizeof stops);
    tx_run(e, tok, prompts, np, stops, true, base, true);
    /* stop strings from the middle of what came out (stops, then, mid-generation) */
    int with_stop = 0;
    for (int i = 0; i < TX_N; i += 2)
        if (base[i].len >= 12) {
            memcpy(stops[i], base[i].text + base[i].len / 2, 3);
            with_stop++;
        }
    long long n_sync = tx_run(e, tok, prompts, np, stops, true, a, true);
    long long n_ovl = tx_run(e, tok, prompts, np, stops, false, b, true);
    /* the steps with requests sampled or scored on the host (3: min_p, 5: logprobs, 6: a presence
     * penalty) bring only those rows' logits over and the backend samples the rest; with
     * OKV_SCHED_ALL_ROWS=1 every row comes over and the host samples them all: the same tokens */
    static struct tout all[TX_N];
    setenv("OKV_SCHED_ALL_ROWS", "1", 1);
    tx_run(e, tok, prompts, np, stops, true, all, true);
    unsetenv("OKV_SCHED_ALL_ROWS");
    int same_all = 0;
    for (int i = 0; i < TX_N; i++)
        same_all += all[i].done && a[i].done && all[i].n == a[i].n && all[i].n_lp == a[i].n_lp &&
                    all[i].lp_sum == a[i].lp_sum && !memcmp(all[i].toks, a[i].toks, sizeof(int32_t) * (size_t)a[i].n) &&
                    !strcmp(all[i].text, a[i].text);
    CHECK(same_all == TX_N, "text: %d of %d requests equal with only the host-sampled rows' logits copied and with all rows",
          same_all, TX_N);
    /* logprobs alone (request 5): its steps are queued like any other, its row copied behind
     * the ids; the same tokens and logprobs as synchronous steps */
    static struct tout c[TX_N], d[TX_N];
    tx_run(e, tok, prompts, np, stops, true, c, false);
    const long long n_ovl_lp = tx_run(e, tok, prompts, np, stops, false, d, false);
    const long long steps_lp = tx_steps, rows_lp = n_mixed[1];
    /* exact on the CPU; on a GPU an overlapped step still carries the rows of requests that
     * finished with the step before it (their finish is seen only when it is collected), so
     * some batches are larger than in the synchronous run and the GEMMs' rounding differs:
     * logprobs within 0.01 a token (a wrong row would be off by nats) */
    const double lp_tol = strcmp(be->ops->name, "cpu") ? 0.01 : 0.0;
    int same_lp = 0;
    for (int i = 0; i < TX_N; i++) {
        const bool eq = c[i].done && d[i].done && c[i].n == d[i].n && c[i].n_lp == d[i].n_lp &&
                        fabs(c[i].lp_sum - d[i].lp_sum) <= lp_tol * c[i].n_lp &&
                        !memcmp(c[i].toks, d[i].toks, sizeof(int32_t) * (size_t)c[i].n) && !strcmp(c[i].text, d[i].text);
        same_lp += eq;
        if (!eq) {
            int at = 0;
            while (at < c[i].n && at < d[i].n && c[i].toks[at] == d[i].toks[at])
                at++;
            printf("  logprobs alone, request %d differs: %d / %d tokens (first difference at %d), %d / %d logprobs, "
                   "sums %.9g / %.9g\n", i, c[i].n, d[i].n, at, c[i].n_lp, d[i].n_lp, c[i].lp_sum, d[i].lp_sum);
        }
    }
    /* the same with request 7 cancelled while it runs beside request 5: its row drops out of the
     * queued step's list, the copied rows keep their places */
    static struct tout c2[TX_N], d2[TX_N];
    tx_cancel_at = 120;
    tx_run(e, tok, prompts, np, stops, true, c2, false);
    tx_run(e, tok, prompts, np, stops, false, d2, false);
    tx_cancel_at = -1;
    int same_cancel = 0;
    for (int i = 0; i < TX_N; i++)
        same_cancel += i == TX_CANCEL ? c2[i].reason == OKV_FINISH_ABORT && d2[i].reason == OKV_FINISH_ABORT && c2[i].n > 0 &&
                                            d2[i].n > 0
                              : c2[i].done && d2[i].done && c2[i].n == d2[i].n && c2[i].n_lp == d2[i].n_lp &&
                                    fabs(c2[i].lp_sum - d2[i].lp_sum) <= lp_tol * c2[i].n_lp &&
                                    !memcmp(c2[i].toks, d2[i].toks, sizeof(int32_t) * (size_t)c2[i].n);
    CHECK(same_cancel == TX_N && d2[5].n_lp == d2[5].n && d2[5].n > 0, "text, logprobs alone, request %d cancelled at "
          "step %d (%d / %d tokens out, finish %d / %d): %d of %d requests as expected", TX_CANCEL, 120, c2[TX_CANCEL].n,
          d2[TX_CANCEL].n, c2[TX_CANCEL].reason, d2[TX_CANCEL].reason, same_cancel, TX_N);
    CHECK(same_lp == TX_N && d[5].n_lp == d[5].n && d[5].n > 0 && rows_lp > 0 && n_ovl_lp >= steps_lp - 2,
          "text, logprobs alone: %d of %d requests equal overlapped and synchronous (request 5: %d logprobs of %d tokens; "
          "%lld of %lld steps overlapped, %lld with copied rows)", same_lp, TX_N, d[5].n_lp, d[5].n, n_ovl_lp, steps_lp,
          rows_lp);
    int same = 0, stopped = 0;
    for (int i = 0; i < TX_N; i++) {
        same += a[i].done && b[i].done && a[i].reason == b[i].reason && a[i].n == b[i].n && a[i].len == b[i].len &&
                !memcmp(a[i].toks, b[i].toks, sizeof(int32_t) * (size_t)a[i].n) && !strcmp(a[i].text, b[i].text) &&
                a[i].n_lp == b[i].n_lp;
        stopped += b[i].reason == OKV_FINISH_STOP;
    }
    CHECK(same == TX_N && n_sync == 0 && n_ovl > 0 && with_stop > 0 && stopped >= with_stop && b[5].n_lp == b[5].n,
          "text: %d of %d requests equal overlapped and synchronous (%d stopped, %d with a stop string; %lld steps "
          "overlapped; request 5: %d logprobs of %d tokens)", same, TX_N, stopped, with_stop, n_ovl, b[5].n_lp, b[5].n);
    struct okv_engine_stats es;
    okv_engine_stats_get(e, &es);
    CHECK(es.prefix_hit_tokens > 0, "text: the shared prompt prefix was never attached");
    CHECK(n_mixed[0] > 0 && n_mixed[1] > 0 && n_mixed[2] == 0, "text: steps with some rows on the host: %lld synchronous, "
          "%lld overlapped, %lld with OKV_SCHED_ALL_ROWS=1", n_mixed[0], n_mixed[1], n_mixed[2]);
    printf("  overlapped decoding on text: %d of %d requests equal to synchronous steps (%d stopped by a stop string or "
           "the end of generation), %lld steps overlapped, %lld prompt tokens from the prefix cache; %d of %d equal with "
           "every logit row on the host (%lld steps with some); with logprobs alone %d of %d equal, %lld of %lld steps "
           "overlapped (%lld copying rows); request %d cancelled after %d / %d tokens beside request 5 (%d / %d logprobs), the "
           "rest equal\n", same, TX_N, stopped, n_ovl, (long long)es.prefix_hit_tokens,
           same_all, TX_N, n_mixed[0], same_lp, TX_N, n_ovl_lp, steps_lp, rows_lp, TX_CANCEL, c2[TX_CANCEL].n,
           d2[TX_CANCEL].n, c2[5].n_lp, d2[5].n_lp);
done:
    for (int i = 0; i < TX_N; i++)
        okv_free(prompts[i]);
    okv_engine_free(e);
    okv_tokenizer_free(tok);
    okv_model_free(m);
}

int main(void)
{
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    struct synth_model sm;
    synth_model_init(&sm, OKV_ARCH_LLAMA, 77);
    int32_t prompts[NREQ][PROMPT];
    struct okv_rng rng;
    okv_rng_seed(&rng, 3);
    for (int i = 0; i < NREQ; i++)
        for (int t = 0; t < PROMPT; t++)
            prompts[i][t] = (int32_t)(okv_rng_next(&rng) % 200);

    /* references: each request alone on a roomy engine */
    static struct out alone[NREQ], together[NREQ];
    struct okv_engine_params big = {.block_size = 4, .max_ctx = 256, .max_seqs = NREQ, .max_batch_tokens = 64,
                                    .kv_budget = 256};
    okv_engine *e = NULL;
    CHECK(okv_engine_create(&sm.m, be, &big, &e) == OKV_OK, "%s", okv_last_error());
    for (int i = 0; i < NREQ; i++)
        run(e, prompts, i, 1, alone);
    test_logprobs(e, &sm.m.cfg, prompts[0]);
    test_extras(e, &sm.m.cfg, prompts[1]);
    okv_engine_free(e);
    {
        /* sparse (a budget of 24 of 56 tokens): the prefill reads every block, so the
         * prompt's entries equal the dense engine's */
        struct okv_engine_params sparse = big;
        sparse.kv_budget = 24;
        CHECK(okv_engine_create(&sm.m, be, &sparse, &e) == OKV_OK, "%s", okv_last_error());
        static struct lp_out sp;
        lp_run(e, lp_all, PROMPT + LP_GEN, 4, true, true, 16, &sp);
        float worst = 0;
        for (int k = 1; k < PROMPT + LP_GEN && k < sp.n; k++)
            worst = fmaxf(worst, fabsf(sp.v[k].logprob - lp_dense.v[k].logprob));
        CHECK(sp.done && sp.n == PROMPT + LP_GEN + sp.n_toks && sp.n_toks == 4 && worst <= 1e-3f,
              "sparse: %d entries, %d tokens, prompt entries within %.2e of the dense engine's", sp.n, sp.n_toks, (double)worst);
        printf("  sparse (budget 24): prompt entries within %.2e of dense\n", (double)worst);
        okv_engine_free(e);
    }

    test_overlap(be, &sm.m, prompts, 4, 0, 3);
    test_overlap(be, &sm.m, prompts, 4, 24, 3);
    test_overlap(be, &sm.m, prompts, 16, 96, 3);
    test_overlap(be, &sm.m, prompts, 16, 96, OV_N);
    test_overlap_text(be);
    okv_backend *gpu = NULL;
    if (okv_backend_create("cuda", &bp, &gpu) == OKV_OK) {   /* on a GPU machine: the CUDA backend's queue */
        test_overlap(gpu, &sm.m, prompts, 16, 0, OV_N);
        test_overlap(gpu, &sm.m, prompts, 16, 96, OV_N);
        test_overlap_text(gpu);
        okv_backend_free(gpu);
    } else {
        printf("  overlapped decoding on the CUDA backend: skipped (%s)\n", okv_last_error());
    }

    /* the same four at once, with a host tier of 60 blocks: each request needs 28 */
    struct okv_engine_params tight = big;
    tight.host_blocks = 60;
    CHECK(okv_engine_create(&sm.m, be, &tight, &e) == OKV_OK, "%s", okv_last_error());
    run(e, prompts, 0, NREQ, together);
    int preempted = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(alone[i].done && alone[i].n == GEN, "request %d alone: %d tokens", i, alone[i].n);
        CHECK(together[i].done && together[i].reason == OKV_FINISH_LENGTH, "request %d: finished %d with %d tokens", i,
              together[i].reason, together[i].n);
        CHECK(together[i].n == GEN && !memcmp(alone[i].toks, together[i].toks, sizeof(int32_t) * GEN),
              "request %d: tokens differ from its run alone", i);
        preempted += together[i].preempt;
    }
    CHECK(preempted > 0, "the pool never ran out: no preemption happened");
    printf("  %d preemptions; all %d requests equal their runs alone\n", preempted, NREQ);
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0 && okv_kv_used_host_blocks(okv_engine_kv(e)) == 0, "blocks leaked");
    /* the priority policy on the same pool (two requests fit): the two of lowest priority value run first, whatever
     * their arrival; the one preempted is the last in (priority, arrival) order */
    static const int prio[NREQ] = {3, 0, 2, 1};
    static struct out ranked[NREQ];
    run_prio(e, prompts, 0, NREQ, ranked, prio);
    int rank_preempted = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(ranked[i].done && ranked[i].n == GEN && !memcmp(alone[i].toks, ranked[i].toks, sizeof(int32_t) * GEN),
              "priority policy, request %d: tokens differ from its run alone", i);
        rank_preempted += ranked[i].preempt;
    }
    CHECK(ranked[1].order <= 2 && ranked[3].order <= 2 && ranked[2].order == 3 && ranked[0].order == 4 &&
          ranked[1].preempt == 0 && ranked[3].preempt == 0,
          "priority policy: finished in the order %d %d %d %d (priorities 3 0 2 1), preempted %d %d %d %d",
          ranked[0].order, ranked[1].order, ranked[2].order, ranked[3].order, ranked[0].preempt, ranked[1].preempt,
          ranked[2].preempt, ranked[3].preempt);
    printf("  priority policy: finish order %d %d %d %d for priorities 3 0 2 1 (%d preemptions)\n", ranked[0].order,
           ranked[1].order, ranked[2].order, ranked[3].order, rank_preempted);
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0 && okv_kv_used_host_blocks(okv_engine_kv(e)) == 0, "blocks leaked");
    okv_engine_free(e);
    synth_model_free(&sm);
    okv_backend_free(be);
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_sched");
}
