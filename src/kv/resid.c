/* Residency bookkeeping of the sparse region (see resid.h). */
#include "kv/resid.h"
#include "kv/select_rules.h"

#include <stdlib.h>
#include <string.h>

struct rlayer {
    int32_t *unit_key;    /* [quota] block*n_kv + head held, -1 free */
    uint32_t *stamp;      /* [quota] last step the unit was selected */
    int32_t *map;         /* [n_kv][bcap] unit index of (head, block), -1: head-major, so that
                             one head's lookups in block order walk memory forwards */
    int bcap;             /* blocks per head row of map */
    int32_t *sel;         /* [quota] current selection [n_kv][k] */
    int32_t *sel_unit;    /* [quota] the unit holding each entry of sel (-1 for none) */
    int k;                /* entries per head in sel */
};

struct rseq {
    int chunk;            /* -1: not attached */
    struct rlayer *layers;
};

struct okv_resid {
    struct okv_resid_params p;
    int32_t *quota;
    uint8_t *chunk_used;
    struct rseq *seqs;
    int n_seqs_cap;
    int32_t *order;       /* scratch [max quota] */
    int32_t *miss_pos;    /* scratch [max quota]: where each missing block stands in sel */
    int max_quota;
};

enum okv_status okv_resid_create(const struct okv_resid_params *p, okv_resid **out)
{
    *out = NULL;
    okv_resid *r = okv_calloc(1, sizeof *r, OKV_TAG_KV);
    if (!r)
        return okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
    r->p = *p;
    r->quota = okv_malloc(sizeof(int32_t) * (size_t)p->n_layers, OKV_TAG_KV);
    r->chunk_used = okv_calloc((size_t)(p->max_seqs > 0 ? p->max_seqs : 1), 1, OKV_TAG_KV);
    if (!r->quota || !r->chunk_used) {
        okv_resid_free(r);
        return okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
    }
    for (int l = 0; l < p->n_layers; l++) {
        r->quota[l] = p->quota[l];
        if (r->quota[l] > r->max_quota)
            r->max_quota = r->quota[l];
    }
    r->p.quota = r->quota;
    r->order = okv_malloc(sizeof(int32_t) * (size_t)(r->max_quota + 1), OKV_TAG_KV);
    r->miss_pos = okv_malloc(sizeof(int32_t) * (size_t)(r->max_quota + 1), OKV_TAG_KV);
    if (!r->order || !r->miss_pos) {
        okv_resid_free(r);
        return okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
    }
    *out = r;
    return OKV_OK;
}

static void free_seq_layers(okv_resid *r, struct rseq *s)
{
    if (!s->layers)
        return;
    for (int l = 0; l < r->p.n_layers; l++) {
        okv_free(s->layers[l].unit_key);
        okv_free(s->layers[l].stamp);
        okv_free(s->layers[l].map);
        okv_free(s->layers[l].sel);
        okv_free(s->layers[l].sel_unit);
    }
    okv_free(s->layers);
    s->layers = NULL;
}

void okv_resid_free(okv_resid *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_seqs_cap; i++)
        free_seq_layers(r, &r->seqs[i]);
    okv_free(r->seqs);
    okv_free(r->quota);
    okv_free(r->chunk_used);
    okv_free(r->order);
    okv_free(r->miss_pos);
    okv_free(r);
}

bool okv_resid_attached(const okv_resid *r, int seq)
{
    return seq >= 0 && seq < r->n_seqs_cap && r->seqs[seq].chunk >= 0;
}

int okv_resid_free_chunks(const okv_resid *r)
{
    int n = 0;
    for (int i = 0; i < r->p.max_seqs; i++)
        n += !r->chunk_used[i];
    return n;
}

int okv_resid_k(const okv_resid *r, int layer) { return r->quota[layer] / r->p.n_kv_heads; }

bool okv_resid_chunk_free(const okv_resid *r, int chunk)
{
    return chunk >= 0 && chunk < r->p.max_seqs && !r->chunk_used[chunk];
}

enum okv_status okv_resid_attach(okv_resid *r, int seq) { return okv_resid_attach_chunk(r, seq, -1); }

