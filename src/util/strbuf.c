/* A growable text (strbuf.h). */
#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void okv_sb_put(struct okv_strbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = okv_realloc(b->s, cap, (enum okv_alloc_tag)b->tag);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void okv_sb_puts(struct okv_strbuf *b, const char *s) { okv_sb_put(b, s, strlen(s)); }

void okv_sb_printf(struct okv_strbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        okv_sb_put(b, tmp, (size_t)n);
        return;
    }
    char *big = okv_malloc((size_t)n + 1, (enum okv_alloc_tag)b->tag);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    okv_sb_put(b, big, (size_t)n);
    okv_free(big);
}
