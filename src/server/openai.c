/* POST /v1/completions and /v1/chat/completions: request validation, prompt
 * building, and the job that carries a request's tokens from the engine thread
 * to its HTTP connection.
 *
 * A job is shared by the connection's thread and the scheduler's callbacks (which
 * run on the engine thread) and freed by whichever lets go last (refs). The
 * engine thread only appends text pieces and the final result under the job's
 * mutex and signals; the connection thread waits with a timeout so that it can
 * notice a client that went away (the socket's read side hung up) and cancel.
 * A request of several choices (a list of completions prompts, n > 1) has one job a
 * choice, all queued at once; the jobs of a request share one lock and condition (struct
 * jsync), so that one connection thread waits on all of them: a reply is built when the
 * last finishes, a stream interleaves the choices' chunks (each with its index) as they come.
 * Log-probabilities (logprobs, echo, top_logprobs) reach a job as entries beside its
 * text; a streamed piece carries the entries of the tokens before it.
 *
 * Wire format of a stream (server-sent events): "data: {chunk}\n\n" per text
 * piece, a last chunk with finish_reason, with stream_options.include_usage a
 * chunk {"choices": [], "usage": {...}}, then "data: [DONE]\n\n"; with
 * continuous_usage_stats too (vLLM's), every chunk carries the usage so far. */
#define _GNU_SOURCE
#include "server/server_internal.h"
#include "oasiskv/structured.h"
#include "server/reasoning.h"
#include "server/responses.h"
#include "server/tools.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STOP 16
#define MAX_STOP_IDS 64
#define MAX_ALLOWED_IDS 4096
#define MAX_BAD_WORDS 128
#define MAX_BAD_TOKENS 2048
#define MAX_LOGIT_BIAS 1024
#define MAX_CHOICES 64   /* prompts x n of one request */

/* The lock and condition of a request's jobs (one for all its choices), freed with the last job. */
struct jsync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int refs;
};

struct job {
    struct jsync *sy;
    atomic_int refs;
    okv_server *sv;
    uint64_t sched_id;
    int fd;                       /* the client's socket, to notice a hang-up */
    double next_check;            /* okv_now() of the next hang-up check */
    bool chat, stream, include_usage;
    bool continuous_usage;        /* stream_options.continuous_usage_stats (vLLM's): usage in every chunk */
    char id[64];
    long created;
    int prompt_tokens;
    bool lp;                      /* the reply carries logprobs (lp_top alternatives each) */
    int lp_top;
    int prompt_lp;                /* vLLM's prompt_logprobs (the alternatives of each prompt token); -1 none */
    bool tokens_as_ids;           /* vLLM's return_tokens_as_token_ids: logprobs' tokens as "token_id:N" */
    char *echo;                   /* completions with echo: the prompt's text, before the completion */
    bool echo_only;               /* max_tokens 0 with echo: the prompt alone (one token is generated, not shown) */

    /* under mu: text pieces not yet taken, and the result */
    struct srv_buf text;          /* pieces back to back */
    size_t *ends;                 /* [n_pieces] end offset of each piece in text */
    int *lp_ends;                 /* [n_pieces] log-probability entries up to each piece (with lp) */
    int *tok_ends;                /* [n_pieces] tokens generated up to each piece */
    int n_pieces, cap_pieces;
    int n_tokens;                 /* tokens generated so far (with text or not) */
    struct okv_token_logprob *lps;   /* entries not taken yet: the prompt's (echo), then the generated */
    int n_lps, cap_lps;
    bool lp_oom;
    bool lp_keep;                 /* the entries are kept for the reply (else only summed: best_of's ranking) */
    double cum_lp;                /* the generated tokens' log-probabilities summed (best_of > n ranks by it) */
    bool finished;
    enum okv_finish reason;
    int completion_tokens;
    int cached_tokens;            /* prompt tokens the prefix cache gave */
    bool think_closed;            /* with a reasoning parser: </think> was written ... */
    int think_tokens;             /* ... by the think_tokens-th generated token */
    int think_matched;            /* bytes of "</think>" matched at the text's end (a tag across pieces) */
    bool details;                 /* the usage says them (prompt_tokens_details) */
    char error[256];

    /* tools (chat): AUTO, the reply's <tool_call> blocks become tool_calls; FORCED, the reply is the
     * arguments of tool_name */
    enum srv_tool_choice tool_mode;
    char tool_name[SRV_TOOL_NAME_MAX + 1];
    bool legacy_fn;               /* the tools came as "functions": the call comes back as "function_call" */
    struct srv_tool_stream ts;    /* connection thread: the stream's reading of the calls (AUTO) */
    enum okv_reasoning reasoning; /* chat with serve --reasoning-parser: the <think> part apart */
    struct srv_reasoning_stream rs;   /* connection thread: the stream's reading of it */
    int n_calls_sent;             /* connection thread: tool calls streamed */
    char call_id[48];             /* FORCED, streamed: the call's id */

    /* connection thread: this choice in the stream being written */
    int index;                    /* the choice's index (prompt i, choice k: i * n + k) */
    bool sent_role, done;
    long lp_offset;               /* characters of the text streamed so far (text_offset) */
};

static void jsync_unref(struct jsync *sy)
{
    if (atomic_fetch_sub(&sy->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&sy->mu);
    pthread_cond_destroy(&sy->cv);
    okv_free(sy);
}

static void job_unref(struct job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    jsync_unref(j->sy);
    okv_free(j->text.s);
    okv_free(j->ends);
    okv_free(j->lp_ends);
    okv_free(j->tok_ends);
    okv_free(j->lps);
    okv_free(j->echo);
    srv_tool_stream_free(&j->ts);
    srv_reasoning_stream_free(&j->rs);
    okv_free(j);
}

/* The connection's side lets go of the job (its reply is out, or it gave up). */
static void http_release(struct job *j)
{
    atomic_fetch_sub(&j->sv->n_active, 1);
    job_unref(j);
}

/* ---- scheduler callbacks (engine thread) ---- */

static void job_on_token(void *user, int32_t token, const char *text, size_t len)
{
    struct job *j = user;
    pthread_mutex_lock(&j->sy->mu);
    j->n_tokens++;
    if (!len) {
        pthread_mutex_unlock(&j->sy->mu);
        return;
    }
    if (j->stream && j->n_pieces == j->cap_pieces) {
        int cap = j->cap_pieces ? j->cap_pieces * 2 : 64;
        size_t *e = okv_realloc(j->ends, sizeof *e * (size_t)cap, OKV_TAG_SERVER);
        if (e)
            j->ends = e;
        int *le = e ? okv_realloc(j->lp_ends, sizeof *le * (size_t)cap, OKV_TAG_SERVER) : NULL;
        if (le)
            j->lp_ends = le;
        int *te = le ? okv_realloc(j->tok_ends, sizeof *te * (size_t)cap, OKV_TAG_SERVER) : NULL;
        if (!e || !le || !te) {
            j->text.oom = true;
        } else {
            j->tok_ends = te;
            j->cap_pieces = cap;
        }
    }
    srv_buf_put(&j->text, text, len);
    /* the thinking's tokens: up to the one that completes "</think>" (its '<' stands nowhere else in it, so a
     * mismatch restarts the match at this byte) */
    for (size_t i = 0; i < len && j->reasoning != OKV_REASONING_NONE && !j->think_closed; i++) {
        static const char tag[] = "</think>";
        j->think_matched = text[i] == tag[j->think_matched] ? j->think_matched + 1 : text[i] == '<';
        if (j->think_matched == (int)sizeof tag - 1) {
            j->think_closed = true;
            j->think_tokens = j->n_tokens;
        }
    }
    if (j->stream && !j->text.oom) {
        j->lp_ends[j->n_pieces] = j->n_lps;   /* a piece carries the entries of the tokens before it */
        j->tok_ends[j->n_pieces] = j->n_tokens;
        j->ends[j->n_pieces++] = j->text.len;
    }
    pthread_cond_signal(&j->sy->cv);
    pthread_mutex_unlock(&j->sy->mu);
}

static void job_on_logprob(void *user, const struct okv_token_logprob *lp)
{
    struct job *j = user;
    pthread_mutex_lock(&j->sy->mu);
    if (!lp->prompt && isfinite(lp->logprob))
        j->cum_lp += lp->logprob;
    if (!j->lp_keep) {
        pthread_mutex_unlock(&j->sy->mu);
        return;
    }
    if (j->n_lps == j->cap_lps) {
        int cap = j->cap_lps ? j->cap_lps * 2 : 64;
        struct okv_token_logprob *v = okv_realloc(j->lps, sizeof *v * (size_t)cap, OKV_TAG_SERVER);
        if (!v) {
            j->lp_oom = true;
            pthread_mutex_unlock(&j->sy->mu);
            return;
        }
        j->lps = v;
        j->cap_lps = cap;
    }
    j->lps[j->n_lps++] = *lp;
    pthread_mutex_unlock(&j->sy->mu);
}

static void job_on_finish(void *user, const struct okv_sched_result *r)
{
    struct job *j = user;
    pthread_mutex_lock(&j->sy->mu);
    j->finished = true;
    j->reason = r->reason;
    j->completion_tokens = r->completion_tokens;
    j->cached_tokens = r->cached_tokens;
    if (r->error)
        snprintf(j->error, sizeof j->error, "%s", r->error);
    pthread_cond_signal(&j->sy->cv);
    pthread_mutex_unlock(&j->sy->mu);
    job_unref(j);
}

/* the tokens of a finished reply's thinking (thought: it has some): up to the one that closed it, or all of them
 * when it was cut off while thinking */
static int reasoning_tokens(const struct job *j, bool thought)
{
    return j->think_closed ? j->think_tokens : thought ? j->completion_tokens : 0;
}

/* ---- waiting (connection thread) ---- */

static bool peer_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* whether the connection thread has something to do for one of js[0..n): a piece to send,
 * or a finish not yet sent (done: sent; a non-streamed job is never done before it is read) */
static bool jobs_ready(struct job *const *js, int n)
{
    for (int i = 0; i < n; i++)
        if (!js[i]->done && (js[i]->finished || js[i]->n_pieces > 0))
            return true;
    return false;
}

/* With the jobs' lock held (the jobs of one request share it): wait until one of js[0..n)
 * has a piece to send or finished. Every 200 ms (tokens of a non-streamed request wake us
 * more often than that) look whether the client hung up, or the server is stopping: then
 * cancel them all. Returns false (the lock released) when the client hung up. */
static bool jobs_wait(struct job *const *js, int n)
{
    struct job *j = js[0];
    while (!jobs_ready(js, n)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->sy->cv, &j->sy->mu, &ts);
        double now = okv_now();
        if (jobs_ready(js, n) || now < j->next_check)
            continue;
        j->next_check = now + 0.2;
        bool gone = peer_gone(j->fd), stopping = atomic_load(&j->sv->stopping);
        if (gone || stopping) {
            pthread_mutex_unlock(&j->sy->mu);
            for (int i = 0; i < n; i++)
                okv_sched_cancel(j->sv->sched, js[i]->sched_id);
            if (gone)
                return false;
            pthread_mutex_lock(&j->sy->mu);
        }
    }
    return true;
}

/* ---- response objects ---- */

static const char *finish_name(enum okv_finish f)
{
    return f == OKV_FINISH_LENGTH ? "length" : f == OKV_FINISH_ABORT ? "abort" : "stop";
}

/* cached < 0: no prompt_tokens_details */
static cJSON *usage_obj(int prompt, int completion, int cached)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", completion);
    cJSON_AddNumberToObject(u, "total_tokens", prompt + completion);
    if (cached >= 0)
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", cached);
    return u;
}

static cJSON *base_obj(const struct job *j, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->sv->model_name);
    return o;
}

static void add_logprobs(const struct job *j, cJSON *choice, const struct okv_token_logprob *v, int n, long *offset);

/* o with the usage so far when the client asked for it in every chunk (vLLM's
 * stream_options.continuous_usage_stats, with include_usage) */
static cJSON *with_usage(const struct job *j, cJSON *o, int completion)
{
    if (o && j->continuous_usage)
        cJSON_AddItemToObject(o, "usage", usage_obj(j->prompt_tokens, completion, -1));
    return o;
}

/* One stream chunk of choice j: text (NULL for none) and finish reason (NULL while running);
 * with logprobs, the entries v[0..nv) (*offset: the text's characters before them). */
static cJSON *chunk_obj(const struct job *j, const char *text, size_t len, const char *finish, bool role,
                        const struct okv_token_logprob *v, int nv, long *offset)
{
    cJSON *o = base_obj(j, j->chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", j->index);
    char *t = NULL;
    if (text) {
        t = okv_malloc(len + 1, OKV_TAG_SERVER);
        if (t) {
            memcpy(t, text, len);
            t[len] = 0;
        }
    }
    if (j->chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role)
            cJSON_AddStringToObject(d, "role", j->sv->response_role);
        if (role || text)
            cJSON_AddStringToObject(d, "content", t ? t : "");
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
    }
    okv_free(t);
    if (nv > 0)
        add_logprobs(j, c, v, nv, offset);
    else
        cJSON_AddNullToObject(c, "logprobs");
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    return o;
}

/* ---- log-probabilities ---- */

/* whether p[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF) */
static bool utf8_ok(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        int k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (k < 0 || i + (size_t)k >= n)
            return false;
        unsigned cp = k == 0 ? c : k == 1 ? c & 0x1F : k == 2 ? c & 0x0F : c & 0x07;
        for (int m = 1; m <= k; m++) {
            if ((p[i + (size_t)m] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + (size_t)m] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        i += (size_t)k + 1;
    }
    return true;
}

/* p[0..n) with every byte that starts no well-formed character replaced by U+FFFD
 * (okv_free; NULL when out of memory): prompts are echoed as given, and token ids or a
 * client's string may cut or break characters */
static char *utf8_repair(const char *p, size_t n)
{
    char *o = okv_malloc(3 * n + 1, OKV_TAG_SERVER);
    if (!o)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        const unsigned c = (unsigned char)p[i];
        const size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        if (i + k <= n && utf8_ok((const unsigned char *)p + i, k)) {
            memcpy(o + at, p + i, k);
            at += k;
            i += k;
        } else {
            memcpy(o + at, "\xEF\xBF\xBD", 3);
            at += 3;
            i++;
        }
    }
    o[at] = 0;
    return o;
}

/* A token's bytes (*raw, okv_free) and its text for JSON (okv_free): the bytes when they
 * are whole UTF-8 characters, else "bytes:\xNN..." (the spelling of OpenAI and vLLM for a
 * token that holds part of a character). NULL when out of memory. */
