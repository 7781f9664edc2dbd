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
 * empty, forgetting its hash.
 *
 * Lending (okv_kv_lend_chunks, sparse engines): the device units of the selection quota
 * chunks that no sparse sequence holds serve as extra group slots, so that sequences can
 * keep every block on the device while the pool has room. A chunk is claimed when a
 * sequence starts selecting into it; the blocks then inside it must move elsewhere
 * (okv_kv_seq_move_block) before its units are used. Group slots are handed out lowest
 * id first, so the chunks (above the group slots) fill last. */
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
    uint64_t *gfree;       /* bit i: group slot id i is free */
    int n_ids;             /* group slot ids: the group slots, then the lent chunks' slots */
    int gfree_lo;          /* no free bit in the words below this one */
    int n_free_group;
    /* lending (okv_kv_lend_chunks): chunk i is ids [lend_base + i*lend_slots, + lend_slots) */
    int lend_base, lend_slots, n_lend, n_claimed;
    uint8_t *claimed;      /* [n_lend] */
    int32_t *owner_seq, *owner_blk;   /* [n_ids] with lending: the sequence block in each slot, or -1 */
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
    c->n_ids = g->n_group_slots;
    c->gfree = okv_calloc((size_t)c->n_ids / 64 + 1, sizeof(uint64_t), OKV_TAG_KV);
    c->free_host = okv_malloc(sizeof(int32_t) * (size_t)(g->n_host_blocks + 1), OKV_TAG_KV);
    if (!c->gfree || !c->free_host) {
        okv_kv_cache_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
    }
    for (int i = 0; i < g->n_group_slots; i++)
        c->gfree[i / 64] |= 1ull << (i % 64);
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
    okv_free(c->gfree);
    okv_free(c->claimed);
    okv_free(c->owner_seq);
    okv_free(c->owner_blk);
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

/* the least recently freed cached block, forgotten by the cache */
static int32_t lru_take(struct kv_prefix *p)
{
    OKV_ASSERT(p && p->n_lru > 0);
    const int32_t s = p->lru_head;
    lru_unlink(p, s);
    uncache(p, s);
    return s;
}

