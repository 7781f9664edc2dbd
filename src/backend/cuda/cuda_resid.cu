/* Device-side residency of the sparse region (backend.h: okv_resid_geometry).
 *
 * The state of src/kv/resid.c, in HBM, for every quota chunk (one sparse sequence) and
 * layer: map [nkv][max_blocks] (int16: the unit index within the chunk's quota holding
 * (head, block), -1), key [quota] (the block a unit holds, -1), stamp [quota] (LRU),
 * sel / selu [nkv][k] (the installed selection in block order and its absolute units).
 *
 * select_install queues on the compute stream, behind the layer's attention:
 *   the scoring and top-k of cuda_select.cu (ids kept in HBM; a second pass for the
 *   real token alone when lookahead merges), then resid_install_k, one CTA per
 *   (sequence, KV head): merge, successors, residency lookup, the least recently
 *   used free units for the missing blocks (a bitonic sort of (stamp, unit)), the
 *   map update, the gather list, and the selection sorted into block order;
 * and on the copy stream the gather of the listed units (cuda_kv.cu), which reads the
 * list's length on the device. The host learns only the number of units gathered,
 * once a step (resid_take_stats). The attention of the next step reads the selection
 * through okv_cuda_resid_fill, which replaces the placeholders of its block lists.
 * Policy and order are those of okv_resid_apply, so units are assigned identically
 * (tests/test_cuda_resid.c checks it against resid.c). */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_sort.cuh"
#include "kv/select_rules.h"

#include <string.h>

#define RS_THREADS 256
#define RS_MAX_K 4096        /* selection per head and quota per head held in shared memory */

struct cuda_resid {
    int n_layers, nkv, max_seqs, max_blocks, base_unit;
    int32_t *quota;          /* [n_layers] (host) */
    size_t *qoff;            /* [n_layers] offset of the layer's [max_seqs][quota] arrays */
    size_t q_total;          /* sum over layers of max_seqs * quota */
    int max_quota;
    int16_t *map;            /* [n_layers][max_seqs][nkv][max_blocks] */
    int32_t *key, *sel, *selu, *f_src, *f_dst;   /* [q_total] each */
    uint32_t *stamp;         /* [q_total] */
    int32_t *h2l;            /* [n_host_blocks] logical block of a host block (rewritten by each call) */
    int32_t *ids, *ids_own;  /* top-k results: [ids_cap], [max_seqs * max_quota] */
    size_t ids_cap;          /* entries of ids (twice max_seqs * max_quota at first; a rank merge's rows grow it) */
    /* a call's selections when some items merge by rank: one per row of those (host) */
    struct okv_select_req *x_reqs;
    int32_t *x_tab;          /* their candidates' place in d_ctab */
    int x_cap;
    int *f_count;            /* [n_layers][2] entries of each layer's gather list, and the gather's CTAs done
                              * with reading it (the last resets both: cuda_kv.cu kv_gather_k) */
    unsigned long long *stat;   /* units listed for gathering, since the last take */
    /* the item table of a call (host): it travels to the device in the upload of the
     * call's select requests (okv_cuda_select_to_device's extra), in the staging ring */
    struct rs_item *h_items;   /* [max_seqs] */
    /* the attention lists' selection placeholders (okv_cuda_resid_fill): on the device, and
     * what was uploaded last (the same for every layer of a step, and most steps alike) */
    int32_t *d_fill, *h_fill;
    size_t fill_hcap, fill_dcap;   /* int32 entries of h_fill, d_fill */
    size_t fill_n;             /* entries uploaded last; 0: none */
    /* the side stream (cuda_select_install): the queries copied aside, the per-layer and
     * last installs' events (a wait on one never recorded passes at once), the compute
     * position the side starts from */
    float *q_snap;
    size_t q_snap_cap;
    cudaEvent_t *side_ev, side_last, side_att;
    size_t smem_set;
    size_t bytes;
    uint32_t *seen;          /* [max_seqs] (host): chunk already in this call when == seen_gen */
    uint32_t seen_gen;
    /* the candidates of each chunk (its sequence's host block ids by logical block) in
     * HBM, so that a call uploads only what changed: d_ctab [max_seqs][max_blocks], its
     * host mirror h_ctab (what d_ctab holds once the queued patches ran), and per chunk
     * the step, list and length last compared (v_gen, v_src, v_end) */
    int32_t *d_ctab, *h_ctab;
    unsigned long long *v_gen;
    const int32_t **v_src;
    int *v_end;
    int *hw;                 /* [max_seqs] (host): d_ctab holds checked ids below this block */
    int *patch;              /* [max_seqs][2] (host): item, first changed candidate */
    int32_t *tab_off;        /* [max_seqs] (host): an item's candidates in d_ctab */
};

struct rs_item {
    int chunk, sink, n_cand, k, k_own, cand_off, ids_off, own_off;
    unsigned stamp;
    int keep;                /* > 0: the sticky cut of the k selected to keep (okv_resid_item.keep) */
    int rank_rows;           /* > 0: merged by rank from this many rows' lists, [rows][nkv][k] at ids_off */
};
static_assert(sizeof(struct rs_item) == 11 * 4, "an item table entry is 11 int32 (rs_item)");

/* exclusive prefix sum of v over the block (RS_THREADS threads); *total gets the sum */
static __device__ int block_scan(int v, int *total)
{
    __shared__ int warp_sum[RS_THREADS / 32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x += t;
    }
    if (lane == 31)
        warp_sum[w] = x;
    __syncthreads();
    if (w == 0) {
        int y = lane < RS_THREADS / 32 ? warp_sum[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int t = __shfl_up_sync(0xffffffffu, y, o);
            if (lane >= o)
                y += t;
        }
        if (lane < RS_THREADS / 32)
            warp_sum[lane] = y;
    }
    __syncthreads();
    const int excl = x - v + (w ? warp_sum[w - 1] : 0);
    *total = warp_sum[RS_THREADS / 32 - 1];
    __syncthreads();
    return excl;
}


