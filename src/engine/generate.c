/* One-sequence generation loop (CLI, tests, eval). The server's scheduler runs its
 * own loop over many sequences with the same pieces: engine forward, sampling,
 * streaming detokenizer and the stop-string matcher of engine/stopstr.h.
 *
 * Speculative decoding (a drafter given): the last emitted token is not yet in the
 * target's KV. Each step drafts d1..dk after the accepted history, runs one target
 * forward over [last, d1..dk] (logits on every row, drafts flagged is_draft so a
 * sparse engine predicts the next step's blocks from their queries), verifies
 * (spec/verify.c), drops the KV of the rejected drafts and emits the accepted
 * drafts and the target's token one by one through the same checks as plain
 * decoding (end of generation, stop strings, callback, max_tokens). */
#include "oasiskv/generate.h"
#include "oasiskv/structured.h"
#include "engine/stopstr.h"
#include "engine/engine_internal.h"

#include <string.h>

struct text_buf {
    char *s;
    size_t len, cap;
};

static enum okv_status text_append(struct text_buf *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = okv_realloc(t->s, cap, OKV_TAG_ENGINE);
        if (!p)
            return okv_set_error(OKV_ERR_NO_MEMORY, "generate: out of memory");
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = 0;
    return OKV_OK;
}

void okv_gen_result_free(struct okv_gen_result *res)
{
    if (!res)
        return;
    okv_free(res->tokens);
    okv_free(res->text);
    memset(res, 0, sizeof *res);
}

/* The output side of one generation: tokens, text, stop matching, streaming. */
struct gen_out {
    const okv_tokenizer *tok;
    const struct okv_gen_params *p;
    okv_gen_token_fn cb;
    void *user;
    struct okv_gen_result *res;
    int max_new;
    struct text_buf text;
    struct okv_detok dt;
    size_t emitted;   /* bytes of text already passed to cb */
};

/* Take one sampled token: end of generation, text, stop strings, callback,
 * max_tokens, in that order. *done when generation ends with it. */
static enum okv_status emit_token(struct gen_out *g, int32_t id, bool *done)
{
    const struct okv_gen_params *p = g->p;
    struct okv_gen_result *res = g->res;
    enum okv_status st;
    char piece[256];
    *done = false;
    bool eog = g->tok && !p->ignore_eos && okv_tokenizer_is_eog(g->tok, id);
    if (eog) {
        res->finish_reason = "stop";
        *done = true;
        return OKV_OK;
    }
    res->tokens[res->n_tokens++] = id;
    bool stop = false;
    size_t upto = g->text.len;
    if (g->tok) {
        int w = okv_detok_push(g->tok, &g->dt, id, true, piece, sizeof piece);
        if (w > 0 && (st = text_append(&g->text, piece, (size_t)w)) != OKV_OK)
            return st;
        long at = okv_stop_find(g->text.s, g->text.len, g->emitted, p->stop, p->n_stop, NULL);
        if (at >= 0) {
            g->text.len = (size_t)at;
            g->text.s[g->text.len] = 0;
            upto = g->text.len;
            stop = true;
            res->finish_reason = "stop";
        } else {
            upto = g->text.len - okv_stop_holdback(g->text.s, g->text.len, p->stop, p->n_stop);
        }
    }
    bool go_on = true;
    if (g->cb) {
        go_on = g->cb(g->user, id, g->text.s ? g->text.s + g->emitted : "", upto - g->emitted);
        g->emitted = upto;
    }
    if (stop || !go_on) {
        if (!go_on)
            res->finish_reason = "stop";
        *done = true;
        return OKV_OK;
    }
    if (res->n_tokens >= g->max_new)
        *done = true;
    return OKV_OK;
}

/* Plain decoding: one forward per token. logits holds the prefill's last row and
 * has room for 2 * vocab floats. */
static enum okv_status decode_plain(okv_engine *e, int seq, struct gen_out *g, float *logits, int vocab)
{
    enum okv_status st;
    struct okv_rng rng;
    okv_rng_seed(&rng, g->p->sampling.seed);
    /* the first token from the prefill's logits; then each step samples on the
     * backend, drawing the same uniform numbers in the same order */
    int32_t id = okv_sample(logits, vocab, &g->p->sampling, &rng, logits + vocab);
    for (;;) {
        bool done;
        if ((st = emit_token(g, id, &done)) != OKV_OK)
            return st;
        if (done)
            return OKV_OK;
        int32_t one_seq = seq;
        uint8_t one_want = 1;
        struct okv_batch b = {1, &id, &one_seq, &one_want, NULL};
        double u = g->p->sampling.temperature > 0.0f ? okv_rng_uniform(&rng) : 0.0;
        int32_t next;
        if ((st = okv_engine_forward_sample(e, &b, &g->p->sampling, &u, &next, NULL)) != OKV_OK)
            return st;
        id = next;
    }
}