static char *token_text(const okv_tokenizer *tok, int32_t id, char **raw, size_t *raw_len)
{
    *raw = NULL;
    *raw_len = 0;
    /* the token's text as it runs in the output (a SentencePiece token's leading space kept, which a one-token
     * decode would strip: the entries' text_offset add up to the text) */
    size_t pl = 0;
    const char *piece = okv_tokenizer_piece(tok, id, &pl, NULL);
    if (piece && (*raw = okv_malloc(pl + 1, OKV_TAG_SERVER))) {
        memcpy(*raw, piece, pl);
        (*raw)[pl] = 0;
        *raw_len = pl;
    }
    if (*raw && utf8_ok((const unsigned char *)*raw, *raw_len))
        return okv_strdup(*raw, OKV_TAG_SERVER);
    char *t = okv_malloc(6 + 4 * *raw_len + 1, OKV_TAG_SERVER);
    if (!t)
        return NULL;
    size_t at = (size_t)sprintf(t, "bytes:");
    for (size_t i = 0; i < *raw_len; i++)
        at += (size_t)sprintf(t + at, "\\x%02x", (unsigned char)(*raw)[i]);
    return t;
}

/* a logprobs entry's token: token_text's, or "token_id:N" with vLLM's return_tokens_as_token_ids (raw: the bytes) */
static char *entry_text(const struct job *j, int32_t id, char **raw, size_t *raw_len)
{
    char *t = token_text(j->sv->tok, id, raw, raw_len);
    if (t && j->tokens_as_ids) {
        okv_free(t);
        t = okv_malloc(32, OKV_TAG_SERVER);
        if (t)
            snprintf(t, 32, "token_id:%d", (int)id);
    }
    return t;
}

/* characters of UTF-8 bytes (the bytes that do not continue one) */
static long utf8_chars(const char *p, size_t n)
{
    long c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

static void add_number_or_null(cJSON *arr, float v)
{
    if (isnan(v))
        cJSON_AddItemToArray(arr, cJSON_CreateNull());
    else
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(isinf(v) ? -9999.0 : (double)v));
}

/* Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"} of entries
 * v[0..n); *offset: the characters of the reply's text before v[0] (advanced). The top
 * dict holds the chosen token and the lp_top most likely (OpenAI: up to logprobs + 1). */
static cJSON *lp_completion(const struct job *j, const struct okv_token_logprob *v, int n, long *offset)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *tlp = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs"), *off = cJSON_AddArrayToObject(o, "text_offset");
    for (int i = 0; i < n; i++) {
        if (v[i].prompt && !j->echo)   /* prompt_logprobs' entries, put apart (prompt_logprobs_obj) */
            continue;
        char *raw;
        size_t raw_len;
        char *t = entry_text(j, v[i].token, &raw, &raw_len);
        const int n_top = v[i].n_top < j->lp_top ? v[i].n_top : j->lp_top;
        cJSON_AddItemToArray(toks, cJSON_CreateString(t ? t : ""));
        add_number_or_null(tlp, v[i].logprob);
        if (isnan(v[i].logprob)) {
            cJSON_AddItemToArray(top, cJSON_CreateNull());
        } else {
            cJSON *d = cJSON_CreateObject();
            for (int k = -1; k < n_top; k++) {
                char *r2;
                size_t l2;
                char *t2 = k < 0 ? NULL : entry_text(j, v[i].top_id[k], &r2, &l2);
                const char *key = k < 0 ? (t ? t : "") : t2 ? t2 : "";
                if (!cJSON_GetObjectItemCaseSensitive(d, key))
                    cJSON_AddNumberToObject(d, key, k < 0 ? (isinf(v[i].logprob) ? -9999.0 : v[i].logprob)
                                                          : v[i].top_logprob[k]);
                if (k >= 0) {
                    okv_free(t2);
                    okv_free(r2);
                }
            }
            cJSON_AddItemToArray(top, d);
        }
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)*offset));
        *offset += utf8_chars(raw ? raw : "", raw_len);
        okv_free(t);
        okv_free(raw);
    }
    return o;
}

/* one {"token", "logprob", "bytes"} of chat */
static cJSON *lp_chat_item(const struct job *j, int32_t id, float lp)
{
    char *raw;
    size_t raw_len;
    char *t = entry_text(j, id, &raw, &raw_len);
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "token", t ? t : "");
    cJSON_AddNumberToObject(it, "logprob", isinf(lp) ? -9999.0 : (double)lp);
    cJSON *b = cJSON_AddArrayToObject(it, "bytes");
    for (size_t i = 0; i < raw_len; i++)
        cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)raw[i]));
    okv_free(t);
    okv_free(raw);
    return it;
}

/* Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]} */
static cJSON *lp_chat(const struct job *j, const struct okv_token_logprob *v, int n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    for (int i = 0; i < n; i++) {
        if (v[i].prompt)
            continue;
        cJSON *it = lp_chat_item(j, v[i].token, v[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(it, "top_logprobs");
        for (int k = 0; k < v[i].n_top && k < j->lp_top; k++)
            cJSON_AddItemToArray(top, lp_chat_item(j, v[i].top_id[k], v[i].top_logprob[k]));
        cJSON_AddItemToArray(content, it);
    }
    return o;
}

/* vLLM's prompt_logprobs: [null, {"id": {"logprob", "rank", "decoded_token"}, ...}, ...], one item a prompt token:
 * its own entry and the prompt_lp most likely (as ids, each with its rank), from the prompt entries of v[0..n) */
static cJSON *prompt_logprobs_obj(const struct job *j, const struct okv_token_logprob *v, int n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        if (!v[i].prompt)
            continue;
        if (isnan(v[i].logprob)) {
            cJSON_AddItemToArray(arr, cJSON_CreateNull());
            continue;
        }
        cJSON *d = cJSON_CreateObject();
        for (int k = -1; k < v[i].n_top && k < j->prompt_lp; k++) {
            const int32_t id = k < 0 ? v[i].token : v[i].top_id[k];
            char key[16];
            snprintf(key, sizeof key, "%d", (int)id);
            if (cJSON_GetObjectItemCaseSensitive(d, key))   /* the prompt's token among the most likely */
                continue;
            char *raw;
            size_t raw_len;
            char *t = token_text(j->sv->tok, id, &raw, &raw_len);   /* its text, as ids are the keys */
            cJSON *e = cJSON_AddObjectToObject(d, key);
            const float lp = k < 0 ? v[i].logprob : v[i].top_logprob[k];
            cJSON_AddNumberToObject(e, "logprob", isinf(lp) ? -9999.0 : (double)lp);
            cJSON_AddNumberToObject(e, "rank", k < 0 ? v[i].rank : k + 1);
            cJSON_AddStringToObject(e, "decoded_token", t ? t : "");
            okv_free(t);
            okv_free(raw);
        }
        cJSON_AddItemToArray(arr, d);
    }
    return arr;
}

/* the logprobs member of a choice: null, or the entries v[0..n) */
static void add_logprobs(const struct job *j, cJSON *choice, const struct okv_token_logprob *v, int n, long *offset)
{
    if (!j->lp)
        cJSON_AddNullToObject(choice, "logprobs");
    else if (j->chat)
        cJSON_AddItemToObject(choice, "logprobs", lp_chat(j, v, n));
    else
        cJSON_AddItemToObject(choice, "logprobs", lp_completion(j, v, n, offset));
}

static void put_event(struct srv_buf *b, cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        b->oom = true;
        return;
    }
    srv_buf_put(b, "data: ", 6);
    srv_buf_put(b, s, strlen(s));
    srv_buf_put(b, "\n\n", 2);
    cJSON_free(s);
}

/* ---- streaming (connection thread, called by MHD) ---- */

/* A streamed request: its choices' jobs (one lock for all), the events not yet written. */
struct stream {
    struct job *jobs[MAX_CHOICES];
    int nj, n_per_prompt;         /* n_per_prompt choices share a prompt (usage counts it once) */
    struct srv_buf out;
    size_t out_pos;
    bool roles_sent, done;
    struct srv_resp_stream *rs;   /* POST /v1/responses: the chat chunks become the Responses API's events */
};

/* a stream's event: a chat chunk (or an error object) as it is, or through the Responses API's writer */
static void put_sev(struct stream *s, cJSON *o)
{
    if (s->rs)
        srv_resp_stream_put(s->rs, &s->out, o);
    else
        put_event(&s->out, o);
}

static void add_tool_calls_from(cJSON *msg, const struct srv_tool_call *calls, int n, int first);

/* a stream chunk's (chunk_obj's) delta object */
static cJSON *chunk_delta(cJSON *o)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0), "delta");
}

/* A piece of a chat reply with tools (p[0..n), final: the reply ended) put as an event: FORCED, the piece of
 * the call's arguments (the first with the call's id and name); AUTO, the content that can no longer be
 * part of a call and the calls that closed. With logprobs, the piece's entries v[0..nv). */
static void put_tool_piece(struct stream *s, struct job *j, const char *p, size_t n, bool final,
                           const struct okv_token_logprob *v, int nv, int completion)
{
    struct srv_buf content = {0};
    struct srv_tool_delta *deltas = NULL;
    int nd = 0;
    cJSON *o = NULL;
    if (j->tool_mode == SRV_TOOLS_FORCED) {
        if (n == 0 && nv == 0)
            return;
        char *t = okv_malloc(n + 1, OKV_TAG_SERVER);
        if (!t) {
            s->out.oom = true;
            return;
        }
        memcpy(t, p, n);
        t[n] = 0;
        o = chunk_obj(j, NULL, 0, NULL, false, v, nv, &j->lp_offset);
        cJSON *d = chunk_delta(o);
        if (j->legacy_fn) {   /* delta.function_call: its name first, then the arguments in pieces */
            cJSON *fn = cJSON_AddObjectToObject(d, "function_call");
            if (!j->n_calls_sent)
                cJSON_AddStringToObject(fn, "name", j->tool_name);
            cJSON_AddStringToObject(fn, "arguments", t);
        } else {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddNumberToObject(c, "index", 0);
            if (!j->n_calls_sent) {
                srv_tool_call_id(j->call_id);
                cJSON_AddStringToObject(c, "id", j->call_id);
                cJSON_AddStringToObject(c, "type", "function");
            }
            cJSON *fn = cJSON_AddObjectToObject(c, "function");
            if (!j->n_calls_sent)
                cJSON_AddStringToObject(fn, "name", j->tool_name);
            cJSON_AddStringToObject(fn, "arguments", t);
            cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), c);
        }
        j->n_calls_sent = 1;
        okv_free(t);
    } else if (j->tool_mode == SRV_TOOLS_REQUIRED) {   /* the array, read once it is complete */
        srv_buf_put(&j->ts.held, p, n);
        if (j->ts.held.oom) {
            s->out.oom = true;
            return;
        }
        if (!final && nv == 0)
            return;
        struct srv_tool_reply r = {0};
        const bool got = final && srv_tools_read_required(j->ts.held.s ? j->ts.held.s : "", j->ts.held.len, &r);
        if (final && !got)   /* cut off: the text as it is */
            srv_buf_put(&content, j->ts.held.s ? j->ts.held.s : "", j->ts.held.len);
        if (!got && content.len == 0 && nv == 0)
            goto out;
        o = chunk_obj(j, content.len ? content.s : NULL, content.len, NULL, false, v, nv, &j->lp_offset);
        if (got)
            add_tool_calls_from(chunk_delta(o), r.calls, r.n, 0);
        j->n_calls_sent += r.n;
        srv_tool_reply_free(&r);
    } else {
        if (!srv_tool_stream_feed(&j->ts, p, n, final, &content, &deltas, &nd)) {
            s->out.oom = true;
            goto out;
        }
        if (j->legacy_fn) {   /* the first call only, as delta.function_call */
            int k = 0;
            for (int i = 0; i < nd; i++) {
                if (deltas[i].index == 0)
                    deltas[k++] = deltas[i];
                else {
                    okv_free(deltas[i].name);
                    okv_free(deltas[i].arguments);
                }
            }
            nd = k;
        }
        if (content.len == 0 && nd == 0 && nv == 0)
            goto out;
        o = chunk_obj(j, content.len ? content.s : NULL, content.len, NULL, false, v, nv, &j->lp_offset);
        if (nd > 0 && j->legacy_fn) {
            cJSON *fn = cJSON_AddObjectToObject(chunk_delta(o), "function_call");
            struct srv_buf args = {0};
            for (int i = 0; i < nd; i++) {
                if (deltas[i].name) {
                    cJSON_AddStringToObject(fn, "name", deltas[i].name);
                    j->n_calls_sent++;
                }
                srv_buf_put(&args, deltas[i].arguments, strlen(deltas[i].arguments));
            }
            cJSON_AddStringToObject(fn, "arguments", args.s ? args.s : "");
            if (args.oom)
                s->out.oom = true;
            okv_free(args.s);
        } else if (nd > 0) {   /* each call's pieces: the first with its id, type and name */
            cJSON *arr = cJSON_AddArrayToObject(chunk_delta(o), "tool_calls");
            for (int i = 0; i < nd; i++) {
                cJSON *c = cJSON_CreateObject();
                cJSON_AddNumberToObject(c, "index", deltas[i].index);
                if (deltas[i].name) {
                    char id[48];
                    srv_tool_call_id(id);
                    cJSON_AddStringToObject(c, "id", id);
                    cJSON_AddStringToObject(c, "type", "function");
                    j->n_calls_sent++;
                }
                cJSON *fn = cJSON_AddObjectToObject(c, "function");
                if (deltas[i].name)
                    cJSON_AddStringToObject(fn, "name", deltas[i].name);
                cJSON_AddStringToObject(fn, "arguments", deltas[i].arguments);
                cJSON_AddItemToArray(arr, c);
            }
        }
    }
    put_sev(s, with_usage(j, o, completion));
out:
    srv_tool_deltas_free(deltas, nd);
    okv_free(content.s);
}

/* A piece of a chat reply (p[0..n), final: the reply ended) put as events: with a reasoning parser its thinking
 * as "reasoning_content" deltas, the rest (and without one, all of it) as content or, with tools, tool calls. */
