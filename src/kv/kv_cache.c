/* Slot allocator and per-sequence block tables of the paged KV cache.
 *
 * Free slots sit on a stack (LIFO reuse keeps recently freed, cache-warm blocks in
 * use). A sequence's table grows by doubling. Reservation is all or nothing so a
 * failed step leaves every table as it was. */
#include "oasiskv/kv.h"

#include <string.h>

struct kv_seq {
    bool used;
    int len;            /* committed tokens */
    int n_blocks;       /* allocated blocks (covers reserved tokens) */
    int cap;
    int32_t *blocks;    /* [cap] slot of each logical block */
};

struct okv_kv_cache {
    okv_backend *be;
    okv_bkv *storage;
    struct okv_kv_geometry g;
    int32_t *free_stack;   /* [n_slots] */
    int n_free;
    struct kv_seq *seqs;
    int n_seqs_cap;
    int n_seqs;
};

enum okv_status okv_kv_cache_create(okv_backend *be, const struct okv_kv_geometry *g, okv_kv_cache **out)
{
    *out = NULL;
    okv_kv_cache *c = okv_calloc(1, sizeof *c, OKV_TAG_KV);
    if (!c)
        return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
    c->be = be;
    c->g = *g;
    enum okv_status st = be->ops->kv_alloc(be, g, &c->storage);
    if (st != OKV_OK) {
        okv_free(c);
        return st;
    }
    c->free_stack = okv_malloc(sizeof(int32_t) * (size_t)g->n_group_slots, OKV_TAG_KV);
    if (!c->free_stack) {
        okv_kv_cache_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
    }
    for (int i = 0; i < g->n_group_slots; i++)
        c->free_stack[i] = g->n_group_slots - 1 - i;   /* slot 0 on top */
    c->n_free = g->n_group_slots;
    *out = c;
    return OKV_OK;
}

void okv_kv_cache_free(okv_kv_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_seqs_cap; i++)
        okv_free(c->seqs[i].blocks);
    okv_free(c->seqs);
    okv_free(c->free_stack);
    if (c->storage)
        c->be->ops->kv_free(c->be, c->storage);
    okv_free(c);
}

const struct okv_kv_geometry *okv_kv_geometry(const okv_kv_cache *c) { return &c->g; }
okv_bkv *okv_kv_storage(okv_kv_cache *c) { return c->storage; }
int okv_kv_free_slots(const okv_kv_cache *c) { return c->n_free; }
int okv_kv_used_slots(const okv_kv_cache *c) { return c->g.n_group_slots - c->n_free; }
int okv_kv_n_seqs(const okv_kv_cache *c) { return c->n_seqs; }

enum okv_status okv_kv_seq_create(okv_kv_cache *c, int *seq)
{
    int id = -1;
    for (int i = 0; i < c->n_seqs_cap; i++)
        if (!c->seqs[i].used) {
            id = i;
            break;
        }
    if (id < 0) {
        int cap = c->n_seqs_cap ? 2 * c->n_seqs_cap : 8;
        struct kv_seq *s = okv_realloc(c->seqs, sizeof *s * (size_t)cap, OKV_TAG_KV);
        if (!s)
            return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
        memset(s + c->n_seqs_cap, 0, sizeof *s * (size_t)(cap - c->n_seqs_cap));
        id = c->n_seqs_cap;
        c->seqs = s;
        c->n_seqs_cap = cap;
    }
    struct kv_seq *s = &c->seqs[id];
    s->used = true;
    s->len = 0;
    s->n_blocks = 0;
    c->n_seqs++;
    *seq = id;
    return OKV_OK;
}

bool okv_kv_seq_valid(const okv_kv_cache *c, int seq)
{
    return seq >= 0 && seq < c->n_seqs_cap && c->seqs[seq].used;
}

void okv_kv_seq_free(okv_kv_cache *c, int seq)
{
    if (!okv_kv_seq_valid(c, seq))
        return;
    struct kv_seq *s = &c->seqs[seq];
    for (int i = s->n_blocks - 1; i >= 0; i--)
        c->free_stack[c->n_free++] = s->blocks[i];
    s->n_blocks = 0;
    s->len = 0;
    s->used = false;
    c->n_seqs--;
}

int okv_kv_seq_len(const okv_kv_cache *c, int seq) { return okv_kv_seq_valid(c, seq) ? c->seqs[seq].len : 0; }

enum okv_status okv_kv_seq_reserve(okv_kv_cache *c, int seq, int n)
{
    if (!okv_kv_seq_valid(c, seq))
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: unknown sequence %d", seq);
    struct kv_seq *s = &c->seqs[seq];
    int need = (s->len + n + c->g.block_size - 1) / c->g.block_size;
    int extra = need - s->n_blocks;
    if (extra <= 0)
        return OKV_OK;
    if (extra > c->n_free)
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: sequence %d needs %d more blocks, %d free of %d",
                             seq, extra, c->n_free, c->g.n_group_slots);
    if (need > s->cap) {
        int cap = s->cap ? s->cap : 16;
        while (cap < need)
            cap *= 2;
        int32_t *b = okv_realloc(s->blocks, sizeof(int32_t) * (size_t)cap, OKV_TAG_KV);
        if (!b)
            return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
        s->blocks = b;
        s->cap = cap;
    }
    while (s->n_blocks < need)
        s->blocks[s->n_blocks++] = c->free_stack[--c->n_free];
    return OKV_OK;
}

int32_t okv_kv_seq_slot(const okv_kv_cache *c, int seq, int pos)
{
    const struct kv_seq *s = &c->seqs[seq];
    int b = pos / c->g.block_size;
    OKV_ASSERT(b < s->n_blocks);
    return s->blocks[b] * c->g.block_size + pos % c->g.block_size;
}

void okv_kv_seq_commit(okv_kv_cache *c, int seq, int n)
{
    struct kv_seq *s = &c->seqs[seq];
    OKV_ASSERT(s->len + n <= s->n_blocks * c->g.block_size);
    s->len += n;
}

void okv_kv_seq_truncate(okv_kv_cache *c, int seq, int len)
{
    if (!okv_kv_seq_valid(c, seq))
        return;
    struct kv_seq *s = &c->seqs[seq];
    if (len < 0)
        len = 0;
    if (len < s->len)
        s->len = len;
    int need = (s->len + c->g.block_size - 1) / c->g.block_size;
    while (s->n_blocks > need)
        c->free_stack[c->n_free++] = s->blocks[--s->n_blocks];
}

const int32_t *okv_kv_seq_blocks(const okv_kv_cache *c, int seq, int *n)
{
    const struct kv_seq *s = &c->seqs[seq];
    *n = s->n_blocks;
    return s->blocks;
}