/* Structured output: one forward per token with its logits on the host, masked by the JSON
 * recognizer's state (oasiskv/structured.h), then sampled; logits holds the prefill's last row
 * and has room for 2 * vocab floats. */
static enum okv_status decode_json(okv_engine *e, int seq, struct gen_out *g, float *logits, int vocab)
{
    const struct okv_gen_params *p = g->p;
    okv_token_trie *trie = NULL;
    enum okv_status st = okv_token_trie_build(g->tok, &trie);
    if (st != OKV_OK)
        return st;
    int32_t *eog = okv_malloc(sizeof(int32_t) * ((size_t)okv_tokenizer_eog_ids(g->tok, vocab, NULL) + 1), OKV_TAG_ENGINE);
    if (!eog) {
        okv_token_trie_free(trie);
        return okv_set_error(OKV_ERR_NO_MEMORY, "generate: out of memory");
    }
    const int n_eog = p->ignore_eos ? 0 : okv_tokenizer_eog_ids(g->tok, vocab, eog);
    struct okv_json_state js;
    if (p->json_schema)
        okv_json_init_schema(&js, p->json_schema);
    else
        okv_json_init(&js, true);
    struct okv_rng rng;
    okv_rng_seed(&rng, p->sampling.seed);
    for (;;) {
        if (okv_json_mask(&js, trie, eog, n_eog, logits, vocab) == 0) {   /* complete, and nothing may follow */
            if (okv_json_overflowed(&js) && !okv_json_complete(&js)) {
                st = okv_set_error(OKV_ERR_UNSUPPORTED, "structured output: the grammar's parses outgrew their limits "
                                   "(nesting deeper than 64 rules, or more than 65,534 parse states); the text is cut");
                break;
            }
            g->res->finish_reason = "stop";
            break;
        }
        const int32_t id = okv_sample(logits, vocab, &p->sampling, &rng, logits + vocab);
        int nb = 0;
        const uint8_t *by = okv_token_trie_bytes(trie, id, &nb);
        okv_json_feed_n(&js, by, (size_t)nb);
        bool done;
        if ((st = emit_token(g, id, &done)) != OKV_OK || done)
            break;
        int32_t one_id = id, one_seq = seq;
        uint8_t one_want = 1;
        struct okv_batch b = {1, &one_id, &one_seq, &one_want, NULL};
        if ((st = okv_engine_forward(e, &b, logits)) != OKV_OK)
            break;
    }
    okv_free(eog);
    okv_token_trie_free(trie);
    return st;
}

/* Speculative decoding's step shapes (1 to rows rows) run twice each on a scratch sequence before the prompt,
 * on a GPU backend: its first steps of a shape pay one-time costs (kernels loaded, cuBLAS plans, the step's
 * graph captured on the second sighting; an 8-row step took 52 ms once on an H100 where it then takes 0.7 ms,
 * session 41) that would otherwise land in the decode time and in the adaptive length's cost line, which then
 * stops drafting. Best effort: where the scratch sequence or a step fails, the rest stays cold. */
