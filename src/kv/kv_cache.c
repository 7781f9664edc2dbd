/* Block allocation of the KV tiers and per-sequence block tables.
 *
 * Two allocators: group slots of the device tier (all layers and heads of one
 * block; where blocks being written live) and host-tier blocks (every block of a
 * sequence when the host tier exists). Free ids sit on stacks (LIFO reuse keeps
 * recently freed, cache-warm blocks in use). A sequence's table maps logical block
 * i to its group slot (-1 once released to the host tier alone) and host block.
 * Reservation is all or nothing, so a failed step leaves every table as it was.
 *
 * Prefix caching (okv_kv_prefix_enable): a full block can be registered under a hash of
 * its tokens and of the blocks before it, and other sequences then attach the same block
 * instead of computing it again. The cached tier is the host tier when there is one (its
 * blocks hold a sequence's whole KV; an attaching sequence gets group slots of its own for
 * the blocks it needs on the device), else the group slots. Its blocks carry a count of the
 * sequences holding them; a registered block that no sequence holds stays cached (least
 * recently freed first out) and counts as free: reserve takes it when the free stack is
 * empty, forgetting its hash. */
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

/* prefix cache state of the group slots (okv_kv_prefix_enable) */
struct kv_prefix {
    /* per block of the cached tier (host blocks with a host tier, else group slots): */
    int32_t *ref;          /* sequences holding the block */
    uint8_t *cached;       /* registered under hash[] */
    uint64_t *hash, *parent;
    int32_t *tokens;       /* [][block_size] the tokens the block's KV was computed from */
    int32_t *lru_prev, *lru_next;   /* cached slots that no sequence holds, oldest first */
    int32_t lru_head, lru_tail;
    int n_lru;
    int32_t *table;        /* open addressing by hash, linear probing: slot, or -1 empty (at least half empty);
                              deletion shifts the probe run back, so there are no tombstones */
    uint32_t table_mask;
};

struct okv_kv_cache {
    okv_backend *be;
    okv_bkv *storage;
    struct okv_kv_geometry g;
    struct kv_prefix *px;  /* NULL: prefix caching off */
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
    okv_kv_prefix_free(c);
    okv_free(c->free_group);
    okv_free(c->free_host);
    if (c->storage)
        c->be->ops->kv_free(c->be, c->storage);
    okv_free(c);
}

/* room for need logical blocks in a sequence's tables */
static enum okv_status seq_grow(struct kv_seq *s, int need)
{
    if (need <= s->cap)
        return OKV_OK;
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
    return OKV_OK;
}

/* ---- prefix cache ---- */

static void lru_unlink(struct kv_prefix *p, int32_t s)
{
    const int32_t a = p->lru_prev[s], b = p->lru_next[s];
    if (a >= 0)
        p->lru_next[a] = b;
    else
        p->lru_head = b;
    if (b >= 0)
        p->lru_prev[b] = a;
    else
        p->lru_tail = a;
    p->lru_prev[s] = p->lru_next[s] = -1;
    p->n_lru--;
}

static void lru_push(struct kv_prefix *p, int32_t s)
{
    p->lru_prev[s] = p->lru_tail;
    p->lru_next[s] = -1;
    if (p->lru_tail >= 0)
        p->lru_next[p->lru_tail] = s;
    else
        p->lru_head = s;
    p->lru_tail = s;
    p->n_lru++;
}

static uint32_t table_pos(const struct kv_prefix *p, uint64_t h) { return (uint32_t)(h ^ (h >> 29)) & p->table_mask; }

static void table_remove(struct kv_prefix *p, int32_t slot)
{
    uint32_t i = table_pos(p, p->hash[slot]);
    for (uint32_t n = 0; p->table[i] != slot; i = (i + 1) & p->table_mask)
        if (p->table[i] == -1 || ++n > p->table_mask)
            return;   /* not there */
    /* backward shift: entries after the hole whose home lies cyclically outside (hole, j] move into it */
    p->table[i] = -1;
    for (uint32_t j = (i + 1) & p->table_mask; p->table[j] != -1; j = (j + 1) & p->table_mask) {
        const uint32_t k = table_pos(p, p->hash[p->table[j]]);
        const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        p->table[i] = p->table[j];
        p->table[j] = -1;
        i = j;
    }
}

/* a slot leaves the cache (reused for another block) */
static void uncache(struct kv_prefix *p, int32_t slot)
{
    if (!p->cached[slot])
        return;
    table_remove(p, slot);
    p->cached[slot] = 0;
}

/* The tier whose blocks the prefix cache keeps: the host tier when there is one (sparse: a
 * sequence's KV lives there whole; sinks and window are copied back to the device), else the
 * device's group slots (dense). */
static bool px_host(const okv_kv_cache *c) { return c->g.n_host_blocks > 0; }

