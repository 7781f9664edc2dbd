/* Verification of drafted tokens against the target's logits: greedy prefix
 * matching, or speculative rejection sampling (Leviathan et al. 2023; Chen et al.
 * 2023), which leaves the distribution of the emitted tokens equal to the target's. */
#include "oasiskv/spec.h"

/* Draw from a distribution that sums to about 1 (zeros skipped). */
static int32_t sample_probs(const float *probs, int n, struct okv_rng *rng)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += probs[i];
    double u = okv_rng_uniform(rng) * sum, cum = 0;
    int32_t last = -1;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f)
            continue;
        cum += probs[i];
        last = i;
        if (u < cum)
            return i;
    }
    return last >= 0 ? last : 0;
}

int okv_spec_verify(const float *logits, int vocab, const int32_t *drafts, const float *q, int k,
                    const struct okv_sampling *s, struct okv_rng *rng, float *scratch, int32_t *next)
{
    if (s->temperature <= 0.0f) {
        int i = 0;
        for (; i < k; i++) {
            int32_t t = okv_argmax(logits + (size_t)i * vocab, vocab);
            if (t != drafts[i]) {
                *next = t;
                return i;
            }
        }
        *next = okv_argmax(logits + (size_t)k * vocab, vocab);
        return k;
    }
    float *p = scratch, *r = scratch + vocab;
    for (int i = 0; i < k; i++) {
        okv_sampling_probs(logits + (size_t)i * vocab, vocab, s, p);
        const int32_t d = drafts[i];
        const float *qi = q ? q + (size_t)i * vocab : NULL;
        /* q(d) = 0 cannot happen for a token drawn from q; treat it as certain */
        double qd = qi && qi[d] > 0.0f ? qi[d] : 1.0;
        double a = p[d] / qd;
        if (a >= 1.0 || okv_rng_uniform(rng) < a)
            continue;
        /* rejected: draw from norm(max(0, p - q)) */
        double sum = 0;
        for (int v = 0; v < vocab; v++) {
            float x = p[v] - (qi ? qi[v] : (v == d ? 1.0f : 0.0f));
            r[v] = x > 0.0f ? x : 0.0f;
            sum += r[v];
        }
        /* sum == 0 means p == q up to rounding, where rejection had probability 0 */
        *next = sample_probs(sum > 0 ? r : p, vocab, rng);
        return i;
    }
    okv_sampling_probs(logits + (size_t)k * vocab, vocab, s, p);
    *next = sample_probs(p, vocab, rng);
    return k;
}