enum okv_status okv_resid_attach_chunk(okv_resid *r, int seq, int want)
{
    if (seq < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "residency: bad sequence %d", seq);
    if (seq >= r->n_seqs_cap) {
        int cap = r->n_seqs_cap ? r->n_seqs_cap : 8;
        while (cap <= seq)
            cap *= 2;
        struct rseq *s = okv_realloc(r->seqs, sizeof *s * (size_t)cap, OKV_TAG_KV);
        if (!s)
            return okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
        for (int i = r->n_seqs_cap; i < cap; i++) {
            s[i].chunk = -1;
            s[i].layers = NULL;
        }
        r->seqs = s;
        r->n_seqs_cap = cap;
    }
    struct rseq *s = &r->seqs[seq];
    if (s->chunk >= 0)
        return OKV_OK;
    int chunk = -1;
    if (want >= 0) {
        if (!okv_resid_chunk_free(r, want))
            return okv_set_error(OKV_ERR_INVALID_ARG, "residency: quota chunk %d is not free", want);
        chunk = want;
    }
    for (int i = 0; i < r->p.max_seqs && chunk < 0; i++)
        if (!r->chunk_used[i])
            chunk = i;
    if (chunk < 0)
        return okv_set_error(OKV_ERR_NO_KV_SPACE, "residency: all %d sparse quotas are in use", r->p.max_seqs);
    s->layers = okv_calloc((size_t)r->p.n_layers, sizeof *s->layers, OKV_TAG_KV);
    if (!s->layers)
        return okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
    for (int l = 0; l < r->p.n_layers; l++) {
        struct rlayer *L = &s->layers[l];
        size_t q = (size_t)(r->quota[l] > 0 ? r->quota[l] : 1);
        L->unit_key = okv_malloc(sizeof(int32_t) * q, OKV_TAG_KV);
        L->stamp = okv_calloc(q, sizeof(uint32_t), OKV_TAG_KV);
        L->sel = okv_malloc(sizeof(int32_t) * q, OKV_TAG_KV);
        L->sel_unit = okv_malloc(sizeof(int32_t) * q, OKV_TAG_KV);
        if (!L->unit_key || !L->stamp || !L->sel || !L->sel_unit) {
            free_seq_layers(r, s);
            return okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
        }
        for (size_t i = 0; i < q; i++)
            L->unit_key[i] = -1;
    }
    r->chunk_used[chunk] = 1;
    s->chunk = chunk;
    return OKV_OK;
}

void okv_resid_detach(okv_resid *r, int seq)
{
    if (!okv_resid_attached(r, seq))
        return;
    struct rseq *s = &r->seqs[seq];
    r->chunk_used[s->chunk] = 0;
    s->chunk = -1;
    free_seq_layers(r, s);
}

void okv_resid_clear(okv_resid *r, int seq)
{
    if (!okv_resid_attached(r, seq))
        return;
    struct rseq *s = &r->seqs[seq];
    for (int l = 0; l < r->p.n_layers; l++) {
        struct rlayer *L = &s->layers[l];
        for (int i = 0; i < r->quota[l]; i++) {
            L->unit_key[i] = -1;
            L->stamp[i] = 0;
        }
        for (int i = 0; i < L->bcap * r->p.n_kv_heads; i++)
            L->map[i] = -1;
        L->k = 0;
    }
}

static int32_t unit_of(const okv_resid *r, const struct rseq *s, int layer, int idx)
{
    return r->p.base_unit + s->chunk * r->quota[layer] + idx;
}

/* Room in the map for blocks [0, block]: rows regrown head by head. */
static bool ensure_map(struct rlayer *L, int nkv, int block)
{
    if (block < L->bcap)
        return true;
    int cap = L->bcap ? L->bcap : 64;
    while (cap <= block)
        cap *= 2;
    int32_t *m = okv_malloc(sizeof(int32_t) * (size_t)cap * (size_t)nkv, OKV_TAG_KV);
    if (!m)
        return false;
    for (int h = 0; h < nkv; h++) {
        for (int b = 0; b < cap; b++)
            m[h * cap + b] = b < L->bcap ? L->map[h * L->bcap + b] : -1;
    }
    okv_free(L->map);
    L->map = m;
    L->bcap = cap;
    return true;
}

