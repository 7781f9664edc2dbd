/* Model drafting: a draft model (a smaller one with the target's vocabulary, or
 * the target itself for self-speculation) on its own engine with a streaming
 * KV (sink + window), so a draft step costs the same at any context length.
 *
 * The drafter keeps the tokens its KV holds. Each proposal first brings the KV in
 * line with the accepted history: it cuts back to the longest common prefix and
 * feeds the rest (the whole prompt, in chunks, the first time; then the target's
 * correction or bonus token, and the last accepted draft, which was never fed).
 * It then drafts k tokens, feeding each one but the last. accept() drops the KV of
 * the rejected drafts. */
#include "oasiskv/spec.h"

#include <string.h>

struct mdraft {
    okv_engine *e;
    int seq;              /* -1: no sequence yet */
    int32_t *toks;        /* [max_ctx] tokens in the KV, in order */
    int n_kv;
    int n_hist_last;      /* history length at the last proposal */
    int n_fed_last;       /* drafts of the last proposal fed into the KV */
    float *logits;        /* [vocab] */
    float *q;             /* [q_cap][vocab] distributions of the last proposal */
    int q_cap;
    int32_t *rows_seq;    /* [chunk] */
    uint8_t *want;        /* [chunk] */
    int vocab, chunk, max_ctx;
};

static void md_reset(void *ctx)
{
    struct mdraft *d = ctx;
    if (d->seq >= 0)
        okv_engine_seq_free(d->e, d->seq);
    d->seq = -1;
    d->n_kv = 0;
    d->n_fed_last = 0;
}

/* Cut the KV back to len tokens; when the cut reaches blocks that left the
 * streaming window, start the sequence over (it is re-prefilled). */
static void md_cut(struct mdraft *d, int len)
{
    if (len >= d->n_kv)
        return;
    if (okv_engine_seq_truncate(d->e, d->seq, len) == OKV_OK) {
        d->n_kv = len;
        return;
    }
    OKV_LOG_DEBUG("draft model: rollback to %d tokens left the window; prefilling again", len);
    md_reset(d);
}

/* Feed toks into the KV; logits of the last row into d->logits. */
static enum okv_status md_feed(struct mdraft *d, const int32_t *toks, int n)
{
    for (int at = 0; at < n; at += d->chunk) {
        int m = n - at < d->chunk ? n - at : d->chunk;
        for (int i = 0; i < m; i++) {
            d->rows_seq[i] = d->seq;
            d->want[i] = 0;
        }
        d->want[m - 1] = at + m == n;
        struct okv_batch b = {m, toks + at, d->rows_seq, d->want, NULL};
        enum okv_status st = okv_engine_forward(d->e, &b, d->logits);
        if (st != OKV_OK)
            return st;
        memcpy(d->toks + d->n_kv, toks + at, sizeof(int32_t) * (size_t)m);
        d->n_kv += m;
    }
    return OKV_OK;
}

static int32_t md_sample(const float *probs, int n, struct okv_rng *rng)
{
    double u = okv_rng_uniform(rng), cum = 0;
    int32_t last = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f)
            continue;
        cum += probs[i];
        last = i;
        if (u < cum)
            return i;
    }
    return last;
}

static enum okv_status md_propose(void *ctx, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                                  struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out)
{
    struct mdraft *d = ctx;
    enum okv_status st;
    *probs = NULL;
    *n_out = 0;
    d->n_fed_last = 0;
    d->n_hist_last = n_hist;
    if (n_hist > d->max_ctx)
        return OKV_OK;   /* past the drafter's context: no drafts */
    const bool sampling = s->temperature > 0.0f;
    if (sampling && k > d->q_cap) {
        float *q = okv_realloc(d->q, sizeof(float) * (size_t)k * (size_t)d->vocab, OKV_TAG_ENGINE);
        if (!q)
            return okv_set_error(OKV_ERR_NO_MEMORY, "draft model: out of memory");
        d->q = q;
        d->q_cap = k;
    }
    /* bring the KV in line with the history; the last token is always fed, for its logits */
    int c = 0;
    while (c < d->n_kv && c < n_hist - 1 && d->toks[c] == hist[c])
        c++;
    md_cut(d, c);
    if (d->seq < 0 && (st = okv_engine_seq_create(d->e, &d->seq)) != OKV_OK)
        return st;
    if ((st = md_feed(d, hist + d->n_kv, n_hist - d->n_kv)) != OKV_OK) {
        md_reset(d);
        return st;
    }
    for (int i = 0; i < k; i++) {
        int32_t t;
        if (sampling) {
            float *qi = d->q + (size_t)i * d->vocab;
            okv_sampling_probs(d->logits, d->vocab, s, qi);
            t = md_sample(qi, d->vocab, rng);
        } else {
            t = okv_argmax(d->logits, d->vocab);
        }
        tokens[i] = t;
        *n_out = i + 1;
        if (i + 1 == k || d->n_kv >= d->max_ctx)
            break;
        if ((st = md_feed(d, &t, 1)) != OKV_OK) {
            md_reset(d);
            return st;
        }
        d->n_fed_last++;
    }
    if (sampling)
        *probs = d->q;
    return OKV_OK;
}

