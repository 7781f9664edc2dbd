/* Structured output's token mask: its cost a step over a vocabulary's trie, for a GBNF grammar, a regex of the same
 * shape and a recursive arithmetic grammar (bench/RESULTS.md section 60), and Lark grammars: the same list, and a
 * calculator with %import and %ignore whose left recursion is rewritten (section 61). For each byte of a text, the mask of the
 * state there is made twice: first while the grammar numbers states and transitions it has not seen (a regex DFA
 * has them all), then with them memoized. One thread, no mask cache.
 *   bench_mask [tokenizer.json]     (default: tests/data/smollm2/tokenizer.json under OKV_SOURCE_DIR or .) */
#include "oasiskv/structured.h"
#include "oasiskv/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void row(const char *name, const okv_json_schema *sch, const char *text, const okv_token_trie *trie,
                const int32_t *eog, int n_eog, float *lg, int n)
{
    struct okv_json_state s;
    okv_json_init_schema(&s, sch);
    double t[2] = {0, 0};
    const size_t len = strlen(text);
    for (size_t i = 0; i <= len; i++) {
        for (int pass = 0; pass < 2; pass++) {
            for (int k = 0; k < n; k++)
                lg[k] = 0.0f;
            const double t0 = now();
            okv_json_mask(&s, trie, eog, n_eog, lg, n);
            t[pass] += now() - t0;
        }
        if (i < len)
            okv_json_feed(&s, (uint8_t)text[i]);
    }
    printf("| %s | `%s` | %.2f | %.2f |\n", name, text, 1e3 * t[0] / (double)(len + 1), 1e3 * t[1] / (double)(len + 1));
}

int main(int argc, char **argv)
{
    char path[1024];
    const char *src = getenv("OKV_SOURCE_DIR");
    if (argc > 1)
        snprintf(path, sizeof path, "%s", argv[1]);
    else
        snprintf(path, sizeof path, "%s/tests/data/smollm2/tokenizer.json", src ? src : ".");
    okv_tokenizer *tok = NULL;
    okv_token_trie *trie = NULL;
    if (okv_tokenizer_from_json_file(path, &tok) != OKV_OK || okv_token_trie_build(tok, &trie) != OKV_OK) {
        fprintf(stderr, "bench_mask: %s: %s\n", path, okv_last_error());
        return 1;
    }
    const int n = okv_tokenizer_n_vocab(tok);
    int32_t eog[8];
    int n_eog = 0;
    for (int32_t id = 0; id < n && n_eog < 8; id++)
        if (okv_tokenizer_is_eog(tok, id))
            eog[n_eog++] = id;
    float *lg = malloc(sizeof(float) * (size_t)n);
    static const char list_g[] = "root ::= \"[\" ws item (\",\" ws item)+ ws \"]\"\n"
                                 "item ::= \"\\\"\" [^\"\\\\\\n]{1,12} \"\\\"\" | \"[\" ws item ws \"]\"\nws ::= \" \"?\n";
    static const char list_re[] = "\\[ ?\"[^\"\\\\\\n]{1,12}\"(, ?\"[^\"\\\\\\n]{1,12}\")+ ?\\]";
    static const char arith_g[] = "root ::= expr \" = \" num\nexpr ::= term ((\"+\" | \"-\" | \"*\") term){1,3}\n"
                                  "term ::= num | \"(\" expr \")\"\nnum ::= [1-9] [0-9]{0,2}\n";
    static const char list_lark[] = "start: \"[\" ws item (\",\" ws item)+ ws \"]\"\n"
                                    "item: \"\\\"\" /[^\"\\\\\\n]{1,12}/ \"\\\"\" | \"[\" ws item ws \"]\"\nws: \" \"?\n";
    static const char calc_lark[] = "?start: sum\n?sum: product | sum \"+\" product | sum \"-\" product\n"
                                    "?product: atom | product \"*\" atom | product \"/\" atom\n"
                                    "?atom: NUMBER | \"-\" atom | NAME | \"(\" sum \")\"\n"
                                    "%import common.CNAME -> NAME\n%import common.NUMBER\n%import common.WS_INLINE\n"
                                    "%ignore WS_INLINE\n";
    okv_json_schema *g1 = NULL, *r1 = NULL, *g2 = NULL, *l1 = NULL, *l2 = NULL;
    if (!lg || okv_json_grammar_compile(list_g, strlen(list_g), &g1) != OKV_OK ||
        okv_json_regex_compile(list_re, strlen(list_re), &r1) != OKV_OK ||
        okv_json_grammar_compile(arith_g, strlen(arith_g), &g2) != OKV_OK ||
        okv_json_grammar_compile(list_lark, strlen(list_lark), &l1) != OKV_OK ||
        okv_json_grammar_compile(calc_lark, strlen(calc_lark), &l2) != OKV_OK) {
        fprintf(stderr, "bench_mask: %s\n", okv_last_error());
        return 1;
    }
    printf("%d ids (%s)\n\n| constraint | text | first walk, ms a step | again, ms a step |\n|---|---|---|---|\n", n, path);
    row("GBNF list of quoted strings, nested lists", g1, "[\"apple\", [\"kiwi\"], \"pear\"]", trie, eog, n_eog, lg, n);
    row("the same shape as a regex (DFA)", r1, "[\"apple\", \"kiwi\", \"pear\"]", trie, eog, n_eog, lg, n);
    row("GBNF arithmetic, recursive", g2, "(12+3)*45-6 = 669", trie, eog, n_eog, lg, n);
    row("the list of the first row, in Lark", l1, "[\"apple\", [\"kiwi\"], \"pear\"]", trie, eog, n_eog, lg, n);
    row("Lark calculator (%import, %ignore, left recursion)", l2, "(x1 + 2.5) * -y / 3e2", trie, eog, n_eog, lg, n);
    okv_json_schema_free(g1);
    okv_json_schema_free(r1);
    okv_json_schema_free(g2);
    okv_json_schema_free(l1);
    okv_json_schema_free(l2);
    okv_token_trie_free(trie);
    okv_tokenizer_free(tok);
    free(lg);
    return 0;
}
