/* Prompt lookup drafting: for n from ngram_max down to ngram_min, find the most
 * recent earlier occurrence of the history's last n tokens and propose the tokens
 * that followed it. When the continuation runs into the suffix itself (a loop),
 * it goes on through the tokens already proposed, so periodic text is drafted
 * whole. Stateless: there is nothing to roll back. */
#include "oasiskv/spec.h"

#include <string.h>

struct ngram {
    int n_max, n_min;
};

static enum okv_status ngram_propose(void *ctx, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                                     struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out)
{
    const struct ngram *g = ctx;
    *probs = NULL;   /* deterministic drafts: point masses */
    *n_out = 0;
    for (int n = g->n_max; n >= g->n_min; n--) {
        if (n_hist < n + 1)
            continue;
        const int32_t *suffix = hist + n_hist - n;
        for (int j = n_hist - n - 1; j >= 0; j--) {
            if (hist[j] != suffix[0] || memcmp(hist + j, suffix, sizeof(int32_t) * (size_t)n))
                continue;
            for (int i = 0; i < k; i++) {
                int at = j + n + i;   /* at - n_hist < i: a token already proposed */
                tokens[i] = at < n_hist ? hist[at] : tokens[at - n_hist];
            }
            *n_out = k;
            return OKV_OK;
        }
    }
    return OKV_OK;
}

static void ngram_free(void *ctx) { okv_free(ctx); }

static const struct okv_drafter_i ngram_iface = {
    .name = "ngram",
    .propose = ngram_propose,
    .free = ngram_free,
};

enum okv_status okv_drafter_ngram_create(const struct okv_drafter_params *p, okv_drafter **out)
{
    *out = NULL;
    int n_max = p && p->ngram_max > 0 ? p->ngram_max : 3;
    int n_min = p && p->ngram_min > 0 ? p->ngram_min : 1;
    if (n_min > n_max)
        return okv_set_error(OKV_ERR_INVALID_ARG, "ngram drafter: ngram_min %d exceeds ngram_max %d", n_min, n_max);
    struct ngram *g = okv_calloc(1, sizeof *g, OKV_TAG_ENGINE);
    if (!g)
        return okv_set_error(OKV_ERR_NO_MEMORY, "ngram drafter: out of memory");
    g->n_max = n_max;
    g->n_min = n_min;
    enum okv_status st = okv_drafter_create_custom(&ngram_iface, g, out);
    if (st != OKV_OK)
        okv_free(g);
    return st;
}