/* stream compaction of one round: the threads with take set append b to out[*at ...], in
 * thread order, up to cap entries; *at advances by all the takers (uniform over the block) */
static __device__ void append_taken(int take, int b, int32_t *out, int cap, int *at)
{
    int total;
    const int ex = block_scan(take, &total);
    if (take && *at + ex < cap)
        out[*at + ex] = b;
    *at += total;
}

struct rs_layer {
    int16_t *map;
    int32_t *key, *sel, *selu, *f_src, *f_dst;
    uint32_t *stamp;
    int *f_count;
    int quota, nkv, max_blocks, base_unit;
};

static __global__ void __launch_bounds__(RS_THREADS)
resid_install_k(const struct rs_item *items, const int32_t *cand_all, const int32_t *ids, const int32_t *ids_own,
                int succ, struct rs_layer L, int32_t *h2l, unsigned long long *stat, int kcap, int pcap)
{
    extern __shared__ unsigned long long rs_sm[];
    unsigned long long *keys = rs_sm;                     /* [pcap] */
    int32_t *s_ids = (int32_t *)(keys + pcap);           /* [kcap] */
    int32_t *s_own = s_ids + kcap, *s_unit = s_own + kcap, *s_miss = s_unit + kcap;
    __shared__ int s_flag, s_fbase;
    const struct rs_item it = items[blockIdx.x / L.nkv];
    const int h = blockIdx.x % L.nkv, tid = threadIdx.x, K = it.k, nkv = L.nkv;
    const int k = it.keep > 0 && it.keep < K ? it.keep : K;   /* installed per head (K selected) */
    if (k <= 0)
        return;
    const size_t cq = (size_t)it.chunk * L.quota;
    int16_t *mp = L.map + ((size_t)it.chunk * nkv + h) * L.max_blocks;
    const int32_t *cand = cand_all + it.cand_off;
    /* 0: logical block of each candidate (a host block belongs to one sequence, or to several
     * at the same logical block when they share a cached prefix: every CTA writing an entry
     * writes the same value) */
    for (int c = tid; c < it.n_cand; c += RS_THREADS)
        h2l[cand[c]] = it.sink + c;
    __syncthreads();
    /* 1: the selection, best first; lookahead: the real token's blocks, then the rest */
    const int32_t *ia = ids + it.ids_off + (size_t)h * K;
    if (it.rank_rows > 0) {
        /* the rank merge (okv_sel_merge_rank): the rows' candidates in their order, each
         * taken when no earlier one holds its block (okv_sel_rank_first), until k */
        const int R = it.rank_rows, n = R * K;
        const size_t stride = (size_t)nkv * K;
        int at = 0;
        for (int base = 0; base < n && at < k; base += RS_THREADS) {
            const int idx = base + tid;
            int take = 0, b = -1;
            if (idx < n && okv_sel_rank_first(ia, R, stride, idx / R, idx % R)) {
                take = 1;
                b = h2l[ia[(size_t)(idx % R) * stride + idx / R]];
            }
            append_taken(take, b, s_ids, k, &at);
        }
        __syncthreads();
    } else if ((!ids_own || it.k_own <= 0) && k < K) {
        /* the sticky cut (okv_sel_sticky): the best 2k - K stay; the other places go to
         * the next ones in order, blocks this head holds first (K <= 2k: enough of them) */
        const int core = 2 * k - K > 0 ? 2 * k - K : 0;
        for (int i = tid; i < core; i += RS_THREADS)
            s_ids[i] = h2l[ia[i]];
        int at = core;
        for (int pass = 0; pass < 2; pass++)
            for (int base = core; base < K; base += RS_THREADS) {
                const int x = base + tid;
                int take = 0, b = -1;
                if (x < K) {
                    b = h2l[ia[x]];
                    take = (mp[b] >= 0) == (pass == 0);
                }
                append_taken(take, b, s_ids, k, &at);
            }
        __syncthreads();
    } else if (!ids_own || it.k_own <= 0) {
        for (int i = tid; i < k; i += RS_THREADS)
            s_ids[i] = h2l[ia[i]];
        __syncthreads();
    } else {
        const int k1 = it.k_own;
        const int32_t *io = ids_own + it.own_off + (size_t)h * k1;
        for (int j = tid; j < k1; j += RS_THREADS)
            s_ids[j] = s_own[j] = h2l[io[j]];
        __syncthreads();
        int at = k1;
        for (int base = 0; base < k && at < k; base += RS_THREADS) {
            const int i = base + tid;
            int keep = 0, b = -1;
            if (i < k) {
                b = h2l[ia[i]];
                keep = 1;
                for (int j = 0; j < k1 && keep; j++)
                    keep = s_own[j] != b;
            }
            append_taken(keep, b, s_ids, k, &at);
        }
        __syncthreads();
    }
    /* 2: successors of the best blocks replace the lowest-ranked entries */
    if (succ > 0) {
        const int top = succ < k / 2 ? succ : k / 2, end = it.sink + it.n_cand;
        int last = k - 1;
        for (int r = 0; r < top && last >= top; r++) {
            const int b = s_ids[r], nxt = b + 1;
            if (b < 0 || nxt >= end)
                continue;
            if (tid == 0)
                s_flag = 0;
            __syncthreads();
            for (int x = tid; x < k; x += RS_THREADS)
                if (s_ids[x] == nxt)
                    s_flag = 1;
            __syncthreads();
            const bool have = s_flag;
            __syncthreads();
            if (!have) {
                if (tid == 0)
                    s_ids[last] = nxt;
                last--;
                __syncthreads();
            }
        }
    }
    /* 3: keep what is resident (stamped now), list what is missing, in selection order */
    int32_t *key = L.key + cq;
    uint32_t *stamp = L.stamp + cq;
    int n_miss = 0;
    for (int base = 0; base < k; base += RS_THREADS) {
        const int i = base + tid;
        int miss = 0;
        if (i < k) {
            const int u = mp[s_ids[i]];
            if (u >= 0) {
                stamp[u] = it.stamp;
                s_unit[i] = u;
            } else {
                miss = 1;
            }
        }
        int total;
        const int ex = block_scan(miss, &total);
        if (miss)
            s_miss[n_miss + ex] = i;
        n_miss += total;
    }
    /* 4: the head's units not stamped now, least recently used first ((stamp, unit)
     * ascending), go to the missing blocks */
    if (n_miss > 0) {
        const int qh = L.quota / nkv;
        int np = 1;
        while (np < qh)
            np <<= 1;
        for (int j = tid; j < np; j += RS_THREADS) {
            unsigned long long kk = ~0ull;
            if (j < qh) {
                const int u = h + j * nkv;
                const uint32_t su = stamp[u];
                if (su != it.stamp)
                    kk = ((unsigned long long)su << 32) | (unsigned)u;
            }
            keys[j] = kk;
        }
        if (tid == 0)
            s_fbase = atomicAdd(L.f_count + 0, n_miss);
        okv_bitonic_sort_u64(keys, np);
        for (int i = tid; i < n_miss; i += RS_THREADS) {
            const unsigned long long kk = keys[i];
            if (kk == ~0ull)   /* cannot happen: k <= quota / nkv */
                continue;
            const int u = (int)(kk & 0xffffffffu), pos = s_miss[i], b = s_ids[pos];
            const int old = key[u];
            if (old >= 0)
                mp[old] = -1;
            key[u] = b;
            mp[b] = (int16_t)u;
            stamp[u] = it.stamp;
            s_unit[pos] = u;
            L.f_src[s_fbase + i] = cand[b - it.sink] * nkv + h;
            L.f_dst[s_fbase + i] = L.base_unit + (int)cq + u;
        }
        if (tid == 0)
            atomicAdd(stat, (unsigned long long)n_miss);
    }
    __syncthreads();
    /* 5: the selection in block order, for the attention lists */
    int kp = 1;
    while (kp < k)
        kp <<= 1;
    for (int i = tid; i < kp; i += RS_THREADS)
        keys[i] = i < k ? ((unsigned long long)(unsigned)s_ids[i] << 32) | (unsigned)s_unit[i] : ~0ull;
    okv_bitonic_sort_u64(keys, kp);
    int32_t *sel = L.sel + cq + (size_t)h * k, *selu = L.selu + cq + (size_t)h * k;
    for (int i = tid; i < k; i += RS_THREADS) {
        sel[i] = (int32_t)(keys[i] >> 32);
        selu[i] = L.base_unit + (int)cq + (int)(keys[i] & 0xffffffffu);
    }
}