static void put_chat_piece(struct stream *s, struct job *j, const char *p, size_t n, bool final,
                           const struct okv_token_logprob *v, int nv, int completion)
{
    const bool tools = j->tool_mode != SRV_TOOLS_OFF;
    struct srv_buf rb = {0}, cb = {0};
    if (j->reasoning != OKV_REASONING_NONE) {
        if (!srv_reasoning_feed(j->reasoning, &j->rs, p, n, final, &rb, &cb)) {
            s->out.oom = true;
            goto out;
        }
        if (rb.len > 0 || (nv > 0 && cb.len == 0)) {
            cJSON *o = chunk_obj(j, NULL, 0, NULL, false, v, nv, &j->lp_offset);
            if (rb.len > 0) {
                srv_buf_put(&rb, "", 1);
                cJSON_AddStringToObject(chunk_delta(o), "reasoning_content", rb.oom ? "" : rb.s);
            }
            put_sev(s, with_usage(j, o, completion));
            v = NULL;
            nv = 0;
        }
        p = cb.s ? cb.s : "";
        n = cb.len;
    }
    if (tools)
        put_tool_piece(s, j, p, n, final, v, nv, completion);
    else if (n > 0 || nv > 0)
        put_sev(s, with_usage(j, chunk_obj(j, p, n, NULL, false, v, nv, &j->lp_offset), completion));
out:
    okv_free(rb.s);
    okv_free(cb.s);
}

/* The pieces and the finish of job j taken (the jobs' lock held) and put as events;
 * returns false when the job ended in an error (its event put). */
static bool stream_take(struct stream *s, struct job *j)
{
    struct srv_buf text = j->text;
    size_t *ends = j->ends;
    int *lp_ends = j->lp_ends, *tok_ends = j->tok_ends;
    int n_pieces = j->n_pieces;
    j->text = (struct srv_buf){0};
    j->ends = NULL;
    j->lp_ends = NULL;
    j->tok_ends = NULL;
    j->n_pieces = j->cap_pieces = 0;
    /* log-probability entries: those of the pieces taken, and all of them at the end;
     * entries of tokens whose text is still held back stay for a later piece */
    int n_lp = j->finished ? j->n_lps : n_pieces > 0 ? lp_ends[n_pieces - 1] : 0;
    struct okv_token_logprob *lps = NULL;
    if (n_lp > 0) {
        lps = okv_malloc(sizeof *lps * (size_t)n_lp, OKV_TAG_SERVER);
        if (lps) {
            memcpy(lps, j->lps, sizeof *lps * (size_t)n_lp);
            memmove(j->lps, j->lps + n_lp, sizeof *lps * (size_t)(j->n_lps - n_lp));
            j->n_lps -= n_lp;
        } else {
            text.oom = true;
        }
    }
    const bool oom = text.oom || j->lp_oom;
    bool ok = true;
    size_t at = 0;
    int lp_at = 0;
    const bool tools = j->chat && j->tool_mode != SRV_TOOLS_OFF;
    const bool chat_read = tools || j->reasoning != OKV_REASONING_NONE;   /* the reply is read as it streams */
    for (int i = 0; i < n_pieces && !oom; i++) {
        const int lp_end = lps ? lp_ends[i] : 0;
        if (chat_read)
            put_chat_piece(s, j, text.s + at, ends[i] - at, false, lps ? lps + lp_at : NULL, lp_end - lp_at, tok_ends[i]);
        else
            put_sev(s, with_usage(j, chunk_obj(j, text.s + at, ends[i] - at, NULL, false, lps ? lps + lp_at : NULL,
                                                       lp_end - lp_at, &j->lp_offset),
                                          tok_ends[i]));
        at = ends[i];
        lp_at = lp_end;
    }
    okv_free(text.s);
    okv_free(ends);
    okv_free(lp_ends);
    okv_free(tok_ends);
    if (oom)
        s->out.oom = true;
    if (j->finished && !oom) {
        j->done = true;
        if (j->reason == OKV_FINISH_ERROR) {
            put_sev(s, srv_error_obj(j->error[0] ? j->error : "generation failed", "server_error", NULL, NULL));
            ok = false;
        } else {
            const char *finish = finish_name(j->reason);
            if (chat_read) {   /* what the reading held back */
                put_chat_piece(s, j, "", 0, true, NULL, 0, j->completion_tokens);
                if (j->tool_mode != SRV_TOOLS_FORCED && j->n_calls_sent > 0 && j->reason == OKV_FINISH_STOP)
                    finish = j->legacy_fn ? "function_call" : "tool_calls";
            }
            put_sev(s, with_usage(j, chunk_obj(j, j->chat ? NULL : "", 0, finish, false,
                                                       lps ? lps + lp_at : NULL, lps ? n_lp - lp_at : 0, &j->lp_offset),
                                          j->completion_tokens));
        }
    }
    okv_free(lps);
    return ok;
}

/* The last events of a stream whose choices all finished: the usage chunk when asked, [DONE]. */
static void stream_end(struct stream *s)
{
    const struct job *j0 = s->jobs[0];
    if (s->rs) {   /* response.completed, with the usage */
        srv_resp_stream_end(s->rs, &s->out, j0->prompt_tokens, j0->completion_tokens, j0->cached_tokens,
                            reasoning_tokens(j0, s->rs->thought));
        s->done = true;
        return;
    }
    if (j0->include_usage) {
        int prompt = 0, completion = 0, cached = 0;
        for (int i = 0; i < s->nj; i++) {
            if (i % s->n_per_prompt == 0) {
                prompt += s->jobs[i]->prompt_tokens;
                cached += s->jobs[i]->cached_tokens;
            }
            completion += s->jobs[i]->completion_tokens;
        }
        cJSON *o = base_obj(j0, j0->chat ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", usage_obj(prompt, completion, j0->details ? cached : -1));
        put_sev(s, o);
    }
    srv_buf_put(&s->out, "data: [DONE]\n\n", 14);
    s->done = true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    for (;;) {
        if (s->out_pos < s->out.len) {
            size_t n = s->out.len - s->out_pos < max ? s->out.len - s->out_pos : max;
            memcpy(buf, s->out.s + s->out_pos, n);
            s->out_pos += n;
            if (s->out_pos == s->out.len)
                s->out_pos = s->out.len = 0;
            return (ssize_t)n;
        }
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (s->out.oom)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->jobs[0]->chat && !s->roles_sent) {   /* each choice's first chunk: the role */
            s->roles_sent = true;
            for (int i = 0; i < s->nj; i++)
                put_sev(s, with_usage(s->jobs[i], chunk_obj(s->jobs[i], NULL, 0, NULL, true, NULL, 0, NULL), 0));
            continue;
        }
        struct jsync *sy = s->jobs[0]->sy;
        pthread_mutex_lock(&sy->mu);
        if (!jobs_wait(s->jobs, s->nj))
            return MHD_CONTENT_READER_END_WITH_ERROR;   /* the client is gone; cancelled */
        bool failed = false, all_done = true;
        for (int i = 0; i < s->nj; i++) {   /* in the choices' order */
            struct job *j = s->jobs[i];
            if (!j->done && !failed && !s->out.oom && (j->n_pieces > 0 || j->finished))
                failed = !stream_take(s, j);
            all_done &= j->done;
        }
        pthread_mutex_unlock(&sy->mu);
        if (failed) {   /* a choice's error ends the stream: the others are cancelled */
            for (int i = 0; i < s->nj; i++)
                okv_sched_cancel(s->jobs[0]->sv->sched, s->jobs[i]->sched_id);
            if (!s->rs)   /* (the Responses API's stream ended with response.failed) */
                srv_buf_put(&s->out, "data: [DONE]\n\n", 14);
            s->done = true;
        } else if (all_done && !s->out.oom) {
            stream_end(s);
        }
    }
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    struct jsync *sy = s->jobs[0]->sy;
    pthread_mutex_lock(&sy->mu);
    bool unfinished[MAX_CHOICES];
    for (int i = 0; i < s->nj; i++)
        unfinished[i] = !s->jobs[i]->finished;
    pthread_mutex_unlock(&sy->mu);
    for (int i = 0; i < s->nj; i++) {
        if (unfinished[i])
            okv_sched_cancel(s->jobs[i]->sv->sched, s->jobs[i]->sched_id);
        http_release(s->jobs[i]);
    }
    if (s->rs) {
        srv_resp_stream_free(s->rs);
        okv_free(s->rs);
    }
    okv_free(s->out.s);
    okv_free(s);
}

/* ---- request parsing ---- */

struct perr {
    unsigned status;
    const char *param;
    const char *code;
    char msg[512];
};

