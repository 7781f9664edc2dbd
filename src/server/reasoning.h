/* Reasoning output (serve --reasoning-parser, as vLLM's): a reasoning model's thinking, written between <think>
 * and </think>, comes back apart from the answer, as the message's (or a stream delta's) "reasoning_content".
 *   deepseek_r1: the reply starts inside the thinking (the template opened it; a leading <think> is dropped) and
 *                everything up to </think> is reasoning; without </think> all of it is (cut off while thinking);
 *   qwen3:       a reply that opens with <think> has its thinking up to </think> (or to its end, when cut off
 *                while thinking: vLLM's parser then gives it all as content, but not when it streams); a reply
 *                that does not open with it (thinking turned off) is all content.
 * The content after </think> (its leading whitespace kept, as vLLM keeps it) goes on to the tool calls' reading,
 * when the request has tools. */
#ifndef OKV_SERVER_REASONING_H
#define OKV_SERVER_REASONING_H

#include "server/server_internal.h"

/* the whole reply: *reasoning and *content (NULL when there is none; owned) */
bool srv_reasoning_split(enum okv_reasoning kind, const char *text, size_t len, char **reasoning, char **content);

/* the same as a stream: text fed as it comes, what can no longer be part of a tag given back to send */
struct srv_reasoning_stream {
    int phase;             /* 0: nothing decided (only whitespace or part of <think> so far), 1: thinking, 2: answer */
    struct srv_buf held;   /* text held back: a possible tag */
};
bool srv_reasoning_feed(enum okv_reasoning kind, struct srv_reasoning_stream *s, const char *p, size_t n, bool final,
                        struct srv_buf *reasoning, struct srv_buf *content);
void srv_reasoning_stream_free(struct srv_reasoning_stream *s);

#endif
