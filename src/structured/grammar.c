/* Structured output: a GBNF grammar recognized one byte at a time (grammar.h). The text is
 * read into flat rule tables by grammar_parse.c (grammar_internal.h): every alternative is a
 * run of elements ending in GE_END, and an element reads a character of a set (GE_CHAR) or
 * derives a rule (GE_REF).
 *
 * Parse stacks. A stack is a list of positions: its top is a GE_CHAR element, the next
 * character to read; each one below is where to go on once the rule entered above it ends
 * (the element after a GE_REF). Stacks share their tails, so they are interned as nodes
 * (position, parent node); node 0 is the empty stack, which means the start rule has ended.
 * A reference that is last in its alternative pushes nothing (the rule's end is its caller's
 * end), which keeps repetitions (R ::= x R |) from deepening the stack.
 *
 * States. A state is a sorted list of nodes (the parses alive), plus the UTF-8 character read
 * in part (its bits so far, the bytes still to come and its length). States are interned by
 * that content and numbered in the order texts first reach them, so one grammar can serve any
 * number of requests and a state number is a plain small integer.
 *
 * A transition from state s on byte c:
 *   - the byte extends the partial character: the code points it can still become form one
 *     range [lo, hi] (UTF-8 keeps code point order). Overlong forms, surrogates and what lies
 *     past U+10FFFF are outside the valid code points of their length, so an invalid byte
 *     leaves the range empty and gives -1;
 *   - in the middle of a character, the new state keeps the stacks whose set meets the range;
 *   - once the character is whole, each stack whose set holds it steps past its top, and the
 *     closure expands the result until every top is a GE_CHAR again: a GE_REF pushes (unless
 *     last) and branches into the rule's alternatives, a GE_END pops. The closure remembers
 *     the (position, parent) pairs it has seen, so a rule that comes back to itself without
 *     reading anything (what ("a"?)* becomes) stops there instead of looping.
 * Every set is non-empty and every rule reachable derives a finite text (grammar_parse.c checks
 * both), so every stack can be completed: a state with a stack left can reach a sentence, and
 * -1 comes at the first byte that leaves none.
 *
 * Threads. What the hot path reads (the 256 next states and the accepting flag of each state)
 * lives in chunks of CHUNK states; a chunk is allocated once and never moves, and the
 * array of chunk pointers is sized for OKV_GRAMMAR_MAX_STATES up front. A row entry is 0
 * until computed. A reader loads it with acquire; when it is 0 the reader takes the mutex,
 * looks again, computes it and stores it with release, after any new state's row, flag and
 * n_states (raised with release) were written. Everything else (stacks, states' contents, the
 * hash tables, the scratch of a transition) is touched only under the mutex. */
#include "structured/grammar.h"
#include "structured/grammar_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BITS 6
#define CHUNK (1 << CHUNK_BITS)
#define N_CHUNKS ((OKV_GRAMMAR_MAX_STATES + CHUNK - 1) / CHUNK)
#define DEAD 0xffff               /* a row entry: no next state */
#define MAX_NODES (1 << 22)       /* stack nodes of all states together */
#define MAX_POOL (1 << 24)        /* node ids held by all states together */
#define MAX_WORK (1 << 20)        /* (position, parent) pairs one transition may visit */
#define LIMIT (-2)                /* from step(): a limit was hit */

/* CHUNK states' rows: next[k][c] is 0 until computed, DEAD for -1, else the next state + 1.
 * A row is 512 bytes, so rows stay aligned to cache lines. */
struct chunk {
    _Atomic uint16_t next[CHUNK][256];
    bool accepting[CHUNK];        /* written before the state is published */
};

struct node { int32_t pos, parent, depth; };

/* partial: the character read in part, bits | left << 21 | len << 23 (0 between characters) */
struct config { uint32_t partial; int32_t off, n; };   /* nodes pool[off .. off+n), sorted */

struct item { int32_t pos, parent; };

