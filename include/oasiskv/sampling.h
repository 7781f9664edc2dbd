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
    float min_p;         /* 0: off; else drop tokens less likely than min_p x the most likely one (after the
                          * temperature, before top-k / top-p, as vLLM). The backends' sample ops do not
                          * take it: the scheduler samples such requests on the host. */
};

/* Adjustments of the logits before sampling, as vLLM's sampling parameters (and the OpenAI
 * API's): applied on the host to the logits of a request whose steps bring them there.
 * In order: logit_bias added; end-of-generation ids masked while fewer than min_tokens
 * tokens are generated; repetition_penalty on every id of the prompt and the generated
 * tokens (a positive logit divided by it, a negative one multiplied); frequency_penalty x
 * the id's count among the generated tokens and presence_penalty for each id among them
 * subtracted. */
struct okv_logit_adjust {
    float presence_penalty, frequency_penalty;   /* 0: off */
    float repetition_penalty;                    /* 1: off (0 reads as 1) */
    int min_tokens;                              /* 0: off */
    const int32_t *bias_id;                      /* [n_bias] logit_bias */
    const float *bias;
    int n_bias;
    const int32_t *allowed_id;                   /* [n_allowed] allowed_token_ids (vLLM's): only these may be
                                                    drawn, the others masked; 0: all */
    int n_allowed;
    const int32_t *bad_ids;                      /* bad_words (vLLM's) as token sequences, one after another:
                                                    a sequence's last id is masked where the generated tokens
                                                    end with the rest of it (a one-token sequence: always) */
    const int *bad_len;                          /* [n_bad] the length of each (>= 1) */
    int n_bad;
};
/* whether a changes any logits */
bool okv_logit_adjust_active(const struct okv_logit_adjust *a);
/* Validate (vLLM's ranges: penalties presence / frequency in [-2, 2], repetition in (0, 2],
 * biases in [-100, 100], ids in the vocabulary of n, min_tokens >= 0): a message names the field. */
enum okv_status okv_logit_adjust_check(const struct okv_logit_adjust *a, int n);
/* Apply a to logits[n] in place. toks: the prompt's n_prompt ids, then the n_gen generated
 * ones; eog[n_eog]: the ids masked while n_gen < min_tokens. counts: n ints of scratch, all 0
 * on entry, left so. */
void okv_logit_adjust_apply(const struct okv_logit_adjust *a, float *logits, int n, const int32_t *toks, int n_prompt,
                            int n_gen, const int32_t *eog, int n_eog, int *counts);

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
    int32_t rank;         /* 1 + the ids with a larger logit (vLLM's rank); 0 with logprob NAN */
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
