/* Block allocation of the KV tiers and per-sequence block tables.
 *
 * Two allocators: group slots of the device tier (all layers and heads of one
 * block; where blocks being written live) and host-tier blocks (every block of a
 * sequence when the host tier exists). Free ids sit on stacks (LIFO reuse keeps
 * recently freed, cache-warm blocks in use). A sequence's table maps logical block
 * i to its group slot (-1 once released to the host tier alone) and host block.
 * Reservation is all or nothing, so a failed step leaves every table as it was. */
#include "oasiskv/kv.h"

#include <string.h>

struct kv_seq {
    bool used;
    int len;            /* committed tokens */
    int n_blocks;       /* allocated logical blocks (covers reserved tokens) */
    int cap;
    int32_t *group;     /* [cap] group slot of each logical block, -1 if released */
    int32_t *host;      /* [cap] host block, -1 without host tier */
    int n_group;        /* blocks holding a group slot */
};

struct okv_kv_cache {
    okv_backend *be;
    okv_bkv *storage;
    struct okv_kv_geometry g;
    int32_t *free_group;   /* [n_group_slots] */
    int n_free_group;
    int32_t *free_host;    /* [n_host_blocks] */
    int n_free_host;
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
    c->g.layer_sparse_units = NULL;
    enum okv_status st = be->ops->kv_alloc(be, g, &c->storage);
    if (st != OKV_OK) {
        okv_free(c);
        return st;
    }
    c->free_group = okv_malloc(sizeof(int32_t) * (size_t)(g->n_group_slots + 1), OKV_TAG_KV);
    c->free_host = okv_malloc(sizeof(int32_t) * (size_t)(g->n_host_blocks + 1), OKV_TAG_KV);
    if (!c->free_group || !c->free_host) {
        okv_kv_cache_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
    }
    for (int i = 0; i < g->n_group_slots; i++)
        c->free_group[i] = g->n_group_slots - 1 - i;   /* slot 0 on top */
    c->n_free_group = g->n_group_slots;
    for (int i = 0; i < g->n_host_blocks; i++)
        c->free_host[i] = g->n_host_blocks - 1 - i;
    c->n_free_host = g->n_host_blocks;
    *out = c;
    return OKV_OK;
}

void okv_kv_cache_free(okv_kv_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_seqs_cap; i++) {
        okv_free(c->seqs[i].group);
        okv_free(c->seqs[i].host);
    }
    okv_free(c->seqs);
    okv_free(c->free_group);
    okv_free(c->free_host);
    if (c->storage)
        c->be->ops->kv_free(c->be, c->storage);
    okv_free(c);
}

const struct okv_kv_geometry *okv_kv_geometry(const okv_kv_cache *c) { return &c->g; }
okv_bkv *okv_kv_storage(okv_kv_cache *c) { return c->storage; }
int okv_kv_free_slots(const okv_kv_cache *c) { return c->n_free_group; }
int okv_kv_used_slots(const okv_kv_cache *c) { return c->g.n_group_slots - c->n_free_group; }
int okv_kv_free_host_blocks(const okv_kv_cache *c) { return c->n_free_host; }
int okv_kv_used_host_blocks(const okv_kv_cache *c) { return c->g.n_host_blocks - c->n_free_host; }
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
    s->n_group = 0;
    c->n_seqs++;
    *seq = id;
    return OKV_OK;
}

bool okv_kv_seq_valid(const okv_kv_cache *c, int seq)
{
    return seq >= 0 && seq < c->n_seqs_cap && c->seqs[seq].used;
}

static void drop_blocks_from(okv_kv_cache *c, struct kv_seq *s, int keep)
{
    while (s->n_blocks > keep) {
        s->n_blocks--;
        if (s->group[s->n_blocks] >= 0) {
            c->free_group[c->n_free_group++] = s->group[s->n_blocks];
            s->n_group--;
        }
        if (s->host[s->n_blocks] >= 0)
            c->free_host[c->n_free_host++] = s->host[s->n_blocks];
    }
}

void okv_kv_seq_free(okv_kv_cache *c, int seq)
{
    if (!okv_kv_seq_valid(c, seq))
        return;
    struct kv_seq *s = &c->seqs[seq];
    drop_blocks_from(c, s, 0);
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
    if (extra > c->n_free_group)
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: sequence %d needs %d more device blocks, %d free of %d",
                             seq, extra, c->n_free_group, c->g.n_group_slots);
    bool host = c->g.n_host_blocks > 0;
    if (host && extra > c->n_free_host)
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: sequence %d needs %d more host blocks, %d free of %d",
                             seq, extra, c->n_free_host, c->g.n_host_blocks);
    if (need > s->cap) {
        int cap = s->cap ? s->cap : 16;
        while (cap < need)
            cap *= 2;
        int32_t *g = okv_realloc(s->group, sizeof(int32_t) * (size_t)cap, OKV_TAG_KV);
        if (g)
            s->group = g;
        int32_t *h = okv_realloc(s->host, sizeof(int32_t) * (size_t)cap, OKV_TAG_KV);
        if (h)
            s->host = h;
        if (!g || !h)
            return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
        s->cap = cap;
    }
    while (s->n_blocks < need) {
        s->group[s->n_blocks] = c->free_group[--c->n_free_group];
        s->host[s->n_blocks] = host ? c->free_host[--c->n_free_host] : -1;
        s->n_blocks++;
        s->n_group++;
    }
    return OKV_OK;
}

int32_t okv_kv_seq_slot(const okv_kv_cache *c, int seq, int pos)
{
    const struct kv_seq *s = &c->seqs[seq];
    int b = pos / c->g.block_size;
    OKV_ASSERT(b < s->n_blocks && s->group[b] >= 0);
    return s->group[b] * c->g.block_size + pos % c->g.block_size;
}

int32_t okv_kv_seq_host_slot(const okv_kv_cache *c, int seq, int pos)
{
    const struct kv_seq *s = &c->seqs[seq];
    int b = pos / c->g.block_size;
    OKV_ASSERT(b < s->n_blocks);
    return s->host[b] < 0 ? -1 : s->host[b] * c->g.block_size + pos % c->g.block_size;
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
    drop_blocks_from(c, s, (s->len + c->g.block_size - 1) / c->g.block_size);
}

const int32_t *okv_kv_seq_blocks(const okv_kv_cache *c, int seq, int *n)
{
    const struct kv_seq *s = &c->seqs[seq];
    *n = s->n_blocks;
    return s->group;
}

const int32_t *okv_kv_seq_host_blocks(const okv_kv_cache *c, int seq, int *n)
{
    const struct kv_seq *s = &c->seqs[seq];
    *n = s->n_blocks;
    return s->host;
}

int okv_kv_seq_group_blocks(const okv_kv_cache *c, int seq) { return okv_kv_seq_valid(c, seq) ? c->seqs[seq].n_group : 0; }

void okv_kv_seq_release_group(okv_kv_cache *c, int seq, int block)
{
    struct kv_seq *s = &c->seqs[seq];
    OKV_ASSERT(block >= 0 && block < s->n_blocks && s->host[block] >= 0);
    if (s->group[block] < 0)
        return;
    c->free_group[c->n_free_group++] = s->group[block];
    s->group[block] = -1;
    s->n_group--;
}

void okv_kv_seq_drop_group(okv_kv_cache *c, int seq, int block)
{
    struct kv_seq *s = &c->seqs[seq];
    OKV_ASSERT(block >= 0 && block < s->n_blocks);
    if (s->group[block] < 0)
        return;
    c->free_group[c->n_free_group++] = s->group[block];
    s->group[block] = -1;
    s->n_group--;
}