static void warm_spec_shapes(okv_engine *e, int rows, int32_t tok, int vocab)
{
    if (!strcmp(e->be->ops->name, "cpu") || rows < 2)
        return;
    int seq = -1;
    float *lg = okv_malloc(sizeof(float) * (size_t)vocab * (size_t)rows, OKV_TAG_ENGINE);
    int32_t t[OKV_SPEC_MAX_TOKENS + 2], sq[OKV_SPEC_MAX_TOKENS + 2];
    uint8_t want[OKV_SPEC_MAX_TOKENS + 2], dr[OKV_SPEC_MAX_TOKENS + 2];
    if (!lg || rows > OKV_SPEC_MAX_TOKENS + 1 || okv_engine_seq_create(e, &seq) != OKV_OK) {
        okv_free(lg);
        return;
    }
    const double t0 = okv_now();
    for (int i = 0; i < rows; i++) {
        t[i] = tok;
        sq[i] = seq;
        want[i] = 1;
    }
    bool ok = true;
    {   /* one token of context, then each shape twice, cut back to it */
        dr[0] = 0;
        struct okv_batch b = {1, t, sq, want, dr};
        ok = okv_engine_forward(e, &b, lg) == OKV_OK;
    }
    for (int r = 1; r <= rows && ok; r++)
        for (int rep = 0; rep < 2 && ok; rep++) {
            for (int i = 0; i < r; i++)
                dr[i] = i > 0;
            struct okv_batch b = {r, t, sq, want, dr};
            ok = okv_engine_forward(e, &b, lg) == OKV_OK && okv_engine_seq_truncate(e, seq, 1) == OKV_OK;
        }
    okv_engine_seq_free(e, seq);
    okv_free(lg);
    OKV_LOG_DEBUG("speculative decoding: steps of 1 to %d rows warmed in %.1f ms%s", rows, 1e3 * (okv_now() - t0),
                  ok ? "" : " (stopped by an error)");
}

/* Speculative decoding; logits holds the prefill's last row. */
static enum okv_status decode_spec(okv_engine *e, int seq, struct gen_out *g, const int32_t *prompt, int n_prompt,
                                   float *logits0, int vocab)
{
    const struct okv_gen_params *p = g->p;
    struct okv_spec_stats *ss = &g->res->spec;
    enum okv_status st = OKV_OK;
    int K = p->spec_tokens > 0 ? p->spec_tokens : 4;
    if (K > okv_engine_max_batch_tokens(e) - 1)
        K = okv_engine_max_batch_tokens(e) - 1;
    const size_t V = (size_t)vocab;
    int32_t *hist = okv_malloc(sizeof(int32_t) * ((size_t)n_prompt + (size_t)g->max_new), OKV_TAG_ENGINE);
    float *logits = okv_malloc(sizeof(float) * V * (size_t)(K + 1), OKV_TAG_ENGINE);
    float *scratch = okv_malloc(sizeof(float) * V * 2, OKV_TAG_ENGINE);
    if (!hist || !logits || !scratch) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "generate: out of memory");
        goto done;
    }
    memcpy(hist, prompt, sizeof(int32_t) * (size_t)n_prompt);
    int n_hist = n_prompt;

    struct okv_rng rng, drng;   /* the target's draws; the drafter's own */
    okv_rng_seed(&rng, p->sampling.seed);
    okv_rng_seed(&drng, p->sampling.seed ^ 0x6a09e667f3bcc909ull);
    int32_t rows_tok[OKV_SPEC_MAX_TOKENS + 1], rows_seq[OKV_SPEC_MAX_TOKENS + 1];
    uint8_t want[OKV_SPEC_MAX_TOKENS + 1], is_draft[OKV_SPEC_MAX_TOKENS + 1];
    int32_t pend[OKV_SPEC_MAX_TOKENS + 1];   /* tokens to emit: accepted drafts, then the target's */
    int n_pend = 1;
    int32_t carry = -1;   /* the own token a deferred step dropped (verify_defer), drafted again */
    struct okv_spec_len len;   /* spec_adaptive: the draft length a step from acceptance and costs */
    struct okv_spec_cost cost;
    okv_spec_len_init(&len, okv_engine_drafts_select(e) ? 1 : 0, K);
    okv_spec_cost_init(&cost);
    long long fwd_n[OKV_SPEC_MAX_TOKENS + 2] = {0};   /* debug: forwards and their seconds by rows */
    double fwd_s[OKV_SPEC_MAX_TOKENS + 2] = {0};
    pend[0] = okv_sample(logits0, vocab, &p->sampling, &rng, logits0 + vocab);
    for (;;) {
        bool done = false;
        for (int i = 0; i < n_pend && !done; i++) {
            if ((st = emit_token(g, pend[i], &done)) != OKV_OK)
                goto done;
            hist[n_hist++] = pend[i];
        }
        if (done)
            break;
        /* at most the tokens still allowed, less the one the target always adds */
        int k = g->max_new - g->res->n_tokens - 1;
        if (k > K)
            k = K;
        int nd = 0, lead = 0;
        const float *q = NULL;
        if (k > 0) {
            /* a deferred own token leads the drafts: the next step's fresh first row verifies it */
            if (carry >= 0) {
                rows_tok[1] = hist[n_hist] = carry;   /* hist has room: a token is still to come */
                lead = 1;
            }
            int kd = k - lead;
            if (p->spec_adaptive && kd > 0)
                kd = okv_spec_len_choose(&len, p->spec_cost ? p->spec_cost : &cost, 1 + lead, 0.0, kd, true);
            double t0 = okv_now();
            /* none chosen: the drafter is not called (a draft model catches up on the tokens it missed in one
             * batch when it drafts again, instead of a forward a token), as in the scheduler */
            st = kd > 0 ? okv_drafter_propose(p->drafter, hist, n_hist + lead, kd, &p->sampling, &drng, rows_tok + 1 + lead,
                                              &q, &nd)
                        : OKV_OK;
            const double dt = okv_now() - t0;
            ss->draft_s += dt;
            okv_spec_cost_draft(&cost, nd, dt);
            if (st != OKV_OK)
                goto done;
            nd += lead;
            if (lead)
                q = NULL;   /* greedy only: no draft distribution is read */
        }
        carry = -1;
        rows_tok[0] = pend[n_pend - 1];
        for (int i = 0; i <= nd; i++) {
            rows_seq[i] = seq;
            want[i] = 1;
            is_draft[i] = i > 0;
        }
        const int len0 = okv_engine_seq_len(e, seq);
        struct okv_batch b = {nd + 1, rows_tok, rows_seq, want, is_draft};
        const double tf = okv_now();
        if ((st = okv_engine_forward(e, &b, logits)) != OKV_OK)
            goto done;
        const double dtf = okv_now() - tf;
        if (okv_spec_cost_settled(&cost, nd + 1))
            okv_spec_cost_forward(&cost, nd + 1, dtf);
        fwd_n[nd + 1]++;
        fwd_s[nd + 1] += dtf;
        int32_t next;
        int acc = okv_spec_verify(logits, vocab, rows_tok + 1, q, nd, &p->sampling, &rng, scratch, &next);
        if (nd > 0) {
            ss->drafts++;
            ss->draft_tokens += nd;
            ss->accepted_tokens += acc;
            for (int i = 0; i < nd; i++) {
                ss->pos_proposed[i]++;
                ss->pos_accepted[i] += i < acc;
            }
            okv_drafter_accept(p->drafter, acc > lead ? acc - lead : 0);
            if (acc >= lead)   /* the drafter's own tokens (a carried token is the target's) */
                okv_spec_len_observe(&len, nd - lead, acc - lead);
            if (acc < nd && (st = okv_engine_seq_truncate(e, seq, len0 + 1 + acc)) != OKV_OK)
                goto done;
        }
        memcpy(pend, rows_tok + 1, sizeof(int32_t) * (size_t)acc);
        pend[acc] = next;
        n_pend = acc + 1;
        if (acc > 0 && p->sampling.temperature <= 0.0f && okv_engine_seq_defer_own(e, seq)) {
            /* the target's own token came from a row that read a stale set (verify_defer): keep the
             * accepted drafts, and run the last of them again as the next step's first row */
            if ((st = okv_engine_seq_truncate(e, seq, len0 + acc)) != OKV_OK)
                goto done;
            n_pend = acc;
            ss->deferred++;
            carry = next;
        }
    }