static bool fail(struct perr *e, unsigned status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static bool fail(struct perr *e, unsigned status, const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    e->param = param;
    e->code = code;
    return false;
}

/* A field, with JSON null read as absent. */
static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool get_int(const cJSON *o, const char *name, long lo, long hi, long *out, bool *given, struct perr *e)
{
    const cJSON *v = field(o, name);
    if (given)
        *given = v != NULL;
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return fail(e, 400, name, NULL, "'%s' must be an integer", name);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return fail(e, 400, name, NULL, "'%s' = %.0f is out of range [%ld, %ld]", name, v->valuedouble, lo, hi);
    *out = (long)v->valuedouble;
    return true;
}

static bool get_num(const cJSON *o, const char *name, double lo, double hi, double *out, struct perr *e)
{
    const cJSON *v = field(o, name);
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fail(e, 400, name, NULL, "'%s' must be a number", name);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return fail(e, 400, name, NULL, "'%s' = %g is out of range [%g, %g]", name, v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return true;
}

static bool get_bool(const cJSON *o, const char *name, bool *out, struct perr *e)
{
    const cJSON *v = field(o, name);
    if (!v)
        return true;
    if (!cJSON_IsBool(v))
        return fail(e, 400, name, NULL, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return true;
}

#define MAX_GUIDED_CHOICES 64   /* guided_choice's strings */
struct params {
    struct okv_sampling samp;
    long max_tokens;
    bool max_given, stream, include_usage, continuous_usage, ignore_eos;
    bool lp, echo;      /* logprobs (lp_top alternatives), echo (completions) */
    int lp_top;
    int prompt_lp;      /* vLLM's prompt_logprobs: the alternatives of each prompt token's entry; -1 none */
    bool include_stop, keep_special, tokens_as_ids;   /* vLLM's include_stop_str_in_output, skip_special_tokens false,
                                                         return_tokens_as_token_ids */
    long truncate;      /* vLLM's truncate_prompt_tokens: keep the prompt's last this many tokens; 0 none */
    long priority;      /* vLLM's priority (serve --scheduling-policy priority): lower is served first */
    long best_of;       /* candidates generated per prompt, the n most likely returned (0: not given, = n) */
    const char *stop[MAX_STOP];   /* borrowed from the JSON tree */
    int n_stop;
    struct okv_logit_adjust adj;  /* penalties, min_tokens, logit_bias (in bias_id / bias) */
    int32_t bias_id[MAX_LOGIT_BIAS];
    float bias[MAX_LOGIT_BIAS];
    int32_t stop_ids[MAX_STOP_IDS];   /* stop_token_ids (vLLM's) */
    int32_t allowed[MAX_ALLOWED_IDS]; /* allowed_token_ids (vLLM's), in adj */
    int32_t bad_ids[MAX_BAD_TOKENS];  /* bad_words (vLLM's) as token sequences, in adj */
    int bad_len[2 * MAX_BAD_WORDS];
    int n_stop_ids;
    bool json_object;                 /* response_format {"type": "json_object"} */
    bool has_schema;                  /* response_format json_schema / guided_json: its text */
    char schema[16384];
    const char *choices[MAX_GUIDED_CHOICES]; /* guided_choice (borrowed from the JSON tree) */
    const char *regex;                /* guided_regex (borrowed from the JSON tree), or NULL */
    const char *grammar;              /* guided_grammar (borrowed from the JSON tree), or NULL */
    int n_choices;
    enum srv_tool_choice tool_mode;   /* chat with tools: AUTO reads the reply's calls, FORCED makes it one */
    char tool_name[SRV_TOOL_NAME_MAX + 1];   /* FORCED: the function */
    bool legacy_fn;                   /* the tools came as "functions" */
    int think;                        /* chat: how the prompt leaves the reply's thinking (THINK_*) */
};

/* a JSON number that is a token id of a vocabulary of nv */
static bool is_token_id(const cJSON *x, int nv)
{
    return cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) && x->valuedouble >= 0 && x->valuedouble < nv;
}

/* vLLM's and the OpenAI API's sampling extras: presence / frequency / repetition penalties,
 * min_p, min_tokens, logit_bias, stop_token_ids; and a clear error for the known parameters
 * that ask for what this server does not do (structured output, tools, beam search, ...) */
static bool parse_extras(okv_server *sv, const cJSON *root, bool chat_req, struct params *p, struct perr *e)
{
    double pres = 0, freq = 0, rep = okv_gen_default(&sv->gen, OKV_GEN_REPETITION_PENALTY, 1),
           min_p = okv_gen_default(&sv->gen, OKV_GEN_MIN_P, 0);
    long min_tokens = 0;
    if (!get_num(root, "presence_penalty", -2, 2, &pres, e) || !get_num(root, "frequency_penalty", -2, 2, &freq, e) ||
        !get_num(root, "repetition_penalty", 1e-6, 2, &rep, e) || !get_num(root, "min_p", 0, 1, &min_p, e) ||
        !get_int(root, "min_tokens", 0, INT32_MAX, &min_tokens, NULL, e))
        return false;
    if (p->max_given && min_tokens > p->max_tokens)
        return fail(e, 400, "min_tokens", NULL, "'min_tokens' = %ld is more than 'max_tokens' = %ld", min_tokens,
                    p->max_tokens);
    /* vLLM's output extras */
    bool skip_special = true;
    long plp = -1, trunc = 0;
    p->tokens_as_ids = sv->tokens_as_ids;   /* serve --return-tokens-as-token-ids: the default */
    if (!get_bool(root, "include_stop_str_in_output", &p->include_stop, e) ||
        !get_bool(root, "skip_special_tokens", &skip_special, e) ||
        !get_bool(root, "return_tokens_as_token_ids", &p->tokens_as_ids, e))
        return false;
    p->keep_special = !skip_special;
    const cJSON *plv = field(root, "prompt_logprobs");
    if (plv && cJSON_IsNumber(plv) && plv->valuedouble == -1)
        return fail(e, 400, "prompt_logprobs", NULL, "prompt_logprobs -1 (the whole vocabulary) is not supported: at "
                    "most %d alternatives", sv->max_logprobs);
    if (!get_int(root, "prompt_logprobs", 0, sv->max_logprobs, &plp, NULL, e))
        return false;
    if (plp >= 0 && p->stream)
        return fail(e, 400, "prompt_logprobs", NULL, "prompt_logprobs are not available with stream");
    p->prompt_lp = (int)plp;
    const cJSON *tv = field(root, "truncate_prompt_tokens");
    if (tv && cJSON_IsNumber(tv) && tv->valuedouble == -1) {   /* vLLM's: the model's context length */
        trunc = sv->max_ctx;
    } else if (!get_int(root, "truncate_prompt_tokens", 1, INT32_MAX, &trunc, NULL, e)) {
        return false;
    }
    p->truncate = trunc;
    if (!get_int(root, "priority", INT32_MIN, INT32_MAX, &p->priority, NULL, e))
        return false;
    if (p->priority != 0 && !sv->priority_policy)
        return fail(e, 400, "priority", NULL, "priority scheduling is not enabled (serve --scheduling-policy priority)");
    p->adj.presence_penalty = (float)pres;
    p->adj.frequency_penalty = (float)freq;
    p->adj.repetition_penalty = (float)rep;
    p->adj.min_tokens = (int)min_tokens;
    p->samp.min_p = (float)min_p;
    const int n_vocab = okv_tokenizer_n_vocab(sv->tok);
    const cJSON *lb = field(root, "logit_bias");
    if (lb) {
        if (!cJSON_IsObject(lb))
            return fail(e, 400, "logit_bias", NULL, "'logit_bias' must be an object of token ids (as strings) to numbers");
        const cJSON *x;
        cJSON_ArrayForEach(x, lb) {
            char *end = NULL;
            const long id = strtol(x->string, &end, 10);
            if (!*x->string || *end || id < 0 || id >= n_vocab)
                return fail(e, 400, "logit_bias", NULL, "logit_bias: '%.40s' is not a token id in [0, %d)", x->string,
                            n_vocab);
            if (!cJSON_IsNumber(x) || !(x->valuedouble >= -100 && x->valuedouble <= 100))
                return fail(e, 400, "logit_bias", NULL, "logit_bias of token %ld must be a number in [-100, 100]", id);
            int at = 0;   /* a key given twice: the last value (as a JSON object read into a dict) */
            while (at < p->adj.n_bias && p->bias_id[at] != (int32_t)id)
                at++;
            if (at == MAX_LOGIT_BIAS)
                return fail(e, 400, "logit_bias", NULL, "at most %d logit_bias entries", MAX_LOGIT_BIAS);
            p->bias_id[at] = (int32_t)id;
            p->bias[at] = (float)x->valuedouble;
            if (at == p->adj.n_bias)
                p->adj.n_bias++;
        }
        p->adj.bias_id = p->bias_id;
        p->adj.bias = p->bias;
    }
    const cJSON *sti = field(root, "stop_token_ids");
    if (sti) {
        if (!cJSON_IsArray(sti))
            return fail(e, 400, "stop_token_ids", NULL, "'stop_token_ids' must be an array of token ids");
        const cJSON *x;
        cJSON_ArrayForEach(x, sti) {
            if (!is_token_id(x, n_vocab))
                return fail(e, 400, "stop_token_ids", NULL, "'stop_token_ids' must be token ids in [0, %d)", n_vocab);
            if (p->n_stop_ids == MAX_STOP_IDS)
                return fail(e, 400, "stop_token_ids", NULL, "at most %d stop_token_ids", MAX_STOP_IDS);
            p->stop_ids[p->n_stop_ids++] = (int32_t)x->valuedouble;
        }
    }
    const cJSON *al = field(root, "allowed_token_ids");   /* vLLM's: only these ids may be drawn */
    if (al && !cJSON_IsNull(al)) {
        if (!cJSON_IsArray(al) || cJSON_GetArraySize(al) == 0 || cJSON_GetArraySize(al) > MAX_ALLOWED_IDS)
            return fail(e, 400, "allowed_token_ids", NULL, "'allowed_token_ids' must list 1 to %d token ids",
                        MAX_ALLOWED_IDS);
        const cJSON *x;
        cJSON_ArrayForEach(x, al) {
            if (!is_token_id(x, n_vocab))
                return fail(e, 400, "allowed_token_ids", NULL, "'allowed_token_ids' must be token ids in [0, %d)", n_vocab);
            p->allowed[p->adj.n_allowed++] = (int32_t)x->valuedouble;
        }
        p->adj.allowed_id = p->allowed;
    }
    const cJSON *bw = field(root, "bad_words");   /* vLLM's: words never written */
    if (bw && !cJSON_IsNull(bw)) {
        if (!cJSON_IsArray(bw) || cJSON_GetArraySize(bw) > MAX_BAD_WORDS)
            return fail(e, 400, "bad_words", NULL, "'bad_words' must list at most %d strings", MAX_BAD_WORDS);
        const cJSON *x;
        int used = 0;
        cJSON_ArrayForEach(x, bw) {
            const char *w = cJSON_IsString(x) ? x->valuestring : NULL;
            while (w && (*w == ' ' || *w == '\t' || *w == '\n' || *w == '\r'))
                w++;
            if (!w || !*w)
                return fail(e, 400, "bad_words", NULL, "'bad_words' must list words (non-empty strings)");
            /* as vLLM tokenizes them: the word (leading whitespace dropped), and with a space before it where that
             * is another first token and as many tokens (the word in the middle of a text) */
            int first_len = 0;
            int32_t first_tok = -1;
            for (int space = 0; space < 2; space++) {
                char buf[512];
                if (snprintf(buf, sizeof buf, "%s%s", space ? " " : "", w) >= (int)sizeof buf)
                    return fail(e, 400, "bad_words", NULL, "a bad word is longer than %zu bytes", sizeof buf - 2);
                int32_t *ids = NULL;
                size_t n = 0;
                if (okv_tokenizer_encode(sv->tok, buf, strlen(buf), false, true, &ids, &n) != OKV_OK)
                    return fail(e, 400, "bad_words", NULL, "cannot tokenize a bad word: %s", okv_last_error());
                const bool take = n > 0 && (!space || (ids[0] != first_tok && (int)n == first_len));
                if (take && used + (int)n > MAX_BAD_TOKENS) {
                    okv_free(ids);
                    return fail(e, 400, "bad_words", NULL, "'bad_words' come to more than %d tokens", MAX_BAD_TOKENS);
                }
                if (take) {
                    memcpy(p->bad_ids + used, ids, sizeof(int32_t) * n);
                    used += (int)n;
                    p->bad_len[p->adj.n_bad++] = (int)n;
                }
                if (!space) {
                    first_len = (int)n;
                    first_tok = n > 0 ? ids[0] : -1;
                }
                okv_free(ids);
            }
        }
        p->adj.bad_ids = p->bad_ids;
        p->adj.bad_len = p->bad_len;
    }
    /* vLLM's structured_outputs {"json": schema, "choice": [...], "regex": ..., "grammar": ..., "json_object": true}:
     * read as guided_json, guided_choice, guided_regex, guided_grammar and response_format json_object are (one of
     * them); its other constraints refused by name */
    const cJSON *so = field(root, "structured_outputs");
    const cJSON *so_json = NULL, *so_choice = NULL, *so_regex = NULL, *so_grammar = NULL;
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so))
            return fail(e, 400, "structured_outputs", NULL, "'structured_outputs' must be an object");
        const cJSON *x;
        int asks = 0;
        cJSON_ArrayForEach(x, so) {
            if (!strcmp(x->string, "json")) {
                so_json = x;
            } else if (!strcmp(x->string, "choice")) {
                so_choice = x;
            } else if (!strcmp(x->string, "regex")) {
                so_regex = x;
            } else if (!strcmp(x->string, "grammar")) {
                so_grammar = x;
            } else if (!strcmp(x->string, "json_object")) {
                if (!cJSON_IsBool(x))
                    return fail(e, 400, "structured_outputs", NULL, "structured_outputs.json_object must be true or false");
                if (cJSON_IsTrue(x))
                    p->json_object = true;
                asks += cJSON_IsTrue(x);
                continue;
            } else if (!strcmp(x->string, "disable_fallback")) {   /* nothing falls back here */
                continue;
            } else {
                return fail(e, 400, "structured_outputs", NULL, "structured_outputs.%.40s is not supported by this "
                            "server (json, choice, regex, grammar, json_object)", x->string);
            }
            asks += !cJSON_IsNull(x);
        }
        if (asks > 1)
            return fail(e, 400, "structured_outputs", NULL, "structured_outputs: give one of json, choice, regex, "
                        "grammar, json_object");
        if ((so_json || so_choice || so_regex || so_grammar || p->json_object) &&
            (field(root, "guided_json") || field(root, "guided_choice") || field(root, "guided_regex") ||
             field(root, "guided_grammar") || field(root, "response_format")))
            return fail(e, 400, "structured_outputs", NULL, "structured_outputs and guided_* / response_format: give one");
    }
    /* known, and not done here: refused rather than ignored when they ask for something */
    const cJSON *rf = field(root, "response_format");
    const cJSON *schema = NULL;   /* response_format json_schema's "schema", or vLLM's guided_json */
    const char *schema_field = NULL;
    if (rf) {   /* text, JSON mode (any JSON object), or a JSON schema */
        const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (cJSON_IsString(t) && strcmp(t->valuestring, "json_object") == 0) {
            p->json_object = true;
        } else if (cJSON_IsString(t) && strcmp(t->valuestring, "json_schema") == 0) {
            const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
            schema_field = "response_format";
            if (!cJSON_IsObject(schema))
                return fail(e, 400, "response_format", NULL,
                            "response_format json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
        } else if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") != 0) {
            return fail(e, 400, "response_format", NULL,
                        "response_format type %s%s%s is not supported (\"text\", \"json_object\", \"json_schema\")",
                        cJSON_IsString(t) ? "\"" : "", cJSON_IsString(t) ? t->valuestring : "(missing)",
                        cJSON_IsString(t) ? "\"" : "");
        }
    }
    const cJSON *gc = so_choice ? so_choice : field(root, "guided_choice");   /* vLLM's: one of these strings */
    const char *gname = so_choice ? "structured_outputs.choice" : "guided_choice";
    if (gc && !cJSON_IsNull(gc)) {
        const cJSON *x;
        if (!cJSON_IsArray(gc) || cJSON_GetArraySize(gc) < 1 || cJSON_GetArraySize(gc) > MAX_GUIDED_CHOICES)
            return fail(e, 400, gname, NULL, "'%s' must list 1 to %d strings", gname, MAX_GUIDED_CHOICES);
        cJSON_ArrayForEach(x, gc) {
            if (!cJSON_IsString(x) || !*x->valuestring)
                return fail(e, 400, gname, NULL, "'%s' must list non-empty strings", gname);
            p->choices[p->n_choices++] = x->valuestring;
        }
        if (p->json_object || schema_field)
            return fail(e, 400, gname, NULL, "%s and a JSON response_format: give one", gname);
    }
    const cJSON *gj = so_json ? so_json : field(root, "guided_json");
    if (gj && !cJSON_IsNull(gj)) {
        if (schema || p->n_choices)
            return fail(e, 400, "guided_json", NULL, "guided_json and a response_format json_schema or guided_choice: give one");
        schema = gj;
        schema_field = so_json ? "structured_outputs" : "guided_json";
    }
    if (schema) {   /* vLLM takes guided_json as an object or as its JSON text */
        char *txt = cJSON_IsString(schema) ? NULL : cJSON_PrintUnformatted(schema);
        const char *src = cJSON_IsString(schema) ? schema->valuestring : txt;
        okv_json_schema *cs = NULL;
        const enum okv_status st = src ? okv_json_schema_compile(src, strlen(src), &cs) : OKV_ERR_NO_MEMORY;
        okv_json_schema_free(cs);
        if (st != OKV_OK) {
            cJSON_free(txt);
            return fail(e, 400, schema_field, NULL, "%s", okv_last_error());
        }
        snprintf(p->schema, sizeof p->schema, "%s", src);
        const bool fits = strlen(src) < sizeof p->schema;
        cJSON_free(txt);
        if (!fits)
            return fail(e, 400, schema_field, NULL, "the JSON schema is longer than %zu bytes", sizeof p->schema - 1);
        p->has_schema = true;
    }
    const cJSON *gr = so_regex ? so_regex : field(root, "guided_regex");   /* vLLM's: the text matches it */
    if (gr && !cJSON_IsNull(gr)) {
        const char *gname = so_regex ? "structured_outputs" : "guided_regex";
        if (!cJSON_IsString(gr) || !*gr->valuestring)
            return fail(e, 400, gname, NULL, "the regex must be a non-empty string");
        if (p->json_object || p->has_schema || p->n_choices)
            return fail(e, 400, gname, NULL, "a regex and a JSON response_format, guided_json or guided_choice: give one");
        okv_json_schema *cs = NULL;
        const enum okv_status st = okv_json_regex_compile(gr->valuestring, strlen(gr->valuestring), &cs);
        okv_json_schema_free(cs);
        if (st != OKV_OK)
            return fail(e, 400, gname, NULL, "%s", okv_last_error());
        p->regex = gr->valuestring;
    }
    const cJSON *gg = so_grammar ? so_grammar : field(root, "guided_grammar");   /* vLLM's: a sentence of it */
    if (gg && !cJSON_IsNull(gg)) {
        const char *gname = so_grammar ? "structured_outputs" : "guided_grammar";
        if (!cJSON_IsString(gg) || !*gg->valuestring)
            return fail(e, 400, gname, NULL, "the grammar must be a non-empty string (GBNF: root ::= ...; or Lark: start: ...)");
        if (p->json_object || p->has_schema || p->n_choices || p->regex)
            return fail(e, 400, gname, NULL, "a grammar and a JSON response_format, guided_json, guided_choice or "
                        "guided_regex: give one");
        okv_json_schema *cs = NULL;
        const enum okv_status st = okv_json_grammar_compile(gg->valuestring, strlen(gg->valuestring), &cs);
        okv_json_schema_free(cs);
        if (st != OKV_OK)
            return fail(e, 400, gname, NULL, "%s", okv_last_error());
        p->grammar = gg->valuestring;
    }
    static const char *const unsupported[] = {"logits_processors"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        const cJSON *v = field(root, unsupported[i]);
        if (v && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0) && !(cJSON_IsObject(v) && !v->child))
            return fail(e, 400, unsupported[i], NULL, "'%s' is not supported by this server", unsupported[i]);
    }
    const cJSON *sfx = field(root, "suffix");
    if (sfx && !(cJSON_IsString(sfx) && !*sfx->valuestring))
        return fail(e, 400, "suffix", NULL, "'suffix' (text after the completion) is not supported by this server");
    /* tools (chat): read with the messages (srv_tools_parse); completions have none */
    if (!chat_req) {
        static const char *const chat_only[] = {"tools", "tool_choice", "parallel_tool_calls", "functions",
                                                "function_call"};
        for (size_t i = 0; i < sizeof chat_only / sizeof chat_only[0]; i++) {
            const cJSON *v = field(root, chat_only[i]);
            if (v && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0) &&
                !(cJSON_IsString(v) && !strcmp(v->valuestring, "none")))
                return fail(e, 400, chat_only[i], NULL, "'%s' is for chat completions (/v1/chat/completions)",
                            chat_only[i]);
        }
    }
    const cJSON *beam = field(root, "use_beam_search");
    if (beam && !cJSON_IsFalse(beam))
        return fail(e, 400, "use_beam_search", NULL, "beam search is not supported by this server");
    return true;
}

