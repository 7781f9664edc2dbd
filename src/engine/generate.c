/* One-sequence generation loop (CLI, tests, eval). The server's scheduler runs its
 * own loop over many sequences with the same pieces: engine forward, sampling,
 * streaming detokenizer and the stop-string matcher of engine/stopstr.h. */
#include "oasiskv/generate.h"
#include "engine/stopstr.h"

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
    int32_t *rows_seq = NULL;
    uint8_t *want = NULL;
    struct text_buf text = {0};
    res->tokens = okv_malloc(sizeof(int32_t) * (size_t)max_new, OKV_TAG_ENGINE);
    int chunk = p->prefill_chunk > 0 ? p->prefill_chunk : okv_engine_max_batch_tokens(e);
    if (chunk > okv_engine_max_batch_tokens(e))
        chunk = okv_engine_max_batch_tokens(e);
    rows_seq = okv_malloc(sizeof(int32_t) * (size_t)chunk, OKV_TAG_ENGINE);
    want = okv_calloc((size_t)chunk, 1, OKV_TAG_ENGINE);
    if (!logits || !res->tokens || !rows_seq || !want) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "generate: out of memory");
        goto done;
    }
    if ((st = okv_engine_seq_create(e, &seq)) != OKV_OK)
        goto done;
    res->prompt_tokens = n_prompt;

    /* prefill in chunks; logits of the last prompt token only */
    double t0 = okv_now();
    for (int at = 0; at < n_prompt; at += chunk) {
        int n = n_prompt - at < chunk ? n_prompt - at : chunk;
        for (int i = 0; i < n; i++) {
            rows_seq[i] = seq;
            want[i] = 0;
        }
        want[n - 1] = at + n == n_prompt;
        struct okv_batch b = {n, prompt + at, rows_seq, want, NULL};
        if ((st = okv_engine_forward(e, &b, logits)) != OKV_OK)
            goto done;
    }
    double t1 = okv_now();
    res->prefill_s = t1 - t0;

    struct okv_rng rng;
    okv_rng_seed(&rng, p->sampling.seed);
    struct okv_detok dt = {0};
    size_t emitted = 0;           /* bytes of text already passed to cb */
    res->finish_reason = "length";
    char piece[256];
    for (;;) {
        int32_t id = okv_sample(logits, vocab, &p->sampling, &rng, logits + vocab);
        bool eog = tok && !p->ignore_eos && okv_tokenizer_is_eog(tok, id);
        if (eog) {
            res->finish_reason = "stop";
            break;
        }
        res->tokens[res->n_tokens++] = id;
        bool stop = false;
        size_t upto = text.len;
        if (tok) {
            int w = okv_detok_push(tok, &dt, id, true, piece, sizeof piece);
            if (w > 0 && (st = text_append(&text, piece, (size_t)w)) != OKV_OK)
                goto done;
            long at = okv_stop_find(text.s, text.len, emitted, p->stop, p->n_stop);
            if (at >= 0) {
                text.len = (size_t)at;
                text.s[text.len] = 0;
                upto = text.len;
                stop = true;
                res->finish_reason = "stop";
            } else {
                upto = text.len - okv_stop_holdback(text.s, text.len, p->stop, p->n_stop);
            }
        }
        bool go_on = true;
        if (cb) {
            go_on = cb(user, id, text.s ? text.s + emitted : "", upto - emitted);
            emitted = upto;
        }
        if (stop || !go_on) {
            if (!go_on)
                res->finish_reason = "stop";
            break;
        }
        if (res->n_tokens >= max_new)
            break;
        int32_t one_seq = seq;
        uint8_t one_want = 1;
        struct okv_batch b = {1, &id, &one_seq, &one_want, NULL};
        if ((st = okv_engine_forward(e, &b, logits)) != OKV_OK)
            goto done;
    }
    if (tok && strcmp(res->finish_reason, "length") == 0) {
        int w = okv_detok_flush(&dt, piece, sizeof piece);
        if (w > 0 && (st = text_append(&text, piece, (size_t)w)) != OKV_OK)
            goto done;
    }
    if (cb && text.len > emitted)
        cb(user, -1, text.s + emitted, text.len - emitted);
    res->decode_s = okv_now() - t1;
    if (!text.s && (st = text_append(&text, "", 0)) != OKV_OK)
        goto done;
    res->text = text.s;
    res->text_len = text.len;
    text.s = NULL;
    st = OKV_OK;
done:
    okv_engine_seq_free(e, seq);
    okv_free(logits);
    okv_free(rows_seq);
    okv_free(want);
    okv_free(text.s);
    if (st != OKV_OK)
        okv_gen_result_free(res);
    return st;
}
