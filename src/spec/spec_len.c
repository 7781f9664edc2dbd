/* The draft length a step: chosen from the running acceptance and the measured costs.
 *
 * Model: each drafted token is accepted, given that the ones before it were, with a
 * probability alpha (the geometric model of speculative decoding), so k drafts give
 * A(k) = 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha) tokens a step
 * (the target always adds one). The step costs C(k) = T + k * (row + draft): T the
 * target's forward without drafts (t0 + row * base_rows: its own row, and in a batch
 * the other sequences'), row what one more verify row adds to it, draft the
 * drafter's time for one token. The length chosen maximizes A(k) / C(k) - in a batch
 * (A(k) + others) / C(k), where others are the tokens the step yields for the other
 * sequences, since a draft row delays them as well; k = 0 (no
 * drafts, A = 1) when no length pays for itself: a draft too weak or too costly.
 *
 * alpha: accepted / trials with exponential forgetting, where a step with k drafts of
 * which a were accepted counts min(a + 1, k) trials (the drafts the verification
 * reached) and a successes; a prior of OKV_SPEC_LEN_PRIOR_TRIALS trials at
 * OKV_SPEC_LEN_PRIOR_ALPHA starts it.
 * T and row: a least-squares line of forward seconds against rows with the same
 * forgetting; a row count up to 64 measured OKV_SPEC_COST_MIN_WEIGHT times or more is priced by its own
 * running mean instead (a GPU's step time is a staircase in its rows: 3 and 4 rows 0.43 ms, 5 and 6 rows 0.62,
 * 7 and 8 rows 0.54, 9 rows 0.92 on an H100, session 41, where a line through them drafts too much). The chosen length is dithered by one every few steps so that the rows
 * vary and the slope stays measured; at 0, one draft every few steps (as many as keep
 * these probes under 3% of the time, 8 to 64) keeps the acceptance measured. Until
 * there are two distinct row counts the slope is taken as OKV_SPEC_LEN_PRIOR_ROW of
 * the intercept. */
#include "oasiskv/spec.h"

#include <math.h>
#include <string.h>

#define OKV_SPEC_LEN_PRIOR_ALPHA 0.6
#define OKV_SPEC_LEN_PRIOR_TRIALS 1.0
#define OKV_SPEC_LEN_FORGET 0.97      /* per observation: a memory of ~33 steps */
#define OKV_SPEC_LEN_PRIOR_ROW 0.05   /* a verify row's cost as a share of a step's, until measured */
#define OKV_SPEC_LEN_DITHER 8         /* one step in this many drafts one less, one one more */
#define OKV_SPEC_LEN_PROBE_SHARE 0.03 /* at 0 drafts, the share of the time that probes may take */
#define OKV_SPEC_COST_MIN_WEIGHT 3.0  /* a row count's forwards (forgetting weight) before its own mean prices it */

void okv_spec_len_init(struct okv_spec_len *c, int k_min, int k_max)
{
    memset(c, 0, sizeof *c);
    c->k_max = k_max < 1 ? 1 : k_max > OKV_SPEC_MAX_TOKENS ? OKV_SPEC_MAX_TOKENS : k_max;
    c->k_min = k_min < 0 ? 0 : k_min > c->k_max ? c->k_max : k_min;
    c->trials = OKV_SPEC_LEN_PRIOR_TRIALS;
    c->accepted = OKV_SPEC_LEN_PRIOR_ALPHA * OKV_SPEC_LEN_PRIOR_TRIALS;
}

void okv_spec_len_observe(struct okv_spec_len *c, int k, int accepted)
{
    if (k <= 0)
        return;
    if (accepted < 0)
        accepted = 0;
    if (accepted > k)
        accepted = k;
    const int trials = accepted + 1 < k ? accepted + 1 : k;
    const double f = pow(OKV_SPEC_LEN_FORGET, trials);
    c->trials = c->trials * f + trials;
    c->accepted = c->accepted * f + accepted;
    c->steps++;
}

double okv_spec_len_alpha(const struct okv_spec_len *c)
{
    return c->trials > 0 ? c->accepted / c->trials : OKV_SPEC_LEN_PRIOR_ALPHA;
}

void okv_spec_cost_init(struct okv_spec_cost *c) { memset(c, 0, sizeof *c); }

void okv_spec_cost_forward(struct okv_spec_cost *c, int rows, double seconds)
{
    if (rows <= 0 || !(seconds >= 0.0))
        return;
    const double f = OKV_SPEC_LEN_FORGET, x = rows;
    if (rows <= OKV_SPEC_COST_WARM_ROWS) {
        c->rw[rows] = c->rw[rows] * f + 1.0;
        c->rs[rows] = c->rs[rows] * f + seconds;
    }
    c->w = c->w * f + 1.0;
    c->sx = c->sx * f + x;
    c->sy = c->sy * f + seconds;
    c->sxx = c->sxx * f + x * x;
    c->sxy = c->sxy * f + x * seconds;
}

bool okv_spec_cost_settled(struct okv_spec_cost *c, int rows)
{
    if (rows <= 0 || rows > OKV_SPEC_COST_WARM_ROWS || c->seen[rows] >= 2)
        return true;
    c->seen[rows]++;
    return false;
}

void okv_spec_cost_draft(struct okv_spec_cost *c, int tokens, double seconds)
{
    if (tokens <= 0 || !(seconds >= 0.0))
        return;
    const double f = pow(OKV_SPEC_LEN_FORGET, tokens);
    c->draft_n = c->draft_n * f + tokens;
    c->draft_s = c->draft_s * f + seconds;
}

