/* The HTTP side of the server: the libmicrohttpd daemon (one thread per
 * connection, so that a request's thread may wait for its tokens), body
 * collection with a size limit, API-key checks, routing, and the small endpoints
 * (/health, /metrics, /v1/models). Completions live in openai.c. */
#define _GNU_SOURCE
#include "server/server_internal.h"
#include "server/resp_store.h"
#include "util/strbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Per-request state kept by MHD between calls of the access handler. */
struct http_req {
    char *body;
    size_t len, cap;
    bool too_large, oom;
};

cJSON *srv_error_obj(const char *message, const char *type, const char *param, const char *code)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", message);
    cJSON_AddStringToObject(err, "type", type);
    if (param)
        cJSON_AddStringToObject(err, "param", param);
    else
        cJSON_AddNullToObject(err, "param");
    if (code)
        cJSON_AddStringToObject(err, "code", code);
    else
        cJSON_AddNullToObject(err, "code");
    return root;
}

/* the server whose request this thread answers (one thread a connection: set by dispatch) */
static __thread const okv_server *tl_server;

void srv_reply_headers(struct MHD_Connection *c, struct MHD_Response *r)
{
    if (tl_server)
        srv_cors_headers(&tl_server->cors, c, r);
}

static enum MHD_Result reply_bytes(struct MHD_Connection *c, unsigned status, const char *ctype, const char *data,
                                   size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    srv_reply_headers(c, r);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result srv_reply_json(struct MHD_Connection *c, unsigned status, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!s)
        return reply_bytes(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json",
                           "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}", 83);
    enum MHD_Result ret = reply_bytes(c, status, "application/json", s, strlen(s));
    cJSON_free(s);
    return ret;
}

enum MHD_Result srv_reply_error(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                                const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return srv_reply_json(c, status, srv_error_obj(msg, type, param, code));
}

/* ---- /metrics ---- */

void srv_buf_printf(struct srv_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0 || b->oom)
            return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        if (!srv_buf_reserve(b, (size_t)n + 1))
            return;
    }
}

const char *srv_find(const char *hay, size_t n, const char *needle)
{
    const size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, k))
            return hay + i;
    return NULL;
}