/* forget chunk's mappings in every layer */
static __global__ void resid_reset_k(int16_t *map, int32_t *key, uint32_t *stamp, const size_t *qoff_d, const int *quota_d,
                                     int chunk, int max_seqs, int nkv, int max_blocks)
{
    const int l = blockIdx.y;
    int16_t *m = map + (((size_t)l * max_seqs + chunk) * nkv) * max_blocks;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)nkv * max_blocks; i += (size_t)gridDim.x * blockDim.x)
        m[i] = -1;
    const size_t o = qoff_d[l] + (size_t)chunk * quota_d[l];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < quota_d[l]; i += gridDim.x * blockDim.x) {
        key[o + i] = -1;
        stamp[o + i] = 0;
    }
}

static __global__ void resid_fill_k(const int32_t *fill, int nkv, const int32_t *sel_l, const int32_t *selu_l, int quota,
                                    int32_t *unit, int32_t *index)
{
    const int li = blockIdx.x, pos = fill[3 * li], chunk = fill[3 * li + 1], k = fill[3 * li + 2], h = li % nkv;
    if (pos < 0)
        return;
    const size_t o = (size_t)chunk * quota + (size_t)h * k;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        unit[pos + i] = selu_l[o + i];
        index[pos + i] = sel_l[o + i];
    }
}

/* candidate table patches: [n][3] (table offset, count, offset in ids) then the ids */
static __global__ void ctab_patch_k(int32_t *tab, const int32_t *pat, int n)
{
    const int32_t *p = pat + 3 * blockIdx.x, *ids = pat + 3 * n + p[2];
    int32_t *dst = tab + p[0];
    for (int i = threadIdx.x; i < p[1]; i += blockDim.x)
        dst[i] = ids[i];
}

/* ---- host side ---- */

void okv_cuda_resid_free(okv_bkv *kv)
{
    struct cuda_resid *r = kv->resid;
    if (!r)
        return;
    void *dev[] = {r->map, r->key, r->sel, r->selu, r->f_src, r->f_dst, r->stamp, r->h2l, r->ids, r->ids_own, r->f_count,
                   r->stat, r->d_ctab, r->d_fill, r->q_snap};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    okv_free(r->h_items);
    okv_free(r->h_fill);
    for (int i = 0; r->side_ev && i < r->n_layers; i++)
        if (r->side_ev[i])
            cudaEventDestroy(r->side_ev[i]);
    okv_free(r->side_ev);
    if (r->side_last)
        cudaEventDestroy(r->side_last);
    if (r->side_att)
        cudaEventDestroy(r->side_att);
    okv_free(r->quota);
    okv_free(r->qoff);
    okv_free(r->seen);
    okv_free(r->h_ctab);
    okv_free(r->v_gen);
    okv_free(r->v_src);
    okv_free(r->v_end);
    okv_free(r->hw);
    okv_free(r->patch);
    okv_free(r->tab_off);
    okv_free(r->x_reqs);
    okv_free(r->x_tab);
    okv_free(r);
    kv->resid = NULL;
}