/* the request's "model", if given, names the served model (or the path it was loaded from) */
static bool model_ok(okv_server *sv, const cJSON *root, struct perr *e)
{
    const cJSON *model = field(root, "model");
    if (!model)
        return true;
    if (!cJSON_IsString(model))
        return fail(e, 400, "model", NULL, "'model' must be a string");
    if (strcmp(model->valuestring, sv->model_name) != 0 && (!sv->model_alias || strcmp(model->valuestring, sv->model_alias) != 0))
        return fail(e, 404, "model", "model_not_found", "The model '%.200s' does not exist; this server serves '%.200s'.",
                    model->valuestring, sv->model_name);
    return true;
}

static bool parse_common(okv_server *sv, const cJSON *root, bool chat, struct params *p, struct perr *e)
{
    if (!model_ok(sv, root, e))
        return false;
    long best_of = 0, n = 1;
    bool bo_given = false;
    if (!get_int(root, "best_of", 1, MAX_CHOICES, &best_of, &bo_given, e) || !get_int(root, "n", 1, 1 << 20, &n, NULL, e))
        return false;
    if (bo_given && best_of < n)   /* OpenAI's and vLLM's rule */
        return fail(e, 400, "best_of", NULL, "'best_of' (%ld) must be at least 'n' (%ld)", best_of, n);
    p->best_of = bo_given ? best_of : 0;

    bool given = false;
    if (chat) {
        if (!get_int(root, "max_completion_tokens", 1, INT32_MAX, &p->max_tokens, &given, e))
            return false;
    }
    if (!given) {
        if (!get_int(root, "max_tokens", chat ? 1 : 0, INT32_MAX, &p->max_tokens, &given, e))
            return false;
    }
    p->max_given = given;

    const struct okv_gen_defaults *gd = &sv->gen;   /* the model's generation_config.json, where it sets them */
    double temp = okv_gen_default(gd, OKV_GEN_TEMPERATURE, 1.0), top_p = okv_gen_default(gd, OKV_GEN_TOP_P, 1.0);
    long top_k = (long)okv_gen_default(gd, OKV_GEN_TOP_K, -1);
    if (!get_num(root, "temperature", 0, 1000, &temp, e) || !get_num(root, "top_p", 1e-9, 1, &top_p, e) ||
        !get_int(root, "top_k", -1, INT32_MAX, &top_k, NULL, e))
        return false;
    p->samp.temperature = (float)temp;
    p->samp.top_p = (float)top_p;
    p->samp.top_k = top_k <= 0 ? 0 : (int)top_k;
    const cJSON *seed = field(root, "seed");
    if (seed) {
        if (!cJSON_IsNumber(seed) || !isfinite(seed->valuedouble) || seed->valuedouble != floor(seed->valuedouble) ||
            fabs(seed->valuedouble) > 9.2e18)
            return fail(e, 400, "seed", NULL, "'seed' must be an integer");
        p->samp.seed = (uint64_t)(int64_t)seed->valuedouble;
    } else if (sv->has_seed) {   /* serve --seed: the k-th request without a seed, reproducibly */
        struct okv_rng r;
        okv_rng_seed(&r, sv->seed ^ ((uint64_t)atomic_fetch_add(&sv->n_unseeded, 1) * 0x9E3779B97F4A7C15ull));
        p->samp.seed = okv_rng_next(&r);
    } else {
        uint64_t x = (uint64_t)okv_now() * 1000003ull ^ ((uint64_t)time(NULL) << 20) ^
                     (atomic_fetch_add(&sv->n_ids, 1) * 0x9E3779B97F4A7C15ull);
        struct okv_rng r;
        okv_rng_seed(&r, x);
        p->samp.seed = okv_rng_next(&r);
    }

    const cJSON *stop = field(root, "stop");
    if (stop) {
        if (cJSON_IsString(stop)) {
            if (*stop->valuestring)
                p->stop[p->n_stop++] = stop->valuestring;
        } else if (cJSON_IsArray(stop)) {
            const cJSON *s;
            cJSON_ArrayForEach(s, stop) {
                if (!cJSON_IsString(s))
                    return fail(e, 400, "stop", NULL, "'stop' must be a string or an array of strings");
                if (p->n_stop == MAX_STOP)
                    return fail(e, 400, "stop", NULL, "at most %d stop strings", MAX_STOP);
                if (*s->valuestring)
                    p->stop[p->n_stop++] = s->valuestring;
            }
        } else {
            return fail(e, 400, "stop", NULL, "'stop' must be a string or an array of strings");
        }
    }
    if (!get_bool(root, "stream", &p->stream, e) || !get_bool(root, "ignore_eos", &p->ignore_eos, e))
        return false;
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return fail(e, 400, "stream_options", NULL, "'stream_options' must be an object");
        if (!get_bool(so, "include_usage", &p->include_usage, e) ||
            !get_bool(so, "continuous_usage_stats", &p->continuous_usage, e))
            return false;
        if (!p->stream)
            return fail(e, 400, "stream_options", NULL, "'stream_options' is only allowed with 'stream': true");
    }
    /* log-probabilities: chat takes logprobs (bool) and top_logprobs (int); completions
     * logprobs (int: the alternatives; null or false: none) and echo */
    long top = 0;
    bool top_given = false;
    if (chat) {
        if (!get_bool(root, "logprobs", &p->lp, e) ||
            !get_int(root, "top_logprobs", 0, sv->max_logprobs, &top, &top_given, e))
            return false;
        if (top_given && top > 0 && !p->lp)
            return fail(e, 400, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
        const cJSON *echo = field(root, "echo");
        if (echo && !cJSON_IsFalse(echo))
            return fail(e, 400, "echo", NULL, "echo is not supported for chat completions");
    } else {
        const cJSON *lp = field(root, "logprobs");
        if (lp && cJSON_IsTrue(lp)) {   /* as vLLM's validation coerces it */
            top = sv->max_logprobs < 1 ? sv->max_logprobs : 1;
            p->lp = true;
        } else if (lp && !cJSON_IsFalse(lp)) {
            if (!get_int(root, "logprobs", 0, sv->max_logprobs, &top, NULL, e))
                return false;
            p->lp = true;
        }
        if (!get_bool(root, "echo", &p->echo, e))
            return false;
        if (p->echo && p->stream)
            return fail(e, 400, "echo", NULL, "echo is not supported with stream");
        if (p->max_given && p->max_tokens == 0 && !p->echo)   /* 0: score the prompt alone (legacy API) */
            return fail(e, 400, "max_tokens", NULL, "'max_tokens' = 0 needs 'echo': true");
    }
    p->lp_top = (int)top;
    return parse_extras(sv, root, chat, p, e);
}

/* One prompt of a request: its ids, and (completions) the JSON item it came from, for echo. */
struct prompt {
    int32_t *ids;
    size_t n;
    const cJSON *src;
};

/* ids of one completions prompt item: a string or an array of token ids */
static bool prompt_ids(okv_server *sv, const cJSON *pr, struct prompt *out, struct perr *e)
{
    out->src = pr;
    if (cJSON_IsString(pr)) {
        const char *t = pr->valuestring;
        if (okv_tokenizer_encode(sv->tok, t, strlen(t), okv_tokenizer_add_bos(sv->tok), true, &out->ids, &out->n) != OKV_OK)
            return fail(e, 400, "prompt", NULL, "cannot tokenize the prompt: %s", okv_last_error());
        return true;
    }
    if (!cJSON_IsArray(pr) || cJSON_GetArraySize(pr) == 0)
        return fail(e, 400, "prompt", NULL, "'prompt' must be a string, an array of token ids, or an array of either");
    int cnt = cJSON_GetArraySize(pr);
    int32_t *v = okv_malloc(sizeof *v * (size_t)cnt, OKV_TAG_SERVER);
    if (!v)
        return fail(e, 500, NULL, NULL, "out of memory");
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, pr) {
        if (!is_token_id(x, okv_tokenizer_n_vocab(sv->tok))) {
            okv_free(v);
            return fail(e, 400, "prompt", NULL, "'prompt' token ids must be integers in [0, %d)", okv_tokenizer_n_vocab(sv->tok));
        }
        v[i++] = (int32_t)x->valuedouble;
    }
    out->ids = v;
    out->n = (size_t)cnt;
    return true;
}

/* Completions prompts: a string, [int, ...], or an array of strings or of arrays of ids (one
 * choice each, at most max); *n_out set. The caller frees the ids (okv_free) on any return. */
static bool completion_prompts(okv_server *sv, const cJSON *root, struct prompt *out, int max, int *n_out, struct perr *e)
{
    *n_out = 0;
    const cJSON *pr = field(root, "prompt");
    if (!pr)
        return fail(e, 400, "prompt", NULL, "'prompt' is required");
    const bool list = cJSON_IsArray(pr) && pr->child && (cJSON_IsString(pr->child) || cJSON_IsArray(pr->child));
    if (!list)
        return prompt_ids(sv, pr, &out[(*n_out)++], e);
    if (cJSON_GetArraySize(pr) > max)
        return fail(e, 400, "prompt", NULL, "at most %d prompts (times n) per request", max);
    const cJSON *x;
    cJSON_ArrayForEach(x, pr) {
        if (!cJSON_IsString(x) && !cJSON_IsArray(x))
            return fail(e, 400, "prompt", NULL, "a list of prompts holds strings or arrays of token ids");
        if (!prompt_ids(sv, x, &out[*n_out], e))
            return false;
        (*n_out)++;
    }
    return true;
}

/* Chat messages through the model's chat template. */
/* An assistant message's "tool_calls" into m (their arguments, JSON text in the request, written as the
 * template's tojson writes them; the strings owned by *calls_owned); legacy: its "function_call" (tcs the
 * {"name", "arguments"} object), one call. */
static bool msg_tool_calls(const cJSON *tcs, bool legacy, int i, struct okv_chat_msg *m,
                           struct okv_chat_tool_call **calls_owned, struct perr *e)
{
    if (!legacy && !cJSON_IsArray(tcs))
        return fail(e, 400, "messages", NULL, "messages[%d].tool_calls must be an array", i);
    const int n = legacy ? 1 : cJSON_GetArraySize(tcs);
    if (n == 0)
        return true;
    struct okv_chat_tool_call *c = okv_calloc((size_t)n, sizeof *c, OKV_TAG_SERVER);
    if (!c)
        return fail(e, 500, NULL, NULL, "out of memory");
    *calls_owned = c;
    m->tool_calls = c;
    const cJSON *tc;
    int k = 0;
    for (tc = legacy ? tcs : tcs->child; tc && k < n; tc = tc->next) {
        /* the legacy "function_call" of a message is the function object itself */
        const cJSON *fn = legacy ? tc : cJSON_IsObject(tc) ? field(tc, "function") : NULL;
        const cJSON *name = cJSON_IsObject(fn) ? field(fn, "name") : NULL;
        const cJSON *args = cJSON_IsObject(fn) ? field(fn, "arguments") : NULL;
        if (legacy && (!cJSON_IsString(name) || !cJSON_IsString(args)))
            return fail(e, 400, "messages", NULL, "messages[%d].function_call must be {\"name\": string, "
                        "\"arguments\": JSON text}", i);
        if (!cJSON_IsString(name) || !cJSON_IsString(args))
            return fail(e, 400, "messages", NULL, "messages[%d].tool_calls[%d] must be {\"type\": \"function\", "
                        "\"function\": {\"name\": string, \"arguments\": JSON text}}", i, k);
        cJSON *a = cJSON_Parse(args->valuestring);
        if (!a && legacy)
            return fail(e, 400, "messages", NULL, "messages[%d].function_call.arguments is not valid JSON", i);
        if (!a)
            return fail(e, 400, "messages", NULL, "messages[%d].tool_calls[%d].function.arguments is not valid JSON", i, k);
        /* from the text: json.dumps of what json.loads reads (1.0 stays 1.0); the parsed tree where the text
         * reader refuses what cJSON took (a raw control character in a string) */
        char *txt = srv_pyjson_of_text(args->valuestring, strlen(args->valuestring));
        if (!txt)
            txt = srv_pyjson_text(a, 0);
        cJSON_Delete(a);
        if (!txt)
            return fail(e, 500, NULL, NULL, "out of memory");
        c[k].name = name->valuestring;
        c[k].arguments = txt;
        m->n_tool_calls = ++k;
    }
    return true;
}

/* think (may be NULL): how the rendered prompt leaves the reply's thinking: THINK_OPEN the generation prompt opened
 * a <think> block (the reply starts inside it), THINK_CLOSED it closed an empty one (enable_thinking false: the reply
 * is all answer), THINK_ASIS neither */
enum { THINK_ASIS = 0, THINK_OPEN, THINK_CLOSED };

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

