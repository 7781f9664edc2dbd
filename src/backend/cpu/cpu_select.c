/* Block selection on the CPU: the Quest upper bound of q.k over a block from the
 * element-wise min and max of its keys, maximised over the GQA group's query heads
 * and the given query rows; then the top k per KV head (ties to the lower block id,
 * so the choice is deterministic). */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct scored { float s; int32_t id; };

static int scored_cmp(const void *a, const void *b)
{
    const struct scored *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static enum okv_status select_one(const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                  const struct okv_select_req *req, int32_t *out, float *scores, struct scored *sc)
{
    const int hd = kv->g.head_dim, nkv = kv->g.n_kv_heads, group = n_heads / nkv;
    if (req->k > req->n_cand || req->k < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu select_blocks: bad request (k %d of %d candidates)", req->k, req->n_cand);
    for (int h = 0; h < nkv; h++) {
        for (int c = 0; c < req->n_cand; c++) {
            int32_t hb = req->cand_host[c];
            if (hb < 0 || hb >= kv->g.n_host_blocks)
                return okv_set_error(OKV_ERR_INVALID_ARG, "cpu select_blocks: host block %d out of range", hb);
            const float *kmin = cpu_kv_summary(kv, layer, hb, h), *kmax = kmin + hd;
            float best = -INFINITY;
            for (int r = 0; r < req->n_rows; r++)
                for (int g = 0; g < group; g++) {
                    const float *qv = q->data + ((size_t)req->rows[r] * n_heads + (size_t)h * group + g) * hd;
                    float s = 0;
                    for (int d = 0; d < hd; d++) {
                        float a = qv[d] * kmin[d], b = qv[d] * kmax[d];
                        s += a > b ? a : b;
                    }
                    if (s > best)
                        best = s;
                }
            sc[c].s = best;
            sc[c].id = hb;
            if (scores)
                scores[(size_t)h * req->n_cand + c] = best;
        }
        qsort(sc, (size_t)req->n_cand, sizeof *sc, scored_cmp);
        for (int i = 0; i < req->k; i++)
            out[(size_t)h * req->k + i] = sc[i].id;
    }
    return OKV_OK;
}

enum okv_status okv_cpu_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                      const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores)
{
    if (!kv->summ || n_heads % kv->g.n_kv_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cpu select_blocks: no host tier or bad head count");
    int max_cand = 1;
    for (int i = 0; i < n_reqs; i++)
        max_cand = reqs[i].n_cand > max_cand ? reqs[i].n_cand : max_cand;
    struct scored *sc = okv_malloc(sizeof *sc * (size_t)max_cand, OKV_TAG_BACKEND);
    if (!sc)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cpu select_blocks: out of memory");
    enum okv_status st = OKV_OK;
    for (int i = 0; i < n_reqs && st == OKV_OK; i++) {
        st = select_one(kv, layer, q, n_heads, &reqs[i], out, scores, sc);
        out += (size_t)kv->g.n_kv_heads * reqs[i].k;
        if (scores)
            scores += (size_t)kv->g.n_kv_heads * reqs[i].n_cand;
    }
    okv_free(sc);
    return st;
}
