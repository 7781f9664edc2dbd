/* Sampling. Top-k and top-p select from the candidates sorted by logit; the
 * softmax is taken over the temperature-scaled logits of the kept set. */
#include "oasiskv/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void okv_rng_seed(struct okv_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t okv_rng_next(struct okv_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double okv_rng_uniform(struct okv_rng *r) { return (double)(okv_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

void okv_log_softmax(const float *x, int n, float *out)
{
    float mx = x[0];
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)(x[i] - mx));
    float ls = (float)log(s) + mx;
    for (int i = 0; i < n; i++)
        out[i] = x[i] - ls;
}

void okv_token_logprob(const float *logits, int n, int32_t token, int n_top, struct okv_token_logprob *lp)
{
    n_top = n_top < 0 ? 0 : n_top > OKV_MAX_TOP_LOGPROBS ? OKV_MAX_TOP_LOGPROBS : n_top;
    n_top = n_top > n ? n : n_top;
    float mx = logits[0];
    for (int i = 1; i < n; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double s = 0;
    const float lt = token >= 0 && token < n ? logits[token] : -INFINITY;
    int32_t rank = 1;
    for (int i = 0; i < n; i++) {
        s += exp((double)(logits[i] - mx));
        rank += logits[i] > lt;
    }
    const float ls = (float)log(s) + mx;   /* the same steps as okv_log_softmax */
    /* the n_top largest, kept sorted (a later id replaces only a strictly larger value's slot) */
    int k = 0;
    for (int i = 0; i < n && n_top > 0; i++) {
        const float v = logits[i];
        if (k == n_top && !(v > logits[lp->top_id[k - 1]]))
            continue;
        int at = k < n_top ? k++ : k - 1;
        while (at > 0 && v > logits[lp->top_id[at - 1]]) {
            lp->top_id[at] = lp->top_id[at - 1];
            at--;
        }
        lp->top_id[at] = i;
    }
    for (int i = 0; i < k; i++)
        lp->top_logprob[i] = logits[lp->top_id[i]] - ls;
    lp->prompt = false;
    lp->token = token;
    lp->logprob = token >= 0 && token < n ? logits[token] - ls : -INFINITY;
    lp->n_top = k;
    lp->rank = rank;
}

int32_t okv_argmax(const float *logits, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

enum okv_status okv_sampling_check(const struct okv_sampling *p)
{
    if (!(p->temperature >= 0.0f) || p->temperature > 100.0f)
        return okv_set_error(OKV_ERR_INVALID_ARG, "temperature %g: must be in [0, 100]", p->temperature);
    if (!(p->top_p >= 0.0f) || p->top_p > 1.0f)
        return okv_set_error(OKV_ERR_INVALID_ARG, "top_p %g: must be in (0, 1]", p->top_p);
    if (p->top_k < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "top_k %d: must be >= 0 (0 = off)", p->top_k);
    if (!(p->min_p >= 0.0f) || p->min_p > 1.0f)
        return okv_set_error(OKV_ERR_INVALID_ARG, "min_p %g: must be in [0, 1]", p->min_p);
    return OKV_OK;
}

bool okv_logit_adjust_active(const struct okv_logit_adjust *a)
{
    return a->presence_penalty != 0.0f || a->frequency_penalty != 0.0f ||
           (a->repetition_penalty != 0.0f && a->repetition_penalty != 1.0f) || a->min_tokens > 0 || a->n_bias > 0 ||
           a->n_allowed > 0 || a->n_bad > 0;
}

enum okv_status okv_logit_adjust_check(const struct okv_logit_adjust *a, int n)
{
    if (!(a->presence_penalty >= -2.0f && a->presence_penalty <= 2.0f))
        return okv_set_error(OKV_ERR_INVALID_ARG, "presence_penalty %g: must be in [-2, 2]", a->presence_penalty);
    if (!(a->frequency_penalty >= -2.0f && a->frequency_penalty <= 2.0f))
        return okv_set_error(OKV_ERR_INVALID_ARG, "frequency_penalty %g: must be in [-2, 2]", a->frequency_penalty);
    if (!(a->repetition_penalty >= 0.0f && a->repetition_penalty <= 2.0f))
        return okv_set_error(OKV_ERR_INVALID_ARG, "repetition_penalty %g: must be in (0, 2]", a->repetition_penalty);
    if (a->min_tokens < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "min_tokens %d: must be >= 0", a->min_tokens);
    if (a->n_bad < 0 || (a->n_bad > 0 && (!a->bad_ids || !a->bad_len)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "bad_words: %d sequences without their arrays", a->n_bad);
    for (int k = 0, at = 0; k < a->n_bad; at += a->bad_len[k++]) {
        if (a->bad_len[k] < 1)
            return okv_set_error(OKV_ERR_INVALID_ARG, "bad_words: sequence %d is empty", k);
        for (int i = 0; i < a->bad_len[k]; i++)
            if (a->bad_ids[at + i] < 0 || a->bad_ids[at + i] >= n)
                return okv_set_error(OKV_ERR_INVALID_ARG, "bad_words: token id %d is out of the vocabulary (size %d)",
                                     a->bad_ids[at + i], n);
    }
    if (a->n_allowed < 0 || (a->n_allowed > 0 && !a->allowed_id))
        return okv_set_error(OKV_ERR_INVALID_ARG, "allowed_token_ids: %d entries without their array", a->n_allowed);
    for (int i = 0; i < a->n_allowed; i++)
        if (a->allowed_id[i] < 0 || a->allowed_id[i] >= n)
            return okv_set_error(OKV_ERR_INVALID_ARG, "allowed_token_ids: token id %d is out of the vocabulary (size %d)",
                                 a->allowed_id[i], n);
    if (a->n_bias < 0 || (a->n_bias > 0 && (!a->bias_id || !a->bias)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "logit_bias: %d entries without their arrays", a->n_bias);
    for (int i = 0; i < a->n_bias; i++) {
        if (a->bias_id[i] < 0 || a->bias_id[i] >= n)
            return okv_set_error(OKV_ERR_INVALID_ARG, "logit_bias: token id %d is out of the vocabulary (size %d)",
                                 a->bias_id[i], n);
        if (!(a->bias[i] >= -100.0f && a->bias[i] <= 100.0f))
            return okv_set_error(OKV_ERR_INVALID_ARG, "logit_bias of token %d: %g must be in [-100, 100]", a->bias_id[i],
                                 a->bias[i]);
    }
    return OKV_OK;
}

void okv_logit_adjust_apply(const struct okv_logit_adjust *a, float *logits, int n, const int32_t *toks, int n_prompt,
                            int n_gen, const int32_t *eog, int n_eog, int *counts)
{
    for (int i = 0; i < a->n_bias; i++)
        if (a->bias_id[i] >= 0 && a->bias_id[i] < n)
            logits[a->bias_id[i]] += a->bias[i];
    if (n_gen < a->min_tokens)
        for (int i = 0; i < n_eog; i++)
            if (eog[i] >= 0 && eog[i] < n)
                logits[eog[i]] = -INFINITY;
    const float rp = a->repetition_penalty;
    const int n_all = n_prompt + n_gen;
    if (rp != 0.0f && rp != 1.0f) {
        /* once an id: counts[] marks the ids seen (-1), reset below */
        for (int i = 0; i < n_all; i++) {
            const int32_t t = toks[i];
            if (t < 0 || t >= n || counts[t])
                continue;
            counts[t] = -1;
            logits[t] = logits[t] > 0.0f ? logits[t] / rp : logits[t] * rp;
        }
        for (int i = 0; i < n_all; i++)
            if (toks[i] >= 0 && toks[i] < n)
                counts[toks[i]] = 0;
    }
    if (a->presence_penalty != 0.0f || a->frequency_penalty != 0.0f) {
        const int32_t *gen = toks + n_prompt;
        for (int i = 0; i < n_gen; i++)
            if (gen[i] >= 0 && gen[i] < n)
                counts[gen[i]]++;
        for (int i = 0; i < n_gen; i++) {
            const int32_t t = gen[i];
            if (t < 0 || t >= n || counts[t] == 0)
                continue;
            logits[t] -= a->frequency_penalty * (float)counts[t] + a->presence_penalty;
            counts[t] = 0;   /* each id once */
        }
    }
    const int32_t *gen = toks + n_prompt;
    for (int k = 0, at = 0; k < a->n_bad; at += a->bad_len[k++]) {   /* bad_words: the generated tokens' tail */
        const int32_t *seq = a->bad_ids + at;
        const int lead = a->bad_len[k] - 1;
        if (lead > n_gen || memcmp(gen + n_gen - lead, seq, sizeof(int32_t) * (size_t)lead) != 0)
            continue;
        if (seq[lead] >= 0 && seq[lead] < n)
            logits[seq[lead]] = -INFINITY;
    }
    if (a->n_allowed > 0) {   /* the ids not allowed masked: counts[] marks the allowed, reset below */
        for (int i = 0; i < a->n_allowed; i++)
            if (a->allowed_id[i] >= 0 && a->allowed_id[i] < n)
                counts[a->allowed_id[i]] = 1;
        for (int i = 0; i < n; i++)
            if (!counts[i])
                logits[i] = -INFINITY;
        for (int i = 0; i < a->n_allowed; i++)
            if (a->allowed_id[i] >= 0 && a->allowed_id[i] < n)
                counts[a->allowed_id[i]] = 0;
    }
}

struct cand { float logit; int32_t id; };

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

/* The candidates that hold the sorted prefix the filters keep, sorted into c (logit descending, id
 * ascending); returns their count. A histogram of z = (l - max) / T in PRE_BINS bins of PRE_NATS / PRE_BINS
 * nats (a bin is a monotone function of the logit, the last one taking everything below) bounds the
 * prefix: top_k's by the bin where the count reaches k, min_p's by the bin of ln(min_p) (the tighter of
 * the two: top_p is measured against the mass of their prefix, which must be whole); top_p alone by the
 * bin where the mass of every logit reaches top_p; a bin of margin for rounding. The logits in the bins up
 * to the bound are gathered and sorted: a few instead of the whole vocabulary when the distribution has a
 * head. *full_sum: the mass of every logit (float terms, double sum), top_p alone's normaliser. */
#define PRE_BINS 1024
#define PRE_NATS 40.0f
static int candidates(const float *logits, int n, float mx, float inv_t, int k, bool use_p, float top_p, bool use_min_p,
                      float min_p, struct cand *c, double *full_sum)
{
    uint32_t cnt[PRE_BINS] = {0};
    double mass[PRE_BINS] = {0};
    const float scale = (float)PRE_BINS / PRE_NATS;
    double total = 0;
    for (int i = 0; i < n; i++) {
        const float z = (logits[i] - mx) * inv_t;
        float b = -z * scale;
        const int bi = b < (float)(PRE_BINS - 1) ? (int)b : PRE_BINS - 1;   /* -inf and NaN: the last bin */
        const double e = (double)expf(z);
        cnt[bi]++;
        mass[bi] += e;
        total += e;
    }
    *full_sum = total;
    int bound = PRE_BINS - 1;
    if (k < n) {
        uint32_t acc = 0;
        for (int b = 0; b < PRE_BINS; b++)
            if ((acc += cnt[b]) >= (uint32_t)k) {
                bound = b;
                break;
            }
    }
    if (use_min_p) {
        const float b = -logf(min_p) * scale + 1.0f;
        const int bm = b < (float)(PRE_BINS - 1) ? (int)b : PRE_BINS - 1;
        bound = bm < bound ? bm : bound;
    }
    if (use_p && k == n && !use_min_p) {   /* top_p alone (with top_k or min_p, their prefix holds the mass
                                                   top_p is measured against) */
        double acc = 0;
        for (int b = 0; b < PRE_BINS; b++)
            if ((acc += mass[b]) >= (double)top_p * total * (1.0 + 1e-6)) {
                bound = b + 1 < bound ? b + 1 : bound;
                break;
            }
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        const float b = -((logits[i] - mx) * inv_t) * scale;
        const int bi = b < (float)(PRE_BINS - 1) ? (int)b : PRE_BINS - 1;
        if (bi <= bound)
            c[m++] = (struct cand){logits[i], i};
    }
    qsort(c, (size_t)m, sizeof *c, cand_cmp);
    return m;
}

void okv_sampling_probs(const float *logits, int n, const struct okv_sampling *p, float *probs)
{
    memset(probs, 0, sizeof(float) * (size_t)n);
    if (p->temperature <= 0.0f) {
        probs[okv_argmax(logits, n)] = 1.0f;
        return;
    }
    const float inv_t = 1.0f / p->temperature;
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    bool use_p = p->top_p > 0.0f && p->top_p < 1.0f;
    const bool use_min_p = p->min_p > 0.0f;
    const float mx = logits[okv_argmax(logits, n)];
    if (k == n && !use_p && !use_min_p) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            probs[i] = expf((logits[i] - mx) * inv_t);
            sum += probs[i];
        }
        for (int i = 0; i < n; i++)
            probs[i] = (float)(probs[i] / sum);
        return;
    }
    struct cand *c = okv_malloc(sizeof *c * (size_t)n, OKV_TAG_ENGINE);
    if (!c) {   /* degrade to greedy rather than fail mid-generation */
        probs[okv_argmax(logits, n)] = 1.0f;
        return;
    }
    double full_sum = 0;
    const bool whole = k == n && !use_min_p;   /* top_p alone: normalised over every logit */
    const int m = candidates(logits, n, mx, inv_t, k, use_p, p->top_p, use_min_p, p->min_p, c, &full_sum);
    k = k < m ? k : m;
    if (use_min_p)   /* min_p first (vLLM's order): the candidates at least min_p x the most likely */
        for (int i = 1; i < k; i++)
            if (exp((double)(c[i].logit - c[0].logit) * inv_t) < (double)p->min_p) {
                k = i;
                break;
            }
    double sum = 0;
    if (whole) {
        sum = full_sum;
    } else {
        for (int i = 0; i < k; i++)
            sum += exp((double)(c[i].logit - c[0].logit) * inv_t);
    }
    int keep = k;
    if (use_p) {
        double cum = 0;
        for (int i = 0; i < k; i++) {
            cum += exp((double)(c[i].logit - c[0].logit) * inv_t) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double s2 = 0;
    for (int i = 0; i < keep; i++)
        s2 += exp((double)(c[i].logit - c[0].logit) * inv_t);
    for (int i = 0; i < keep; i++)
        probs[c[i].id] = (float)(exp((double)(c[i].logit - c[0].logit) * inv_t) / s2);
    okv_free(c);
}

int32_t okv_sample_u(const float *logits, int n, const struct okv_sampling *p, double u, float *scratch)
{
    if (p->temperature <= 0.0f)
        return okv_argmax(logits, n);
    const bool plain = !(p->top_k > 0 && p->top_k < n) && !(p->top_p > 0.0f && p->top_p < 1.0f) && !(p->min_p > 0.0f);
    if (plain) {   /* okv_sampling_probs's softmax, normalised as the walk goes: the same draws, two passes fewer */
        const int32_t best = okv_argmax(logits, n);
        const float mx = logits[best], inv_t = 1.0f / p->temperature;
        double sum = 0;
        for (int i = 0; i < n; i++) {
            scratch[i] = expf((logits[i] - mx) * inv_t);
            sum += scratch[i];
        }
        double cum = 0;
        int32_t last = -1;
        for (int i = 0; i < n; i++) {
            const float pi = (float)(scratch[i] / sum);
            if (pi <= 0.0f)
                continue;
            cum += pi;
            last = i;
            if (u < cum)
                return i;
        }
        return last >= 0 ? last : best;
    }
    okv_sampling_probs(logits, n, p, scratch);
    double cum = 0;
    int32_t last = -1;
    for (int i = 0; i < n; i++) {
        if (scratch[i] <= 0.0f)
            continue;
        cum += scratch[i];
        last = i;
        if (u < cum)
            return i;
    }
    return last >= 0 ? last : okv_argmax(logits, n);
}

int32_t okv_sample(const float *logits, int n, const struct okv_sampling *p, struct okv_rng *rng, float *scratch)
{
    if (p->temperature <= 0.0f)
        return okv_argmax(logits, n);
    return okv_sample_u(logits, n, p, okv_rng_uniform(rng), scratch);
}
