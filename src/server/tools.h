/* Tools (function calling) for the chat completions API: the request's "tools" and "tool_choice", the
 * tool calls and results in its messages, and the tool calls read back out of a reply.
 *
 * tool_choice "auto" (the default with tools): the tools go into the prompt as the model's chat template
 * lists them (a template with tools: okv_tokenizer_chat_tools), and the reply's calls, written in the
 * template's format (Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>), come back as
 * "tool_calls" with finish_reason "tool_calls"; the text before the first call is the content.
 * {"type": "function", "function": {"name": N}} (or "required" with one tool): the reply is the arguments
 * of that function, generated under its "parameters" schema (structured output), and comes back as one tool
 * call (finish_reason "stop", as the OpenAI API gives for a forced call). "required" with several tools: the
 * reply is a JSON array of {"name": ..., "parameters": {...}} generated under a schema whose items are a
 * union of the functions told apart by "name" (as vLLM does it; parallel_tool_calls false: one item), and
 * comes back as those calls (finish_reason "tool_calls"; streamed once the array is complete). Forced calls
 * work with any template (the tools are listed in the prompt where the template can). "none": the tools
 * are not offered.
 * The legacy "functions" (each a tool's "function" object) and "function_call" ("none", "auto", {"name": N}) stand
 * for the tools and tool_choice they were replaced by; a reply's call then comes back as the message's
 * "function_call" {"name", "arguments"} (the first call only, as the legacy API has one), finish_reason
 * "function_call", and a conversation's assistant "function_call" and role "function" messages are read as a tool
 * call and a tool result.
 * A tool's definition and a call's arguments are written into the prompt as transformers' tojson writes
 * them (Python's json.dumps, ensure_ascii off), so that the prompt is the one the template renders. */
#ifndef OKV_SERVER_TOOLS_H
#define OKV_SERVER_TOOLS_H

#include "server/server_internal.h"

#include <stdint.h>

#define SRV_MAX_TOOLS 128
#define SRV_TOOL_NAME_MAX 64   /* the OpenAI API's limit on a function's name */

enum srv_tool_choice { SRV_TOOLS_OFF, SRV_TOOLS_AUTO, SRV_TOOLS_FORCED, SRV_TOOLS_REQUIRED };

struct srv_tools {
    enum srv_tool_choice choice;
    int n;                          /* tools given (and offered in the prompt, unless choice is OFF) */
    char *defs[SRV_MAX_TOOLS];      /* each tool as tojson writes it (owned) */
    char name[SRV_TOOL_NAME_MAX + 1];   /* FORCED: the function called */
    char *params;                   /* FORCED: its "parameters" schema; REQUIRED: the calls' array schema (JSON
                                       text, owned) */
    bool legacy;                    /* given as the legacy "functions" / "function_call": the reply's call comes
                                       back as "function_call" (one; finish_reason "function_call") */
};

/* Read "tools", "tool_choice" and "parallel_tool_calls" of a chat request root, parsed from body[0..len) (NULL:
 * no text). False with *err (a message for a 400 reply) and *param (the field) set when they are malformed or ask
 * for what cannot be done. The definitions are written from the text where it is given (srv_pyjson_of_text, and
 * with the template's indent): json.dumps writes what Python's json.loads read, a float literal 1.0 as 1.0 and an
 * integer past 2^53 with its digits, where the parsed tree alone gives 1 and a rounded double. */
bool srv_tools_parse(const okv_tokenizer *tok, const cJSON *root, const char *body, size_t len, struct srv_tools *t,
                     char *err, size_t errlen, const char **param);
void srv_tools_free(struct srv_tools *t);

/* JSON text spans (of text cJSON read): the value of the top-level member key of the object s[0..n) (the first
 * one, as cJSON finds it); the items of the array s[0..n) (at most max; returns the count, -1 when it is not an
 * array or has more). */
bool srv_json_member(const char *s, size_t n, const char *key, const char **vs, size_t *vn);
int srv_json_items(const char *s, size_t n, const char **vs, size_t *vn, int max);
/* JSON text as json.dumps writes it (srv_pyjson_of_text's output) with indent: items on lines of their own (okv_free;
 * NULL: out of memory). */
char *srv_pyjson_indent_text(const char *canon, int indent);

/* v as Python's json.dumps(v, ensure_ascii=False) writes it (", " and ": " separators; a number that is an
 * integer is written as one, others as Python's repr of the double). Where it differs: a float literal with
 * an integer value (1.0, 1e2: json.dumps writes 1.0 and 100.0, this 1 and 100, the parsed tree keeping no
 * int/float distinction) and integers past 2^53 (rounded to a double). */
void srv_pyjson(const cJSON *v, struct srv_buf *b);
/* The same with json.dumps's indent (Llama 3.1's tools: tojson(indent=4)): items on lines of their own, "," and
 * ": " separators. */
void srv_pyjson_indent(const cJSON *v, struct srv_buf *b, int indent);
/* The same as a NUL-terminated text (okv_free); NULL: out of memory. */
char *srv_pyjson_text(const cJSON *v, int indent);