int okv_resid_apply(okv_resid *r, int seq, int layer, const int32_t *sel, int k, uint32_t stamp,
                    int32_t *fetch_block, int32_t *fetch_head, int32_t *fetch_unit)
{
    OKV_ASSERT(okv_resid_attached(r, seq));
    struct rseq *s = &r->seqs[seq];
    struct rlayer *L = &s->layers[layer];
    const int nkv = r->p.n_kv_heads, q = r->quota[layer];
    OKV_ASSERT(k * nkv <= q && stamp > 0);
    /* 1: keep what is resident, stamping it; collect what is missing */
    int max_b = -1;
    for (int i = 0; i < k * nkv; i++)
        max_b = sel[i] > max_b ? sel[i] : max_b;
    if (max_b >= 0 && !ensure_map(L, nkv, max_b)) {
        okv_set_error(OKV_ERR_NO_MEMORY, "residency: out of memory");
        k = 0;   /* nothing is selected */
    }
    int n_missing = 0;
    const int32_t ubase = unit_of(r, s, layer, 0);
    int32_t *sel_unit = L->sel_unit;
    uint32_t *st = L->stamp;
    /* the map lookups miss the cache (a sequence's map is visited once a layer and step):
     * prefetch them a few dozen entries ahead so that many misses overlap */
    enum { AHEAD = 32 };
    const int n_sel = k * nkv;
    for (int i = 0; i < AHEAD && i < n_sel; i++)
        if (sel[i] >= 0)
            __builtin_prefetch(L->map + (size_t)(i / k) * L->bcap + sel[i]);
    for (int h = 0; h < nkv; h++) {
        const int32_t *row = L->map + (size_t)h * L->bcap;
        for (int i = 0; i < k; i++) {
            const int ia = h * k + i + AHEAD;
            if (ia < n_sel && sel[ia] >= 0)
                __builtin_prefetch(L->map + (size_t)(ia / k) * L->bcap + sel[ia]);
            int b = sel[h * k + i];
            sel_unit[h * k + i] = -1;
            if (b < 0)
                continue;
            int32_t u = row[b];
            if (u >= 0) {
                st[u] = stamp;
                sel_unit[h * k + i] = ubase + u;
            } else {
                fetch_block[n_missing] = b;
                fetch_head[n_missing] = h;
                r->miss_pos[n_missing] = h * k + i;
                n_missing++;
            }
        }
    }
    /* 2: each head owns the units u with u % nkv == head (so that a tensor-parallel
     * backend finds a head's units on the rank that holds the head); its missing
     * blocks replace its units not stamped now, least recently used first (all of
     * them when the head needs every one: no order to find) */
    int done = 0;
    for (int h = 0; h < nkv; h++) {
        int want = 0;
        for (int i = done; i < n_missing && fetch_head[i] == h; i++)
            want++;
        if (!want)
            continue;
        int n_vict = 0, m = 0;
        for (int u = h; u < q; u += nkv) {
            if (L->stamp[u] == stamp)
                continue;
            n_vict++;
            /* keep the want oldest, by (stamp, unit), in r->order[0 .. m) */
            uint32_t su = L->stamp[u];
            if (m == want && su >= L->stamp[r->order[m - 1]])
                continue;
            int at = m < want ? m++ : m - 1;
            while (at > 0 && L->stamp[r->order[at - 1]] > su) {
                r->order[at] = r->order[at - 1];
                at--;
            }
            r->order[at] = u;
        }
        OKV_ASSERT(want <= n_vict && m == want);
        for (int i = done; i < done + want; i++) {
            int u = r->order[i - done];
            if (L->unit_key[u] >= 0)   /* key = block * nkv + head */
                L->map[(L->unit_key[u] % nkv) * L->bcap + L->unit_key[u] / nkv] = -1;
            L->unit_key[u] = fetch_block[i] * nkv + fetch_head[i];
            L->map[fetch_head[i] * L->bcap + fetch_block[i]] = u;
            L->stamp[u] = stamp;
            fetch_unit[i] = unit_of(r, s, layer, u);
            L->sel_unit[r->miss_pos[i]] = fetch_unit[i];
        }
        done += want;
    }
    OKV_ASSERT(done == n_missing);
    memcpy(L->sel, sel, sizeof(int32_t) * (size_t)(k * nkv));
    L->k = k;
    return n_missing;
}

const int32_t *okv_resid_selection_units(const okv_resid *r, int seq, int layer)
{
    return okv_resid_attached(r, seq) ? r->seqs[seq].layers[layer].sel_unit : NULL;
}

const int32_t *okv_resid_selection(const okv_resid *r, int seq, int layer, int *k)
{
    if (!okv_resid_attached(r, seq)) {
        *k = 0;
        return NULL;
    }
    const struct rlayer *L = &r->seqs[seq].layers[layer];
    *k = L->k;
    return L->sel;
}

bool okv_resid_holds(const okv_resid *r, int seq, int layer, int head, int block)
{
    if (!okv_resid_attached(r, seq) || layer < 0 || layer >= r->p.n_layers || head < 0 || head >= r->p.n_kv_heads ||
        block < 0)
        return false;
    const struct rlayer *L = &r->seqs[seq].layers[layer];
    return L->map && block < L->bcap && L->map[head * L->bcap + block] >= 0;
}

void okv_resid_sticky_cut(const okv_resid *r, int seq, int layer, int head, const int32_t *ids, int K, int k,
                          uint8_t *held, int32_t *out)
{
    for (int x = 0; x < K; x++)
        held[x] = okv_resid_holds(r, seq, layer, head, ids[x]);
    okv_sel_sticky(ids, K, k, held, out);
}

int okv_resid_chunk(const okv_resid *r, int seq) { return okv_resid_attached(r, seq) ? r->seqs[seq].chunk : -1; }

void okv_resid_set_k(okv_resid *r, int seq, int layer, int k)
{
    OKV_ASSERT(okv_resid_attached(r, seq) && k * r->p.n_kv_heads <= r->quota[layer]);
    r->seqs[seq].layers[layer].k = k;
}
