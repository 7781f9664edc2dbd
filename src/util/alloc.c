/* Counted allocations: a 32-byte header in front of each block records its size
 * and tag, so live bytes and counts per tag can be read at any time. The header
 * keeps the returned pointer 32-byte aligned for vector loads. */
#include "oasiskv/common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define OKV_ALLOC_HDR 32
#define OKV_ALLOC_MAGIC 0x4f4b5641u

struct alloc_hdr {
    uint64_t size;
    uint32_t tag;
    uint32_t magic;
};

static _Atomic int64_t g_live_bytes[OKV_TAG_COUNT];
static _Atomic int64_t g_live_count[OKV_TAG_COUNT];

static void *finish(void *raw, size_t n, enum okv_alloc_tag tag)
{
    if (!raw)
        return NULL;
    struct alloc_hdr *h = raw;
    h->size = n;
    h->tag = (uint32_t)tag;
    h->magic = OKV_ALLOC_MAGIC;
    atomic_fetch_add(&g_live_bytes[tag], (int64_t)n);
    atomic_fetch_add(&g_live_count[tag], 1);
    return (char *)raw + OKV_ALLOC_HDR;
}

void *okv_malloc(size_t n, enum okv_alloc_tag tag)
{
    OKV_ASSERT(tag < OKV_TAG_COUNT);
    void *raw = NULL;
    if (posix_memalign(&raw, OKV_ALLOC_HDR, n + OKV_ALLOC_HDR) != 0)
        return NULL;
    return finish(raw, n, tag);
}

void *okv_calloc(size_t count, size_t n, enum okv_alloc_tag tag)
{
    if (n && count > SIZE_MAX / n)
        return NULL;
    void *p = okv_malloc(count * n, tag);
    if (p)
        memset(p, 0, count * n);
    return p;
}

void okv_free(void *p)
{
    if (!p)
        return;
    struct alloc_hdr *h = (struct alloc_hdr *)((char *)p - OKV_ALLOC_HDR);
    OKV_ASSERT(h->magic == OKV_ALLOC_MAGIC);
    h->magic = 0;
    atomic_fetch_sub(&g_live_bytes[h->tag], (int64_t)h->size);
    atomic_fetch_sub(&g_live_count[h->tag], 1);
    free(h);
}

void *okv_realloc(void *p, size_t n, enum okv_alloc_tag tag)
{
    if (!p)
        return okv_malloc(n, tag);
    struct alloc_hdr *h = (struct alloc_hdr *)((char *)p - OKV_ALLOC_HDR);
    OKV_ASSERT(h->magic == OKV_ALLOC_MAGIC);
    void *q = okv_malloc(n, (enum okv_alloc_tag)h->tag);
    if (!q)
        return NULL;
    memcpy(q, p, h->size < n ? h->size : n);
    okv_free(p);
    return q;
}

char *okv_strdup(const char *s, enum okv_alloc_tag tag)
{
    size_t n = strlen(s) + 1;
    char *d = okv_malloc(n, tag);
    if (d)
        memcpy(d, s, n);
    return d;
}

int64_t okv_alloc_live_bytes(enum okv_alloc_tag tag) { return atomic_load(&g_live_bytes[tag]); }
int64_t okv_alloc_live_count(enum okv_alloc_tag tag) { return atomic_load(&g_live_count[tag]); }
