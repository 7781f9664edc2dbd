/* An OpenAI-compatible HTTP server over a scheduler (libmicrohttpd, one thread per
 * connection; JSON through cJSON).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (SSE streaming with
 * "data: {json}\n\n" events ending "data: [DONE]\n\n"), GET /v1/models,
 * GET /health, GET /metrics (Prometheus text format, vLLM's metric names plus
 * oasiskv:* ones for the KV tiers). Errors are OpenAI error objects
 * {"error": {"message", "type", "param", "code"}} with a 4xx/5xx status. A client
 * that disconnects cancels its request, which frees its KV at the next step. */
#ifndef OASISKV_SERVER_H
#define OASISKV_SERVER_H

#include "oasiskv/sched.h"
#include "oasiskv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_server okv_server;

/* Default sampling parameters from a model's generation_config.json, as vLLM takes them
 * (--generation-config auto, its default): temperature, top_p, top_k, min_p,
 * repetition_penalty, and max_new_tokens as the default max_tokens. A request's own value
 * wins; a field the file lacks keeps the OpenAI default. */
enum okv_gen_field {
    OKV_GEN_TEMPERATURE, OKV_GEN_TOP_P, OKV_GEN_TOP_K, OKV_GEN_MIN_P, OKV_GEN_REPETITION_PENALTY, OKV_GEN_MAX_TOKENS,
    OKV_GEN_COUNT
};
struct okv_gen_defaults {
    bool has[OKV_GEN_COUNT];
    double value[OKV_GEN_COUNT];
};
/* value of field f when the file set it, else dflt */
static inline double okv_gen_default(const struct okv_gen_defaults *d, enum okv_gen_field f, double dflt)
{
    return d->has[f] ? d->value[f] : dflt;
}
/* Read dir/generation_config.json into *d (zeroed first). No file: OKV_OK with nothing set; a
 * malformed file or an out-of-range value: an error naming it. */
enum okv_status okv_gen_defaults_load(const char *dir, struct okv_gen_defaults *d);
/* " temperature 0.7 top_p 0.8 ..." for the fields set (the request parameters' names) into buf;
 * returns false when none is set. */
bool okv_gen_defaults_describe(const struct okv_gen_defaults *d, char *buf, size_t n);

/* How a reasoning model's thinking comes back (vLLM's --reasoning-parser): src/server/reasoning.h */
enum okv_reasoning { OKV_REASONING_NONE = 0, OKV_REASONING_DEEPSEEK_R1, OKV_REASONING_QWEN3 };

struct okv_server_params {
    const char *host;             /* address to bind; default 127.0.0.1 */
    int port;                     /* 0: any free port (see okv_server_port) */
    const char *model_name;       /* the served model name (required) */
    const char *model_alias;      /* another name requests may use (the model path), or NULL */
    const char *model_root;       /* "root" of /v1/models (the model path), or NULL */
    const char *api_key;          /* requests to /v1/ need "Authorization: Bearer KEY"; NULL: open */
    int max_ctx;                  /* context length of the engine */
    size_t max_body_bytes;        /* larger bodies get 413; default 4 MiB */
    bool has_seed;                /* requests without a seed draw from seeds derived from seed, in arrival order
                                     (vLLM's --seed); otherwise from the clock */
    uint64_t seed;
    struct okv_gen_defaults gen;  /* sampling defaults (generation_config.json); all unset: the OpenAI API's */
    enum okv_reasoning reasoning; /* chat replies' <think> part as "reasoning_content"; NONE: left in the content */
    const char *chat_template_kwargs;   /* the chat template's variables for requests that give none, as a JSON
                                           object (vLLM's --default-chat-template-kwargs; okv_chat_template_kwargs
                                           says which are read), or NULL */
    bool prompt_tokens_details;   /* usage.prompt_tokens_details.cached_tokens in chat and completions replies (vLLM's
                                     --enable-prompt-tokens-details); the Responses API's usage always has them */
    bool priority_policy;         /* the scheduler runs the priority policy: requests' "priority" is taken (otherwise
                                     one other than 0 is refused, as vLLM refuses it without --scheduling-policy
                                     priority) */
    int max_stored_responses;     /* the Responses API's stored responses (store: true, the default), for
                                     previous_response_id and GET/DELETE /v1/responses/{id}: at most this many, the
                                     oldest dropped first; 0: 1,024; -1: none kept (store is then false) */
    size_t max_stored_bytes;      /* ... and at most this many bytes of their JSON text; 0: 256 MiB */
    int max_logprobs;             /* the most alternatives a request may ask for (vLLM's --max-logprobs): 1-20; 0: 20
                                     (the default); -1: none (logprobs 0 alone) */
    bool tokens_as_ids;           /* logprobs' tokens as "token_id:N" by default (vLLM's --return-tokens-as-token-ids) */
    const char *response_role;    /* the role of chat replies; NULL: "assistant" */
    /* CORS (vLLM's --allowed-origins, --allowed-methods, --allowed-headers as JSON lists of strings, and
     * --allow-credentials); NULL: ["*"], as vLLM's defaults. An empty origins list turns CORS off. */
    const char *cors_origins, *cors_methods, *cors_headers;
    bool cors_credentials;
    const char *tls_key_file, *tls_cert_file;   /* PEM files: HTTPS; NULL: plain HTTP */
};

/* Start serving on the scheduler (which must be started: okv_sched_start) and
 * tokenizer, both borrowed until okv_server_free. The caller owns *out. */
enum okv_status okv_server_create(okv_sched *s, const okv_tokenizer *tok, const struct okv_server_params *p,
                                  okv_server **out);
/* The port the server listens on. */
int okv_server_port(const okv_server *sv);
/* Stop accepting connections, cancel every request in flight (streams end with
 * finish_reason "abort"), wait for the connections to close. Idempotent. */
void okv_server_shutdown(okv_server *sv);
/* Shut down if needed and free. NULL is fine. */
void okv_server_free(okv_server *sv);

#ifdef __cplusplus
}
#endif
#endif