size_t okv_cuda_resid_bytes(const okv_bkv *kv) { return kv->resid ? kv->resid->bytes : 0; }

/* qoff and quota on the device, after the arrays of the state (reset kernel) */
#define R_QOFF_D(r) ((size_t *)((char *)(r)->stat + 64))
#define R_QUOTA_D(r) ((int *)((char *)(r)->stat + 64 + sizeof(size_t) * (size_t)(r)->n_layers))

static enum okv_status cuda_resid_init(okv_backend *be, okv_bkv *kv, const struct okv_resid_geometry *g)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    okv_cuda_resid_free(kv);
    const int L = kv->g.n_layers, nkv = kv->g.n_kv_heads;
    if (!kv->host || g->max_seqs <= 0 || g->max_blocks <= 0 || !g->quota)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda residency: no host tier or bad geometry");
    for (int l = 0; l < L; l++)
        if (g->quota[l] % nkv || g->quota[l] / nkv > RS_MAX_K || g->quota[l] > 32767)
            return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda residency: layer %d quota %d units (at most %d per KV head)", l,
                                 g->quota[l], RS_MAX_K);
    struct cuda_resid *r = (struct cuda_resid *)okv_calloc(1, sizeof *r, OKV_TAG_BACKEND);
    if (!r)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda residency: out of host memory");
    kv->resid = r;
    r->n_layers = L;
    r->nkv = nkv;
    r->max_seqs = g->max_seqs;
    r->max_blocks = g->max_blocks;
    r->base_unit = g->base_unit;
    r->quota = (int32_t *)okv_malloc(sizeof(int32_t) * (size_t)L, OKV_TAG_BACKEND);
    r->qoff = (size_t *)okv_malloc(sizeof(size_t) * (size_t)L, OKV_TAG_BACKEND);
    r->seen = (uint32_t *)okv_calloc((size_t)g->max_seqs, sizeof(uint32_t), OKV_TAG_BACKEND);
    const size_t ctab_n = (size_t)g->max_seqs * g->max_blocks;
    r->h_ctab = (int32_t *)okv_malloc(sizeof(int32_t) * ctab_n, OKV_TAG_BACKEND);
    r->v_gen = (unsigned long long *)okv_calloc((size_t)g->max_seqs, sizeof(unsigned long long), OKV_TAG_BACKEND);
    r->v_src = (const int32_t **)okv_calloc((size_t)g->max_seqs, sizeof(int32_t *), OKV_TAG_BACKEND);
    r->v_end = (int *)okv_calloc((size_t)g->max_seqs, sizeof(int), OKV_TAG_BACKEND);
    r->hw = (int *)okv_calloc((size_t)g->max_seqs, sizeof(int), OKV_TAG_BACKEND);
    r->patch = (int *)okv_malloc(sizeof(int) * 2 * (size_t)g->max_seqs, OKV_TAG_BACKEND);
    r->tab_off = (int32_t *)okv_malloc(sizeof(int32_t) * (size_t)g->max_seqs, OKV_TAG_BACKEND);
    if (!r->quota || !r->qoff || !r->seen || !r->h_ctab || !r->v_gen || !r->v_src || !r->v_end || !r->hw || !r->patch || !r->tab_off) {
        okv_cuda_resid_free(kv);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda residency: out of host memory");
    }
    for (int l = 0; l < L; l++) {
        r->quota[l] = g->quota[l];
        r->qoff[l] = r->q_total;
        r->q_total += (size_t)g->max_seqs * g->quota[l];
        if (g->quota[l] > r->max_quota)
            r->max_quota = g->quota[l];
        if ((size_t)g->base_unit + (size_t)g->max_seqs * g->quota[l] > kv->layer_units[l]) {
            okv_cuda_resid_free(kv);
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda residency: layer %d: the quotas exceed its units", l);
        }
    }
    memset(r->h_ctab, 0xff, sizeof(int32_t) * ctab_n);   /* -1: no host block id; every entry differs at first */
    const size_t map_n = (size_t)L * g->max_seqs * nkv * g->max_blocks, q = r->q_total ? r->q_total : 1;
    const size_t ids_n = (size_t)g->max_seqs * (r->max_quota ? r->max_quota : 1);
    struct { void **p; size_t bytes; } allocs[] = {
        {(void **)&r->map, map_n * sizeof(int16_t)},
        {(void **)&r->key, q * sizeof(int32_t)},
        {(void **)&r->sel, q * sizeof(int32_t)},
        {(void **)&r->selu, q * sizeof(int32_t)},
        {(void **)&r->f_src, q * sizeof(int32_t)},
        {(void **)&r->f_dst, q * sizeof(int32_t)},
        {(void **)&r->stamp, q * sizeof(uint32_t)},
        {(void **)&r->h2l, sizeof(int32_t) * (size_t)(kv->g.n_host_blocks ? kv->g.n_host_blocks : 1)},
        {(void **)&r->ids, 2 * ids_n * sizeof(int32_t)},   /* sticky selections select up to twice what they keep */
        {(void **)&r->ids_own, ids_n * sizeof(int32_t)},
        {(void **)&r->f_count, 2 * sizeof(int) * (size_t)L},
        {(void **)&r->stat, 64 + (sizeof(size_t) + sizeof(int)) * (size_t)L},
        {(void **)&r->d_ctab, sizeof(int32_t) * ctab_n},
    };
    for (size_t i = 0; i < sizeof allocs / sizeof allocs[0]; i++) {
        cudaError_t e = cudaMalloc(allocs[i].p, allocs[i].bytes);
        if (e != cudaSuccess) {
            *allocs[i].p = NULL;
            (void)cudaGetLastError();
            okv_cuda_resid_free(kv);
            return okv_set_error(OKV_ERR_NO_MEMORY, "cuda residency: cannot allocate %zu MiB of HBM: %s", allocs[i].bytes >> 20,
                                 cudaGetErrorString(e));
        }
        r->bytes += allocs[i].bytes;
    }
    r->ids_cap = 2 * ids_n;
    if (!(r->h_items = (struct rs_item *)okv_malloc(sizeof(struct rs_item) * (size_t)g->max_seqs, OKV_TAG_BACKEND))) {
        okv_cuda_resid_free(kv);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda residency: out of host memory (item table)");
    }
    if (c->side) {
        r->side_ev = (cudaEvent_t *)okv_calloc((size_t)L, sizeof(cudaEvent_t), OKV_TAG_BACKEND);
        cudaError_t se = r->side_ev ? cudaSuccess : cudaErrorMemoryAllocation;
        for (int i = 0; se == cudaSuccess && i < L; i++)
            se = cudaEventCreateWithFlags(&r->side_ev[i], cudaEventDisableTiming);
        if (se == cudaSuccess)
            se = cudaEventCreateWithFlags(&r->side_last, cudaEventDisableTiming);
        if (se == cudaSuccess)
            se = cudaEventCreateWithFlags(&r->side_att, cudaEventDisableTiming);
        if (se != cudaSuccess) {
            (void)cudaGetLastError();
            okv_cuda_resid_free(kv);
            return okv_cuda_err(se, "cuda residency: selection stream events", __FILE__, __LINE__);
        }
    }
    cudaError_t e = cudaMemsetAsync(r->map, 0xff, map_n * sizeof(int16_t), c->stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(r->key, 0xff, q * sizeof(int32_t), c->stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(r->stamp, 0, q * sizeof(uint32_t), c->stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(r->f_count, 0, 2 * sizeof(int) * (size_t)L, c->stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(r->stat, 0, 64, c->stream);
    int *quota_i = (int *)okv_malloc(sizeof(int) * (size_t)L, OKV_TAG_BACKEND);
    if (!quota_i) {
        okv_cuda_resid_free(kv);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda residency: out of host memory");
    }
    for (int l = 0; l < L; l++)
        quota_i[l] = r->quota[l];
    if (e == cudaSuccess)
        e = cudaMemcpy(R_QOFF_D(r), r->qoff, sizeof(size_t) * (size_t)L, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(R_QUOTA_D(r), quota_i, sizeof(int) * (size_t)L, cudaMemcpyHostToDevice);
    okv_free(quota_i);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        okv_cuda_resid_free(kv);
        return okv_cuda_err(e, "cuda residency: initialisation", __FILE__, __LINE__);
    }
    return OKV_OK;
}

static enum okv_status cuda_resid_reset(okv_backend *be, okv_bkv *kv, int chunk)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    struct cuda_resid *r = kv->resid;
    if (!r || chunk < 0 || chunk >= r->max_seqs)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda residency: no state or bad chunk %d", chunk);
    if (c->side)   /* an install of the chunk's old sequence may still run */
        OKV_CU(cudaStreamWaitEvent(c->stream, r->side_last, 0), "reset after the selection stream");
    dim3 grid(4, (unsigned)r->n_layers);
    resid_reset_k<<<grid, 256, 0, c->stream>>>(r->map, r->key, r->stamp, R_QOFF_D(r), R_QUOTA_D(r), chunk, r->max_seqs, r->nkv,
                                              r->max_blocks);
    OKV_LAUNCHED("residency reset kernel");
    return OKV_OK;
}

/* Bring the candidate table up to the items' lists (reqs[i].cand_host: the host blocks
 * [sink, sink + n_cand) of item i's sequence). A list compared in this step (same
 * pointer, same length) is taken as unchanged: host block ids do not change within a
 * step. Otherwise it is compared with the mirror and the changed tail (after a
 * sequence's first step: its new blocks, if any) is checked and queued as a patch. */
static enum okv_status ctab_sync(struct cuda_ctx *c, struct cuda_resid *r, const okv_bkv *kv,
                                 const struct okv_select_req *reqs, const struct okv_resid_item *items, int n_items)
{
    const unsigned long long gen = c->step.gen;
    int n_patch = 0;
    size_t n_ids = 0;
    for (int i = 0; i < n_items; i++) {
        const int chunk = items[i].chunk, end = items[i].sink + reqs[i].n_cand;
        const int32_t *src = reqs[i].cand_host - items[i].sink;   /* by logical block */
        if (gen && r->v_gen[chunk] == gen && r->v_src[chunk] == src && r->v_end[chunk] >= end)
            continue;
        const int32_t *m = r->h_ctab + (size_t)chunk * r->max_blocks;
        int first = items[i].sink;
        const bool same = !memcmp(m + first, src + first, sizeof(int32_t) * (size_t)(end - first));
        if (same && end <= r->hw[chunk]) {
            r->v_gen[chunk] = gen;
            r->v_src[chunk] = src;
            r->v_end[chunk] = end;
            continue;
        }
        if (same)
            first = end;
        else
            while (m[first] == src[first])
                first++;
        /* entries past the high-water mark were never written (nor checked): from there on */
        const int hw = r->hw[chunk] > items[i].sink ? r->hw[chunk] : items[i].sink;
        if (first > hw)
            first = hw;
        bool bad = false;
        for (int b = first; b < end; b++)
            bad |= (uint32_t)src[b] >= (uint32_t)kv->g.n_host_blocks;
        if (bad)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_install: item %d: a candidate is outside the %d host blocks", i,
                                 kv->g.n_host_blocks);
        r->patch[2 * n_patch] = i;
        r->patch[2 * n_patch + 1] = first;
        n_patch++;
        n_ids += (size_t)(end - first);
    }
    if (n_patch == 0)
        return OKV_OK;
    void *hv = NULL, *dv = NULL;
    enum okv_status st = okv_cuda_ring_alloc(c, sizeof(int32_t) * (3 * (size_t)n_patch + n_ids), &hv, &dv);
    if (st != OKV_OK)
        return st;
    int32_t *hp = (int32_t *)hv, *hid = hp + 3 * n_patch;
    int32_t at = 0;
    for (int p = 0; p < n_patch; p++) {
        const int i = r->patch[2 * p], first = r->patch[2 * p + 1], chunk = items[i].chunk;
        const int end = items[i].sink + reqs[i].n_cand;
        const int32_t *src = reqs[i].cand_host - items[i].sink;
        hp[3 * p] = chunk * r->max_blocks + first;
        hp[3 * p + 1] = end - first;
        hp[3 * p + 2] = at;
        memcpy(hid + at, src + first, sizeof(int32_t) * (size_t)(end - first));
        at += end - first;
    }
    OKV_CU(cudaMemcpyAsync(dv, hv, sizeof(int32_t) * (3 * (size_t)n_patch + n_ids), cudaMemcpyHostToDevice, c->sel_stream),
           "candidate table patch upload");
    ctab_patch_k<<<(unsigned)n_patch, 128, 0, c->sel_stream>>>(r->d_ctab, (const int32_t *)dv, n_patch);
    OKV_LAUNCHED("candidate table patch kernel");
    /* queued: the mirror follows (the ring region is committed with the call's others) */
    for (int p = 0; p < n_patch; p++) {
        const int i = r->patch[2 * p], first = r->patch[2 * p + 1], chunk = items[i].chunk;
        const int end = items[i].sink + reqs[i].n_cand;
        const int32_t *src = reqs[i].cand_host - items[i].sink;
        memcpy(r->h_ctab + (size_t)chunk * r->max_blocks + first, src + first, sizeof(int32_t) * (size_t)(end - first));
        r->v_gen[chunk] = gen;
        r->v_src[chunk] = src;
        r->v_end[chunk] = end;
        if (end > r->hw[chunk])
            r->hw[chunk] = end;
    }
    return OKV_OK;
}

/* ids for n entries: a rank merge selects once per row. Grown with every stream that may
 * still read the old buffer (an install on the compute or the selection stream) drained. */
static enum okv_status ids_reserve(struct cuda_ctx *c, struct cuda_resid *r, size_t n)
{
    if (n <= r->ids_cap)
        return OKV_OK;
    OKV_CU(cudaStreamSynchronize(c->stream), "selection ids: drain");
    if (c->side)
        OKV_CU(cudaStreamSynchronize(c->side), "selection ids: drain");
    cudaFree(r->ids);
    r->bytes -= r->ids_cap * sizeof(int32_t);
    r->ids = NULL;
    r->ids_cap = 0;
    const size_t want = n + n / 2;
    cudaError_t e = cudaMalloc((void **)&r->ids, want * sizeof(int32_t));
    if (e != cudaSuccess) {
        r->ids = NULL;
        (void)cudaGetLastError();
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda select_install: cannot allocate %zu MiB of HBM for the rows' selections: %s",
                             (want * sizeof(int32_t)) >> 20, cudaGetErrorString(e));
    }
    r->ids_cap = want;
    r->bytes += want * sizeof(int32_t);
    return OKV_OK;
}

