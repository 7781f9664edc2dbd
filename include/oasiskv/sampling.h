/* Token sampling from a row of logits: greedy, temperature, top-k, top-p, with a
 * seeded generator per sequence (same seed, same tokens). */
#ifndef OASISKV_SAMPLING_H
#define OASISKV_SAMPLING_H

#include "oasiskv/common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct okv_sampling {
    float temperature;   /* <= 0: greedy */
    int top_k;           /* <= 0: off */
    float top_p;         /* >= 1 or <= 0: off */
    uint64_t seed;
};

/* A small, fast generator (SplitMix64-seeded xoshiro256**). */
struct okv_rng { uint64_t s[4]; };
void okv_rng_seed(struct okv_rng *r, uint64_t seed);
uint64_t okv_rng_next(struct okv_rng *r);
/* Uniform in [0, 1). */
double okv_rng_uniform(struct okv_rng *r);

/* out[i] = log softmax(x)[i] (out may equal x). */
void okv_log_softmax(const float *x, int n, float *out);

/* Index of the largest logit (lowest index on ties). */
int32_t okv_argmax(const float *logits, int n);

/* Turn logits into the sampling distribution of p (temperature, top-k, top-p
 * applied, renormalised) in probs[n]; entries outside the kept set are 0.
 * With temperature <= 0 the distribution is one-hot on the argmax. */
void okv_sampling_probs(const float *logits, int n, const struct okv_sampling *p, float *probs);

/* Draw one token with the uniform number u in [0, 1): the distribution of
 * okv_sampling_probs walked in increasing id order; the first id whose cumulative
 * probability exceeds u. Greedy ignores u. scratch needs n floats. The reference
 * of every backend's sample op. */
int32_t okv_sample_u(const float *logits, int n, const struct okv_sampling *p, double u, float *scratch);

/* Draw one token (u from rng; no number is drawn when greedy). scratch needs n floats. */
int32_t okv_sample(const float *logits, int n, const struct okv_sampling *p, struct okv_rng *rng, float *scratch);

/* Log-probabilities for the OpenAI API's logprobs: of one token under the model's
 * distribution (log softmax of the raw logits: temperature, top-k and top-p are not
 * applied, as vLLM reports them), and the n_top most likely ids. */
#define OKV_MAX_TOP_LOGPROBS 20
struct okv_token_logprob {
    bool prompt;          /* a prompt token (echo) rather than a generated one */
    int32_t token;
    float logprob;        /* NAN for the first prompt token: nothing predicts it */
    int n_top;            /* entries of top_id / top_logprob */
    int32_t top_id[OKV_MAX_TOP_LOGPROBS];       /* by decreasing log-probability, lower id first on ties */
    float top_logprob[OKV_MAX_TOP_LOGPROBS];
};
/* lp->token = token, its log-probability under log softmax(logits[n]) and the n_top
 * (clamped to 0..OKV_MAX_TOP_LOGPROBS) most likely ids; lp->prompt is left false. */
void okv_token_logprob(const float *logits, int n, int32_t token, int n_top, struct okv_token_logprob *lp);

/* Validate parameters: a message names the bad field. */
enum okv_status okv_sampling_check(const struct okv_sampling *p);

#ifdef __cplusplus
}
#endif
#endif
