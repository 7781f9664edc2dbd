/* The host sampler (src/engine/sampling.c) against a plain reference written here: a softmax at the
 * temperature over the whole vocabulary sorted by logit (descending, id ascending), min_p, top_k and
 * top_p cut from the sorted list as vLLM orders them, the kept candidates renormalised; a draw walks
 * the kept ids in increasing id order until the cumulative probability passes u. The sampler gathers
 * only the candidates a histogram bounds before it sorts, and fuses the passes of the unfiltered draw;
 * its distributions and draws must be those of the reference. Logit rows: flat, peaked (a head of a
 * few ids over a long tail), with ties, and with ids masked to -inf (structured output); every filter
 * setting on a grid and at random. Unfiltered, the terms are float (expf), as in the sampler: an id whose
 * term underflows is not drawn. */
#include "oasiskv/sampling.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rc { float l; int32_t id; };

static int rc_cmp(const void *a, const void *b)
{
    const struct rc *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

/* the reference distribution (probs[n], zero outside the kept set) */
static void ref_probs(const float *lg, int n, const struct okv_sampling *p, double *probs)
{
    memset(probs, 0, sizeof(double) * (size_t)n);
    int best = 0;
    for (int i = 1; i < n; i++)
        if (lg[i] > lg[best])
            best = i;
    if (p->temperature <= 0.0f) {
        probs[best] = 1.0;
        return;
    }
    const bool filtered = (p->top_k > 0 && p->top_k < n) || (p->top_p > 0.0f && p->top_p < 1.0f) || p->min_p > 0.0f;
    if (!filtered) {   /* unfiltered: float terms (expf), as the GPU's sampler and the documented host one */
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += expf((lg[i] - lg[best]) * (1.0f / p->temperature));
        for (int i = 0; i < n; i++)
            probs[i] = expf((lg[i] - lg[best]) * (1.0f / p->temperature)) / sum;
        return;
    }
    struct rc *c = malloc(sizeof *c * (size_t)n);
    for (int i = 0; i < n; i++)
        c[i] = (struct rc){lg[i], i};
    qsort(c, (size_t)n, sizeof *c, rc_cmp);
    const double inv_t = (double)(1.0f / p->temperature);
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    if (p->min_p > 0.0f)
        for (int i = 1; i < k; i++)
            if (exp((double)(c[i].l - c[0].l) * inv_t) < (double)p->min_p) {
                k = i;
                break;
            }
    double sum = 0;
    for (int i = 0; i < k; i++)
        sum += exp((double)(c[i].l - c[0].l) * inv_t);
    int keep = k;
    if (p->top_p > 0.0f && p->top_p < 1.0f) {
        double cum = 0;
        for (int i = 0; i < k; i++) {
            cum += exp((double)(c[i].l - c[0].l) * inv_t) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double s2 = 0;
    for (int i = 0; i < keep; i++)
        s2 += exp((double)(c[i].l - c[0].l) * inv_t);
    for (int i = 0; i < keep; i++)
        probs[c[i].id] = exp((double)(c[i].l - c[0].l) * inv_t) / s2;
    free(c);
}

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}
static float frand(void) { return (float)(rnd() & 0xffffff) / 16777216.0f; }

/* a row of logits of one of the kinds */
static void make_row(float *lg, int n, int kind)
{
    for (int i = 0; i < n; i++) {
        switch (kind) {
        case 0: lg[i] = frand() * 4.0f - 2.0f; break;                       /* flat */
        case 1: lg[i] = -8.0f + frand() * 6.0f; break;                      /* a tail, the head below */
        case 2: lg[i] = (float)(rnd() % 16) * 0.5f; break;                  /* ties */
        default: lg[i] = frand() * 10.0f - 5.0f; break;                     /* wide */
        }
    }
    if (kind == 1)
        for (int h = 0; h < 5; h++)
            lg[rnd() % (uint32_t)n] = 4.0f + 3.0f * frand();
    if (kind == 3) {   /* masked: most ids -inf, one at least allowed (the scheduler samples no row without) */
        const int keep = (int)(rnd() % (uint32_t)n);
        for (int i = 0; i < n; i++)
            if (i != keep && rnd() % 8)
                lg[i] = -INFINITY;
    }
}

int main(void)
{
    const int vocabs[] = {7, 1000, 49152};
    const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f};
    const int top_ks[] = {0, 1, 3, 40, 900, 60000};
    const float top_ps[] = {1.0f, 0.5f, 0.9f, 0.95f, 0.999f};
    const float min_ps[] = {0.0f, 0.05f, 0.3f};
    int n_rows = 0, bad_support = 0, bad_draw = 0;
    double max_err = 0;
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const int n = vocabs[vi];
        float *lg = malloc(sizeof(float) * (size_t)n), *pr = malloc(sizeof(float) * (size_t)n);
        float *scratch = malloc(sizeof(float) * (size_t)n);
        double *ref = malloc(sizeof(double) * (size_t)n);
        const int reps = n > 10000 ? 60 : 300;
        for (int r = 0; r < reps; r++) {
            make_row(lg, n, r % 4);
            struct okv_sampling p = {0};
            if (r < 5 * 6) {   /* the grid of temperature x top_k, then top_p x min_p, then random */
                p.temperature = temps[r % 5];
                p.top_k = top_ks[r / 5];
                p.top_p = 1.0f;
            } else if (r < 30 + 15) {
                p.temperature = 0.8f;
                p.top_p = top_ps[(r - 30) % 5];
                p.min_p = min_ps[(r - 30) / 5];
            } else {
                p.temperature = 0.1f + 2.0f * frand();
                p.top_k = rnd() % 3 ? 0 : (int)(rnd() % 200);
                p.top_p = rnd() % 3 ? 1.0f : 0.3f + 0.7f * frand();
                p.min_p = rnd() % 4 ? 0.0f : 0.2f * frand();
            }
            okv_sampling_probs(lg, n, &p, pr);
            ref_probs(lg, n, &p, ref);
            for (int i = 0; i < n; i++) {
                if ((pr[i] > 0.0f) != (ref[i] > 0.0)) {
                    bad_support++;
                    if (bad_support <= 5)
                        fprintf(stderr, "  vocab %d row %d (T %g k %d p %g min_p %g): id %d kept %d, reference %d\n", n, r,
                                p.temperature, p.top_k, p.top_p, p.min_p, i, pr[i] > 0.0f, ref[i] > 0.0);
                    break;
                }
                const double e = fabs((double)pr[i] - ref[i]) / (ref[i] > 1e-30 ? ref[i] : 1e6);   /* below 1e-30:
                                                                                      absolute, 1e-36 */
                max_err = e > max_err ? e : max_err;
            }
            /* draws at fresh u: the reference's walk over its float probabilities, in increasing id order */
            for (int d = 0; d < 8; d++) {
                const double u = d == 0 ? 0.0 : d == 1 ? 0.9999999 : (double)frand();
                const int32_t got = okv_sample_u(lg, n, &p, u, scratch);
                int32_t want = -1, last = -1;
                double cum = 0;
                for (int i = 0; i < n && want < 0; i++) {
                    const float pi = (float)ref[i];
                    if (pi <= 0.0f)
                        continue;
                    cum += pi;
                    last = i;
                    if (u < cum)
                        want = i;
                }
                if (want < 0)
                    want = last;
                if (got != want && ++bad_draw <= 5)
                    fprintf(stderr, "  vocab %d row %d (T %g k %d p %g min_p %g) u %.7f: drew %d, reference %d\n", n, r,
                            p.temperature, p.top_k, p.top_p, p.min_p, u, got, want);
            }
            n_rows++;
        }
        free(lg);
        free(pr);
        free(scratch);
        free(ref);
    }
    CHECK(bad_support == 0, "%d of %d rows keep other ids than the reference", bad_support, n_rows);
    CHECK(max_err < 1e-6, "probabilities differ from the reference by up to %.3g (relative)", max_err);
    CHECK(bad_draw == 0, "%d of %d draws differ from the reference's", bad_draw, 8 * n_rows);
    printf("  %d rows (3 vocabularies, 4 kinds, the filter grid and random settings), %d draws: kept sets equal, "
           "probabilities within %.2g, draws equal\n", n_rows, 8 * n_rows, max_err);
    return tu_finish("test_sampling");
}