done:
    if (p->spec_adaptive) {
        double t0, row;
        okv_spec_cost_line(&cost, &t0, &row);
        OKV_LOG_DEBUG("adaptive drafts: acceptance %.3f, a forward %.3g s + %.3g s a row, a draft token %.3g s",
                      okv_spec_len_alpha(&len), t0, row, cost.draft_n > 0 ? cost.draft_s / cost.draft_n : 0.0);
    }
    for (int r = 1; r <= OKV_SPEC_MAX_TOKENS + 1; r++)
        if (fwd_n[r] > 0)
            OKV_LOG_DEBUG("speculative decoding: %lld forwards of %d rows, %.3f ms each", fwd_n[r], r,
                          1e3 * fwd_s[r] / (double)fwd_n[r]);
    okv_spec_stats_finish(ss);
    okv_free(hist);
    okv_free(logits);
    okv_free(scratch);
    return st;
}

enum okv_status okv_generate(okv_engine *e, const okv_tokenizer *tok, const int32_t *prompt, int n_prompt,
                             const struct okv_gen_params *p, okv_gen_token_fn cb, void *user,
                             struct okv_gen_result *res)
{
    memset(res, 0, sizeof *res);
    enum okv_status st;
    if (n_prompt <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "generate: the prompt is empty");
    if (p->max_tokens <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "generate: max_tokens %d must be positive", p->max_tokens);
    if ((st = okv_sampling_check(&p->sampling)) != OKV_OK)
        return st;
    if (p->drafter && (p->spec_tokens < 0 || p->spec_tokens > OKV_SPEC_MAX_TOKENS))
        return okv_set_error(OKV_ERR_INVALID_ARG, "generate: spec_tokens %d must be in [1, %d]", p->spec_tokens,
                             OKV_SPEC_MAX_TOKENS);
    const bool json = p->json_object || p->json_schema;
    if (json && !tok)
        return okv_set_error(OKV_ERR_INVALID_ARG, "generate: structured output needs the model's tokenizer");
    if (json && p->drafter)
        return okv_set_error(OKV_ERR_INVALID_ARG, "generate: structured output runs without speculative decoding (a drafter)");
    if (p->drafter && okv_engine_max_batch_tokens(e) < 2)
        return okv_set_error(OKV_ERR_INVALID_ARG, "generate: speculative decoding needs batches of 2 rows or more (engine has %d)",
                             okv_engine_max_batch_tokens(e));
    const int max_ctx = okv_engine_max_ctx(e);
    if (n_prompt >= max_ctx)
        return okv_set_error(OKV_ERR_CONTEXT, "prompt of %d tokens does not fit the context length %d (leave room for one generated token)",
                             n_prompt, max_ctx);
    const int vocab = okv_engine_model_config(e)->vocab_size;
    int max_new = p->max_tokens;
    if (n_prompt + max_new > max_ctx)
        max_new = max_ctx - n_prompt;

