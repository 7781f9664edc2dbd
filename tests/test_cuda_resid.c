/* label: cuda */
/* Device-side residency (cuda_resid.cu) against the host's (src/kv/resid.c).
 *
 * Several sequences (quota chunks) over a few layers and steps, random host blocks
 * with random K/V (kv_host_randomize) and fresh random queries each step. Each step,
 * for each layer, the same requests go to
 *  - the device: select_install (scoring, top-k, lookahead merge, successors,
 *    install and gather, all on the GPU), and
 *  - the reference: select_blocks (the same GPU scoring and top-k, ids copied back),
 *    then, on the host, the merge and successor rules of src/kv/select_rules.c (which
 *    the engine and the CPU backend use) and okv_resid_apply.
 * Checked after every call: the selection in block order and the unit of each entry
 * equal the reference's exactly (the policy is the same, so the units are too); every
 * selected unit holds the K and V of its (host block, head) (kv_unit_read against
 * kv_host_read, bit for bit); the number of units gathered equals the reference's
 * misses. Cases: with and without merge (the half share, or by rank: each row's own
 * top k taken in turn, okv_sel_merge_rank) and successors, a quota larger than the
 * selection (LRU among cached units), chunks reset and reused, k = n_cand, the sticky
 * cut (K = k + sticky selected, k kept, held blocks first: okv_resid_sticky_cut
 * as the reference).
 * Skips (77) without a CUDA device. */
#include "kv/resid.h"
#include "kv/select_rules.h"
#include "oasiskv/backend.h"
#include "testutil.h"

#include <cuda_runtime_api.h>
#include <math.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rndf(void) { return (float)(rnd() % 2000001) / 1000000.0f - 1.0f; }

struct cfg {
    const char *what;
    int nkv, group, hd, bs, layers, seqs, blocks, sink, k, cached, rows, succ;
    bool merge;
    int sticky;   /* blocks selected beyond k and cut back (not with merge) */
    bool rank;    /* with merge: by rank (okv_resid_item.by_rank) instead of the half share */
};