static bool chat_prompt(okv_server *sv, const cJSON *root, const struct srv_tools *tools, int32_t **ids, size_t *n,
                        int *think, struct perr *e)
{
    struct okv_chat_opts opts = sv->chat_defaults;
    bool gen_prompt = true, cont = false;   /* vLLM's add_generation_prompt and continue_final_message */
    if (!get_bool(root, "add_generation_prompt", &gen_prompt, e) || !get_bool(root, "continue_final_message", &cont, e))
        return false;
    if (gen_prompt && cont)
        return fail(e, 400, "continue_final_message", NULL, "continue_final_message leaves the last message open: give it "
                    "with add_generation_prompt false");
    const cJSON *kw = field(root, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw)) {
        char *txt = cJSON_PrintUnformatted(kw);
        if (!txt)
            return fail(e, 500, NULL, NULL, "out of memory");
        const enum okv_status st = okv_chat_template_kwargs(txt, strlen(txt), &opts);
        cJSON_free(txt);
        if (st != OKV_OK)
            return fail(e, 400, "chat_template_kwargs", NULL, "%s", okv_last_error());
    }
    const cJSON *msgs = field(root, "messages");
    if (!msgs || !cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return fail(e, 400, "messages", NULL, "'messages' must be a non-empty array");
    int cnt = cJSON_GetArraySize(msgs);
    struct okv_chat_msg *m = okv_calloc((size_t)cnt, sizeof *m, OKV_TAG_SERVER);
    char **owned = okv_calloc((size_t)cnt, sizeof *owned, OKV_TAG_SERVER);
    struct okv_chat_tool_call **calls = okv_calloc((size_t)cnt, sizeof *calls, OKV_TAG_SERVER);
    bool ok = false;
    char *text = NULL;
    if (!m || !owned || !calls) {
        fail(e, 500, NULL, NULL, "out of memory");
        goto done;
    }
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_IsObject(msg) ? field(msg, "role") : NULL;
        if (!role || !cJSON_IsString(role)) {
            fail(e, 400, "messages", NULL, "messages[%d] must be an object with a string 'role'", i);
            goto done;
        }
        const char *r = role->valuestring;
        if (!strcmp(r, "developer"))
            r = "system";
        else if (!strcmp(r, "function"))   /* the legacy API's function result */
            r = "tool";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            fail(e, 400, "messages", NULL, "messages[%d]: role '%.50s' is not supported (system, user, assistant, tool, "
                 "function)", i, role->valuestring);
            goto done;
        }
        m[i].role = r;
        const cJSON *tcs = field(msg, "tool_calls"), *fcall = field(msg, "function_call");
        if (tcs && cJSON_IsNull(tcs))
            tcs = NULL;
        if (fcall && cJSON_IsNull(fcall))
            fcall = NULL;
        if ((tcs || fcall) && strcmp(r, "assistant") != 0) {
            fail(e, 400, "messages", NULL, "messages[%d]: only an assistant message has %s", i,
                 tcs ? "tool_calls" : "a function_call");
            goto done;
        }
        if (tcs && fcall) {
            fail(e, 400, "messages", NULL, "messages[%d]: tool_calls and a function_call (its legacy form): give one", i);
            goto done;
        }
        if ((tcs || fcall) && !msg_tool_calls(tcs ? tcs : fcall, fcall != NULL, i, &m[i], &calls[i], e))
            goto done;
        const cJSON *rc = field(msg, "reasoning_content");   /* an answer's thinking (what a reply gave back) */
        if (rc && !cJSON_IsNull(rc) && !cJSON_IsString(rc)) {
            fail(e, 400, "messages", NULL, "messages[%d].reasoning_content must be a string", i);
            goto done;
        }
        if (cJSON_IsString(rc))
            m[i].reasoning_content = rc->valuestring;
        const bool as_json = !strcmp(r, "tool") && okv_tokenizer_chat_tools(sv->tok) == OKV_CHAT_TOOLS_LLAMA31;
        const cJSON *content = field(msg, "content");
        if (!content) {
            m[i].content = "";
        } else if (cJSON_IsString(content)) {
            m[i].content = content->valuestring;
        } else if (cJSON_IsArray(content)) {
            struct srv_buf b = {0};
            const cJSON *part;
            int k = 0;
            cJSON_ArrayForEach(part, content) {
                const cJSON *type = cJSON_IsObject(part) ? field(part, "type") : NULL;
                const cJSON *t = cJSON_IsObject(part) ? field(part, "text") : NULL;
                if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "text") || !t || !cJSON_IsString(t)) {
                    okv_free(b.s);
                    fail(e, 400, "messages", NULL, "messages[%d].content[%d]: only {\"type\": \"text\", \"text\": ...} parts are supported", i, k);
                    goto done;
                }
                if (k++)
                    srv_buf_put(&b, "\n", 1);
                srv_buf_put(&b, t->valuestring, strlen(t->valuestring));
            }
            if (b.oom) {
                okv_free(b.s);
                fail(e, 500, NULL, NULL, "out of memory");
                goto done;
            }
            owned[i] = b.s;
            m[i].content = b.s ? b.s : "";
        } else {
            fail(e, 400, "messages", NULL, "messages[%d].content must be a string or an array of text parts", i);
            goto done;
        }
        if (as_json) {   /* Llama 3.1's template writes a tool's result as a JSON string (tojson) */
            cJSON *str = cJSON_CreateString(m[i].content);
            char *txt = str ? srv_pyjson_text(str, 0) : NULL;
            cJSON_Delete(str);
            if (!txt) {
                fail(e, 500, NULL, NULL, "out of memory");
                goto done;
            }
            okv_free(owned[i]);
            owned[i] = txt;
            m[i].content = txt;
        }
        i++;
    }
    opts.tools = (const char *const *)tools->defs;
    opts.n_tools = (size_t)tools->n;
    opts.add_generation_prompt = gen_prompt;
    opts.continue_final_message = cont;
    if (okv_tokenizer_render_chat(sv->tok, m, (size_t)cnt, &opts, &text) != OKV_OK) {
        fail(e, 400, "messages", NULL, "cannot apply the chat template: %s", okv_last_error());
        goto done;
    }
    if (think)
        *think = ends_with(text, "<think>\n") ? THINK_OPEN : ends_with(text, "</think>\n\n") ? THINK_CLOSED : THINK_ASIS;
    /* the template carries the special tokens and BOS, if any */
    if (okv_tokenizer_encode(sv->tok, text, strlen(text), false, true, ids, n) != OKV_OK) {
        fail(e, 400, "messages", NULL, "cannot tokenize the messages: %s", okv_last_error());
        goto done;
    }
    ok = true;
done:
    if (owned)
        for (int k = 0; k < cnt; k++)
            okv_free(owned[k]);
    if (calls && m)
        for (int k = 0; k < cnt; k++) {
            for (int c = 0; c < m[k].n_tool_calls; c++)
                okv_free((char *)calls[k][c].arguments);
            okv_free(calls[k]);
        }
    okv_free(calls);
    okv_free(owned);
    okv_free(m);
    okv_free(text);
    return ok;
}

/* ---- the handler ---- */

/* Whether a JSON body writes U+0000 in a string: cJSON keeps strings NUL-terminated, so the
 * text after it would be dropped without a word (a prompt cut short, a stop string emptied). */
#define NUL_ESCAPE_MSG "strings holding the character U+0000 (\\u0000) are not supported"
static bool has_nul_escape(const char *body, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (body[i] != '\\')
            continue;
        if (body[i + 1] == 'u' && i + 5 < len && !memcmp(body + i + 2, "0000", 4))
            return true;
        i++;   /* the escaped character */
    }
    return false;
}

static enum MHD_Result reply_perr(struct MHD_Connection *c, const struct perr *e)
{
    return srv_reply_json(c, e->status, srv_error_obj(e->msg, e->status >= 500 ? "server_error" : "invalid_request_error",
                                                      e->param, e->code));
}

/* A message's "tool_calls" (the reply's calls; in a stream, delta entries from index first on). */
static void add_tool_calls_from(cJSON *msg, const struct srv_tool_call *calls, int n, int first)
{
    cJSON *arr = cJSON_AddArrayToObject(msg, "tool_calls");
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        char id[48];
        srv_tool_call_id(id);
        if (first >= 0)
            cJSON_AddNumberToObject(c, "index", first + i);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(fn, "name", calls[i].name);
        cJSON_AddStringToObject(fn, "arguments", calls[i].arguments);
        cJSON_AddItemToArray(arr, c);
    }
}

/* The reply's calls into a message: "tool_calls", or for a request with the legacy "functions" the first call as
 * "function_call" {"name", "arguments"} */
static void add_calls(cJSON *msg, const struct srv_tool_reply *r, bool legacy)
{
    if (!legacy) {
        add_tool_calls_from(msg, r->calls, r->n, -1);
    } else if (r->n > 0) {
        cJSON *fn = cJSON_AddObjectToObject(msg, "function_call");
        cJSON_AddStringToObject(fn, "name", r->calls[0].name);
        cJSON_AddStringToObject(fn, "arguments", r->calls[0].arguments);
    }
}

/* The choice of a finished job (index i), or NULL when out of memory. */
static cJSON *choice_obj(const struct job *j, int i)
{
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", i);
    const char *text = j->text.s ? j->text.s : "";
    const char *finish = j->echo_only ? "length" : finish_name(j->reason);
    char *think = NULL, *answer = NULL;   /* with a reasoning parser: the reply's two parts */
    if (j->chat && j->reasoning != OKV_REASONING_NONE) {
        if (!srv_reasoning_split(j->reasoning, text, strlen(text), &think, &answer)) {
            cJSON_Delete(ch);
            return NULL;
        }
        text = answer ? answer : "";
    }
    if (j->chat && j->tool_mode != SRV_TOOLS_OFF) {
        cJSON *msg = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(msg, "role", j->sv->response_role);
        struct srv_tool_reply r = {0};
        if (j->tool_mode == SRV_TOOLS_FORCED) {   /* the text is the arguments */
            struct srv_tool_call c = {.name = (char *)j->tool_name, .arguments = (char *)text};
            r.calls = &c;
            r.n = 1;
            cJSON_AddNullToObject(msg, "content");
            add_calls(msg, &r, j->legacy_fn);
        } else if (j->tool_mode == SRV_TOOLS_REQUIRED) {   /* the text is the array of calls (unless cut off) */
            if (srv_tools_read_required(text, strlen(text), &r)) {
                cJSON_AddNullToObject(msg, "content");
                add_calls(msg, &r, j->legacy_fn);
                if (j->reason == OKV_FINISH_STOP)
                    finish = j->legacy_fn ? "function_call" : "tool_calls";
            } else {
                cJSON_AddStringToObject(msg, "content", text);
            }
            srv_tool_reply_free(&r);
        } else {
            if (!srv_tools_read_reply(j->ts.fmt, text, strlen(text), &r)) {
                okv_free(think);
                okv_free(answer);
                cJSON_Delete(ch);
                return NULL;
            }
            if (r.content)
                cJSON_AddStringToObject(msg, "content", r.content);
            else
                cJSON_AddNullToObject(msg, "content");
            if (r.n > 0) {
                add_calls(msg, &r, j->legacy_fn);
                if (j->reason == OKV_FINISH_STOP)
                    finish = j->legacy_fn ? "function_call" : "tool_calls";
            }
            srv_tool_reply_free(&r);
        }
    } else if (j->chat) {
        cJSON *msg = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(msg, "role", j->sv->response_role);
        if (j->reasoning != OKV_REASONING_NONE && !answer)
            cJSON_AddNullToObject(msg, "content");
        else
            cJSON_AddStringToObject(msg, "content", text);
    } else if (j->echo) {   /* the prompt's text, then the completion (none with max_tokens 0) */
        struct srv_buf t = {0};
        srv_buf_put(&t, j->echo, strlen(j->echo));
        if (!j->echo_only)
            srv_buf_put(&t, text, strlen(text));
        srv_buf_put(&t, "", 1);
        if (t.oom) {
            okv_free(t.s);
            cJSON_Delete(ch);
            return NULL;
        }
        cJSON_AddStringToObject(ch, "text", t.s);
        okv_free(t.s);
    } else {
        cJSON_AddStringToObject(ch, "text", text);
    }
    long offset = 0;
    int n_lps = j->n_lps;
    while (j->echo_only && n_lps > 0 && !j->lps[n_lps - 1].prompt)   /* the prompt's entries alone */
        n_lps--;
    if (j->chat && j->reasoning != OKV_REASONING_NONE) {
        cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
        if (think)
            cJSON_AddStringToObject(msg, "reasoning_content", think);
        else
            cJSON_AddNullToObject(msg, "reasoning_content");
    }
    okv_free(think);
    okv_free(answer);
    add_logprobs(j, ch, j->lps, n_lps, &offset);
    if (j->prompt_lp >= 0 && !j->chat)   /* vLLM's: on each choice of a completion, on the response of a chat */
        cJSON_AddItemToObject(ch, "prompt_logprobs", prompt_logprobs_obj(j, j->lps, n_lps));
    cJSON_AddStringToObject(ch, "finish_reason", finish);
    return ch;
}

/* The reply to a finished request of nj jobs, n_per_prompt for each prompt, its first n_show of them its choices
 * (best_of > n: the rest were candidates not chosen); the prompt tokens of each prompt counted once, the completion
 * tokens of every job (those generated: OpenAI bills best_of's candidates). */
static cJSON *final_obj(struct job **jobs, int nj, int n_per_prompt, int n_show, const struct srv_resp_req *resp,
                        struct perr *e)
{
    for (int i = 0; i < nj; i++) {
        const struct job *j = jobs[i];
        if (j->reason == OKV_FINISH_ERROR) {
            fail(e, 500, NULL, NULL, "%s", j->error[0] ? j->error : "generation failed");
            return NULL;
        }
        if (j->reason == OKV_FINISH_ABORT) {
            fail(e, 503, NULL, "service_unavailable", "The request was cancelled: the server is shutting down.");
            return NULL;
        }
        if (j->text.oom || j->lp_oom) {
            fail(e, 500, NULL, NULL, "out of memory");
            return NULL;
        }
    }
    cJSON *o = base_obj(jobs[0], jobs[0]->chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    int prompt = 0, completion = 0, cached = 0;
    for (int i = 0; i < nj; i++) {
        if (i % n_per_prompt < n_show) {
            cJSON *ch = choice_obj(jobs[i], i / n_per_prompt * n_show + i % n_per_prompt);
            if (!ch) {
                cJSON_Delete(o);
                fail(e, 500, NULL, NULL, "out of memory");
                return NULL;
            }
            cJSON_AddItemToArray(choices, ch);
        }
        if (i % n_per_prompt == 0) {
            prompt += jobs[i]->prompt_tokens;
            cached += jobs[i]->cached_tokens;
        }
        completion += jobs[i]->echo_only ? 0 : jobs[i]->completion_tokens;
    }
    cJSON_AddItemToObject(o, "usage", usage_obj(prompt, completion, jobs[0]->details ? cached : -1));
    if (jobs[0]->chat && jobs[0]->prompt_lp >= 0)
        cJSON_AddItemToObject(o, "prompt_logprobs", prompt_logprobs_obj(jobs[0], jobs[0]->lps, jobs[0]->n_lps));
    if (resp) {   /* POST /v1/responses: the chat completion as a Response object, with its thinking's tokens */
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(choices, 0), "message");
        const bool thought = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(msg, "reasoning_content"));
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(o, "usage"),
                                                         "completion_tokens_details"), "reasoning_tokens",
                                reasoning_tokens(jobs[0], thought));
        cJSON *r = srv_resp_reply(resp, o);
        cJSON_Delete(o);
        if (!r)
            fail(e, 500, NULL, NULL, "out of memory");
        o = r;
    }
    return o;
}

static enum MHD_Result reply_final(struct job **jobs, int nj, int n_per_prompt, int n_show, struct MHD_Connection *c,
                                   const struct srv_resp_req *resp)
{
    struct perr e = {0};
    cJSON *o = final_obj(jobs, nj, n_per_prompt, n_show, resp, &e);
    if (!o)
        return reply_perr(c, &e);
    return srv_reply_json(c, MHD_HTTP_OK, o);
}