    int seq = -1;
    float *logits = okv_malloc(sizeof(float) * (size_t)vocab * 2, OKV_TAG_ENGINE);
    struct gen_out g = {.tok = tok, .p = p, .cb = cb, .user = user, .res = res, .max_new = max_new};
    res->tokens = okv_malloc(sizeof(int32_t) * (size_t)max_new, OKV_TAG_ENGINE);
    if (!logits || !res->tokens) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "generate: out of memory");
        goto done;
    }
    if ((st = okv_engine_seq_create(e, &seq)) != OKV_OK)
        goto done;
    res->prompt_tokens = n_prompt;
    if (p->drafter) {   /* the verify steps' shapes, outside the timed prefill and decode */
        int K = p->spec_tokens > 0 ? p->spec_tokens : 4;
        if (K > okv_engine_max_batch_tokens(e) - 1)
            K = okv_engine_max_batch_tokens(e) - 1;
        warm_spec_shapes(e, K + 1, prompt[0], vocab);
    }

    /* prefill in chunks; logits of the last prompt token only */
    double t0 = okv_now();
    if ((st = okv_engine_prefill(e, seq, prompt, n_prompt, p->prefill_chunk, logits)) != OKV_OK)
        goto done;
    double t1 = okv_now();
    res->prefill_s = t1 - t0;

    res->finish_reason = "length";
    if (p->drafter)
        st = decode_spec(e, seq, &g, prompt, n_prompt, logits, vocab);
    else if (json)
        st = decode_json(e, seq, &g, logits, vocab);
    else
        st = decode_plain(e, seq, &g, logits, vocab);
    if (st != OKV_OK)
        goto done;
    if (tok && strcmp(res->finish_reason, "length") == 0) {
        char piece[256];
        int w = okv_detok_flush(&g.dt, piece, sizeof piece);
        if (w > 0 && (st = text_append(&g.text, piece, (size_t)w)) != OKV_OK)
            goto done;
    }
    if (cb && g.text.len > g.emitted)
        cb(user, -1, g.text.s + g.emitted, g.text.len - g.emitted);
    res->decode_s = okv_now() - t1;
    if (!g.text.s && (st = text_append(&g.text, "", 0)) != OKV_OK)
        goto done;
    res->text = g.text.s;
    res->text_len = g.text.len;
    g.text.s = NULL;
    st = OKV_OK;
done:
    okv_engine_seq_free(e, seq);
    if (p->drafter)
        okv_drafter_reset(p->drafter);
    okv_free(logits);
    okv_free(g.text.s);
    if (st != OKV_OK)
        okv_gen_result_free(res);
    return st;
}
