/* Block selection on the CPU: the Quest upper bound of q.k over a block from the
 * element-wise min and max of its keys (or, with key codes, the max of q.k over its keys
 * as the codes see them; backend.h), maximised over the GQA group's query heads and the
 * given query rows; then the top k per KV head (ties to the lower block id, so the choice
 * is deterministic). */
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

/* OKV_SELECT_SCORE (diagnostics; bench/ACCURACY.md; exact and codesB on the CUDA backend too)
 * replaces the bound (or the key codes) by:
 *   exact    the exact max of q.k over the block's keys in the host tier (what block selection
 *            could reach with a perfect summary);
 *   mean     q . (the mean of the block's keys);
 *   codesB   the max of q.k over the block's keys, each channel first rounded to one of 2^B
 *            levels (B = 1..4) spanning the summary's [kmin, kmax] (per-token codes a summary
 *            could keep);
 *   blend:R  q.c + R * sum_d |q_d| r_d from the summary's centre c and half-range r (R = 1 is
 *            the bound, R = 0 the centre).
 * OKV_CODES_BLEND=b (0..1; with key codes, both backends) scores (1 - b) * the codes' max +
 * b * Quest's bound (from the weights the codes use: q.kmin + L sum_d max(w_d, 0)) in place of
 * OKV_KEY_CODE_BLEND (backend.h).
 * Read once per select_blocks call (tests switch them). */
enum score_kind { SCORE_BOUND, SCORE_EXACT, SCORE_MEAN, SCORE_CODES, SCORE_BLEND };
struct score_mode { enum score_kind kind; int bits; float radius; float codes_blend; };

static struct score_mode score_mode(void)
{
    const char *e = getenv("OKV_SELECT_SCORE");
    struct score_mode m = {SCORE_BOUND, 0, 1.0f, okv_key_code_blend()};
    if (!e || !*e)
        return m;
    if (!strcmp(e, "exact"))
        m.kind = SCORE_EXACT;
    else if (!strcmp(e, "mean"))
        m.kind = SCORE_MEAN;
    else if (!strncmp(e, "codes", 5)) {
        const int b = atoi(e + 5);
        m.kind = SCORE_CODES;
        m.bits = b < 1 ? 1 : b > 4 ? 4 : b;
    } else if (!strncmp(e, "blend:", 6)) {
        m.kind = SCORE_BLEND;
        m.radius = strtof(e + 6, NULL);
    }
    return m;
}

/* exact max (or mean) of q.k over the block's keys; with bits > 0 each key channel first
 * rounded to one of 2^bits levels spanning the block's [kmin, kmax] for that channel
 * (codes a summary could keep per token) */
static float host_score(const okv_bkv *kv, int layer, int hb, int h, const float *qv, bool mean, int bits,
                        const float *kmin, const float *kmax)
{
    const int hd = kv->g.head_dim;
    const float *k = kv->hk ? cpu_kv_host(kv, kv->hk, layer, hb, h) : NULL;
    const uint8_t *k8 = kv->hk8 ? cpu_kv_host8(kv, kv->hk8, layer, hb, h) : NULL;
    const int top = (1 << bits) - 1;
    float best = -INFINITY, sum = 0;
    for (int t = 0; t < kv->g.block_size; t++) {
        float s = 0;
        for (int d = 0; d < hd; d++) {
            const size_t at = (size_t)t * hd + d;
            float kd = k8 ? kv->dec8[k8[at]] : k[at];
            if (bits > 0) {
                const float span = kmax[d] - kmin[d];
                kd = kmin[d] + (float)cpu_key_quantize(kd, kmin[d], span, top) / (float)top * span;
            }
            s += qv[d] * kd;
        }
        best = s > best ? s : best;
        sum += s;
    }
    return mean ? sum / (float)kv->g.block_size : best;
}

/* the block's score from its key codes (backend.h): max_t q.kmin + s * sum_d iw_d c_td, with
 * w_d = (q_d (1 / L)) (kmax_d - kmin_d), iw_d = round(w_d (127 / m)) and s = m / 127, m = max_d |w_d|
 * (the CUDA backend's integer dot products; the same float steps here, so the same integers) */
static float codes_score(const okv_bkv *kv, int layer, int hb, int h, const float *qv, const float *kmin,
                         const float *kmax, float blend)
{
    const int hd = kv->g.head_dim, bits = kv->g.key_code_bits;
    float w[512];   /* head_dim <= 512 (cpu kv_alloc) */
    int iw[512];
    const float inv_top = 1.f / (float)((1 << bits) - 1);
    const uint8_t *c = cpu_kv_codes(kv, layer, hb, h);
    float base = 0, mx = 0, pos = 0;
    for (int d = 0; d < hd; d++) {
        const float span = kmax[d] - kmin[d];
        base += qv[d] * kmin[d];
        w[d] = span > 0 ? (qv[d] * inv_top) * span : 0;
        mx = fabsf(w[d]) > mx ? fabsf(w[d]) : mx;
        pos += w[d] > 0 ? w[d] : 0;
    }
    const float rs = mx > 0 ? 127.f / mx : 0;
    for (int d = 0; d < hd; d++) {
        const int v = (int)rintf(w[d] * rs);
        iw[d] = v < -127 ? -127 : v > 127 ? 127 : v;
    }
    float sc = mx / 127.f;
    if (blend > 0) {   /* (1 - b) the codes' max + b Quest's bound q.kmin + L sum_d max(w_d, 0) (backend.h) */
        base = fmaf(blend, (float)((1 << bits) - 1) * pos, base);
        sc = (1.f - blend) * sc;
    }
    float best = -INFINITY;
    for (int t = 0; t < kv->g.block_size; t++) {
        int acc = 0;
        for (int d = 0; d < hd; d++)
            acc += iw[d] * cpu_key_code(c, bits, (size_t)t * hd + d);
        const float s = fmaf(sc, (float)acc, base);   /* fused, as on the GPU: the same float */
        best = s > best ? s : best;
    }
    return best;
}

static enum okv_status select_one(const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                  const struct okv_select_req *req, const struct score_mode *mode, int32_t *out, float *scores,
                                  struct scored *sc)
{
    const enum score_kind kind = mode->kind;
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
                    if (kind == SCORE_BOUND && kv->codes)
                        s = codes_score(kv, layer, hb, h, qv, kmin, kmax, mode->codes_blend);
                    else if (kind == SCORE_EXACT || kind == SCORE_MEAN || kind == SCORE_CODES)
                        s = host_score(kv, layer, hb, h, qv, kind == SCORE_MEAN, mode->bits, kmin, kmax);
                    else if (kind == SCORE_BLEND)
                        for (int d = 0; d < hd; d++)
                            s += qv[d] * (0.5f * (kmin[d] + kmax[d])) + fabsf(qv[d]) * (mode->radius * 0.5f * (kmax[d] - kmin[d]));
                    else
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
    const struct score_mode mode = score_mode();
    enum okv_status st = OKV_OK;
    for (int i = 0; i < n_reqs && st == OKV_OK; i++) {
        st = select_one(kv, layer, q, n_heads, &reqs[i], &mode, out, scores, sc);
        out += (size_t)kv->g.n_kv_heads * reqs[i].k;
        if (scores)
            scores += (size_t)kv->g.n_kv_heads * reqs[i].n_cand;
    }
    okv_free(sc);
    return st;
}
