/* The drafter handle (a function table and its state), construction by name, and
 * the statistics of speculative verification. */
#include "oasiskv/spec.h"

#include <string.h>

struct okv_drafter {
    const struct okv_drafter_i *iface;
    void *ctx;
};

enum okv_status okv_drafter_create_custom(const struct okv_drafter_i *iface, void *ctx, okv_drafter **out)
{
    *out = NULL;
    if (!iface || !iface->propose || !iface->free)
        return okv_set_error(OKV_ERR_INVALID_ARG, "drafter: the interface needs propose and free");
    okv_drafter *d = okv_calloc(1, sizeof *d, OKV_TAG_ENGINE);
    if (!d)
        return okv_set_error(OKV_ERR_NO_MEMORY, "drafter: out of memory");
    d->iface = iface;
    d->ctx = ctx;
    *out = d;
    return OKV_OK;
}

void okv_drafter_free(okv_drafter *d)
{
    if (!d)
        return;
    d->iface->free(d->ctx);
    okv_free(d);
}

const char *okv_drafter_name(const okv_drafter *d) { return d->iface->name ? d->iface->name : "custom"; }

enum okv_status okv_drafter_propose(okv_drafter *d, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                                    struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out)
{
    *n_out = 0;
    *probs = NULL;
    if (k <= 0 || n_hist <= 0)
        return OKV_OK;
    enum okv_status st = d->iface->propose(d->ctx, hist, n_hist, k, s, rng, tokens, probs, n_out);
    if (st == OKV_OK && (*n_out < 0 || *n_out > k))
        return okv_set_error(OKV_ERR_INTERNAL, "drafter %s: proposed %d tokens for k = %d", okv_drafter_name(d), *n_out, k);
    return st;
}

void okv_drafter_accept(okv_drafter *d, int n_accepted)
{
    if (d->iface->accept)
        d->iface->accept(d->ctx, n_accepted);
}

void okv_drafter_reset(okv_drafter *d)
{
    if (d && d->iface->reset)
        d->iface->reset(d->ctx);
}

okv_engine *okv_drafter_engine(okv_drafter *d) { return d && d->iface->engine ? d->iface->engine(d->ctx) : NULL; }

enum okv_status okv_drafter_create(const char *spec, const struct okv_model *target, okv_backend *be,
                                   const struct okv_drafter_params *p, okv_drafter **out)
{
    *out = NULL;
    if (!spec)
        return okv_set_error(OKV_ERR_INVALID_ARG, "drafter: no name (expected ngram, self or model:PATH)");
    if (!strcmp(spec, "ngram"))
        return okv_drafter_ngram_create(p, out);
    if (!target || !be)
        return okv_set_error(OKV_ERR_INVALID_ARG, "drafter %s: needs the target model and a backend", spec);
    if (!strcmp(spec, "self"))
        return okv_drafter_model_create(target, target->cfg.vocab_size, be, p, out);
    if (!strncmp(spec, "model:", 6)) {
        const char *path = spec + 6;
        if (!*path)
            return okv_set_error(OKV_ERR_INVALID_ARG, "drafter model: no path (expected model:PATH)");
        struct okv_model *m = NULL;
        enum okv_status st = okv_model_load(path, &m);
        if (st != OKV_OK)
            return st;
        if (m->cfg.vocab_size != target->cfg.vocab_size)
            st = okv_set_error(OKV_ERR_INVALID_ARG, "draft model %s: its vocabulary has %d tokens, the target's %d (they must match)",
                               path, m->cfg.vocab_size, target->cfg.vocab_size);
        else
            st = okv_drafter_model_create(m, target->cfg.vocab_size, be, p, out);
        okv_model_free(m);   /* the engine holds its own copy of the weights */
        return st;
    }
    return okv_set_error(OKV_ERR_INVALID_ARG, "drafter '%s': expected ngram, self or model:PATH", spec);
}

void okv_spec_stats_finish(struct okv_spec_stats *s)
{
    s->acceptance_rate = s->draft_tokens > 0 ? (double)s->accepted_tokens / (double)s->draft_tokens : 0.0;
    /* a deferred step emits its accepted drafts without a token of its own */
    s->mean_acceptance_length = s->drafts > 0 ? 1.0 + (double)(s->accepted_tokens - s->deferred) / (double)s->drafts : 1.0;
}
