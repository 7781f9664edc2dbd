/* Single-sequence generation on an engine: chunked prefill, then decode with
 * sampling, stopping at end-of-generation tokens, stop strings or max_tokens, and
 * streaming text pieces that are always complete UTF-8. With a drafter, decode is
 * speculative: each step verifies up to spec_tokens drafted tokens in one target
 * forward; the tokens (greedy) or their distribution (sampling) are those of plain
 * decoding. */
#ifndef OASISKV_GENERATE_H
#define OASISKV_GENERATE_H

#include "oasiskv/engine.h"
#include "oasiskv/sampling.h"
#include "oasiskv/spec.h"
#include "oasiskv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

struct okv_gen_params {
    int max_tokens;                 /* tokens to generate at most (> 0) */
    struct okv_sampling sampling;
    const char *const *stop;        /* stop strings (not included in the text) */
    int n_stop;
    bool ignore_eos;                /* keep going through end-of-generation tokens */
    int prefill_chunk;              /* rows per prefill forward; 0: the engine's max */
    okv_drafter *drafter;           /* speculative decoding (borrowed; reset at the end); NULL: plain decoding */
    int spec_tokens;                /* draft tokens per step, 1..OKV_SPEC_MAX_TOKENS; 0: 4 */
    bool spec_adaptive;             /* draft 0..spec_tokens a step, as okv_spec_len chooses */
    const struct okv_spec_cost *spec_cost;   /* spec_adaptive: NULL: the costs measured in this call; else these,
                                                as they are (costs known beforehand; tests) */
    /* structured output (needs the tokenizer; not with a drafter): each token keeps the text a prefix of a JSON
     * object (json_object) or of an instance of json_schema (borrowed; oasiskv/structured.h), the end of generation
     * allowed once it is complete; a complete text with ignore_eos ends with finish_reason "stop" */
    bool json_object;
    const struct okv_json_schema *json_schema;
};

/* Called for each generated token with the new text it completes (may be empty,
 * e.g. half a UTF-8 character or text held back while it may start a stop string).
 * Return false to stop generating. */
typedef bool (*okv_gen_token_fn)(void *user, int32_t token, const char *text, size_t len);

struct okv_gen_result {
    int32_t *tokens;          /* generated ids (okv_free via okv_gen_result_free) */
    int n_tokens;
    char *text;               /* generated text, NUL-terminated, stop string removed */
    size_t text_len;
    int prompt_tokens;
    const char *finish_reason;   /* "stop" or "length" (static string) */
    double prefill_s;            /* time of the prefill forwards */
    double decode_s;             /* time from the first generated token to the last */
    struct okv_spec_stats spec;  /* speculative decoding counters (zero without a drafter) */
};

/* Generate for one prompt on a fresh sequence of the engine (freed before return).
 * The tokenizer may be NULL (no text, no stop strings, no EOG detection). */
enum okv_status okv_generate(okv_engine *e, const okv_tokenizer *tok, const int32_t *prompt, int n_prompt,
                             const struct okv_gen_params *p, okv_gen_token_fn cb, void *user,
                             struct okv_gen_result *res);
void okv_gen_result_free(struct okv_gen_result *res);

#ifdef __cplusplus
}
#endif
#endif