/* a block id for a new block: the free stack, else (cached tier) the least recently freed cached one */
static int32_t take_from(okv_kv_cache *c, int32_t *stack, int *n_free, bool cached_tier)
{
    struct kv_prefix *p = cached_tier ? c->px : NULL;
    const int32_t s = *n_free > 0 ? stack[--*n_free] : lru_take(p);
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

static bool gbit(const okv_kv_cache *c, int32_t s) { return c->gfree[s / 64] >> (s % 64) & 1; }
static void gset(okv_kv_cache *c, int32_t s)
{
    c->gfree[s / 64] |= 1ull << (s % 64);
    if (s / 64 < c->gfree_lo)
        c->gfree_lo = s / 64;
    c->n_free_group++;
}
static void gclear(okv_kv_cache *c, int32_t s)
{
    c->gfree[s / 64] &= ~(1ull << (s % 64));
    c->n_free_group--;
}
/* the first group slot id of lent chunk ch (it has lend_slots) */
static int32_t chunk_base(const okv_kv_cache *c, int ch) { return c->lend_base + ch * c->lend_slots; }
static int lend_chunk_of(const okv_kv_cache *c, int32_t s)
{
    return c->n_lend && s >= c->lend_base ? (s - c->lend_base) / c->lend_slots : -1;
}

/* a group slot for block blk of sequence seq: the lowest free id, else (group-tier prefix
 * cache) the least recently freed cached one */
static int32_t take_group(okv_kv_cache *c, int seq, int blk)
{
    struct kv_prefix *p = c->px && !px_host(c) ? c->px : NULL;
    int32_t s;
    if (c->n_free_group > 0) {
        int w = c->gfree_lo;
        while (!c->gfree[w])
            w++;
        c->gfree_lo = w;
        s = w * 64 + __builtin_ctzll(c->gfree[w]);
        gclear(c, s);
    } else {
        s = lru_take(p);
    }
    if (p)
        p->ref[s] = 1;
    if (c->owner_seq) {
        c->owner_seq[s] = seq;
        c->owner_blk[s] = blk;
    }
    return s;
}

static void put_group(okv_kv_cache *c, int32_t s)
{
    struct kv_prefix *p = c->px && !px_host(c) ? c->px : NULL;
    if (p && --p->ref[s] > 0)
        return;
    if (c->owner_seq)
        c->owner_seq[s] = -1;
    const int ch = lend_chunk_of(c, s);
    if (ch >= 0 && c->claimed[ch])
        return;   /* inside a claimed chunk: its units belong to the selection now */
    if (p && p->cached[s])
        lru_push(p, s);
    else
        gset(c, s);
}

static int32_t take_host(okv_kv_cache *c) { return take_from(c, c->free_host, &c->n_free_host, c->px && px_host(c)); }
static void put_host(okv_kv_cache *c, int32_t s) { put_to(c, s, c->free_host, &c->n_free_host, c->px && px_host(c)); }

enum okv_status okv_kv_prefix_enable(okv_kv_cache *c)
{
    if (c->px)
        return OKV_OK;
    if (okv_kv_used_slots(c) != 0 || c->n_free_host != c->g.n_host_blocks)
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
    s->group[s->n_blocks] = host ? (with_group ? take_group(c, seq, s->n_blocks) : -1) : id;
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
/* occupied: the group slots and unclaimed lent chunks less what is free */
int okv_kv_used_slots(const okv_kv_cache *c)
{
    return c->g.n_group_slots + (c->n_lend - c->n_claimed) * c->lend_slots - okv_kv_free_slots(c);
}
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
        s->group[s->n_blocks] = take_group(c, seq, s->n_blocks);
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

/* ---- lending the selection chunks as group slots ---- */

enum okv_status okv_kv_lend_chunks(okv_kv_cache *c, int chunk_slots, int n_chunks)
{
    if (c->n_lend || chunk_slots <= 0 || n_chunks <= 0 || (c->px && !px_host(c)))
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: cannot lend %d chunks of %d slots", n_chunks, chunk_slots);
    const int64_t n_ids = (int64_t)c->g.n_group_slots + (int64_t)chunk_slots * n_chunks;
    if (n_ids > INT32_MAX / c->g.block_size)
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: %lld group slot ids are too many", (long long)n_ids);
    uint64_t *bits = okv_calloc((size_t)n_ids / 64 + 1, sizeof(uint64_t), OKV_TAG_KV);
    uint8_t *claimed = okv_calloc((size_t)n_chunks, 1, OKV_TAG_KV);
    int32_t *os = okv_malloc(sizeof(int32_t) * (size_t)n_ids, OKV_TAG_KV);
    int32_t *ob = okv_malloc(sizeof(int32_t) * (size_t)n_ids, OKV_TAG_KV);
    if (!bits || !claimed || !os || !ob) {
        okv_free(bits);
        okv_free(claimed);
        okv_free(os);
        okv_free(ob);
        return okv_set_error(OKV_ERR_NO_MEMORY, "kv cache: out of memory");
    }
    memcpy(bits, c->gfree, sizeof(uint64_t) * ((size_t)c->n_ids / 64 + 1));
    for (int64_t i = 0; i < n_ids; i++)
        os[i] = ob[i] = -1;
    for (int i = 0; i < c->n_seqs_cap; i++)   /* blocks taken before lending began */
        for (int b = 0; c->seqs[i].used && b < c->seqs[i].n_blocks; b++)
            if (c->seqs[i].group[b] >= 0) {
                os[c->seqs[i].group[b]] = i;
                ob[c->seqs[i].group[b]] = b;
            }
    okv_free(c->gfree);
    c->gfree = bits;
    c->claimed = claimed;
    c->owner_seq = os;
    c->owner_blk = ob;
    c->lend_base = c->g.n_group_slots;
    c->lend_slots = chunk_slots;
    c->n_lend = n_chunks;
    c->n_ids = (int)n_ids;
    for (int32_t s = c->lend_base; s < c->n_ids; s++)
        gset(c, s);
    return OKV_OK;
}

int okv_kv_lent_chunks(const okv_kv_cache *c) { return c->n_lend; }
int okv_kv_chunk_slots(const okv_kv_cache *c) { return c->lend_slots; }
int okv_kv_chunk_of(const okv_kv_cache *c, int32_t slot) { return slot >= 0 && slot < c->n_ids ? lend_chunk_of(c, slot) : -1; }

int okv_kv_chunk_used(const okv_kv_cache *c, int chunk)
{
    if (chunk < 0 || chunk >= c->n_lend || c->claimed[chunk])
        return 0;
    int n = 0;
    for (int32_t s = chunk_base(c, chunk), e = s + c->lend_slots; s < e; s++)
        n += !gbit(c, s);
    return n;
}

void okv_kv_chunk_claim(okv_kv_cache *c, int chunk)
{
    OKV_ASSERT(chunk >= 0 && chunk < c->n_lend && !c->claimed[chunk]);
    for (int32_t s = chunk_base(c, chunk), e = s + c->lend_slots; s < e; s++)
        if (gbit(c, s))
            gclear(c, s);
    c->claimed[chunk] = 1;
    c->n_claimed++;
}

void okv_kv_chunk_unclaim(okv_kv_cache *c, int chunk)
{
    OKV_ASSERT(chunk >= 0 && chunk < c->n_lend && c->claimed[chunk]);
    c->claimed[chunk] = 0;
    c->n_claimed--;
    for (int32_t s = chunk_base(c, chunk), e = s + c->lend_slots; s < e; s++) {
        OKV_ASSERT(c->owner_seq[s] < 0);
        gset(c, s);
    }
}

bool okv_kv_chunk_occupant(const okv_kv_cache *c, int chunk, int *seq, int *block)
{
    if (chunk < 0 || chunk >= c->n_lend)
        return false;
    for (int32_t s = chunk_base(c, chunk), e = s + c->lend_slots; s < e; s++)
        if (c->owner_seq[s] >= 0) {
            *seq = c->owner_seq[s];
            *block = c->owner_blk[s];
            return true;
        }
    return false;
}

enum okv_status okv_kv_seq_move_block(okv_kv_cache *c, int seq, int block, int32_t *from, int32_t *to)
{
    if (!c->owner_seq || !okv_kv_seq_valid(c, seq) || block < 0 || block >= c->seqs[seq].n_blocks ||
        c->seqs[seq].group[block] < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "kv cache: cannot move block %d of sequence %d", block, seq);
    if (c->n_free_group == 0)
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "kv cache: no free device block to move block %d of sequence %d into",
                             block, seq);
    struct kv_seq *s = &c->seqs[seq];
    *from = s->group[block];
    *to = take_group(c, seq, block);
    s->group[block] = *to;
    put_group(c, *from);
    return OKV_OK;
}