/* The selections of a call with rank items (okv_sel_rank_expand) and their candidates' place in
 * d_ctab. */
static enum okv_status rank_requests(struct cuda_resid *r, const struct okv_select_req *reqs,
                                     const struct okv_resid_item *items, int n_items, int n_x)
{
    if (n_x > r->x_cap) {
        struct okv_select_req *xr =
            (struct okv_select_req *)okv_realloc(r->x_reqs, sizeof *xr * (size_t)n_x, OKV_TAG_BACKEND);
        if (xr)
            r->x_reqs = xr;
        int32_t *xt = (int32_t *)okv_realloc(r->x_tab, sizeof *xt * (size_t)n_x, OKV_TAG_BACKEND);
        if (xt)
            r->x_tab = xt;
        if (!xr || !xt)
            return okv_set_error(OKV_ERR_NO_MEMORY, "cuda select_install: out of host memory (rank merge)");
        r->x_cap = n_x;
    }
    okv_sel_rank_expand(reqs, items, n_items, r->x_reqs, r->x_tab);
    for (int x = 0; x < n_x; x++)
        r->x_tab[x] = r->tab_off[r->x_tab[x]];
    return OKV_OK;
}

static enum okv_status install_on(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                 const struct okv_select_req *reqs, const struct okv_select_req *own,
                                 const struct okv_resid_item *items, int n_items, int succ)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    struct cuda_resid *r = kv->resid;
    if (!r || layer < 0 || layer >= r->n_layers || n_items < 0 || n_items > r->max_seqs)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_install: no residency state, bad layer %d or %d items", layer,
                             n_items);
    if (n_items == 0)
        return OKV_OK;
    const int nkv = r->nkv, quota = r->quota[layer], qh = quota / nkv;
    /* the item table (host arrays are checked before anything is queued) */
    struct rs_item *hi = r->h_items;
    int ids_off = 0, own_off = 0, kmax = 0, bound = 0, n_x = 0;
    bool any_rank = false;
    if (++r->seen_gen == UINT32_MAX) {
        memset(r->seen, 0, sizeof(uint32_t) * (size_t)r->max_seqs);
        r->seen_gen = 1;
    }
    const uint32_t gen = r->seen_gen;
    for (int i = 0; i < n_items; i++) {
        const struct okv_select_req *rq = &reqs[i];
        const int k1 = own ? own[i].k : 0, keep = items[i].keep;
        const bool bad_keep = keep < 0 || (keep > 0 && (own || keep > qh || rq->k < keep || rq->k > 2 * keep));
        const bool bad_rank = items[i].by_rank && (own || keep || rq->n_rows < 1);
        if (items[i].chunk < 0 || items[i].chunk >= r->max_seqs || (!keep && rq->k > qh) || bad_keep || bad_rank ||
            k1 > rq->k || items[i].stamp == 0 || items[i].sink < 0 || items[i].sink + rq->n_cand > r->max_blocks ||
            (own && own[i].n_cand != rq->n_cand))
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_install: item %d: chunk %d, k %d (own %d, keep %d%s) of %d "
                                 "per head, stamp %u", i, items[i].chunk, rq->k, k1, keep, items[i].by_rank ? ", by rank" : "",
                                 qh, items[i].stamp);
        if (r->seen[items[i].chunk] == gen)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_install: chunk %d appears twice", items[i].chunk);
        r->seen[items[i].chunk] = gen;
        /* the candidates by their place in the table */
        r->tab_off[i] = items[i].chunk * r->max_blocks + items[i].sink;
        const int lists = okv_sel_lists(&items[i], rq);
        hi[i] = (struct rs_item){items[i].chunk, items[i].sink, rq->n_cand, rq->k, k1, r->tab_off[i], ids_off, own_off,
                                 items[i].stamp, keep, items[i].by_rank ? lists : 0};
        ids_off += nkv * rq->k * lists;
        n_x += lists;
        any_rank |= items[i].by_rank;
        own_off += nkv * k1;
        kmax = rq->k > kmax ? rq->k : kmax;
        bound += nkv * (keep ? keep : rq->k);
    }
    if (kmax == 0)
        return OKV_OK;
    enum okv_status st;
    if ((st = ids_reserve(c, r, (size_t)ids_off)) != OKV_OK || (st = ctab_sync(c, r, kv, reqs, items, n_items)) != OKV_OK ||
        (any_rank && (st = rank_requests(r, reqs, items, n_items, n_x)) != OKV_OK))
        return st;
    const struct okv_cuda_cand_tab tab = {r->d_ctab, r->tab_off};
    const int32_t *d_cand = NULL, *d_cand_own = NULL;
    if (own && (st = okv_cuda_select_to_device(be, kv, layer, q, n_heads, own, n_items, r->ids_own, &d_cand_own, &tab,
                                               NULL)) != OKV_OK)
        return st;
    /* the item table travels with the requests */
    struct okv_cuda_blob itab = {hi, sizeof(struct rs_item) * (size_t)n_items, NULL};
    const struct okv_cuda_cand_tab xtab = {r->d_ctab, r->x_tab};
    if ((st = okv_cuda_select_to_device(be, kv, layer, q, n_heads, any_rank ? r->x_reqs : reqs, any_rank ? n_x : n_items,
                                        r->ids, &d_cand, any_rank ? &xtab : &tab, &itab)) != OKV_OK)
        return st;
    if (!d_cand || !itab.d)
        return okv_cuda_ring_commit(c, c->sel_stream);
    const struct rs_item *di = (const struct rs_item *)itab.d;
    int kp = 1, np = 1;
    while (kp < kmax)
        kp <<= 1;
    while (np < qh)
        np <<= 1;
    const int pcap = kp > np ? kp : np;
    const size_t smem = (size_t)pcap * 8 + (size_t)4 * kmax * sizeof(int32_t);
    if (smem > 48 * 1024 && smem > r->smem_set) {
        OKV_CU(cudaFuncSetAttribute(resid_install_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "residency kernel shared memory");
        r->smem_set = smem;
    }
    /* a gather of this layer still in flight reads the list this install rewrites */
    if ((st = okv_cuda_kv_fetch_order(c, kv, layer)) != OKV_OK)
        return st;
    const size_t o = r->qoff[layer];
    struct rs_layer Ls = {r->map + (size_t)layer * r->max_seqs * nkv * r->max_blocks,
                          r->key + o, r->sel + o, r->selu + o, r->f_src + o, r->f_dst + o, r->stamp + o,
                          r->f_count + 2 * layer, quota, nkv, r->max_blocks, r->base_unit};
    resid_install_k<<<(unsigned)n_items * nkv, RS_THREADS, smem, c->sel_stream>>>(
        di, d_cand, r->ids, own ? r->ids_own : NULL, succ, Ls, r->h2l, r->stat, kmax, pcap);
    OKV_LAUNCHED("residency install kernel");
    if ((st = okv_cuda_ring_commit(c, c->sel_stream)) != OKV_OK)
        return st;
    /* the gather, on the copy stream behind the install (and so behind the layer's attention) */
    return okv_cuda_kv_fetch_device(c, kv, layer, r->f_src + o, r->f_dst + o, r->f_count + 2 * layer, bound);
}