struct okv_grammar {
    struct gram_rules r;
    _Atomic(struct chunk *) chunks[N_CHUNKS];
    atomic_int n_states;
    atomic_bool overflowed;
    pthread_mutex_t lock;
    /* the rest only under lock */
    struct config *configs;       /* (n_states) */
    int32_t cap_configs;
    int32_t *pool;
    int64_t n_pool, cap_pool;
    int32_t *config_hash;         /* state ids by content, -1 empty; power of two */
    uint32_t config_hash_cap;
    struct node *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *node_hash;           /* node ids by (pos, parent), -1 empty; power of two */
    uint32_t node_hash_cap;
    /* one transition's scratch */
    uint64_t *seen;               /* (pos, parent) pairs visited, valid where seen_gen == gen */
    uint32_t *seen_gen;
    uint32_t seen_cap, n_seen, gen;
    struct item *work;
    int32_t n_work, cap_work;
    int32_t *out;                 /* the new state's nodes */
    int32_t n_out, cap_out;
    bool out_empty;               /* the empty stack (a sentence ends here) is among them */
    bool limit;                   /* a limit was hit */
    bool no_memory;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Grow *pp (an array of *cap items of size size) to hold need; false (limit set) when out of memory. */
static bool reserve(okv_grammar *g, void *pp, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap)
        return true;
    int64_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p;
    memcpy(&p, pp, sizeof p);
    void *q = okv_realloc(p, size * (size_t)c, OKV_TAG_SERVER);
    if (!q) {
        g->limit = g->no_memory = true;
        return false;
    }
    memcpy(pp, &q, sizeof q);
    *cap = c;
    return true;
}

static bool reserve32(okv_grammar *g, void *pp, int32_t *cap, int64_t need, size_t size)
{
    int64_t c = *cap;
    const bool ok = reserve(g, pp, &c, need, size);
    *cap = (int32_t)c;
    return ok;
}

/* A fresh table of cap slots, all -1. */
static int32_t *new_table(okv_grammar *g, uint32_t cap)
{
    int32_t *t = okv_malloc(sizeof *t * cap, OKV_TAG_SERVER);
    if (!t)
        g->limit = g->no_memory = true;
    else
        memset(t, 0xff, sizeof *t * cap);
    return t;
}

/* ---- sets ---- */