static void md_accept(void *ctx, int n_accepted)
{
    struct mdraft *d = ctx;
    if (d->seq < 0)
        return;
    int keep = n_accepted < d->n_fed_last ? n_accepted : d->n_fed_last;
    md_cut(d, d->n_hist_last + keep);
}

static okv_engine *md_engine(void *ctx) { return ((struct mdraft *)ctx)->e; }

static void md_free(void *ctx)
{
    struct mdraft *d = ctx;
    if (!d)
        return;
    md_reset(d);
    okv_engine_free(d->e);
    okv_free(d->toks);
    okv_free(d->logits);
    okv_free(d->q);
    okv_free(d->rows_seq);
    okv_free(d->want);
    okv_free(d);
}

static const struct okv_drafter_i model_iface = {
    .name = "model",
    .propose = md_propose,
    .accept = md_accept,
    .reset = md_reset,
    .engine = md_engine,
    .free = md_free,
};

enum okv_status okv_drafter_model_create(const struct okv_model *draft, int target_vocab, okv_backend *be,
                                         const struct okv_drafter_params *p, okv_drafter **out)
{
    *out = NULL;
    if (draft->cfg.vocab_size != target_vocab)
        return okv_set_error(OKV_ERR_INVALID_ARG, "draft model: its vocabulary has %d tokens, the target's %d (they must match)",
                             draft->cfg.vocab_size, target_vocab);
    struct okv_drafter_params dp = p ? *p : (struct okv_drafter_params){0};
    struct okv_engine_params ep = {
        .block_size = dp.block_size > 0 ? dp.block_size : 16,
        .max_ctx = dp.max_ctx,
        .max_batch_tokens = dp.max_batch_tokens > 0 ? dp.max_batch_tokens : 256,
        .kv_budget = dp.kv_budget > 0 ? dp.kv_budget : 256,
        .sink_blocks = dp.sink_blocks,
        .streaming = true,
    };
    struct mdraft *d = okv_calloc(1, sizeof *d, OKV_TAG_ENGINE);
    if (!d)
        return okv_set_error(OKV_ERR_NO_MEMORY, "draft model: out of memory");
    d->seq = -1;
    enum okv_status st = okv_engine_create(draft, be, &ep, &d->e);
    if (st != OKV_OK)
        goto fail;
    d->vocab = target_vocab;
    d->max_ctx = okv_engine_max_ctx(d->e);
    d->chunk = okv_engine_max_batch_tokens(d->e);
    d->toks = okv_malloc(sizeof(int32_t) * (size_t)d->max_ctx, OKV_TAG_ENGINE);
    d->logits = okv_malloc(sizeof(float) * (size_t)d->vocab, OKV_TAG_ENGINE);
    d->rows_seq = okv_malloc(sizeof(int32_t) * (size_t)d->chunk, OKV_TAG_ENGINE);
    d->want = okv_malloc((size_t)d->chunk, OKV_TAG_ENGINE);
    if (!d->toks || !d->logits || !d->rows_seq || !d->want) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "draft model: out of memory");
        goto fail;
    }
    if ((st = okv_drafter_create_custom(&model_iface, d, out)) != OKV_OK)
        goto fail;
    return OKV_OK;
fail:
    md_free(d);
    return st;
}
