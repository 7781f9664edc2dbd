/* Internals shared by the server's files: server.c (daemon, routing, auth,
 * /health, /metrics, /v1/models, error replies) and openai.c (completions and chat
 * completions, their jobs and SSE streams). */
#ifndef OKV_SERVER_INTERNAL_H
#define OKV_SERVER_INTERNAL_H

#include "oasiskv/server.h"
#include "server/cors.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

struct okv_server {
    struct MHD_Daemon *d;
    okv_sched *sched;
    const okv_tokenizer *tok;
    char *model_name, *model_alias, *model_root, *api_key;
    int max_ctx, port;
    size_t max_body;
    long created;                 /* unix time of the start */
    atomic_bool stopping;
    bool shut;
    atomic_uint_fast64_t n_ids;   /* request ids */
    bool has_seed;                /* okv_server_params.seed */
    struct okv_gen_defaults gen;  /* okv_server_params.gen */
    enum okv_reasoning reasoning; /* okv_server_params.reasoning */
    struct okv_chat_opts chat_defaults;   /* okv_server_params.chat_template_kwargs (tools unset) */
    bool prompt_details;          /* okv_server_params.prompt_tokens_details */
    bool priority_policy;         /* okv_server_params.priority_policy */
    uint64_t seed;
    atomic_uint_fast64_t n_unseeded;   /* requests without a seed so far (with has_seed) */
    atomic_int n_active;          /* completion handlers running, and jobs whose reply is not out yet */
    MHD_socket listen_fd;
    struct srv_resp_store *responses;   /* the Responses API's stored responses (resp_store.h); NULL: none kept */
    int max_logprobs;             /* okv_server_params.max_logprobs, resolved: 0-20 */
    bool tokens_as_ids;           /* okv_server_params.tokens_as_ids */
    char *response_role;          /* chat replies' role */
    struct srv_cors cors;         /* okv_server_params.cors_* */
    char *tls_key, *tls_cert;     /* the PEM texts (HTTPS), kept while the daemon runs */
    pthread_mutex_t bg_mu;        /* background responses running (openai.c's struct bg_task list) */
    pthread_cond_t bg_cv;         /* signalled as one leaves the list and as its thread ends */
    struct bg_task *bg_tasks;
    int n_background;             /* their threads (bg_mu); the server is freed after the last one ends */
};

/* A growing byte buffer (NUL-terminated when non-empty); oom sticks. */
struct srv_buf {
    char *s;
    size_t len, cap;
    bool oom;
};
bool srv_buf_reserve(struct srv_buf *b, size_t more);
void srv_buf_put(struct srv_buf *b, const char *data, size_t len);
void srv_buf_printf(struct srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Text helpers of the replies' readers (tools.c, reasoning.c): the first needle in hay[0..n) (NULL: none); the
 * length of the longest suffix of p[0..n) that is a proper prefix of tag (a tag split across stream pieces). */
const char *srv_find(const char *hay, size_t n, const char *needle);
char *srv_strndup(const char *s, size_t n);   /* s[0..n) as a NUL-terminated copy (okv_free); NULL: out of memory */
size_t srv_partial_tag(const char *p, size_t n, const char *tag);
/* A bad request's message into err (errlen bytes) and its field into *param (p, or NULL); returns false. */
bool srv_errf(char *err, size_t errlen, const char **param, const char *p, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* prefix and 32 random hex digits (ids of tool calls, responses and their items) */
void srv_random_id(char out[48], const char *prefix);

/* The headers every reply carries (CORS), added to r for connection c; called on the connection's thread. */
void srv_reply_headers(struct MHD_Connection *c, struct MHD_Response *r);
/* Send obj (consumed) as a JSON reply. */
enum MHD_Result srv_reply_json(struct MHD_Connection *c, unsigned status, cJSON *obj);
/* Send an OpenAI error object. type: "invalid_request_error", "authentication_error",
 * "server_error", ...; param and code may be NULL (JSON null). */
enum MHD_Result srv_reply_error(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                                const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The error object as a cJSON tree (for SSE error events). */
cJSON *srv_error_obj(const char *message, const char *type, const char *param, const char *code);

/* vLLM's /tokenize and /detokenize (openai.c) */
enum MHD_Result srv_handle_tokenize(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_handle_detokenize(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len);
/* POST /v1/completions (chat false) and /v1/chat/completions (chat true). Runs on
 * the connection's thread and may block there until the request finishes. */
enum MHD_Result srv_handle_completion(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len,
                                      bool chat);
/* POST /v1/responses/{id}/cancel: a background response stopped (openai.c) */
enum MHD_Result srv_handle_cancel_response(okv_server *sv, struct MHD_Connection *c, const char *id);
/* POST /v1/responses (OpenAI's Responses API, on the chat path: responses.c) */
enum MHD_Result srv_handle_responses(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len);

#endif
