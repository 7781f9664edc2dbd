/* A growable NUL-terminated text: appends that fail for lack of memory set oom and leave the
 * text as it was, so a writer checks once at the end. Zero-initialized is empty; s is
 * okv_malloc'd (okv_free it), allocated under tag (OKV_TAG_MISC when left 0). */
#ifndef OKV_UTIL_STRBUF_H
#define OKV_UTIL_STRBUF_H

#include "oasiskv/common.h"

#include <stdbool.h>
#include <stddef.h>

struct okv_strbuf {
    char *s;       /* NULL until the first append */
    size_t len, cap;
    bool oom;
    int tag;       /* enum okv_alloc_tag of the allocations */
};

void okv_sb_put(struct okv_strbuf *b, const char *s, size_t n);
void okv_sb_puts(struct okv_strbuf *b, const char *s);
void okv_sb_printf(struct okv_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