/* With the side stream (the default; OKV_SELECT_STREAM=0 turns it off): the queries are
 * copied aside (the compute stream reuses its q buffer at the next layer), the side stream
 * starts behind the layer's attention, and selection, install and the gather's start run
 * there while the compute stream goes on with the layer; the next use of this layer's
 * residency (the attention lists' fill, a reset, the statistics) waits for it. */
static enum okv_status cuda_select_install(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                           const struct okv_select_req *reqs, const struct okv_select_req *own,
                                           const struct okv_resid_item *items, int n_items, int succ)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    struct cuda_resid *r = kv->resid;
    if (!c->side || !r || n_items <= 0 || layer < 0 || layer >= r->n_layers || !q)
        return install_on(be, kv, layer, q, n_heads, reqs, own, items, n_items, succ);
    /* the snapshot of the last install is read until then */
    OKV_CU(cudaStreamWaitEvent(c->stream, r->side_last, 0), "query snapshot reuse");
    enum okv_status st = okv_cuda_grow_device(c->side, (void **)&r->q_snap, &r->q_snap_cap, q->n, sizeof(float),
                                              "query snapshot");
    if (st != OKV_OK)
        return st;
    OKV_CU(cudaMemcpyAsync(r->q_snap, q->d, sizeof(float) * q->n, cudaMemcpyDeviceToDevice, c->stream), "query snapshot");
    OKV_CU(cudaEventRecord(r->side_att, c->stream), "event record");
    OKV_CU(cudaStreamWaitEvent(c->side, r->side_att, 0), "selection stream wait");
    const okv_bmem qs = {r->q_snap, q->n};
    c->sel_stream = c->side;
    st = install_on(be, kv, layer, &qs, n_heads, reqs, own, items, n_items, succ);
    c->sel_stream = c->stream;
    OKV_CU(cudaEventRecord(r->side_ev[layer], c->side), "event record");
    OKV_CU(cudaEventRecord(r->side_last, c->side), "event record");
    return st;
}