/* ---- background responses (the Responses API's background: true) ---- */

/* A background response: its jobs, waited for on a thread of its own, the Response kept in the store when they end
 * (cancelled: with status "cancelled"). Listed in the server's registry while it runs, so that
 * POST /v1/responses/{id}/cancel finds it. */
struct bg_task {
    okv_server *sv;
    struct job *jobs[MAX_CHOICES];
    int nj;
    struct srv_resp_req rq;
    struct bg_task *next;   /* the registry (sv->bg_mu) */
    bool cancelled;         /* under sv->bg_mu */
};

/* t off the registry (its response is kept by then: a cancel waiting for it wakes); ended: its thread ends too */
static void bg_unlist(okv_server *sv, struct bg_task *t, bool ended)
{
    pthread_mutex_lock(&sv->bg_mu);
    for (struct bg_task **p = &sv->bg_tasks; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    sv->n_background -= ended;
    pthread_cond_broadcast(&sv->bg_cv);
    pthread_mutex_unlock(&sv->bg_mu);
}

/* whether a background response of this id is running (sv->bg_mu held) */
static bool bg_listed(const okv_server *sv, const char *id)
{
    for (const struct bg_task *t = sv->bg_tasks; t; t = t->next)
        if (!strcmp(t->rq.id, id))
            return true;
    return false;
}

static void *bg_main(void *arg)
{
    struct bg_task *t = arg;
    okv_server *sv = t->sv;
    pthread_mutex_lock(&t->jobs[0]->sy->mu);
    for (;;) {
        int left = 0;
        for (int i = 0; i < t->nj; i++) {
            t->jobs[i]->done |= t->jobs[i]->finished;
            left += !t->jobs[i]->done;
        }
        if (!left)
            break;
        jobs_wait(t->jobs, t->nj);   /* (no client to lose: the jobs' fd is -1) */
    }
    pthread_mutex_unlock(&t->jobs[0]->sy->mu);
    pthread_mutex_lock(&sv->bg_mu);
    const bool cancelled = t->cancelled;
    pthread_mutex_unlock(&sv->bg_mu);
    bool aborted = false;
    for (int i = 0; i < t->nj; i++)
        aborted |= t->jobs[i]->reason == OKV_FINISH_ABORT;
    struct perr e = {0};
    cJSON *o;   /* the Response to keep, where final_obj did not keep it */
    if (aborted || cancelled)
        o = srv_resp_status_obj(&t->rq, sv->model_name, "cancelled", NULL, NULL);
    else if ((o = final_obj(t->jobs, t->nj, t->nj, 1, &t->rq, &e))) {
        cJSON_Delete(o);   /* (kept by srv_resp_reply) */
        o = NULL;
    } else {
        o = srv_resp_status_obj(&t->rq, sv->model_name, "failed", "server_error", e.msg);
    }
    if (o)
        srv_resp_keep(&t->rq, o);
    cJSON_Delete(o);
    bg_unlist(sv, t, false);   /* (the jobs live while it is listed: a cancel reads their ids) */
    for (int i = 0; i < t->nj; i++)
        http_release(t->jobs[i]);
    srv_resp_req_free(&t->rq);
    okv_free(t);
    pthread_mutex_lock(&sv->bg_mu);   /* the last touch of sv: okv_server_free waits for the count */
    sv->n_background--;
    pthread_cond_broadcast(&sv->bg_cv);
    pthread_mutex_unlock(&sv->bg_mu);
    return NULL;
}

/* The jobs of a background response handed to their thread (rq moved in); the reply: the response in progress.
 * False: the thread could not start (the caller cancels the jobs). */
static bool bg_start(okv_server *sv, struct MHD_Connection *c, struct job **jobs, int nj, struct srv_resp_req *rq,
                     enum MHD_Result *ret)
{
    struct bg_task *t = okv_calloc(1, sizeof *t, OKV_TAG_SERVER);
    if (!t)
        return false;
    t->sv = sv;
    t->nj = nj;
    for (int i = 0; i < nj; i++) {
        t->jobs[i] = jobs[i];
        jobs[i]->fd = -1;
    }
    t->rq = *rq;
    cJSON *o = srv_resp_status_obj(&t->rq, sv->model_name, "in_progress", NULL, NULL);
    if (!o) {
        okv_free(t);
        return false;
    }
    srv_resp_keep(&t->rq, o);   /* GET finds it in progress */
    pthread_mutex_lock(&sv->bg_mu);
    t->next = sv->bg_tasks;
    sv->bg_tasks = t;
    sv->n_background++;
    pthread_mutex_unlock(&sv->bg_mu);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    const int rc = pthread_create(&th, &at, bg_main, t);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        bg_unlist(sv, t, true);
        srv_resp_store_delete(sv->responses, t->rq.id);
        cJSON_Delete(o);
        okv_free(t);
        return false;
    }
    memset(rq, 0, sizeof *rq);   /* the thread owns it now */
    *ret = srv_reply_json(c, MHD_HTTP_OK, o);
    return true;
}

/* POST /v1/responses/{id}/cancel: a background response in progress cancelled (its jobs stop; the thread keeps it
 * with status "cancelled"), replied with as kept then. */
enum MHD_Result srv_handle_cancel_response(okv_server *sv, struct MHD_Connection *c, const char *id)
{
    bool found = false;
    pthread_mutex_lock(&sv->bg_mu);
    for (struct bg_task *t = sv->bg_tasks; t; t = t->next)
        if (!strcmp(t->rq.id, id)) {
            found = true;
            t->cancelled = true;
            for (int i = 0; i < t->nj; i++)
                okv_sched_cancel(sv->sched, t->jobs[i]->sched_id);
        }
    pthread_mutex_unlock(&sv->bg_mu);
    cJSON *r = NULL;
    bool oom = false;
    if (found) {   /* the thread keeps the cancelled response once its jobs have stopped (a step or so; at most 5 s) */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        pthread_mutex_lock(&sv->bg_mu);
        while (bg_listed(sv, id) && pthread_cond_timedwait(&sv->bg_cv, &sv->bg_mu, &dl) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&sv->bg_mu);
    }
    if (!sv->responses || !srv_resp_store_get(sv->responses, id, &r, NULL, NULL, &oom)) {
        if (oom)
            return srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "out of memory");
        return srv_reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", "response_id", "not_found",
                               "No response with id '%.80s' is stored here.", id);
    }
    if (!found && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "background"))) {
        cJSON_Delete(r);
        return srv_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "response_id", NULL,
                               "Only a background response can be cancelled: '%.80s' was not made with \"background\": "
                               "true.", id);
    }
    return srv_reply_json(c, MHD_HTTP_OK, r);   /* (a finished one as it is, as OpenAI's API) */
}

/* A job for choice `index`: prompt pr, its echo text when asked; *sy is the request's lock,
 * made by its first job (NULL: out of memory). */
static struct job *job_new(okv_server *sv, struct MHD_Connection *c, bool chat, const struct params *p,
                           const struct prompt *pr, bool echo_only, const char *id, int index, struct jsync **sy)
{
    if (!*sy) {
        if (!(*sy = okv_calloc(1, sizeof **sy, OKV_TAG_SERVER)))
            return NULL;
        pthread_mutex_init(&(*sy)->mu, NULL);
        pthread_cond_init(&(*sy)->cv, NULL);
        atomic_init(&(*sy)->refs, 1);   /* the request's own, let go once its jobs hold theirs */
    }
    struct job *j = okv_calloc(1, sizeof *j, OKV_TAG_SERVER);
    if (!j)
        return NULL;
    atomic_fetch_add(&(*sy)->refs, 1);
    j->sy = *sy;
    j->index = index;
    atomic_init(&j->refs, 2);   /* the connection and the scheduler */
    j->sv = sv;
    j->chat = chat;
    j->stream = p->stream;
    j->include_usage = p->include_usage;
    j->continuous_usage = p->include_usage && p->continuous_usage;
    j->created = (long)time(NULL);
    j->prompt_tokens = (int)pr->n;
    j->lp = p->lp;
    j->lp_top = p->lp_top;
    j->prompt_lp = p->prompt_lp;
    j->tokens_as_ids = p->tokens_as_ids;
    j->echo_only = echo_only;
    j->tool_mode = p->tool_mode;
    j->legacy_fn = p->legacy_fn;
    j->ts.fmt = okv_tokenizer_chat_tools(sv->tok);
    j->reasoning = chat ? sv->reasoning : OKV_REASONING_NONE;
    /* the template decides where the reply starts: inside a <think> block it opened (read as deepseek_r1's
     * parser reads: thinking up to </think>), or after one it closed (all answer: as qwen3's reads a reply
     * without <think>) */
    if (j->reasoning != OKV_REASONING_NONE && p->think != THINK_ASIS)
        j->reasoning = p->think == THINK_OPEN ? OKV_REASONING_DEEPSEEK_R1 : OKV_REASONING_QWEN3;
    snprintf(j->tool_name, sizeof j->tool_name, "%s", p->tool_name);
    snprintf(j->id, sizeof j->id, "%s", id);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    if (p->echo) {   /* the prompt's text: as given, or its token ids decoded */
        size_t el = 0;
        char *dec = NULL;
        if (pr->src && cJSON_IsString(pr->src))
            j->echo = utf8_repair(pr->src->valuestring, strlen(pr->src->valuestring));
        else if (okv_tokenizer_decode(sv->tok, pr->ids, pr->n, false, &dec, &el) == OKV_OK)
            j->echo = utf8_repair(dec, el);
        okv_free(dec);
        if (!j->echo) {
            atomic_store(&j->refs, 1);
            job_unref(j);
            return NULL;
        }
    }
    return j;
}

static enum MHD_Result handle_completion(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len,
                                         bool chat, struct srv_resp_req *resp);

/* The handler counts as active while it runs (a shutdown waits for it: a request still
 * being tokenized gets its reply, 503 when cancelled, instead of a dropped connection). */
enum MHD_Result srv_handle_completion(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len,
                                      bool chat)
{
    atomic_fetch_add(&sv->n_active, 1);
    const enum MHD_Result r = handle_completion(sv, c, body, len, chat, NULL);
    atomic_fetch_sub(&sv->n_active, 1);
    return r;
}

/* POST /v1/responses: the request read into a chat completions request (responses.c), which runs as any other;
 * its reply or stream written back in the Responses API's shapes. */
enum MHD_Result srv_handle_responses(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len)
{
    atomic_fetch_add(&sv->n_active, 1);
    enum MHD_Result r;
    cJSON *root = cJSON_ParseWithLength(body, len), *chat = NULL;
    struct srv_resp_req rq = {0};
    char err[512];
    const char *param = NULL;
    char *txt = NULL;
    unsigned status = 400;
    if (!root || !cJSON_IsObject(root)) {
        r = srv_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", NULL, NULL,
                            root ? "the body must be a JSON object" : "the body is not valid JSON");
    } else if (has_nul_escape(body, len)) {
        r = srv_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", NULL, NULL, NUL_ESCAPE_MSG);
    } else if (!srv_resp_request(root, body, len, sv->responses, &chat, &rq, err, sizeof err, &param, &status)) {
        r = srv_reply_error(c, param ? status : MHD_HTTP_INTERNAL_SERVER_ERROR, param ? "invalid_request_error" : "server_error",
                            param, status == 404 ? "previous_response_not_found" : NULL, "%s", err);
    } else if (!(txt = cJSON_PrintUnformatted(chat))) {
        r = srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "out of memory");
    } else {
        cJSON_Delete(root);
        cJSON_Delete(chat);
        root = chat = NULL;
        r = handle_completion(sv, c, txt, strlen(txt), true, &rq);
    }
    cJSON_free(txt);
    cJSON_Delete(root);
    cJSON_Delete(chat);
    srv_resp_req_free(&rq);   /* (a stream took it) */
    atomic_fetch_sub(&sv->n_active, 1);
    return r;
}