/* The same from JSON text, read as it comes: each value's text rewritten as json.dumps writes what json.loads
 * reads from it - whitespace dropped, ", " and ": " between items, strings with their escapes decoded and
 * written again (ensure_ascii off), an integer literal with all its digits, a float literal (1.0, 1e2) as the
 * float's repr (1.0, 100.0) - where the parsed tree (srv_pyjson) writes a float with an integer value as an
 * integer. Output is appended as soon as it is certain (a number once the character after it comes), so what
 * a prefix of the text gives is a prefix of what the whole gives. */
struct srv_pyjson_rd {
    int depth;            /* containers open */
    int st;               /* what comes next */
    bool in_key;          /* the string being read is an object's key */
    bool done;            /* the value ended: the text after it is not read */
    bool bad;             /* not JSON (as json.loads reads it: no raw control characters in strings, no lone
                             surrogates; deeper than the stack) */
    char stack[256];      /* '{' or '[' of each open container */
    char tok[40];         /* a number or literal being read, or a \u escape's digits */
    int nt;
    uint32_t hi;          /* a high surrogate waiting for its low half */
};
/* Feed p[0..n) (final: the text ends there); returns the bytes read, fewer than n once the value ended. */
size_t srv_pyjson_feed(struct srv_pyjson_rd *r, const char *p, size_t n, bool final, struct srv_buf *out);
/* The whole of s[0..n) (one value, whitespace around it allowed) as a NUL-terminated text (okv_free); NULL when
 * it is not one JSON value, or out of memory. */
char *srv_pyjson_of_text(const char *s, size_t n);

/* A reply's tool calls: Hermes, <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks after the
 * content; Llama 3.1, a reply that is {"name": ..., "parameters": {...}} (several separated by ';'). */
struct srv_tool_call {
    char *name;
    char *arguments;   /* JSON text, as json.dumps writes it */
};
struct srv_tool_reply {
    char *content;     /* the text before the first call; NULL when there is none (or it is empty) */
    struct srv_tool_call *calls;
    int n;
};
/* Read text[0..len): with calls that all parse, *out holds them and the text before them; otherwise (no
 * call, or one that is not {"name": string, "arguments": object}) the whole text is the content and there
 * are no calls. False when out of memory. */
bool srv_tools_read_reply(enum okv_chat_tools fmt, const char *text, size_t len, struct srv_tool_reply *out);
void srv_tool_reply_free(struct srv_tool_reply *r);
/* A REQUIRED reply, [{"name": ..., "parameters": {...}}, ...]: its calls; false when it is not one (cut off)
 * or out of memory (*out then empty). */
bool srv_tools_read_required(const char *text, size_t len, struct srv_tool_reply *out);

/* The same read as a stream: text fed as it comes; content that can no longer be part of a call is given
 * back to send, and the calls as deltas. Hermes: a call streams live once its head, {"name": "...",
 * "arguments": {, is read - a first delta with its name, then its arguments' json.dumps text (srv_pyjson_rd)
 * as it comes; the pieces join to what the whole read gives. A call written otherwise (other keys first) goes
 * out whole at its close, and one that does not parse as text (the rest of the reply too), as the whole read
 * has it - except that a call already streaming stays a call (its arguments as far as they were read: what a
 * reply cut off or gone wrong inside its arguments gives). Llama 3.1: the calls whole at the reply's end. */
struct srv_tool_stream {
    enum okv_chat_tools fmt;   /* set before the first feed */
    struct srv_buf held;   /* text not sent yet: a possible "<tool_call>" opening, or a call being read (Llama 3.1:
                              a reply that opens with '{', read at its end) */
    int lead;              /* Llama 3.1: 0 undecided (whitespace so far), 1 content, 2 calls */
    bool in_call;
    bool bad;              /* a call did not parse: the rest goes out as content */
    int n_calls;           /* calls begun (sent, or streaming) */
    int live;              /* the call being read: 0 its head not read yet, 1 streaming, -1 read whole at its close */
    size_t args_at;        /* live: where its arguments' text not read yet starts in held */
    size_t args_sent;      /* live: bytes of their json.dumps text sent */
    struct srv_pyjson_rd args_rd;   /* live: the reading of its arguments so far */
};
/* A piece of a call: its first has the name. */
struct srv_tool_delta {
    int index;             /* the call's place in the reply */
    char *name;            /* the call's name in its first delta (owned), else NULL */
    char *arguments;       /* the next piece of its arguments (owned; may be "") */
};
/* Feed text (final: the reply ended). Appends what may be sent as content to *content and the calls' pieces to
 * *deltas (*n_deltas of them, grown with okv_realloc; pieces of one call in one feed joined into one). False
 * when out of memory. */
bool srv_tool_stream_feed(struct srv_tool_stream *s, const char *p, size_t n, bool final, struct srv_buf *content,
                          struct srv_tool_delta **deltas, int *n_deltas);
void srv_tool_deltas_free(struct srv_tool_delta *d, int n);
void srv_tool_stream_free(struct srv_tool_stream *s);

/* A tool call's id: "chatcmpl-tool-" and 32 hex digits. */
void srv_tool_call_id(char out[48]);

#endif