static enum okv_status cuda_resid_take_stats(okv_backend *be, okv_bkv *kv, int64_t *units)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    struct cuda_resid *r = kv->resid;
    *units = 0;
    if (!r)
        return OKV_OK;
    unsigned long long v = 0;
    if (c->side)
        OKV_CU(cudaStreamWaitEvent(c->stream, r->side_last, 0), "statistics after the selection stream");
    OKV_CU(cudaMemcpyAsync(&v, r->stat, sizeof v, cudaMemcpyDeviceToHost, c->stream), "residency statistics");
    OKV_CU(cudaMemsetAsync(r->stat, 0, sizeof v, c->stream), "residency statistics reset");
    OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "residency statistics");
    *units = (int64_t)v;
    return OKV_OK;
}

static enum okv_status cuda_resid_read(okv_backend *be, okv_bkv *kv, int chunk, int layer, int k, int32_t *blocks,
                                       int32_t *units)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    struct cuda_resid *r = kv->resid;
    if (!r || chunk < 0 || chunk >= r->max_seqs || layer < 0 || layer >= r->n_layers || k < 0 || k * r->nkv > r->quota[layer])
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda resid_read: bad chunk %d, layer %d or k %d", chunk, layer, k);
    enum okv_status st = okv_cuda_sync_all(c);
    if (st != OKV_OK)
        return st;
    const size_t o = r->qoff[layer] + (size_t)chunk * r->quota[layer];
    OKV_CU(cudaMemcpy(blocks, r->sel + o, sizeof(int32_t) * (size_t)k * r->nkv, cudaMemcpyDeviceToHost), "residency read");
    OKV_CU(cudaMemcpy(units, r->selu + o, sizeof(int32_t) * (size_t)k * r->nkv, cudaMemcpyDeviceToHost), "residency read");
    return OKV_OK;
}

