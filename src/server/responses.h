/* OpenAI's Responses API (POST /v1/responses) on the chat completions path (openai.c): a request is written again
 * as a chat completions request (srv_resp_request); the finished chat reply becomes a Response object
 * (srv_resp_reply), and a chat stream's chunks become the Responses API's typed events (struct srv_resp_stream).
 * A response made with `store` (the default) is kept (resp_store.h) with the conversation it ended, so that a later
 * request's `previous_response_id` goes on from it; `background` responses run on a thread of their own (openai.c)
 * and are polled with GET; conversations (`conversation`) are refused by name. */
#ifndef OKV_SERVER_RESPONSES_H
#define OKV_SERVER_RESPONSES_H

#include "server/resp_store.h"
#include "server/server_internal.h"

/* A Responses request as the reply needs it back: the fields a Response object echoes, the output's ids. */
struct srv_resp_req {
    cJSON *echo;     /* instructions, max_output_tokens, temperature, top_p, tools, tool_choice, parallel_tool_calls,
                        text, reasoning, metadata, top_logprobs, user, ... as the Response object writes them */
    char id[48];     /* resp_... */
    long created;
    srv_resp_store *store;   /* where the finished response is kept (store: true); NULL: not kept */
    cJSON *items;    /* with store: the conversation through this request's input (the previous response's items,
                        then the input's, each with its id), to which the output's items are added */
    bool background; /* background: true (with store): the reply is the response in progress, polled with GET */
};

/* Read the Responses request root (parsed from body[0..len)) into a chat completions request *chat (made here; the
 * caller deletes it) and rq (srv_resp_req_free); store: the server's stored responses (previous_response_id is
 * read from it, and with store the response will be kept there), or NULL. False: a bad request; err (errsz bytes)
 * says why, *param names the field (NULL: out of memory) and *status is the HTTP status (400, 404: an unknown
 * previous_response_id, 500). A tool's parameters keep their text's form (1.0 stays 1.0: srv_pyjson_of_text). */
bool srv_resp_request(const cJSON *root, const char *body, size_t len, srv_resp_store *store, cJSON **chat,
                      struct srv_resp_req *rq, char *err, size_t errsz, const char **param, unsigned *status);
void srv_resp_req_free(struct srv_resp_req *rq);

/* A Response object with no output: status "in_progress", "cancelled" or "failed" (with the error's code and
 * message); NULL: out of memory. */
cJSON *srv_resp_status_obj(const struct srv_resp_req *rq, const char *model, const char *status, const char *code,
                           const char *message);
/* response kept in rq's store (where it has one) with the conversation: rq's items, then the response's output. */
void srv_resp_keep(const struct srv_resp_req *rq, const cJSON *response);
/* The Response object of a finished chat completion object (its first choice), kept in rq's store where it has
 * one; NULL: out of memory. */
cJSON *srv_resp_reply(const struct srv_resp_req *rq, const cJSON *chat);

/* A streamed response: the chat stream's chunks in, server-sent events out ("event: TYPE", "data: {...}" with
 * type and sequence_number): response.created and .in_progress, then per output item (reasoning, the message,
 * each function call) output_item.added, its parts and deltas, their .done events and output_item.done, and last
 * response.completed (response.incomplete when max_output_tokens cut it, response.failed after an error). */
struct srv_resp_stream {
    struct srv_resp_req rq;
    int seq;               /* the next event's sequence_number */
    int kind;              /* the open output item: RS_NONE, RS_REASONING, RS_MESSAGE, RS_CALL */
    cJSON *output;         /* the closed items, in order */
    struct srv_buf text;   /* the open item's text (a call's arguments) */
    cJSON *lps;            /* the open message's log-probabilities (with top_logprobs) */
    struct srv_buf pend;   /* blank content held until text follows (or dropped when a call does) */
    cJSON *pend_lps;       /* its log-probability entries */
    int n_calls;           /* function calls opened */
    bool thought;          /* a reasoning item was opened */
    char item_id[48], call_id[96], name[160];
    char model[256];
    char finish[24];       /* the chat stream's finish_reason */
    bool started, ended, oom;
};

/* The stream's state for rq (moved in: rq is left empty); false: out of memory. */
bool srv_resp_stream_init(struct srv_resp_stream *st, struct srv_resp_req *rq);
/* One chat stream chunk (chat.completion.chunk, or an {"error": ...} object), consumed; events go to out. */
void srv_resp_stream_put(struct srv_resp_stream *st, struct srv_buf *out, cJSON *chunk);
/* The stream ended with all its chunks put: the open item closed and the final event, with the usage (the final
 * response kept in the store where rq has one). */
void srv_resp_stream_end(struct srv_resp_stream *st, struct srv_buf *out, int prompt_tokens, int completion_tokens,
                         int cached_tokens, int reasoning_tokens);
void srv_resp_stream_free(struct srv_resp_stream *st);

#endif