/* a block id for a new block: the free stack, else (cached tier) the least recently freed cached one */
static int32_t take_from(okv_kv_cache *c, int32_t *stack, int *n_free, bool cached_tier)
{
    struct kv_prefix *p = cached_tier ? c->px : NULL;
    int32_t s;
    if (*n_free > 0) {
        s = stack[--*n_free];
    } else {
        OKV_ASSERT(p && p->n_lru > 0);
        s = p->lru_head;
        lru_unlink(p, s);
        uncache(p, s);
    }
    if (p)
        p->ref[s] = 1;
    return s;
}

/* a sequence lets a block id go */
static void put_to(okv_kv_cache *c, int32_t s, int32_t *stack, int *n_free, bool cached_tier)
{
    struct kv_prefix *p = cached_tier ? c->px : NULL;
    if (p && --p->ref[s] > 0)
        return;
    if (p && p->cached[s])
        lru_push(p, s);
    else
        stack[(*n_free)++] = s;
}

static int32_t take_group(okv_kv_cache *c) { return take_from(c, c->free_group, &c->n_free_group, c->px && !px_host(c)); }
static void put_group(okv_kv_cache *c, int32_t s) { put_to(c, s, c->free_group, &c->n_free_group, c->px && !px_host(c)); }
static int32_t take_host(okv_kv_cache *c) { return take_from(c, c->free_host, &c->n_free_host, c->px && px_host(c)); }
static void put_host(okv_kv_cache *c, int32_t s) { put_to(c, s, c->free_host, &c->n_free_host, c->px && px_host(c)); }

enum okv_status okv_kv_prefix_enable(okv_kv_cache *c)
{
    if (c->px)
        return OKV_OK;
    if (c->n_free_group != c->g.n_group_slots || c->n_free_host != c->g.n_host_blocks)
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: prefix caching is enabled before any block is used");
    const size_t n = (size_t)(px_host(c) ? c->g.n_host_blocks : c->g.n_group_slots) + 1;
    uint32_t tsize = 16;
    while (tsize < 2 * n)
        tsize *= 2;
    struct kv_prefix *p = okv_calloc(1, sizeof *p, OKV_TAG_KV);
    if (p) {
        p->ref = okv_calloc(n, sizeof *p->ref, OKV_TAG_KV);
        p->cached = okv_calloc(n, 1, OKV_TAG_KV);
        p->hash = okv_calloc(n, sizeof *p->hash, OKV_TAG_KV);
        p->parent = okv_calloc(n, sizeof *p->parent, OKV_TAG_KV);
        p->tokens = okv_calloc(n * (size_t)c->g.block_size, sizeof *p->tokens, OKV_TAG_KV);
        p->lru_prev = okv_malloc(n * sizeof *p->lru_prev, OKV_TAG_KV);
        p->lru_next = okv_malloc(n * sizeof *p->lru_next, OKV_TAG_KV);
        p->table = okv_malloc(tsize * sizeof *p->table, OKV_TAG_KV);
    }
    if (!p || !p->ref || !p->cached || !p->hash || !p->parent || !p->tokens || !p->lru_prev || !p->lru_next || !p->table) {
        c->px = p;
        okv_kv_prefix_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory (prefix cache)");
    }
    for (size_t i = 0; i < n; i++)
        p->lru_prev[i] = p->lru_next[i] = -1;
    for (uint32_t i = 0; i < tsize; i++)
        p->table[i] = -1;
    p->table_mask = tsize - 1;
    p->lru_head = p->lru_tail = -1;
    c->px = p;
    return OKV_OK;
}

void okv_kv_prefix_free(okv_kv_cache *c)
{
    struct kv_prefix *p = c->px;
    if (!p)
        return;
    okv_free(p->ref);
    okv_free(p->cached);
    okv_free(p->hash);
    okv_free(p->parent);
    okv_free(p->tokens);
    okv_free(p->lru_prev);
    okv_free(p->lru_next);
    okv_free(p->table);
    okv_free(p);
    c->px = NULL;
}

bool okv_kv_prefix_enabled(const okv_kv_cache *c) { return c->px != NULL; }

int okv_kv_prefix_cached_blocks(const okv_kv_cache *c)
{
    const struct kv_prefix *p = c->px;
    if (!p)
        return 0;
    int n = 0;
    for (int i = 0, e = px_host(c) ? c->g.n_host_blocks : c->g.n_group_slots; i < e; i++)
        n += p->cached[i];
    return n;
}

int32_t okv_kv_prefix_lookup(const okv_kv_cache *c, uint64_t parent, uint64_t hash, const int32_t *tokens)
{
    const struct kv_prefix *p = c->px;
    if (!p)
        return -1;
    const int bs = c->g.block_size;
    uint32_t i = table_pos(p, hash);
    for (uint32_t n = 0; n <= p->table_mask; n++, i = (i + 1) & p->table_mask) {
        const int32_t s = p->table[i];
        if (s == -1)
            return -1;
        /* the hash names a block; the parent's hash and the block's own tokens are compared
         * too, so a wrong hit needs two prefixes whose 64-bit chain hashes collide and then
         * the same block of tokens */
        if (p->hash[s] == hash && p->parent[s] == parent &&
            !memcmp(p->tokens + (size_t)s * bs, tokens, sizeof(int32_t) * (size_t)bs))
            return s;
    }
    return -1;
}