enum okv_status okv_cuda_resid_fill(struct cuda_ctx *c, const okv_bkv *kv, int layer, const struct okv_attn_blocks *blocks,
                                    int n_lists, int32_t *d_unit, int32_t *d_index)
{
    struct cuda_resid *r = kv->resid;   /* its upload mirror changes */
    if (!blocks->sel_fill)
        return OKV_OK;
    if (!r)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: selection placeholders without residency state");
    const int nkv = r->nkv, quota = r->quota[layer];
    if (c->side)   /* the layer's last install, on the side stream */
        OKV_CU(cudaStreamWaitEvent(c->stream, r->side_ev[layer], 0), "fill after the selection stream");
    bool any = false;
    for (int li = 0; li < n_lists; li++) {
        const int32_t *f = blocks->sel_fill + 3 * li;
        if (f[0] < 0)
            continue;
        if (f[1] < 0 || f[1] >= r->max_seqs || f[2] < 0 || f[2] * nkv > quota || f[0] + f[2] > blocks->blk_start[li + 1] ||
            f[0] < blocks->blk_start[li])
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: list %d: bad selection placeholder (%d, %d, %d)", li, f[0],
                                 f[1], f[2]);
        any = true;
    }
    if (!any)
        return OKV_OK;
    /* uploaded only when it differs from the last upload: the copy (from pageable memory,
     * staged by the driver before the call returns) runs behind the fills that read the
     * previous contents on the same stream */
    const size_t nf = 3 * (size_t)n_lists;
    if (nf != r->fill_n || memcmp(r->h_fill, blocks->sel_fill, sizeof(int32_t) * nf)) {
        if (nf > r->fill_hcap) {
            okv_free(r->h_fill);
            r->fill_n = 0;
            r->h_fill = (int32_t *)okv_malloc(sizeof(int32_t) * 2 * nf, OKV_TAG_BACKEND);
            r->fill_hcap = r->h_fill ? 2 * nf : 0;
            if (!r->h_fill)
                return okv_set_error(OKV_ERR_NO_MEMORY, "cuda attention: out of host memory (selection placeholders)");
        }
        enum okv_status st = okv_cuda_grow_device(c->stream, (void **)&r->d_fill, &r->fill_dcap, nf, sizeof(int32_t),
                                                  "selection placeholders");
        if (st != OKV_OK)
            return st;
        memcpy(r->h_fill, blocks->sel_fill, sizeof(int32_t) * nf);
        r->fill_n = 0;   /* until the copy is queued */
        OKV_CU(cudaMemcpyAsync(r->d_fill, r->h_fill, sizeof(int32_t) * nf, cudaMemcpyHostToDevice, c->stream),
               "selection placeholders upload");
        r->fill_n = nf;
    }
    const size_t o = r->qoff[layer];
    resid_fill_k<<<(unsigned)n_lists, 128, 0, c->stream>>>(r->d_fill, nkv, r->sel + o, r->selu + o, quota, d_unit, d_index);
    OKV_LAUNCHED("residency list fill kernel");
    return OKV_OK;
}

void okv_cuda_fill_resid_ops(struct okv_backend_ops *o)
{
    o->resid_init = cuda_resid_init;
    o->resid_reset = cuda_resid_reset;
    o->select_install = cuda_select_install;
    o->resid_take_stats = cuda_resid_take_stats;
    o->resid_read = cuda_resid_read;
}