/* the logical block of each host id of a sequence (hb: its host block of each logical block) */
static void to_logical(const int32_t *ids, int n, const int32_t *hb, int sink, int nb, int32_t *out)
{
    for (int i = 0; i < n; i++) {
        out[i] = -1;
        for (int b = sink; b < nb && out[i] < 0; b++)
            if (hb[b] == ids[i])
                out[i] = b;
    }
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static void run(okv_backend *gpu, const struct cfg *c)
{
    const int nkv = c->nkv, nh = nkv * c->group, hd = c->hd, L = c->layers, S = c->seqs, nb = c->blocks;
    const int quota = c->cached * nkv, n_host = S * nb + 5;
    const int group_slots = 4;
    int32_t *sparse_units = malloc(sizeof(int32_t) * L), *quotas = malloc(sizeof(int32_t) * L);
    for (int l = 0; l < L; l++) {
        quotas[l] = quota;
        sparse_units[l] = S * quota;
    }
    struct okv_kv_geometry g = {.n_layers = L, .n_group_slots = group_slots, .layer_sparse_units = sparse_units,
                                .n_host_blocks = n_host, .block_size = c->bs, .n_kv_heads = nkv, .head_dim = hd};
    okv_bkv *kv = NULL;
    CHECK(gpu->ops->kv_alloc(gpu, &g, &kv) == OKV_OK, "%s: kv_alloc: %s", c->what, okv_last_error());
    if (!kv)
        return;
    const int base = group_slots * nkv;
    struct okv_resid_geometry rg = {S, nb, base, quotas};
    CHECK(gpu->ops->resid_init(gpu, kv, &rg) == OKV_OK, "%s: resid_init: %s", c->what, okv_last_error());
    okv_resid *ref = NULL;
    struct okv_resid_params rp = {L, nkv, S, base, quotas};
    CHECK(okv_resid_create(&rp, &ref) == OKV_OK, "resid_create");
    /* each sequence's host blocks: a random permutation of its share of the host tier */
    int32_t *host = malloc(sizeof(int32_t) * (size_t)S * nb);
    for (int i = 0; i < S * nb; i++)
        host[i] = i + 5;
    for (int i = S * nb - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint32_t)(i + 1));
        int32_t t = host[i];
        host[i] = host[j];
        host[j] = t;
    }
    for (int hb = 0; hb < n_host; hb++)
        CHECK(gpu->ops->kv_host_randomize(gpu, kv, hb, 1000 + (uint64_t)hb, 1.0f) == OKV_OK, "randomize");
    for (int s = 0; s < S; s++) {
        CHECK(okv_resid_attach(ref, s) == OKV_OK, "attach");
        CHECK(okv_resid_chunk(ref, s) == s, "chunk %d of seq %d", okv_resid_chunk(ref, s), s);
        CHECK(gpu->ops->resid_reset(gpu, kv, s) == OKV_OK, "reset");
    }
    const int n_rows = S * c->rows;
    okv_bmem *q = NULL;
    CHECK(gpu->ops->mem_alloc(gpu, (size_t)n_rows * nh * hd, &q) == OKV_OK, "mem_alloc");
    float *qh = malloc(sizeof(float) * (size_t)n_rows * nh * hd);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)n_rows);
    for (int i = 0; i < n_rows; i++)
        rows[i] = i;
    const int n_cand = nb - c->sink, k = c->k < n_cand ? c->k : n_cand, k1 = c->merge ? (c->k + 1) / 2 : 0;
    const int k1c = k1 < k ? k1 : k;
    const int K = k + c->sticky < n_cand ? k + c->sticky : n_cand;   /* selected per head */
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)S * nkv * K), *own = malloc(sizeof(int32_t) * (size_t)S * nkv * k);
    /* the rank merge's reference: one request per (sequence, row), their ids [S][rows][nkv][k] */
    struct okv_select_req *rreqs = malloc(sizeof *rreqs * (size_t)n_rows);
    int32_t *rids = malloc(sizeof(int32_t) * (size_t)n_rows * nkv * k), *rmerged = malloc(sizeof(int32_t) * (size_t)k);
    uint8_t held[4096];
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)nkv * k), *fb = malloc(sizeof(int32_t) * (size_t)quota);
    int32_t *fh = malloc(sizeof(int32_t) * (size_t)quota), *fu = malloc(sizeof(int32_t) * (size_t)quota);
    int32_t *db = malloc(sizeof(int32_t) * (size_t)nkv * k), *du = malloc(sizeof(int32_t) * (size_t)nkv * k);
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * (size_t)k);
    float *k_u = malloc(sizeof(float) * (size_t)c->bs * hd * 4);
    float *v_u = k_u + c->bs * hd, *k_h = v_u + c->bs * hd, *v_h = k_h + c->bs * hd;
    struct okv_select_req *reqs = malloc(sizeof *reqs * (size_t)S), *oreqs = malloc(sizeof *oreqs * (size_t)S);
    struct okv_resid_item *items = malloc(sizeof *items * (size_t)S);
    uint32_t stamp = 0;
    int bad_sel = 0, bad_unit = 0, bad_content = 0, checked_units = 0;
    int64_t dev_fetched = 0, ref_fetched = 0;
    const int steps = 6;
    for (int step = 0; step < steps; step++) {
        if (step == 3) {   /* a sequence ends and its chunk is reused */
            okv_resid_detach(ref, 1 % S);
            CHECK(okv_resid_attach(ref, 1 % S) == OKV_OK, "reattach");
            CHECK(gpu->ops->resid_reset(gpu, kv, okv_resid_chunk(ref, 1 % S)) == OKV_OK, "reset");
        }
        for (size_t i = 0; i < (size_t)n_rows * nh * hd; i++)
            qh[i] = rndf();
        CHECK(gpu->ops->mem_write(gpu, q, 0, qh, (size_t)n_rows * nh * hd) == OKV_OK, "mem_write");
        for (int l = 0; l < L; l++) {
            for (int s = 0; s < S; s++) {
                reqs[s] = (struct okv_select_req){rows + s * c->rows, c->rows, host + (size_t)s * nb + c->sink, n_cand, K};
                oreqs[s] = (struct okv_select_req){rows + s * c->rows, 1, host + (size_t)s * nb + c->sink, n_cand, k1c};
                items[s] = (struct okv_resid_item){okv_resid_chunk(ref, s), c->sink, ++stamp, K > k ? k : 0, c->rank};
                for (int r = 0; r < c->rows; r++)
                    rreqs[s * c->rows + r] = (struct okv_select_req){rows + s * c->rows + r, 1, reqs[s].cand_host, n_cand, k};
            }
            const bool share = c->merge && !c->rank;
            CHECK(gpu->ops->select_install(gpu, kv, l, q, nh, reqs, share ? oreqs : NULL, items, S, c->succ) == OKV_OK,
                  "%s: select_install: %s", c->what, okv_last_error());
            /* the reference */
            CHECK(gpu->ops->select_blocks(gpu, kv, l, q, nh, reqs, S, ids, NULL) == OKV_OK, "select");
            if (share)
                CHECK(gpu->ops->select_blocks(gpu, kv, l, q, nh, oreqs, S, own, NULL) == OKV_OK, "select own");
            if (c->rank)
                CHECK(gpu->ops->select_blocks(gpu, kv, l, q, nh, rreqs, n_rows, rids, NULL) == OKV_OK, "select rows");
            for (int s = 0; s < S; s++) {
                const int32_t *hb = host + (size_t)s * nb;
                for (int h = 0; h < nkv; h++) {
                    int32_t all_l[4096], own_l[4096];
                    to_logical(ids + ((size_t)s * nkv + h) * K, K, hb, c->sink, nb, all_l);
                    to_logical(own + ((size_t)s * nkv + h) * k1c, k1c, hb, c->sink, nb, own_l);
                    if (c->rank) {
                        const int m = okv_sel_merge_rank(rids + ((size_t)s * c->rows * nkv + h) * k, c->rows, nkv * k, k,
                                                         rmerged);
                        CHECK(m == k, "rank merge: %d of %d", m, k);
                        to_logical(rmerged, k, hb, c->sink, nb, sel + h * k);
                    } else if (c->merge) {
                        okv_sel_merge(own_l, k1c, all_l, k, sel + h * k);
                    } else if (K > k) {
                        okv_resid_sticky_cut(ref, s, l, h, all_l, K, k, held, sel + h * k);
                    } else {
                        memcpy(sel + h * k, all_l, sizeof(int32_t) * (size_t)k);
                    }
                    if (c->succ)
                        okv_sel_successors(sel + h * k, k, c->succ, nb);
                }
                ref_fetched += okv_resid_apply(ref, s, l, sel, k, items[s].stamp, fb, fh, fu);
            }
            /* compare */
            int64_t units = 0;
            CHECK(gpu->ops->resid_take_stats(gpu, kv, &units) == OKV_OK, "take_stats");
            dev_fetched += units;
            for (int s = 0; s < S; s++) {
                const int chunk = okv_resid_chunk(ref, s);
                CHECK(gpu->ops->resid_read(gpu, kv, chunk, l, k, db, du) == OKV_OK, "resid_read: %s", okv_last_error());
                int kr = 0;
                const int32_t *rs = okv_resid_selection(ref, s, l, &kr);
                const int32_t *ru = okv_resid_selection_units(ref, s, l);
                CHECK(kr == k, "k %d vs %d", kr, k);
                for (int h = 0; h < nkv; h++) {
                    for (int i = 0; i < k; i++) {
                        pairs[2 * i] = rs[h * k + i];
                        pairs[2 * i + 1] = ru[h * k + i];
                    }
                    qsort(pairs, (size_t)k, 2 * sizeof(int32_t), cmp_pair);
                    for (int i = 0; i < k; i++) {
                        const int32_t b = db[h * k + i], u = du[h * k + i];
                        bad_sel += b != pairs[2 * i];
                        bad_unit += u != pairs[2 * i + 1];
                        if (b < c->sink || b >= nb)
                            continue;
                        /* content: the device unit holds (host block, head) */
                        checked_units++;
                        if (gpu->ops->kv_unit_read(gpu, kv, l, u, k_u, v_u) != OKV_OK ||
                            gpu->ops->kv_host_read(gpu, kv, l, host[(size_t)s * nb + b], h, k_h, v_h) != OKV_OK ||
                            memcmp(k_u, k_h, sizeof(float) * (size_t)c->bs * hd) ||
                            memcmp(v_u, v_h, sizeof(float) * (size_t)c->bs * hd))
                            bad_content++;
                    }
                }
            }
        }
    }
    CHECK(bad_sel == 0, "%s: %d selection entries differ from resid.c", c->what, bad_sel);
    CHECK(bad_unit == 0, "%s: %d units differ from resid.c", c->what, bad_unit);
    CHECK(bad_content == 0, "%s: %d of %d selected units do not hold their block", c->what, bad_content, checked_units);
    CHECK(dev_fetched == ref_fetched, "%s: %lld units gathered, resid.c fetched %lld", c->what, (long long)dev_fetched,
          (long long)ref_fetched);
    CHECK(ref_fetched > 0 && checked_units > 0, "%s: nothing exercised", c->what);
    printf("  %-40s %d steps x %d layers x %d seqs, k %d of %d (cached %d): %lld units gathered, %d units checked\n", c->what,
           steps, L, S, k, n_cand, c->cached, (long long)dev_fetched, checked_units);
    okv_resid_free(ref);
    gpu->ops->mem_free(gpu, q);
    gpu->ops->kv_free(gpu, kv);
    free(sparse_units);
    free(quotas);
    free(host);
    free(qh);
    free(rows);
    free(ids);
    free(own);
    free(rreqs);
    free(rids);
    free(rmerged);
    free(sel);
    free(fb);
    free(fh);
    free(fu);
    free(db);
    free(du);
    free(pairs);
    free(k_u);
    free(reqs);
    free(oreqs);
    free(items);
}