char *srv_strndup(const char *s, size_t n)
{
    char *c = okv_malloc(n + 1, OKV_TAG_SERVER);
    if (c) {
        memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

size_t srv_partial_tag(const char *p, size_t n, const char *tag)
{
    const size_t k = strlen(tag);
    for (size_t m = k - 1 < n ? k - 1 : n; m > 0; m--)
        if (!memcmp(p + n - m, tag, m))
            return m;
    return 0;
}

bool srv_buf_reserve(struct srv_buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap * 2 : 8192;
    while (cap < b->len + more)
        cap *= 2;
    char *p = okv_realloc(b->s, cap, OKV_TAG_SERVER);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->s = p;
    b->cap = cap;
    return true;
}

void srv_buf_put(struct srv_buf *b, const char *data, size_t len)
{
    if (!srv_buf_reserve(b, len + 1))
        return;
    memcpy(b->s + b->len, data, len);
    b->len += len;
    b->s[b->len] = 0;
}

static void metric(struct srv_buf *b, const char *name, const char *type, const char *help, const char *label,
                   double v)
{
    srv_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %.17g\n", name, help, name, type, name, label, v);
}

static void histogram(struct srv_buf *b, const char *name, const char *help, const char *label, const struct okv_hist *h)
{
    srv_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        srv_buf_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, label, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    srv_buf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, label, (unsigned long long)cum);
    srv_buf_printf(b, "%s_count{%s} %llu\n%s_sum{%s} %.17g\n", name, label, (unsigned long long)h->count, name, label, h->sum);
}

static enum MHD_Result handle_metrics(okv_server *sv, struct MHD_Connection *c)
{
    struct okv_sched_metrics m;
    okv_sched_metrics(sv->sched, &m);
    const struct okv_engine_stats *es = &m.engine;
    char label[512];
    snprintf(label, sizeof label, "model_name=\"%s\"", sv->model_name);
    struct srv_buf b = {0};
    metric(&b, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", label,
           m.num_running);
    metric(&b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", label,
           m.num_waiting);
    metric(&b, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage (device tier). 1 means 100 percent usage.",
           label, m.kv_usage);
    metric(&b, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", label,
           (double)m.prompt_tokens_total);
    metric(&b, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", label,
           (double)m.generation_tokens_total);
    metric(&b, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.", label,
           (double)m.num_preemptions_total);
    metric(&b, "vllm:prefix_cache_queries_total", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", label, (double)m.engine.prefix_query_tokens);
    metric(&b, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
           label, (double)m.engine.prefix_hit_tokens);
    srv_buf_printf(&b, "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                  "# TYPE vllm:request_success_total counter\n");
    for (int f = OKV_FINISH_STOP; f <= OKV_FINISH_ABORT; f++)
        srv_buf_printf(&b, "vllm:request_success_total{%s,finished_reason=\"%s\"} %llu\n", label,
                  okv_finish_str((enum okv_finish)f), (unsigned long long)m.requests_finished[f]);
    histogram(&b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", label, &m.ttft);
    histogram(&b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", label, &m.itl);
    histogram(&b, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", label,
              &m.e2e);
    /* speculative decoding (--draft ngram), vLLM's definitions */
    metric(&b, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.", label,
           (double)m.spec_drafts_total);
    metric(&b, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", label,
           (double)m.spec_draft_tokens_total);
    metric(&b, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.", label,
           (double)m.spec_accepted_tokens_total);
    metric(&b, "oasiskv:spec_deferred_total", "counter",
           "Verify steps whose own token was dropped because it came from a row that read a stale predicted "
           "selection; the last accepted draft ran again (--kv-verify-defer).", label, (double)m.spec_deferred_total);
    metric(&b, "oasiskv:structured_masks_total", "counter", "Structured output: token masks applied.", label,
           (double)m.structured_masks_total);
    metric(&b, "oasiskv:structured_walks_total", "counter",
           "Structured output: masks computed by walking the vocabulary (the rest were cached by state).", label,
           (double)m.structured_walks_total);
    metric(&b, "oasiskv:host_sampled_rows_total", "counter",
           "Rows sampled on the host (logit adjustments, min_p, structured output), drafts' verification aside.", label,
           (double)m.host_sampled_rows_total);
    metric(&b, "oasiskv:host_sampling_seconds_total", "counter",
           "Time the engine thread spent sampling rows on the host (masks, adjustments, draws, on a pool of threads).",
           label, m.host_sampling_seconds);
    metric(&b, "oasiskv:kv_device_bytes", "gauge", "Bytes of the device KV tier in use.", label,
           (double)es->device_bytes);
    metric(&b, "oasiskv:kv_host_bytes", "gauge", "Bytes of the host KV tier in use.", label, (double)es->host_bytes);
    metric(&b, "oasiskv:blocks_fetched_total", "counter", "KV units (block, KV head, layer) fetched host to device.",
           label, (double)es->units_fetched);
    metric(&b, "oasiskv:fetch_bytes_total", "counter", "Bytes fetched host to device.", label,
           (double)es->fetch_bytes);
    metric(&b, "oasiskv:resident_in_time_ratio", "gauge",
           "Share of selected KV units resident when attention started (1 when none were selected).", label,
           es->units_selected > 0 ? (double)es->units_in_time / (double)es->units_selected : 1.0);
    metric(&b, "oasiskv:prediction_recall", "gauge",
           "Share of the truly selected KV units that the prediction chose (0 when not tracked).", label,
           es->recall_total > 0 ? (double)es->recall_hits / (double)es->recall_total : 0.0);
    metric(&b, "oasiskv:stall_seconds_total", "counter", "Time attention waited for KV fetches.", label, es->stall_s);
    metric(&b, "oasiskv:inline_selections_total", "counter",
           "Sequence steps whose KV blocks were chosen with the step's own queries before attention, not predicted "
           "(first decode steps; verify steps with --kv-verify-inline).", label, (double)es->inline_selections);
    /* where the engine's steps go (the host issues a step up to its final device sync) */
    metric(&b, "oasiskv:dense_phase_sequences", "gauge",
           "Sparse serving, dense while room: sequences reading every block of their context now.", label,
           (double)es->dense_phase_seqs);
    metric(&b, "oasiskv:sparse_demotions_total", "counter",
           "Sparse serving, dense while room: sequences turned sparse when the device pool ran short.", label,
           (double)es->demotions);
    metric(&b, "oasiskv:engine_steps_total", "counter", "Engine steps (forward passes) run.", label, (double)es->steps);
    metric(&b, "oasiskv:steps_overlapped_total", "counter",
           "Decode steps queued while the step before ran (overlapped decoding).", label, (double)m.steps_overlapped_total);
    metric(&b, "oasiskv:steps_host_rows_total", "counter",
           "Steps sampled on the device but for the rows of requests sampled or scored on the host (logit_bias, "
           "penalties, min_p, logprobs), whose logits alone were copied.", label, (double)m.steps_host_rows_total);
    metric(&b, "oasiskv:step_host_issue_seconds_total", "counter",
           "Host time issuing steps up to their final device sync (includes waits inside a step).", label, es->host_issue_s);
    metric(&b, "oasiskv:step_host_sparse_seconds_total", "counter",
           "Of the issue time, the sparse selection, residency and fetch bookkeeping.", label, es->host_sparse_s);
    metric(&b, "oasiskv:step_host_blocked_seconds_total", "counter",
           "Of the issue time, blocked waiting for the device (sampled tokens, staging buffers).", label, es->host_blocked_s);
    metric(&b, "oasiskv:step_sync_wait_seconds_total", "counter", "Time waiting for the device at the end of steps.", label,
           es->sync_wait_s);
    metric(&b, "oasiskv:kv_residency_on_device", "gauge",
           "1 when the backend holds the residency maps of the sparse KV (select_install), else 0.", label,
           es->device_residency ? 1.0 : 0.0);
    metric(&b, "oasiskv:kv_blocks_used", "gauge", "Device-tier KV blocks in use.", label, m.kv_blocks_used);
    metric(&b, "oasiskv:kv_blocks_total", "gauge", "Device-tier KV blocks.", label, m.kv_blocks_total);
    enum MHD_Result ret;
    if (b.oom || !b.s)
        ret = srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "out of memory");
    else
        ret = reply_bytes(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b.s, b.len);
    okv_free(b.s);
    return ret;
}

/* the served model as the OpenAI API's model object */
static cJSON *model_obj(const okv_server *sv)
{
    cJSON *mo = cJSON_CreateObject();
    cJSON_AddStringToObject(mo, "id", sv->model_name);
    cJSON_AddStringToObject(mo, "object", "model");
    cJSON_AddNumberToObject(mo, "created", (double)sv->created);
    cJSON_AddStringToObject(mo, "owned_by", "oasiskv");
    cJSON_AddStringToObject(mo, "root", sv->model_root ? sv->model_root : sv->model_name);
    cJSON_AddNullToObject(mo, "parent");
    cJSON_AddNumberToObject(mo, "max_model_len", sv->max_ctx);
    cJSON_AddArrayToObject(mo, "permission");
    return mo;
}

static enum MHD_Result handle_models(okv_server *sv, struct MHD_Connection *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), model_obj(sv));
    return srv_reply_json(c, MHD_HTTP_OK, root);
}

/* GET /v1/models/{id} (the openai client's models.retrieve): the model when id names it (its served name or the
 * path it was loaded from) */
static enum MHD_Result handle_model(okv_server *sv, struct MHD_Connection *c, const char *id)
{
    if (strcmp(id, sv->model_name) != 0 && !(sv->model_root && strcmp(id, sv->model_root) == 0))
        return srv_reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model", "model_not_found",
                               "The model '%.200s' does not exist (this server serves '%s').", id, sv->model_name);
    return srv_reply_json(c, MHD_HTTP_OK, model_obj(sv));
}

/* ---- routing ---- */

static bool authorized(okv_server *sv, struct MHD_Connection *c)
{
    if (!sv->api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t a = strlen(h), b = strlen(sv->api_key);
    unsigned diff = a != b;
    for (size_t i = 0; i < a && i < b; i++)   /* no early exit: no timing hint */
        diff |= (unsigned char)h[i] ^ (unsigned char)sv->api_key[i];
    return diff == 0;
}

static enum MHD_Result dispatch(okv_server *sv, struct MHD_Connection *c, const char *url, const char *method,
                                struct http_req *hr)
{
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    tl_server = sv;
    enum MHD_Result pre;
    if (srv_cors_preflight(&sv->cors, c, method, &pre))   /* (a browser's preflight carries no API key) */
        return pre;
    if (!strncmp(url, "/v1/", 4) && !authorized(sv, c))
        return srv_reply_error(c, MHD_HTTP_UNAUTHORIZED, "invalid_request_error", NULL, "invalid_api_key",
                               "Incorrect or missing API key: send the header 'Authorization: Bearer KEY'.");
    if (hr->too_large)
        return srv_reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", NULL, "request_too_large",
                               "The request body is larger than %zu bytes.", sv->max_body);
    if (hr->oom)
        return srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "out of memory");
    struct route { const char *path; bool post; };
    static const struct route routes[] = {
        {"/health", false}, {"/metrics", false}, {"/v1/models", false},
        {"/v1/completions", true}, {"/v1/chat/completions", true},
        {"/tokenize", true}, {"/detokenize", true}, {"/version", false},   /* vLLM's */
        {"/v1/responses", true},
    };
    int r = -1;
    for (int i = 0; i < (int)(sizeof routes / sizeof routes[0]); i++)
        if (!strcmp(url, routes[i].path))
            r = i;
    if (r < 0 && !strncmp(url, "/v1/models/", 11) && url[11]) {
        if (!get)
            return srv_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL, "method_not_allowed",
                                   "Method %s is not allowed on %s.", method, url);
        return handle_model(sv, c, url + 11);
    }
    if (r < 0 && !strncmp(url, "/v1/responses/", 14))   /* a stored response: GET, its input_items, DELETE, cancel */
        return srv_handle_stored_response(sv, c, method, url + 14);
    if (r < 0 && !strcmp(url, "/ping") && (get || post))   /* vLLM's (SageMaker's) liveness probe */
        return reply_bytes(c, MHD_HTTP_OK, "text/plain", "", 0);
    if (r < 0)
        return srv_reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", NULL, "not_found",
                               "Unknown endpoint '%s %s'.", method, url);
    if (routes[r].post ? !post : !get)
        return srv_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL, "method_not_allowed",
                               "Method %s is not allowed on %s.", method, url);
    switch (r) {
    case 0: return reply_bytes(c, MHD_HTTP_OK, "text/plain", "", 0);
    case 1: return handle_metrics(sv, c);
    case 2: return handle_models(sv, c);
    case 5: return srv_handle_tokenize(sv, c, hr->body ? hr->body : "", hr->len);
    case 6: return srv_handle_detokenize(sv, c, hr->body ? hr->body : "", hr->len);
    case 7: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "version", OKV_VERSION_STRING);
        return srv_reply_json(c, MHD_HTTP_OK, o);
    }
    default:
        if (atomic_load(&sv->stopping))
            return srv_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL, "service_unavailable",
                                   "The server is shutting down.");
        if (r == 8)
            return srv_handle_responses(sv, c, hr->body ? hr->body : "", hr->len);
        return srv_handle_completion(sv, c, hr->body ? hr->body : "", hr->len, r == 4);
    }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    okv_server *sv = cls;
    struct http_req *hr = *con_cls;
    if (!hr) {
        hr = okv_calloc(1, sizeof *hr, OKV_TAG_SERVER);
        if (!hr)
            return MHD_NO;
        *con_cls = hr;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (hr->too_large || hr->oom)
            return MHD_YES;   /* drain the rest; the reply comes at the end */
        if (hr->len + n > sv->max_body) {
            hr->too_large = true;
            okv_free(hr->body);
            hr->body = NULL;
            hr->len = hr->cap = 0;
            return MHD_YES;
        }
        if (hr->len + n + 1 > hr->cap) {
            size_t cap = hr->cap ? hr->cap : 4096;
            while (cap < hr->len + n + 1)
                cap *= 2;
            char *p = okv_realloc(hr->body, cap, OKV_TAG_SERVER);
            if (!p) {
                hr->oom = true;
                return MHD_YES;
            }
            hr->body = p;
            hr->cap = cap;
        }
        memcpy(hr->body + hr->len, upload_data, n);
        hr->len += n;
        hr->body[hr->len] = 0;
        return MHD_YES;
    }
    return dispatch(sv, c, url, method, hr);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct http_req *hr = *con_cls;
    if (hr) {
        okv_free(hr->body);
        okv_free(hr);
        *con_cls = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    OKV_LOG_DEBUG("http: %s", msg);
}