static enum MHD_Result handle_completion(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len,
                                         bool chat, struct srv_resp_req *resp)
{
    struct perr e = {0};
    struct params p = {.max_tokens = 0, .prompt_lp = -1};
    struct prompt prompts[MAX_CHOICES];
    struct job *jobs[MAX_CHOICES];
    int n_prompts = 0, nj = 0;
    long n_choices = 1;
    memset(prompts, 0, sizeof prompts);
    enum MHD_Result ret;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        fail(&e, 400, NULL, NULL, "the body is not valid JSON");
        goto bad;
    }
    if (!cJSON_IsObject(root)) {
        fail(&e, 400, NULL, NULL, "the body must be a JSON object");
        goto bad;
    }
    if (has_nul_escape(body, len)) {
        fail(&e, 400, NULL, NULL, NUL_ESCAPE_MSG);
        goto bad;
    }
    if (!parse_common(sv, root, chat, &p, &e) || !get_int(root, "n", 1, MAX_CHOICES, &n_choices, NULL, &e))
        goto bad;
    /* best_of > n: that many candidates per prompt, the n of the largest summed log-probability returned (vLLM's
     * ranking), known only when all have finished */
    const long per = p.best_of ? p.best_of : n_choices;
    const bool rank = per > n_choices;
    if (rank && p.stream) {
        fail(&e, 400, "best_of", NULL, "'best_of' > 'n' cannot be streamed: the best candidates are known only at the end");
        goto bad;
    }
    if (chat) {
        struct srv_tools tools;
        const char *tparam = NULL;
        if (!srv_tools_parse(sv->tok, root, body, len, &tools, e.msg, sizeof e.msg, &tparam)) {
            e.status = tparam ? 400 : 500;
            e.param = tparam;
            goto bad;
        }
        n_prompts = 1;   /* (freed at bad:, NULL until chat_prompt succeeds) */
        bool ok = chat_prompt(sv, root, &tools, &prompts[0].ids, &prompts[0].n, &p.think, &e);
        if (ok && (tools.choice == SRV_TOOLS_FORCED || tools.choice == SRV_TOOLS_REQUIRED)) {
            /* the reply: the function's arguments under its schema, or the array of calls under theirs */
            if (p.has_schema || p.json_object || p.n_choices || p.regex || p.grammar) {
                ok = fail(&e, 400, tools.legacy ? "function_call" : "tool_choice", NULL,
                          "a forced tool call and a response_format / guided_*: give one");
            } else if (strlen(tools.params) >= sizeof p.schema) {
                ok = fail(&e, 400, tools.legacy ? "functions" : "tools", NULL, "the parameters schema of %s is longer than %zu bytes",
                          tools.name[0] ? tools.name : "the tools", sizeof p.schema - 1);
            } else {
                okv_json_schema *cs = NULL;
                if (okv_json_schema_compile(tools.params, strlen(tools.params), &cs) != OKV_OK)
                    ok = fail(&e, 400, tools.legacy ? "functions" : "tools", NULL, "the parameters of %s: %s", tools.name[0] ? tools.name : "the tools",
                              okv_last_error());
                okv_json_schema_free(cs);
                snprintf(p.schema, sizeof p.schema, "%s", tools.params);
                p.has_schema = true;
            }
        }
        p.tool_mode = tools.choice;
        p.legacy_fn = tools.legacy;
        snprintf(p.tool_name, sizeof p.tool_name, "%s", tools.name);
        srv_tools_free(&tools);
        if (!ok)
            goto bad;
    } else if (!completion_prompts(sv, root, prompts, (int)(MAX_CHOICES / per), &n_prompts, &e)) {
        goto bad;
    }
    for (int i = 0; i < n_prompts; i++) {
        if (p.truncate > 0 && (long)prompts[i].n > p.truncate) {   /* the last tokens (left truncation, as vLLM) */
            const size_t drop = prompts[i].n - (size_t)p.truncate;
            memmove(prompts[i].ids, prompts[i].ids + drop, sizeof *prompts[i].ids * (size_t)p.truncate);
            prompts[i].n = (size_t)p.truncate;
            prompts[i].src = NULL;   /* echo: the kept tokens' text, not the prompt as given */
        }
        const size_t n_ids = prompts[i].n;
        char which[32] = "";   /* in a list of prompts, which one */
        if (n_prompts > 1)
            snprintf(which, sizeof which, " (prompt %d)", i);
        if (n_ids == 0) {
            fail(&e, 400, chat ? "messages" : "prompt", NULL, "the prompt is empty%s", which);
            goto bad;
        }
        if ((long)n_ids >= sv->max_ctx || (p.max_given && (long)n_ids + p.max_tokens > sv->max_ctx)) {
            fail(&e, 400, chat ? "messages" : "prompt", "context_length_exceeded",
                 "This model's maximum context length is %d tokens. However, you requested %ld tokens (%zu in the %s%s, "
                 "%ld in the completion). Please reduce the length of the %s or completion.",
                 sv->max_ctx, (long)n_ids + (p.max_given ? p.max_tokens : 1), n_ids, chat ? "messages" : "prompt", which,
                 p.max_given ? p.max_tokens : 1L, chat ? "messages" : "prompt");
            goto bad;
        }
    }
    const bool echo_only = p.max_given && p.max_tokens == 0;   /* only with echo (parse_common) */
    char id[64];
    snprintf(id, sizeof id, "%s-%016llx%08llx", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)p.samp.seed ^ (unsigned long long)okv_now(),
             (unsigned long long)atomic_fetch_add(&sv->n_ids, 1));

    enum okv_status st = OKV_OK;
    struct jsync *sy = NULL;   /* the lock of the request's jobs */
    struct stream *sm = p.stream ? okv_calloc(1, sizeof *sm, OKV_TAG_SERVER) : NULL;
    if (p.stream && !sm)
        st = okv_set_error(OKV_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n_prompts && st == OKV_OK; i++)
        for (int k = 0; k < per && st == OKV_OK; k++) {
            long max_tokens = p.max_given           ? p.max_tokens
                              : sv->gen.has[OKV_GEN_MAX_TOKENS] ? (long)sv->gen.value[OKV_GEN_MAX_TOKENS]   /* max_new_tokens */
                              : chat                   ? sv->max_ctx - (long)prompts[i].n
                                                       : 16;
            if (echo_only)
                max_tokens = 1;   /* one token is generated and not shown */
            if (p.adj.min_tokens > max_tokens) {   /* against the max_tokens in effect (given or the default) */
                st = okv_set_error(OKV_ERR_INVALID_ARG, "'min_tokens' = %d is more than the max_tokens in effect (%ld)",
                                   p.adj.min_tokens, max_tokens);
                break;
            }
            struct job *j = job_new(sv, c, chat, &p, &prompts[i], echo_only, id, nj, &sy);
            if (!j) {
                st = okv_set_error(OKV_ERR_NO_MEMORY, "out of memory");
                break;
            }
            j->details = sv->prompt_details || resp;
            const bool prompt_lps = (p.lp && p.echo) || p.prompt_lp >= 0;
            j->lp_keep = p.lp || prompt_lps;
            struct okv_sampling samp = p.samp;
            samp.seed ^= (uint64_t)k * 0x9E3779B97F4A7C15ull;   /* the n choices of a prompt draw apart */
            struct okv_sched_request rq = {
                .prompt = prompts[i].ids, .n_prompt = (int)prompts[i].n, .max_tokens = (int)max_tokens,
                .sampling = samp, .stop = p.stop, .n_stop = p.n_stop, .ignore_eos = p.ignore_eos,
                .adjust = p.adj, .stop_token_ids = p.stop_ids, .n_stop_token_ids = p.n_stop_ids,
                .on_token = job_on_token, .on_finish = job_on_finish, .user = j,
                .logprobs = p.lp || rank, .prompt_logprobs = prompt_lps,
                .top_logprobs = p.lp_top > p.prompt_lp ? p.lp_top : p.prompt_lp,
                .include_stop_str_in_output = p.include_stop, .keep_special_tokens = p.keep_special,
                .priority = (int)p.priority,
                .on_logprob = job_on_logprob, .json_object = p.json_object,
                .json_schema = p.has_schema ? p.schema : NULL, .json_schema_len = p.has_schema ? strlen(p.schema) : 0,
                .choices = p.choices, .n_choices = p.n_choices,
                .regex = p.regex, .regex_len = p.regex ? strlen(p.regex) : 0,
                .grammar = p.grammar, .grammar_len = p.grammar ? strlen(p.grammar) : 0,
            };
            st = okv_sched_submit(sv->sched, &rq, &j->sched_id);
            if (st != OKV_OK) {
                atomic_store(&j->refs, 1);
                job_unref(j);
                if (n_prompts > 1) {   /* name the prompt the scheduler refused */
                    char msg[200];
                    snprintf(msg, sizeof msg, "%s", okv_last_error());
                    okv_set_error(st, "prompt %d: %s", i, msg);
                }
                break;
            }
            atomic_fetch_add(&sv->n_active, 1);
            jobs[nj++] = j;
        }
    if (sy)
        jsync_unref(sy);   /* the jobs hold it now */
    for (int i = 0; i < n_prompts; i++)
        okv_free(prompts[i].ids);
    n_prompts = 0;
    cJSON_Delete(root);   /* the scheduler copied the stop strings */
    root = NULL;
    if (st == OKV_OK && nj > 1 && atomic_load(&sv->stopping))   /* a shutdown began while choices were queued */
        st = okv_set_error(OKV_ERR_INVALID_ARG, "the server is shutting down");
    if (st != OKV_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", okv_last_error());
        for (int i = 0; i < nj; i++) {   /* the choices already queued are cancelled */
            okv_sched_cancel(sv->sched, jobs[i]->sched_id);
            http_release(jobs[i]);
        }
        okv_free(sm);
        if (atomic_load(&sv->stopping))
            return srv_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL, "service_unavailable",
                                   "The server is shutting down.");
        fail(&e, st == OKV_ERR_NO_MEMORY ? 500 : 400, NULL,
             st == OKV_ERR_NO_KV_SPACE || st == OKV_ERR_CONTEXT ? "context_length_exceeded" : NULL, "%s", msg);
        goto bad;
    }

    if (resp && resp->background) {   /* the reply now, the jobs waited for on their own thread */
        enum MHD_Result bret;
        if (bg_start(sv, c, jobs, nj, resp, &bret))
            return bret;
        for (int i = 0; i < nj; i++) {
            okv_sched_cancel(sv->sched, jobs[i]->sched_id);
            http_release(jobs[i]);
        }
        return srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL,
                               "cannot start the background response");
    }
    if (p.stream) {
        memcpy(sm->jobs, jobs, sizeof *jobs * (size_t)nj);
        sm->nj = nj;
        sm->n_per_prompt = (int)n_choices;
        if (resp && (!(sm->rs = okv_calloc(1, sizeof *sm->rs, OKV_TAG_SERVER)) || !srv_resp_stream_init(sm->rs, resp))) {
            stream_free(sm);   /* cancels the choices */
            return srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "out of memory");
        }
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, sm, stream_free);
        if (!r) {
            stream_free(sm);   /* cancels the choices */
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
        srv_reply_headers(c, r);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);   /* stream_free runs when MHD is done with it */
        return ret;
    }

    /* all choices finished (each marked done as it is seen), or the client gone */
    pthread_mutex_lock(&jobs[0]->sy->mu);
    for (;;) {
        int left = 0;
        for (int i = 0; i < nj; i++) {
            jobs[i]->done |= jobs[i]->finished;
            left += !jobs[i]->done;
        }
        if (!left)
            break;
        if (!jobs_wait(jobs, nj)) {   /* client gone: the choices are cancelled */
            for (int k = 0; k < nj; k++)
                http_release(jobs[k]);
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&jobs[0]->sy->mu);
    if (rank)   /* each prompt's candidates by decreasing summed log-probability, the earlier first on ties */
        for (int g = 0; g + per <= nj; g += (int)per)
            for (int a = g + 1; a < g + per; a++)
                for (int b = a; b > g && jobs[b]->cum_lp > jobs[b - 1]->cum_lp; b--) {
                    struct job *t = jobs[b];
                    jobs[b] = jobs[b - 1];
                    jobs[b - 1] = t;
                }
    ret = reply_final(jobs, nj, (int)per, (int)n_choices, c, resp);
    for (int i = 0; i < nj; i++)
        http_release(jobs[i]);
    return ret;
bad:
    cJSON_Delete(root);
    for (int i = 0; i < n_prompts; i++)
        okv_free(prompts[i].ids);
    if (resp && e.param && !strcmp(e.param, "messages"))   /* the Responses API's conversation is its input */
        e.param = "input";
    return reply_perr(c, &e);
}

/* ---- vLLM's /tokenize and /detokenize ---- */

/* POST /tokenize {"prompt": "..."} or {"messages": [...]} (the chat template applied, with the
 * generation prompt), "add_special_tokens" (default true: the BOS the model's prompts start with)
 * -> {"count", "max_model_len", "tokens"} */
enum MHD_Result srv_handle_tokenize(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len)
{
    struct perr e = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    cJSON *root = cJSON_ParseWithLength(body, len);
    bool ok = false, special = true, strs = false;
    if (!root || !cJSON_IsObject(root)) {
        fail(&e, 400, NULL, NULL, "the body must be a JSON object");
    } else if (has_nul_escape(body, len)) {
        fail(&e, 400, NULL, NULL, NUL_ESCAPE_MSG);
    } else if (get_bool(root, "add_special_tokens", &special, &e) && get_bool(root, "return_token_strs", &strs, &e) &&
               model_ok(sv, root, &e)) {
        const cJSON *pr = field(root, "prompt");
        struct srv_tools tools = {0};
        const char *tparam = NULL;
        if (field(root, "messages")) {   /* with the tools listed, as a chat request with them would be */
            if (!srv_tools_parse(sv->tok, root, body, len, &tools, e.msg, sizeof e.msg, &tparam)) {
                e.status = tparam ? 400 : 500;
                e.param = tparam;
            } else {
                ok = chat_prompt(sv, root, &tools, &ids, &n, NULL, &e);
            }
            srv_tools_free(&tools);
        }
        else if (!pr || !cJSON_IsString(pr))
            fail(&e, 400, "prompt", NULL, "'prompt' (a string) or 'messages' is required");
        else if (okv_tokenizer_encode(sv->tok, pr->valuestring, strlen(pr->valuestring),
                                      special && okv_tokenizer_add_bos(sv->tok), true, &ids, &n) != OKV_OK)
            fail(&e, 400, "prompt", NULL, "cannot tokenize the prompt: %s", okv_last_error());
        else
            ok = true;
    }
    cJSON_Delete(root);
    if (!ok) {
        okv_free(ids);
        return reply_perr(c, &e);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "count", (double)n);
    cJSON_AddNumberToObject(o, "max_model_len", sv->max_ctx);
    cJSON *t = cJSON_AddArrayToObject(o, "tokens");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(t, cJSON_CreateNumber(ids[i]));
    if (strs) {   /* vLLM's: the vocabulary's strings of the ids (convert_ids_to_tokens) */
        cJSON *ts = cJSON_AddArrayToObject(o, "token_strs");
        for (size_t i = 0; i < n; i++) {
            const char *str = okv_tokenizer_token_str(sv->tok, ids[i]);
            str = str ? str : "";
            char *fixed = utf8_ok((const unsigned char *)str, strlen(str)) ? NULL : utf8_repair(str, strlen(str));
            cJSON_AddItemToArray(ts, cJSON_CreateString(fixed ? fixed : str));
            okv_free(fixed);
        }
    }
    okv_free(ids);
    return srv_reply_json(c, MHD_HTTP_OK, o);
}

/* POST /detokenize {"tokens": [...]} -> {"prompt": "..."} (special tokens rendered, as vLLM) */
enum MHD_Result srv_handle_detokenize(okv_server *sv, struct MHD_Connection *c, const char *body, size_t len)
{
    struct perr e = {0};
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *toks = root && cJSON_IsObject(root) ? field(root, "tokens") : NULL;
    int32_t *ids = NULL;
    int cnt = toks && cJSON_IsArray(toks) ? cJSON_GetArraySize(toks) : -1;
    const int nv = okv_tokenizer_n_vocab(sv->tok);
    if (cnt < 0) {
        fail(&e, 400, "tokens", NULL, "'tokens' must be an array of token ids");
    } else if (!(ids = okv_malloc(sizeof *ids * (size_t)(cnt + 1), OKV_TAG_SERVER))) {
        fail(&e, 500, NULL, NULL, "out of memory");
    } else {
        int i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, toks) {
            if (!is_token_id(x, nv)) {
                fail(&e, 400, "tokens", NULL, "'tokens' must be token ids in [0, %d)", nv);
                break;
            }
            ids[i++] = (int32_t)x->valuedouble;
        }
    }
    cJSON_Delete(root);
    char *text = NULL;
    size_t tl = 0;
    if (!e.status && okv_tokenizer_decode(sv->tok, ids, (size_t)cnt, false, &text, &tl) != OKV_OK)
        fail(&e, 500, NULL, NULL, "cannot decode: %s", okv_last_error());
    okv_free(ids);
    if (e.status) {
        okv_free(text);
        return reply_perr(c, &e);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", text ? text : "");
    okv_free(text);
    return srv_reply_json(c, MHD_HTTP_OK, o);
}