int main(void)
{
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0) {
        printf("test_cuda_resid: skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    okv_backend *gpu = NULL;
    struct okv_backend_params bp = {0};
    if (okv_backend_create("cuda", &bp, &gpu) != OKV_OK) {
        fprintf(stderr, "backend: %s\n", okv_last_error());
        return 1;
    }
    const struct cfg cases[] = {
        /* what              nkv grp hd  bs  L  S  blocks sink k  cached rows succ merge sticky rank */
        {"plain, quota = k", 2, 2, 64, 16, 2, 3, 64, 1, 8, 8, 1, 0, false, 0, false},
        {"successors, cached 1.5x", 2, 4, 64, 16, 2, 4, 96, 1, 16, 24, 1, 1, false, 0, false},
        {"lookahead merge + successors", 3, 3, 64, 8, 2, 3, 80, 2, 12, 18, 3, 2, true, 0, false},
        {"k = n_cand (dense layer)", 1, 2, 128, 16, 1, 2, 40, 1, 39, 39, 1, 0, false, 0, false},
        {"large k (512 of 1500), hd 128", 2, 2, 128, 16, 1, 2, 1500, 1, 512, 640, 2, 1, true, 0, false},
        {"sticky 4 of 8, quota = k", 2, 2, 64, 16, 2, 3, 64, 1, 8, 8, 1, 0, false, 4, false},
        {"sticky 8 of 16, cached 2x, successors", 2, 4, 64, 16, 2, 4, 96, 1, 16, 32, 1, 1, false, 8, false},
        {"sticky 300 of 600 (k + m > RS_THREADS)", 2, 2, 64, 16, 1, 2, 1500, 1, 600, 1200, 1, 0, false, 300, false},
        {"rank merge + successors", 3, 3, 64, 8, 2, 3, 80, 2, 12, 18, 3, 2, true, 0, true},
        {"rank merge, 5 rows, cached 2x", 2, 4, 64, 16, 2, 4, 96, 1, 16, 32, 5, 0, true, 0, true},
        {"rank merge, 512 of 1500, 2 rows, hd 128", 2, 2, 128, 16, 1, 2, 1500, 1, 512, 640, 2, 1, true, 0, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run(gpu, &cases[i]);
    okv_backend_free(gpu);
    CHECK(okv_alloc_live_count(OKV_TAG_KV) == 0, "KV allocations leaked");
    CHECK(okv_alloc_live_count(OKV_TAG_BACKEND) == 0, "backend allocations leaked");
    printf("test_cuda_resid: %d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
