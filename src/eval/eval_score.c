/* Scoring of outputs against references, and the Wilson interval of an accuracy. */
#include "eval_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <strings.h>

char *okv_eval_normalize(const char *s)
{
    size_t n = strlen(s);
    char *o = okv_malloc(n + 1, OKV_TAG_MISC);
    if (!o)
        return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (isalnum(ch)) {
            o[m++] = (char)tolower(ch);
            continue;
        }
        /* a thousands separator: 1,234,567 is 1234567 */
        if (ch == ',' && m > 0 && isdigit((unsigned char)o[m - 1]) && i + 1 < n && isdigit((unsigned char)s[i + 1]))
            continue;
        if (m > 0 && o[m - 1] != ' ')
            o[m++] = ' ';
    }
    while (m > 0 && o[m - 1] == ' ')
        m--;
    o[m] = 0;
    return o;
}

/* ref (normalised) appears in out (normalised) on word boundaries */
static bool has_words(const char *out, const char *ref)
{
    size_t rl = strlen(ref), ol = strlen(out);
    if (!rl)
        return false;
    for (const char *p = out; (p = strstr(p, ref)) != NULL; p++) {
        bool left = p == out || p[-1] == ' ';
        bool right = (size_t)(p - out) + rl == ol || p[rl] == ' ';
        if (left && right)
            return true;
    }
    return false;
}

/* the most steps read from a chain's output: its answers and a few more */
#define MAX_STEPS (OKV_EVAL_MAX_ANSWERS + 8)

/* chain: the words the output names as steps: its first word (the answer to the prompt's
 * "A ->"), then the word after every later "->"; and its final answer. */
static int chain_steps(const char *out, char steps[][64], int max)
{
    int n = 0;
    const char *p = out;
    for (bool first = true; *p && n < max; first = false) {
        if (!first) {
            const char *arrow = strstr(p, "->");
            if (!arrow)
                break;
            p = arrow + 2;
        }
        while (*p && !isalnum((unsigned char)*p) && strncmp(p, "->", 2))
            p++;
        size_t l = 0;
        while (p[l] && isalnum((unsigned char)p[l]) && l < 63)
            l++;
        if (l) {
            for (size_t i = 0; i < l; i++)
                steps[n][i] = (char)tolower((unsigned char)p[i]);
            steps[n][l] = 0;
            n++;
        }
        p += l;
    }
    return n;
}

static void final_answer(const char *out, char *ans, size_t cap)
{
    ans[0] = 0;
    const char *last = NULL;
    /* the last "Final:" (a word of its own: codes such as "finally" contain it too) */
    for (const char *p = out; *p; p++) {
        if (strncasecmp(p, "final", 5) || (p > out && isalnum((unsigned char)p[-1])))
            continue;
        const char *q = p + 5;
        while (*q == ' ')
            q++;
        if (*q == ':')
            last = q + 1;
    }
    if (last) {
        while (*last && !isalnum((unsigned char)*last))
            last++;
        size_t l = 0;
        while (last[l] && isalnum((unsigned char)last[l]) && l + 1 < cap)
            ans[l] = (char)tolower((unsigned char)last[l]), l++;
        ans[l] = 0;
        return;
    }
    char steps[MAX_STEPS][64];
    int n = chain_steps(out, steps, MAX_STEPS);
    if (n > 0)
        snprintf(ans, cap, "%s", steps[n - 1]);
}

double okv_eval_score(enum okv_eval_score_kind kind, const char *const *answers, int n_answers, const char *output,
                      bool *correct)
{
    *correct = false;
    if (n_answers <= 0 || !output)
        return 0;
    if (kind == OKV_EVAL_SCORE_FINAL) {
        char fin[64];
        final_answer(output, fin, sizeof fin);
        char *ref = okv_eval_normalize(answers[n_answers - 1]);
        *correct = ref && fin[0] && !strcmp(fin, ref);
        okv_free(ref);
        char steps[MAX_STEPS][64];
        int ns = chain_steps(output, steps, MAX_STEPS), ok = 0;
        for (int i = 0; i < ns && i < n_answers; i++) {
            char *r = okv_eval_normalize(answers[i]);
            bool same = r && !strcmp(r, steps[i]);
            okv_free(r);
            if (!same)
                break;
            ok++;
        }
        return (double)ok / n_answers;
    }
    char *out = okv_eval_normalize(output);
    if (!out)
        return 0;
    int found = 0;
    for (int i = 0; i < n_answers; i++) {
        char *ref = okv_eval_normalize(answers[i]);
        if (ref && has_words(out, ref))
            found++;
        okv_free(ref);
    }
    okv_free(out);
    if (kind == OKV_EVAL_SCORE_ANY) {
        *correct = found > 0;
        return found > 0 ? 1.0 : 0.0;
    }
    *correct = found == n_answers;
    return (double)found / n_answers;
}

void okv_eval_wilson(int k, int n, double *lo, double *hi)
{
    if (n <= 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    const double z = 1.959963984540054;
    double p = (double)k / n, z2 = z * z;
    double den = 1 + z2 / n;
    double center = (p + z2 / (2.0 * n)) / den;
    double half = z / den * sqrt(p * (1 - p) / n + z2 / (4.0 * n * n));
    *lo = center - half < 0 ? 0 : center - half;
    *hi = center + half > 1 ? 1 : center + half;
}