/* The first range of set s whose end is >= cp (the set's range count if none). */
static int32_t range_at(const struct gram_rules *r, int32_t s, uint32_t cp)
{
    int32_t lo = r->set_off[s], hi = r->set_off[s + 1];
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (r->ranges[mid].hi < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Set s holds a code point in lo..hi (with lo == hi: holds lo). */
static bool set_meets(const struct gram_rules *r, int32_t s, uint32_t lo, uint32_t hi)
{
    const int32_t i = range_at(r, s, lo);
    return i < r->set_off[s + 1] && r->ranges[i].lo <= hi;
}

/* ---- stack nodes ---- */

static bool node_hash_grow(okv_grammar *g)
{
    const uint32_t cap = g->node_hash_cap * 2;
    int32_t *t = new_table(g, cap);
    if (!t)
        return false;
    for (int32_t id = 1; id < g->n_nodes; id++) {
        const uint64_t key = (uint64_t)(uint32_t)g->nodes[id].pos << 32 | (uint32_t)g->nodes[id].parent;
        uint32_t i = (uint32_t)mix(key) & (cap - 1);
        while (t[i] >= 0)
            i = (i + 1) & (cap - 1);
        t[i] = id;
    }
    okv_free(g->node_hash);
    g->node_hash = t;
    g->node_hash_cap = cap;
    return true;
}

/* The node (pos, parent), made if new; -1 (limit set) past the depth or node limits. */
static int32_t node_get(okv_grammar *g, int32_t pos, int32_t parent)
{
    if ((uint32_t)(g->n_nodes + 1) * 2 > g->node_hash_cap && !node_hash_grow(g))
        return -1;   /* (grown first, so that the table always has a free slot) */
    const uint64_t key = (uint64_t)(uint32_t)pos << 32 | (uint32_t)parent;
    const uint32_t mask = g->node_hash_cap - 1;
    uint32_t i = (uint32_t)mix(key) & mask;
    for (; g->node_hash[i] >= 0; i = (i + 1) & mask) {
        const struct node *n = &g->nodes[g->node_hash[i]];
        if (n->pos == pos && n->parent == parent)
            return g->node_hash[i];
    }
    const int32_t depth = g->nodes[parent].depth + 1;
    if (depth > OKV_GRAMMAR_MAX_DEPTH || g->n_nodes >= MAX_NODES ||
        !reserve32(g, &g->nodes, &g->cap_nodes, g->n_nodes + 1L, sizeof *g->nodes)) {
        g->limit = true;
        return -1;
    }
    const int32_t id = g->n_nodes++;
    g->nodes[id] = (struct node){pos, parent, depth};
    g->node_hash[i] = id;
    return id;
}

/* ---- the closure ---- */

static void begin(okv_grammar *g)
{
    if (++g->gen == 0) {   /* wrapped: forget every stamp */
        memset(g->seen_gen, 0, sizeof *g->seen_gen * g->seen_cap);
        g->gen = 1;
    }
    g->n_seen = 0;
    g->n_work = g->n_out = 0;
    g->out_empty = g->limit = false;
}

static bool seen_grow(okv_grammar *g)
{
    const uint32_t cap = g->seen_cap * 2;
    uint64_t *keys = okv_malloc(sizeof *keys * cap, OKV_TAG_SERVER);
    uint32_t *gens = okv_calloc(cap, sizeof *gens, OKV_TAG_SERVER);
    if (!keys || !gens) {
        okv_free(keys);
        okv_free(gens);
        g->limit = g->no_memory = true;
        return false;
    }
    for (uint32_t j = 0; j < g->seen_cap; j++) {
        if (g->seen_gen[j] != g->gen)
            continue;
        uint32_t i = (uint32_t)mix(g->seen[j]) & (cap - 1);
        while (gens[i] == g->gen)
            i = (i + 1) & (cap - 1);
        keys[i] = g->seen[j];
        gens[i] = g->gen;
    }
    okv_free(g->seen);
    okv_free(g->seen_gen);
    g->seen = keys;
    g->seen_gen = gens;
    g->seen_cap = cap;
    return true;
}

/* Queue (pos, parent) unless this transition has seen it. */
static void push_item(okv_grammar *g, int32_t pos, int32_t parent)
{
    if (g->limit)
        return;
    const uint64_t key = (uint64_t)(uint32_t)pos << 32 | (uint32_t)parent;
    const uint32_t mask = g->seen_cap - 1;
    uint32_t i = (uint32_t)mix(key) & mask;
    for (; g->seen_gen[i] == g->gen; i = (i + 1) & mask)
        if (g->seen[i] == key)
            return;
    if (g->n_seen >= MAX_WORK) {
        g->limit = true;
        return;
    }
    g->seen[i] = key;
    g->seen_gen[i] = g->gen;
    if (++g->n_seen * 2 > g->seen_cap && !seen_grow(g))
        return;
    if (!reserve32(g, &g->work, &g->cap_work, g->n_work + 1L, sizeof *g->work))
        return;
    g->work[g->n_work++] = (struct item){pos, parent};
}

static void out_add(okv_grammar *g, int32_t node)
{
    if (g->n_out >= OKV_GRAMMAR_MAX_STACKS) {
        g->limit = true;
        return;
    }
    if (reserve32(g, &g->out, &g->cap_out, g->n_out + 1L, sizeof *g->out))
        g->out[g->n_out++] = node;
}

/* Expand the queued items until every stack's top reads a character; the tops go to out. */
static void run_closure(okv_grammar *g)
{
    const struct gram_elem *e = g->r.elems;
    while (g->n_work > 0 && !g->limit) {
        const struct item it = g->work[--g->n_work];
        switch (e[it.pos].kind) {
        case GE_CHAR: {
            const int32_t n = node_get(g, it.pos, it.parent);
            if (n >= 0)
                out_add(g, n);
            break;
        }
        case GE_END:
            if (it.parent == 0)
                g->out_empty = true;
            else
                push_item(g, g->nodes[it.parent].pos, g->nodes[it.parent].parent);
            break;
        default: {   /* GE_REF */
            int32_t below = it.parent;
            if (e[it.pos + 1].kind != GE_END && (below = node_get(g, it.pos + 1, it.parent)) < 0)
                break;
            const int32_t r = e[it.pos].v;
            for (int32_t a = g->r.alt_off[r]; a < g->r.alt_off[r + 1]; a++)
                push_item(g, g->r.alt_pos[a], below);
            break;
        }
        }
    }
}

static int cmp_i32(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* ---- states ---- */

static uint64_t config_key(uint32_t partial, const int32_t *nodes, int32_t n)
{
    uint64_t h = mix(partial ^ (uint64_t)n << 32);
    for (int32_t i = 0; i < n; i++)
        h = mix(h ^ (uint32_t)nodes[i]);
    return h;
}

static bool config_hash_grow(okv_grammar *g)
{
    const uint32_t cap = g->config_hash_cap * 2;
    int32_t *t = new_table(g, cap);
    if (!t)
        return false;
    const int n_states = atomic_load_explicit(&g->n_states, memory_order_relaxed);
    for (int32_t id = 0; id < n_states; id++) {
        const struct config *c = &g->configs[id];
        uint32_t i = (uint32_t)config_key(c->partial, g->pool + c->off, c->n) & (cap - 1);
        while (t[i] >= 0)
            i = (i + 1) & (cap - 1);
        t[i] = id;
    }
    okv_free(g->config_hash);
    g->config_hash = t;
    g->config_hash_cap = cap;
    return true;
}

/* The state of (partial, nodes[0..n)), sorted: made and published if new; LIMIT past a limit. */
static int intern(okv_grammar *g, uint32_t partial, const int32_t *nodes, int32_t n)
{
    if ((uint32_t)(atomic_load_explicit(&g->n_states, memory_order_relaxed) + 1) * 2 > g->config_hash_cap &&
        !config_hash_grow(g))
        return LIMIT;
    const uint32_t mask = g->config_hash_cap - 1;
    uint32_t i = (uint32_t)config_key(partial, nodes, n) & mask;
    for (; g->config_hash[i] >= 0; i = (i + 1) & mask) {
        const struct config *c = &g->configs[g->config_hash[i]];
        if (c->partial == partial && c->n == n && !memcmp(g->pool + c->off, nodes, sizeof *nodes * (size_t)n))
            return g->config_hash[i];
    }
    const int id = atomic_load_explicit(&g->n_states, memory_order_relaxed);
    if (id >= OKV_GRAMMAR_MAX_STATES || g->n_pool + n > MAX_POOL ||
        !reserve(g, &g->pool, &g->cap_pool, g->n_pool + n, sizeof *g->pool) ||
        !reserve32(g, &g->configs, &g->cap_configs, id + 1L, sizeof *g->configs))
        return LIMIT;
    struct chunk *chunk = atomic_load_explicit(&g->chunks[id >> CHUNK_BITS], memory_order_relaxed);
    if (!chunk) {
        if (!(chunk = okv_malloc(sizeof *chunk, OKV_TAG_SERVER))) {
            g->no_memory = true;
            return LIMIT;
        }
        for (int k = 0; k < CHUNK; k++) {
            for (int c = 0; c < 256; c++)
                atomic_init(&chunk->next[k][c], 0);
            chunk->accepting[k] = false;
        }
        atomic_store_explicit(&g->chunks[id >> CHUNK_BITS], chunk, memory_order_release);
    }
    memcpy(g->pool + g->n_pool, nodes, sizeof *nodes * (size_t)n);
    g->configs[id] = (struct config){partial, (int32_t)g->n_pool, n};
    g->n_pool += n;
    chunk->accepting[id & (CHUNK - 1)] = partial == 0 && n > 0 && nodes[0] == 0;
    g->config_hash[i] = id;
    atomic_store_explicit(&g->n_states, id + 1, memory_order_release);
    return id;
}

/* The closure's result as a state: -1 when no parse is left. */
static int finish_state(okv_grammar *g, uint32_t partial)
{
    if (g->limit)
        return LIMIT;
    if (g->out_empty)
        out_add(g, 0);
    if (g->limit)
        return LIMIT;
    if (g->n_out == 0)
        return -1;
    qsort(g->out, (size_t)g->n_out, sizeof *g->out, cmp_i32);
    return intern(g, partial, g->out, g->n_out);
}

/* The state after byte c from state s (under the lock): -1 or LIMIT. */
static int step(okv_grammar *g, int s, uint8_t c)
{
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000}, max_cp[5] = {0, 0x7f, 0x7ff, 0xffff, 0x10ffff};
    const struct config cf = g->configs[s];
    uint32_t bits, left, len;
    if (cf.partial == 0) {
        if (c < 0x80)
            bits = c, left = 0, len = 1;
        else if (c >= 0xc0 && c < 0xe0)
            bits = c & 0x1f, left = 1, len = 2;
        else if (c >= 0xe0 && c < 0xf0)
            bits = c & 0x0f, left = 2, len = 3;
        else if (c >= 0xf0 && c < 0xf8)
            bits = c & 0x07, left = 3, len = 4;
        else
            return -1;   /* a continuation byte, or 0xf8 and up: never in UTF-8 */
    } else {
        if ((c & 0xc0) != 0x80)
            return -1;
        bits = (cf.partial & 0x1fffff) << 6 | (c & 0x3f);
        left = (cf.partial >> 21 & 3) - 1;
        len = cf.partial >> 23;
    }
    uint32_t lo = bits << (6 * left), hi = lo | ((1u << (6 * left)) - 1);
    lo = lo > min_cp[len] ? lo : min_cp[len];
    hi = hi < max_cp[len] ? hi : max_cp[len];
    if (lo > hi)
        return -1;   /* an overlong form or past U+10FFFF (a surrogate meets no set: they hold none) */
    begin(g);
    for (int32_t k = 0; k < cf.n; k++) {
        const int32_t id = g->pool[cf.off + k];
        if (id == 0)
            continue;
        const struct node nd = g->nodes[id];
        if (!set_meets(&g->r, g->r.elems[nd.pos].v, lo, hi))
            continue;
        if (left > 0)
            out_add(g, id);   /* a parse that this character may still fit */
        else
            push_item(g, nd.pos + 1, nd.parent);
    }
    if (left > 0)
        return finish_state(g, bits | left << 21 | len << 23);
    run_closure(g);
    return finish_state(g, 0);
}

/* ---- the API ---- */

enum okv_status okv_grammar_compile(const char *text, size_t len, const char *root_rule, okv_grammar **out)
{
    if (!out)
        return okv_set_error(OKV_ERR_INVALID_ARG, "grammar: no output pointer");
    *out = NULL;
    okv_grammar *g = okv_calloc(1, sizeof *g, OKV_TAG_SERVER);
    if (!g)
        return okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory");
    if (pthread_mutex_init(&g->lock, NULL)) {
        okv_free(g);
        return okv_set_error(OKV_ERR_NO_MEMORY, "grammar: cannot make a mutex");
    }
    for (int i = 0; i < N_CHUNKS; i++)
        atomic_init(&g->chunks[i], NULL);
    atomic_init(&g->n_states, 0);
    atomic_init(&g->overflowed, false);
    enum okv_status st;
    if (text && gram_is_lark(text, len)) {   /* Lark's syntax: read into GBNF whose rules keep their lines */
        char *gbnf = NULL;
        if ((st = gram_lark_to_gbnf(text, len, &gbnf)) != OKV_OK)
            goto fail;
        int lines = 1;   /* the GBNF keeps each rule on its Lark line: errors name those */
        for (size_t i = 0; i < len; i++)
            lines += text[i] == '\n';
        st = gram_parse(gbnf, strlen(gbnf), "lark-top", lines, &g->r);
        okv_free(gbnf);
        if (st != OKV_OK)
            goto fail;
    } else if ((st = gram_parse(text, len, root_rule, 0, &g->r)) != OKV_OK) {
        goto fail;
    }
    g->node_hash_cap = g->config_hash_cap = g->seen_cap = 1024;
    g->node_hash = new_table(g, g->node_hash_cap);
    g->config_hash = new_table(g, g->config_hash_cap);
    g->seen = okv_malloc(sizeof *g->seen * g->seen_cap, OKV_TAG_SERVER);
    g->seen_gen = okv_calloc(g->seen_cap, sizeof *g->seen_gen, OKV_TAG_SERVER);
    if (!g->node_hash || !g->config_hash || !g->seen || !g->seen_gen ||
        !reserve32(g, &g->nodes, &g->cap_nodes, 1, sizeof *g->nodes)) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory");
        goto fail;
    }
    g->nodes[0] = (struct node){-1, -1, 0};   /* the empty stack */
    g->n_nodes = 1;
    begin(g);
    const int32_t root = g->r.root;
    for (int32_t a = g->r.alt_off[root]; a < g->r.alt_off[root + 1]; a++)
        push_item(g, g->r.alt_pos[a], 0);
    run_closure(g);
    if (finish_state(g, 0) != 0) {   /* the root derives a finite text, so its start has a parse */
        st = g->no_memory ? okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory")
                          : okv_set_error(OKV_ERR_INVALID_ARG, "grammar: the start rule opens more than %d rules within "
                                          "rules, or has more than %d parses, before its first character",
                                          OKV_GRAMMAR_MAX_DEPTH, OKV_GRAMMAR_MAX_STACKS);
        goto fail;
    }
    *out = g;
    return OKV_OK;
fail:
    okv_grammar_free(g);
    return st;
}

void okv_grammar_free(okv_grammar *g)
{
    if (!g)
        return;
    for (int i = 0; i < N_CHUNKS; i++)
        okv_free(atomic_load_explicit(&g->chunks[i], memory_order_relaxed));
    pthread_mutex_destroy(&g->lock);
    gram_rules_free(&g->r);
    okv_free(g->configs);
    okv_free(g->pool);
    okv_free(g->config_hash);
    okv_free(g->nodes);
    okv_free(g->node_hash);
    okv_free(g->seen);
    okv_free(g->seen_gen);
    okv_free(g->work);
    okv_free(g->out);
    okv_free(g);
}

int okv_grammar_start(okv_grammar *g)
{
    (void)g;
    return 0;   /* made by okv_grammar_compile, first */
}

/* The slow path of okv_grammar_next: compute the entry under the lock. Kept out of line, so
 * that the fast path saves no registers. */
__attribute__((noinline)) static int next_slow(okv_grammar *g, _Atomic uint16_t *entry, int s, uint8_t c)
{
    pthread_mutex_lock(&g->lock);
    uint16_t v = atomic_load_explicit(entry, memory_order_relaxed);
    if (v == 0) {   /* not filled by another thread meanwhile */
        if (s >= atomic_load_explicit(&g->n_states, memory_order_relaxed)) {
            pthread_mutex_unlock(&g->lock);
            return -1;   /* a number not given out yet */
        }
        const int t = step(g, s, c);
        if (t == LIMIT)
            atomic_store_explicit(&g->overflowed, true, memory_order_relaxed);
        v = t >= 0 ? (uint16_t)(t + 1) : DEAD;
        atomic_store_explicit(entry, v, memory_order_release);
    }
    pthread_mutex_unlock(&g->lock);
    return v == DEAD ? -1 : v - 1;
}

int okv_grammar_next(okv_grammar *g, int s, uint8_t c)
{
    if ((unsigned)s >= OKV_GRAMMAR_MAX_STATES)
        return -1;
    struct chunk *chunk = atomic_load_explicit(&g->chunks[s >> CHUNK_BITS], memory_order_acquire);
    if (!chunk)
        return -1;
    _Atomic uint16_t *entry = &chunk->next[s & (CHUNK - 1)][c];
    const uint16_t v = atomic_load_explicit(entry, memory_order_acquire);
    if (v)
        return v == DEAD ? -1 : v - 1;
    return next_slow(g, entry, s, c);
}

bool okv_grammar_accepting(const okv_grammar *g, int s)
{
    okv_grammar *m = (okv_grammar *)g;   /* atomic loads take a non-const pointer in C11 */
    if (s < 0 || s >= atomic_load_explicit(&m->n_states, memory_order_acquire))
        return false;
    const struct chunk *chunk = atomic_load_explicit(&m->chunks[s >> CHUNK_BITS], memory_order_acquire);
    return chunk->accepting[s & (CHUNK - 1)];
}

int okv_grammar_min_to_accept(okv_grammar *g, int s)
{
    pthread_mutex_lock(&g->lock);
    int64_t best = -1;
    if (s >= 0 && s < atomic_load_explicit(&g->n_states, memory_order_relaxed)) {
        /* the cheapest stack: what is left of the character being read and of its alternative,
         * then of each alternative below it */
        const struct config cf = g->configs[s];
        const int32_t left = (int32_t)(cf.partial >> 21 & 3);
        best = GRAM_INF_LEN;
        for (int32_t k = 0; k < cf.n; k++) {
            const int32_t id = g->pool[cf.off + k];
            int64_t cost = 0;
            if (id > 0) {
                const struct node *top = &g->nodes[id];
                cost = left ? left + g->r.pos_min[top->pos + 1] : g->r.pos_min[top->pos];
                for (int32_t p = top->parent; p > 0; p = g->nodes[p].parent)
                    cost += g->r.pos_min[g->nodes[p].pos];
            }
            best = cost < best ? cost : best;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return (int)best;
}

int okv_grammar_n_states(const okv_grammar *g)
{
    return atomic_load_explicit(&((okv_grammar *)g)->n_states, memory_order_acquire);
}

bool okv_grammar_overflowed(const okv_grammar *g)
{
    return atomic_load_explicit(&((okv_grammar *)g)->overflowed, memory_order_relaxed);
}
