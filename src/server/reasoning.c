/* Reasoning output: see reasoning.h. */
#include "server/reasoning.h"

#include "oasiskv/common.h"

#include <string.h>

#define OPEN "<think>"
#define CLOSE "</think>"

static char *dup_or_null(const char *s, size_t n) { return n ? srv_strndup(s, n) : NULL; }

static size_t lead_ws(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r'))
        i++;
    return i;
}

bool srv_reasoning_split(enum okv_reasoning kind, const char *text, size_t len, char **reasoning, char **content)
{
    *reasoning = *content = NULL;
    const size_t ws = lead_ws(text, len);
    const bool opens = len - ws >= strlen(OPEN) && !memcmp(text + ws, OPEN, strlen(OPEN));
    const char *close = srv_find(text, len, CLOSE);
    if (kind == OKV_REASONING_QWEN3 && !opens) {   /* no thinking: all content */
        *content = dup_or_null(text, len);
        return len == 0 || *content;
    }
    const char *r = opens ? text + ws + strlen(OPEN) : text;
    const char *r_end = close ? close : text + len;
    *reasoning = dup_or_null(r, (size_t)(r_end - r));
    if (close) {
        const char *c = close + strlen(CLOSE);
        *content = dup_or_null(c, (size_t)(text + len - c));
    }
    const bool ok = (r_end == r || *reasoning) && (!close || close + strlen(CLOSE) == text + len || *content);
    if (!ok) {
        okv_free(*reasoning);
        okv_free(*content);
        *reasoning = *content = NULL;
    }
    return ok;
}

void srv_reasoning_stream_free(struct srv_reasoning_stream *s)
{
    okv_free(s->held.s);
    memset(s, 0, sizeof *s);
}

bool srv_reasoning_feed(enum okv_reasoning kind, struct srv_reasoning_stream *s, const char *p, size_t n, bool final,
                        struct srv_buf *reasoning, struct srv_buf *content)
{
    if (s->phase == 2) {
        srv_buf_put(content, p, n);
        return !content->oom;
    }
    srv_buf_put(&s->held, p, n);
    if (s->held.oom)
        return false;
    char *h = s->held.s;
    size_t hn = s->held.len;
    if (s->phase == 0) {   /* whitespace and <think>: which way the reply goes */
        const size_t ws = lead_ws(h, hn);
        const size_t k = strlen(OPEN), have = hn - ws < k ? hn - ws : k;
        const bool prefix = !memcmp(h + ws, OPEN, have);   /* all of what follows the whitespace is <think> so far */
        if (prefix && have < k && !final)
            return true;   /* undecided */
        if (prefix && have == k) {   /* thinking: the tag and its whitespace dropped */
            memmove(h, h + ws + k, hn - ws - k);
            s->held.len = hn -= ws + k;
            s->phase = 1;
        } else if (kind == OKV_REASONING_DEEPSEEK_R1) {   /* the template opened the thinking */
            s->phase = 1;
        } else {   /* qwen3 without <think>: an answer */
            s->phase = 2;
            srv_buf_put(content, h, hn);
            s->held.len = 0;
            return !content->oom;
        }
    }
    /* thinking, up to </think> */
    const char *close = srv_find(h, hn, CLOSE);
    if (close) {
        srv_buf_put(reasoning, h, (size_t)(close - h));
        const char *c = close + strlen(CLOSE);
        srv_buf_put(content, c, (size_t)(h + hn - c));
        s->held.len = 0;
        s->phase = 2;
        return !reasoning->oom && !content->oom;
    }
    const size_t keep = final ? 0 : srv_partial_tag(h, hn, CLOSE);
    srv_buf_put(reasoning, h, hn - keep);
    memmove(h, h + hn - keep, keep);
    s->held.len = keep;
    return !reasoning->oom;
}
