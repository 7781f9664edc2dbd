/* label: unit */
/* The CPU backend's attention (tiles of rows of one sequence and one KV head, each query run
 * block by block while the block is in cache; src/backend/cpu/cpu_attention.c) against a
 * reference that runs every (row, head) on its own with okv_cpu_dot and okv_cpu_axpy, the
 * backend's algorithm before the tiles: the outputs must be equal bit for bit, on random
 * sequences (prefill chunks, decode rows, several sequences a step), GQA groups of 1 to 16,
 * head dims 8 to 128, blocks of 8 to 64 tokens, whole and sparse (shuffled, partial) lists. */
#include "backend/cpu/cpu_internal.h"
#include "oasiskv/backend.h"
#include "testutil.h"

#include <math.h>

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 11);
}
static float rf(void) { return (float)(rnd() % 20001) / 10000.f - 1.f; }
static int ri(int a, int b) { return a + (int)(rnd() % (unsigned)(b - a + 1)); }

/* one (row, head) over its KV head's list with an online softmax, key by key */
static void ref_query(const okv_bkv *kv, const struct okv_step_meta *meta, const struct okv_attn_blocks *bl, const float *q,
                      float *o, int t, int h, int n_heads, float scale)
{
    const int hd = kv->g.head_dim, bs = kv->g.block_size, n_kv = kv->g.n_kv_heads;
    const int s = meta->tok_seq[t], pos = meta->tok_pos[t], kv_len = meta->seq_kv_len[s], list = s * n_kv + h / (n_heads / n_kv);
    float acc[512] = {0}, sc[256], m = -INFINITY, l = 0.f;
    for (int b = bl->blk_start[list]; b < bl->blk_start[list + 1]; b++) {
        const int first = bl->blk_index[b] * bs;
        int n_valid = bs;
        if (first + n_valid > kv_len)
            n_valid = kv_len - first;
        if (first + n_valid > pos + 1)
            n_valid = pos + 1 - first;
        if (n_valid <= 0)
            continue;
        const float *kb = cpu_kv_unit(kv, false, 0, bl->blk_unit[b]), *vb = cpu_kv_unit(kv, true, 0, bl->blk_unit[b]);
        float bmax = -INFINITY;
        for (int i = 0; i < n_valid; i++) {
            sc[i] = okv_cpu_dot(q, kb + (size_t)i * hd, hd) * scale;
            bmax = sc[i] > bmax ? sc[i] : bmax;
        }
        if (bmax > m) {
            const float r = expf(m - bmax);
            for (int d = 0; d < hd; d++)
                acc[d] *= r;
            l *= r;
            m = bmax;
        }
        for (int i = 0; i < n_valid; i++) {
            const float p = expf(sc[i] - m);
            l += p;
            okv_cpu_axpy(acc, p, vb + (size_t)i * hd, hd);
        }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (int d = 0; d < hd; d++)
        o[d] = acc[d] * inv;
}

int main(void)
{
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK) {
        fprintf(stderr, "backend: %s\n", okv_last_error());
        return 1;
    }
    /* block size, KV heads, group, head dim */
    static const int cfg[][4] = {{16, 2, 4, 64}, {16, 3, 3, 64}, {8, 1, 8, 128}, {32, 4, 1, 32},
                                 {16, 2, 2, 8},  {64, 2, 2, 128}, {16, 1, 16, 64}, {16, 2, 3, 20}};
    int runs = 0, equal = 0;
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++)
        for (int rep = 0; rep < 3; rep++) {
            const int bs = cfg[ci][0], nkv = cfg[ci][1], group = cfg[ci][2], hd = cfg[ci][3], nh = nkv * group;
            struct okv_kv_geometry g = {.n_layers = 1, .n_group_slots = 64, .block_size = bs, .n_kv_heads = nkv, .head_dim = hd};
            okv_bkv *kv = NULL;
            CHECK(be->ops->kv_alloc(be, &g, &kv) == OKV_OK, "kv_alloc: %s", okv_last_error());
            if (!kv)
                continue;
            const int n_units = (int)kv->layer_units[0];
            for (int u = 0; u < n_units; u++) {
                float *k = cpu_kv_unit(kv, false, 0, u), *v = cpu_kv_unit(kv, true, 0, u);
                for (size_t i = 0; i < kv->unit_floats; i++) {
                    k[i] = rf();
                    v[i] = rf();
                }
            }
            const int ns = ri(1, 5);
            int32_t kvlen[5], nq[5], n = 0;
            for (int s = 0; s < ns; s++) {
                kvlen[s] = ri(1, 700);
                const int r = ri(0, 3);
                nq[s] = r == 0 ? 1 : r == 1 ? ri(2, 7) : r == 2 ? ri(20, 300) : kvlen[s];
                nq[s] = nq[s] > kvlen[s] ? kvlen[s] : nq[s];
                n += nq[s];
            }
            int32_t *seq, *pos, *slot;
            tu_step_rows(ns, nq, kvlen, &seq, &pos, &slot);
            struct okv_step_meta meta = {n, ns, seq, pos, slot, NULL, NULL, kvlen};
            CHECK(be->ops->step_begin(be, &meta) == OKV_OK, "step_begin: %s", okv_last_error());
            const int max_list = (700 + bs - 1) / bs;
            int32_t *start = malloc(4 * (size_t)(ns * nkv + 1)), *unit = malloc(4 * (size_t)(ns * nkv * max_list + 1)),
                    *index = malloc(4 * (size_t)(ns * nkv * max_list + 1));
            const bool sparse = rep > 0;
            int at = 0;
            for (int s = 0; s < ns; s++)
                for (int h = 0; h < nkv; h++) {
                    start[s * nkv + h] = at;
                    const int nb = (kvlen[s] + bs - 1) / bs, first = at;
                    for (int b = 0; b < nb; b++) {
                        if (sparse && b > 0 && b < nb - 1 && ri(0, 2) == 0)
                            continue;
                        index[at] = b;
                        unit[at++] = ri(0, n_units - 1);
                    }
                    for (int i = at - 1; sparse && i > first; i--) {   /* block order is the list's, not the keys' */
                        const int j = first + ri(0, i - first);
                        const int32_t tu = unit[i], ti = index[i];
                        unit[i] = unit[j];
                        index[i] = index[j];
                        unit[j] = tu;
                        index[j] = ti;
                    }
                }
            start[ns * nkv] = at;
            const struct okv_attn_blocks bl = {start, unit, index, NULL, 0};
            const size_t nf = (size_t)n * nh * hd;
            okv_bmem *q = NULL, *o = NULL;
            CHECK(be->ops->mem_alloc(be, nf, &q) == OKV_OK && be->ops->mem_alloc(be, nf, &o) == OKV_OK, "mem_alloc");
            float *ref = malloc(sizeof(float) * nf);
            for (size_t i = 0; i < nf; i++) {
                q->data[i] = rf();
                o->data[i] = NAN;   /* poisoned: every output must be written */
            }
            const float scale = 1.f / sqrtf((float)hd);
            CHECK(be->ops->attention(be, o, q, kv, 0, &bl, nh, scale) == OKV_OK, "attention: %s", okv_last_error());
            for (int t = 0; t < n; t++)
                for (int h = 0; h < nh; h++)
                    ref_query(kv, &meta, &bl, q->data + ((size_t)t * nh + h) * hd, ref + ((size_t)t * nh + h) * hd, t, h, nh, scale);
            const bool same = memcmp(ref, o->data, sizeof(float) * nf) == 0;
            CHECK(same, "bs %d kv %d x%d hd %d, %d sequences, %d rows%s: the tiled output differs from the reference", bs, nkv,
                  group, hd, ns, n, sparse ? ", sparse lists" : "");
            runs++;
            equal += same;
            free(ref);
            be->ops->mem_free(be, q);
            be->ops->mem_free(be, o);
            be->ops->kv_free(be, kv);
            free(seq);
            free(pos);
            free(slot);
            free(start);
            free(unit);
            free(index);
        }
    printf("cpu attention: %d of %d random steps bit-equal to the per-query reference\n", equal, runs);
    okv_backend_free(be);
    return tu_finish("test_cpu_attention");
}