enum okv_status okv_kv_seq_attach_block(okv_kv_cache *c, int seq, int32_t id, bool with_group)
{
    struct kv_prefix *p = c->px;
    const bool host = px_host(c);
    if (!p || !okv_kv_seq_valid(c, seq) || id < 0 || id >= (host ? c->g.n_host_blocks : c->g.n_group_slots) ||
        !p->cached[id])
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: cannot attach cached block %d to sequence %d", id, seq);
    struct kv_seq *s = &c->seqs[seq];
    if (s->len != s->n_blocks * c->g.block_size)
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: sequence %d is not block-aligned (%d tokens)", seq, s->len);
    with_group = with_group || !host;
    if (host && with_group && okv_kv_free_slots(c) < 1)
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: no device block free for an attached block");
    enum okv_status st = seq_grow(s, s->n_blocks + 1);
    if (st != OKV_OK)
        return st;
    if (p->ref[id]++ == 0)
        lru_unlink(p, id);
    s->group[s->n_blocks] = host ? (with_group ? take_group(c) : -1) : id;
    s->host[s->n_blocks] = host ? id : -1;
    s->n_blocks++;
    s->n_group += with_group;
    s->len += c->g.block_size;
    return OKV_OK;
}

void okv_kv_prefix_register(okv_kv_cache *c, int seq, int block, uint64_t parent, uint64_t hash, const int32_t *tokens)
{
    struct kv_prefix *p = c->px;
    if (!p || !okv_kv_seq_valid(c, seq))
        return;
    const struct kv_seq *s = &c->seqs[seq];
    if (block < 0 || block >= s->n_blocks || (block + 1) * c->g.block_size > s->len)
        return;   /* only full, committed blocks */
    const int32_t slot = px_host(c) ? s->host[block] : s->group[block];
    if (slot < 0 || p->cached[slot] || okv_kv_prefix_lookup(c, parent, hash, tokens) >= 0)
        return;   /* already cached, here or in another block */
    const int bs = c->g.block_size;
    uint32_t i = table_pos(p, hash);
    while (p->table[i] != -1)   /* at most one entry a block, in a table of twice that: an empty one exists */
        i = (i + 1) & p->table_mask;
    p->table[i] = slot;
    p->cached[slot] = 1;
    p->hash[slot] = hash;
    p->parent[slot] = parent;
    memcpy(p->tokens + (size_t)slot * bs, tokens, sizeof(int32_t) * (size_t)bs);
}

const struct okv_kv_geometry *okv_kv_geometry(const okv_kv_cache *c) { return &c->g; }
okv_bkv *okv_kv_storage(okv_kv_cache *c) { return c->storage; }
/* cached blocks that no sequence holds are free: reserve takes them */
int okv_kv_free_slots(const okv_kv_cache *c) { return c->n_free_group + (c->px && !px_host(c) ? c->px->n_lru : 0); }
int okv_kv_used_slots(const okv_kv_cache *c) { return c->g.n_group_slots - okv_kv_free_slots(c); }
int okv_kv_free_host_blocks(const okv_kv_cache *c) { return c->n_free_host + (c->px && px_host(c) ? c->px->n_lru : 0); }
int okv_kv_used_host_blocks(const okv_kv_cache *c) { return c->g.n_host_blocks - okv_kv_free_host_blocks(c); }
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
            put_group(c, s->group[s->n_blocks]);
            s->n_group--;
        }
        if (s->host[s->n_blocks] >= 0)
            put_host(c, s->host[s->n_blocks]);
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
    if (extra > okv_kv_free_slots(c))
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: sequence %d needs %d more device blocks, %d free of %d",
                             seq, extra, okv_kv_free_slots(c), c->g.n_group_slots);
    bool host = c->g.n_host_blocks > 0;
    if (host && extra > okv_kv_free_host_blocks(c))
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: sequence %d needs %d more host blocks, %d free of %d",
                             seq, extra, okv_kv_free_host_blocks(c), c->g.n_host_blocks);
    enum okv_status st = seq_grow(s, need);
    if (st != OKV_OK)
        return st;
    while (s->n_blocks < need) {
        s->group[s->n_blocks] = take_group(c);
        s->host[s->n_blocks] = host ? take_host(c) : -1;
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
    put_group(c, s->group[block]);
    s->group[block] = -1;
    s->n_group--;
}

void okv_kv_seq_drop_group(okv_kv_cache *c, int seq, int block)
{
    struct kv_seq *s = &c->seqs[seq];
    OKV_ASSERT(block >= 0 && block < s->n_blocks);
    if (s->group[block] < 0)
        return;
    put_group(c, s->group[block]);
    s->group[block] = -1;
    s->n_group--;
}