static char *dup_or_null(const char *s)
{
    return s ? okv_strdup(s, OKV_TAG_SERVER) : NULL;
}

/* A PEM file's text (at most 1 MiB); NULL with the error set */
static char *read_pem(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        okv_set_error(OKV_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct okv_strbuf b = {.tag = OKV_TAG_SERVER};
    char buf[8192];
    size_t n;
    while (b.len <= (1 << 20) && (n = fread(buf, 1, sizeof buf, f)) > 0)
        okv_sb_put(&b, buf, n);
    fclose(f);
    if (b.oom) {
        okv_free(b.s);
        okv_set_error(OKV_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    if (b.len > (1 << 20) || !b.s || !strstr(b.s, "-----BEGIN ")) {
        okv_set_error(OKV_ERR_INVALID_ARG, "%s is not a PEM file (%s)", path,
                      b.len > (1 << 20) ? "larger than 1 MiB" : "no -----BEGIN line");
        okv_free(b.s);
        return NULL;
    }
    return b.s;
}

enum okv_status okv_server_create(okv_sched *s, const okv_tokenizer *tok, const struct okv_server_params *p,
                                  okv_server **out)
{
    *out = NULL;
    if (!p->model_name || !*p->model_name)
        return okv_set_error(OKV_ERR_INVALID_ARG, "server: a served model name is required");
    if (p->port < 0 || p->port > 65535)
        return okv_set_error(OKV_ERR_INVALID_ARG, "server: port %d is out of range", p->port);
    const char *host = p->host && *p->host ? p->host : "127.0.0.1";
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", p->port);
    struct okv_chat_opts chat_defaults = {.enable_thinking = -1};
    if (p->chat_template_kwargs &&
        okv_chat_template_kwargs(p->chat_template_kwargs, strlen(p->chat_template_kwargs), &chat_defaults) != OKV_OK)
        return okv_set_error(OKV_ERR_INVALID_ARG, "server: default %s", okv_last_error());
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai != 0 || !ai)
        return okv_set_error(OKV_ERR_INVALID_ARG, "server: cannot resolve host '%s': %s", host, gai_strerror(gai));

    okv_server *sv = okv_calloc(1, sizeof *sv, OKV_TAG_SERVER);
    if (!sv) {
        freeaddrinfo(ai);
        return okv_set_error(OKV_ERR_NO_MEMORY, "server: out of memory");
    }
    sv->sched = s;
    sv->tok = tok;
    sv->max_ctx = p->max_ctx;
    sv->max_body = p->max_body_bytes ? p->max_body_bytes : (size_t)4 << 20;
    sv->has_seed = p->has_seed;
    sv->gen = p->gen;
    sv->reasoning = p->reasoning;
    sv->chat_defaults = chat_defaults;
    sv->prompt_details = p->prompt_tokens_details;
    sv->priority_policy = p->priority_policy;
    sv->seed = p->seed;
    atomic_init(&sv->n_unseeded, 0);
    sv->created = (long)time(NULL);
    sv->listen_fd = MHD_INVALID_SOCKET;
    atomic_init(&sv->stopping, false);
    atomic_init(&sv->n_ids, 0);
    atomic_init(&sv->n_active, 0);
    pthread_mutex_init(&sv->bg_mu, NULL);
    pthread_cond_init(&sv->bg_cv, NULL);
    sv->model_name = dup_or_null(p->model_name);
    sv->model_alias = dup_or_null(p->model_alias);
    sv->model_root = dup_or_null(p->model_root);
    sv->api_key = p->api_key && *p->api_key ? dup_or_null(p->api_key) : NULL;
    sv->max_logprobs = p->max_logprobs < 0 ? 0 : p->max_logprobs == 0 || p->max_logprobs > OKV_MAX_TOP_LOGPROBS
                                                     ? OKV_MAX_TOP_LOGPROBS : p->max_logprobs;
    sv->tokens_as_ids = p->tokens_as_ids;
    sv->response_role = dup_or_null(p->response_role && *p->response_role ? p->response_role : "assistant");
    /* the options' state: a failure leaves its error set (okv_last_error) */
    enum okv_status st = srv_cors_init(&sv->cors, p->cors_origins, p->cors_methods, p->cors_headers, p->cors_credentials);
    if (st == OKV_OK && !sv->response_role)
        st = okv_set_error(OKV_ERR_NO_MEMORY, "out of memory");
    if (st == OKV_OK && (p->tls_key_file || p->tls_cert_file)) {   /* HTTPS: libmicrohttpd's GnuTLS */
        if (!p->tls_key_file || !p->tls_cert_file)
            st = okv_set_error(OKV_ERR_INVALID_ARG, "an HTTPS server needs both a key and a certificate");
        else if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
            st = okv_set_error(OKV_ERR_INVALID_ARG, "this libmicrohttpd was built without TLS");
        else if (!(sv->tls_key = read_pem(p->tls_key_file)) || !(sv->tls_cert = read_pem(p->tls_cert_file)))
            st = OKV_ERR_INVALID_ARG;   /* (read_pem set the error) */
    }
    if (st == OKV_OK && p->max_stored_responses >= 0 &&
        !(sv->responses = srv_resp_store_new(p->max_stored_responses ? p->max_stored_responses : 1024,
                                             p->max_stored_bytes ? p->max_stored_bytes : (size_t)256 << 20)))
        st = okv_set_error(OKV_ERR_NO_MEMORY, "out of memory");
    if (st != OKV_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", okv_last_error());
        freeaddrinfo(ai);
        okv_server_free(sv);
        return okv_set_error(st, "server: %s", msg);
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0) | (sv->tls_key ? MHD_USE_TLS : 0);
    struct MHD_OptionItem tls_opts[] = {{MHD_OPTION_HTTPS_MEM_KEY, 0, sv->tls_key},
                                        {MHD_OPTION_HTTPS_MEM_CERT, 0, sv->tls_cert},
                                        {MHD_OPTION_END, 0, NULL}};
    sv->d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_access, sv,
                             MHD_OPTION_ARRAY, sv->tls_key ? tls_opts : tls_opts + 2,
                             MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                             MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)256,
                             MHD_OPTION_EXTERNAL_LOGGER, mhd_log, sv,
                             MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!sv->d) {
        okv_server_free(sv);
        return okv_set_error(OKV_ERR_IO, "server: cannot listen on %s:%d (address in use, or not allowed%s)", host,
                             p->port, p->tls_key_file ? "; or the key and certificate do not make a TLS identity" : "");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(sv->d, MHD_DAEMON_INFO_BIND_PORT);
    sv->port = di && di->port ? di->port : p->port;
    *out = sv;
    return OKV_OK;
}

int okv_server_port(const okv_server *sv) { return sv->port; }

void okv_server_shutdown(okv_server *sv)
{
    if (!sv || sv->shut)
        return;
    sv->shut = true;
    atomic_store(&sv->stopping, true);
    if (sv->d) {
        sv->listen_fd = MHD_quiesce_daemon(sv->d);
        /* streams end with finish_reason "abort"; waiting requests get 503 */
        okv_sched_cancel_all(sv->sched);
        /* let the replies of the cancelled requests go out (bounded: a client
         * that does not read must not hold the shutdown) */
        for (int i = 0; i < 1000 && atomic_load(&sv->n_active) > 0; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        MHD_stop_daemon(sv->d);
        sv->d = NULL;
        if (sv->listen_fd != MHD_INVALID_SOCKET)
            close(sv->listen_fd);
        sv->listen_fd = MHD_INVALID_SOCKET;
    }
}

void okv_server_free(okv_server *sv)
{
    if (!sv)
        return;
    okv_server_shutdown(sv);
    pthread_mutex_lock(&sv->bg_mu);   /* background responses: their jobs were cancelled, their threads end now */
    while (sv->n_background > 0)
        pthread_cond_wait(&sv->bg_cv, &sv->bg_mu);
    pthread_mutex_unlock(&sv->bg_mu);
    pthread_cond_destroy(&sv->bg_cv);
    pthread_mutex_destroy(&sv->bg_mu);
    okv_free(sv->model_name);
    okv_free(sv->model_alias);
    okv_free(sv->model_root);
    okv_free(sv->api_key);
    okv_free(sv->response_role);
    okv_free(sv->tls_key);
    okv_free(sv->tls_cert);
    srv_cors_free(&sv->cors);
    srv_resp_store_free(sv->responses);
    okv_free(sv);
}

/* generation_config.json's keys (the order of enum okv_gen_field), the names requests use, and the ranges
 * requests accept */
static const struct { const char *key, *param; double lo, hi; } k_gen[OKV_GEN_COUNT] = {
    {"temperature", "temperature", 0, 1000},   {"top_p", "top_p", 1e-9, 1},
    {"top_k", "top_k", -1, 1e9},               {"min_p", "min_p", 0, 1},
    {"repetition_penalty", "repetition_penalty", 1e-6, 2}, {"max_new_tokens", "max_tokens", 1, 1e9},
};

enum okv_status okv_gen_defaults_load(const char *dir, struct okv_gen_defaults *d)
{
    memset(d, 0, sizeof *d);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/generation_config.json", dir) >= (int)sizeof path)
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: path too long", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return OKV_OK;   /* none: the defaults stay the OpenAI API's */
    char buf[65536];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_ParseWithLength(buf, n);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return okv_set_error(OKV_ERR_FORMAT, "%s: not a JSON object", path);
    }
    enum okv_status st = OKV_OK;
    for (int i = 0; i < OKV_GEN_COUNT && st == OKV_OK; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k_gen[i].key);
        if (!v || cJSON_IsNull(v))
            continue;
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= k_gen[i].lo && v->valuedouble <= k_gen[i].hi))
            st = okv_set_error(OKV_ERR_FORMAT, "%s: \"%s\" must be a number in [%g, %g]", path, k_gen[i].key, k_gen[i].lo,
                               k_gen[i].hi);
        d->has[i] = st == OKV_OK;
        d->value[i] = v->valuedouble;
    }
    cJSON_Delete(j);
    return st;
}

bool okv_gen_defaults_describe(const struct okv_gen_defaults *d, char *buf, size_t n)
{
    size_t k = 0;
    bool any = false;
    buf[0] = 0;
    for (int i = 0; i < OKV_GEN_COUNT; i++)
        if (d->has[i] && k < n) {
            k += (size_t)snprintf(buf + k, n - k, " %s %g", k_gen[i].param, d->value[i]);
            any = true;
        }
    return any;
}