void okv_spec_cost_line(const struct okv_spec_cost *c, double *t0, double *row)
{
    *t0 = *row = 0.0;
    if (c->w <= 0.0)
        return;
    const double mx = c->sx / c->w, my = c->sy / c->w;
    const double vxx = c->sxx / c->w - mx * mx, vxy = c->sxy / c->w - mx * my;
    if (vxx > 1e-3) {
        *row = vxy / vxx;
        if (*row < 0.0)   /* noise: a row never makes a step cheaper */
            *row = 0.0;
        *t0 = my - *row * mx;
        if (*t0 < 0.0) {
            *t0 = 0.0;
            *row = mx > 0.0 ? my / mx : 0.0;
        }
    } else {   /* one row count so far: split its time as the prior says */
        const double s = OKV_SPEC_LEN_PRIOR_ROW;
        *t0 = my / (1.0 + s * (mx - 1.0 > 0.0 ? mx - 1.0 : 0.0));
        *row = s * *t0;
    }
}

/* Expected tokens a step with k drafts: 1 + alpha + ... + alpha^k. */
static double expected_tokens(double alpha, int k)
{
    double a = 1.0, p = 1.0;
    for (int i = 0; i < k; i++) {
        p *= alpha;
        a += p;
    }
    return a;
}

/* The costs that choose a length: a step's without drafts (base), a draft token's (row + draft), from the line;
 * fwd_cost gives a forward of a row count, from its own mean where it has one. */
static void step_costs(const struct okv_spec_cost *cost, int base_rows, double *base, double *per_draft)
{
    double t0, row;
    okv_spec_cost_line(cost, &t0, &row);
    const double draft = cost->draft_n > 0.0 ? cost->draft_s / cost->draft_n : 0.0;
    if (t0 <= 0.0 && row <= 0.0)   /* nothing measured yet: the acceptance alone, a row at the prior's share */
        t0 = 1.0, row = OKV_SPEC_LEN_PRIOR_ROW;
    *base = t0 + row * (double)(base_rows > 1 ? base_rows : 1);
    *per_draft = row + draft;
}

/* a step of base_rows rows and k drafts: its forward (a row count's own mean where measured, else the line)
 * plus the drafter's time for k tokens */
static double step_cost(const struct okv_spec_cost *cost, int base_rows, int k, double base, double per)
{
    const int rows = (base_rows > 1 ? base_rows : 1) + k;
    if (rows <= OKV_SPEC_COST_WARM_ROWS && cost->rw[rows] >= OKV_SPEC_COST_MIN_WEIGHT) {
        const double draft = cost->draft_n > 0.0 ? cost->draft_s / cost->draft_n : 0.0;
        return cost->rs[rows] / cost->rw[rows] + (double)k * draft;
    }
    return base + (double)k * per;
}

int okv_spec_len_best(const struct okv_spec_len *c, const struct okv_spec_cost *cost, int base_rows, double others,
                      int k_cap)
{
    const int kmax = c->k_max < k_cap ? c->k_max : k_cap;
    if (kmax <= 0)
        return 0;
    double base, per;
    step_costs(cost, base_rows, &base, &per);
    const double alpha = okv_spec_len_alpha(c);
    const int kmin = c->k_min < kmax ? c->k_min : kmax;
    int best = kmin;
    if (others < 0.0)
        others = 0.0;
    /* the step's tokens over its time: a draft row delays the other sequences' tokens too */
    double best_g = (expected_tokens(alpha, kmin) + others) / step_cost(cost, base_rows, kmin, base, per);   /* k = 0: one token */
    for (int k = kmin + 1; k <= kmax; k++) {
        const double g = (expected_tokens(alpha, k) + others) / step_cost(cost, base_rows, k, base, per);
        if (g > best_g * (1.0 + 1e-9)) {   /* ties: the shorter */
            best_g = g;
            best = k;
        }
    }
    return best;
}

int okv_spec_len_choose(struct okv_spec_len *c, const struct okv_spec_cost *cost, int base_rows, double others,
                        int k_cap, bool probe_ok)
{
    int k = okv_spec_len_best(c, cost, base_rows, others, k_cap);
    const int kmax = c->k_max < k_cap ? c->k_max : k_cap;
    if (k == 0) {
        /* nothing pays: a one-token probe now and then keeps the acceptance measured, as often as
         * OKV_SPEC_LEN_PROBE_SHARE of the time allows (every 8 to 64 steps) */
        double base, per;
        step_costs(cost, base_rows, &base, &per);
        double period = per / (OKV_SPEC_LEN_PROBE_SHARE * base);
        period = period < OKV_SPEC_LEN_DITHER ? OKV_SPEC_LEN_DITHER : period > 64.0 ? 64.0 : period;
        if (c->idle < (unsigned)period)
            c->idle++;
        if (kmax >= 1 && probe_ok && c->idle >= (unsigned)period) {
            c->idle = 0;
            return 1;
        }
        return 0;   /* (a due probe waits for a step where it may run) */
    }
    c->idle = 0;
    const unsigned phase = c->n_chosen++ % OKV_SPEC_LEN_DITHER;
    if (phase == OKV_SPEC_LEN_DITHER / 2 && k > 1 && k > c->k_min)
        k--;
    else if (phase == 0 && c->n_chosen > 1 && k < kmax)
        k++;
    return k;
}
