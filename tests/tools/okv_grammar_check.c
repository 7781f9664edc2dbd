/* okv_grammar_check: the GBNF recognizer's verdicts (src/structured/grammar.c), for
 * tests/py/check_grammar_ref.py to compare with Lark.
 *
 * usage: okv_grammar_check GRAMMAR_FILE [--root NAME]                < hex lines
 *        okv_grammar_check GRAMMAR_FILE [--root NAME] --walk N SEED
 * The first output line is "states N", or "error: STATUS: MESSAGE" (exit 3) when the grammar
 * does not compile. Each input line (a text in hex, "-" for the empty one) then gets one line:
 * "accept N" or "reject N", where N is the length of the longest prefix whose every byte the
 * recognizer took (the text's length when it took them all), and, where it took them all
 * without accepting, a shortest completion to a sentence in hex, found by following
 * okv_grammar_min_to_accept down ("none" when that fails, which breaks the API's promise). A trailing " overflow" says a limit
 * was hit. --walk: N random sentences, each a walk over the bytes the recognizer allows,
 * finished by a shortest completion, one per line in hex. */
#include "structured/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexline.h"

static okv_grammar *gram;

/* A shortest completion from state s into buf (at most cap bytes): at each step the lowest
 * byte that brings okv_grammar_min_to_accept down by one. Its length; -1 when no byte does
 * (which breaks the API's promise) or a limit was hit. */
static long shortest_completion(int s, uint8_t *buf, long cap)
{
    long n = 0;
    for (int d = okv_grammar_min_to_accept(gram, s); d > 0; d--) {
        int next = -1;
        for (int c = 0; c < 256 && next < 0; c++) {
            const int t = okv_grammar_next(gram, s, (uint8_t)c);
            if (t >= 0 && okv_grammar_min_to_accept(gram, t) == d - 1) {
                next = t;
                if (n < cap)
                    buf[n] = (uint8_t)c;
                n++;
            }
        }
        if (next < 0)
            return -1;
        s = next;
    }
    return okv_grammar_accepting(gram, s) && n <= cap ? n : -1;
}

static int walk(void)
{
    static uint8_t buf[1 << 16];
    long n = 0;
    int s = okv_grammar_start(gram);
    const long target = 4 + (long)(next_rand() % 40);
    for (;;) {
        if (okv_grammar_accepting(gram, s) && (next_rand() % 4 == 0 || n >= target))
            break;
        if (n >= target) {   /* long enough: head for the nearest sentence */
            const long k = shortest_completion(s, buf + n, (long)sizeof buf - n);
            if (k < 0) {
                printf("none\n");
                return 4;
            }
            n += k;
            break;
        }
        int allowed[256], na = 0, ascii[256], nascii = 0;
        for (int c = 0; c < 256; c++)
            if (okv_grammar_next(gram, s, (uint8_t)c) >= 0) {
                allowed[na++] = c;
                if (c >= 0x20 && c < 0x7f)
                    ascii[nascii++] = c;
            }
        if (na == 0)
            break;   /* accepting, with nowhere to go */
        const int c = nascii > 0 && next_rand() % 4 ? ascii[next_rand() % (uint64_t)nascii] : allowed[next_rand() % (uint64_t)na];
        buf[n++] = (uint8_t)c;
        s = okv_grammar_next(gram, s, (uint8_t)c);
    }
    put_hex(buf, (size_t)n);
    putchar('\n');
    return 0;
}

int main(int argc, char **argv)
{
    const char *root = NULL;
    long n_walks = -1, seed = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--root") && i + 1 < argc) {
            root = argv[++i];
        } else if (!strcmp(argv[i], "--walk") && i + 2 < argc) {
            n_walks = atol(argv[i + 1]);
            seed = atol(argv[i + 2]);
            i += 2;
        } else {
            argc = 0;
        }
    }
    if (argc < 2) {
        fprintf(stderr, "usage: okv_grammar_check GRAMMAR_FILE [--root NAME] [--walk N SEED] < hex lines\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", argv[1]);
        return 2;
    }
    static char text[1 << 20];
    const size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    const enum okv_status st = okv_grammar_compile(text, len, root, &gram);
    if (st != OKV_OK) {
        printf("error: %s: %s\n", okv_status_str(st), okv_last_error());
        return 3;
    }
    printf("states %d\n", okv_grammar_n_states(gram));
    int rc = 0;
    if (n_walks >= 0) {
        rng = 88172645463325252ull ^ (uint64_t)seed * 0x9e3779b97f4a7c15ull;
        for (long i = 0; i < n_walks && !rc; i++)
            rc = walk();
        goto out;
    }
    static char line[1 << 17];
    static uint8_t comp[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        const long n = unhex(line);
        if (n < 0) {
            printf("bad line\n");
            continue;
        }
        const uint8_t *b = (const uint8_t *)line;
        int s = okv_grammar_start(gram);
        long i = 0;
        for (; i < n; i++) {
            const int t = okv_grammar_next(gram, s, b[i]);
            if (t < 0)
                break;
            s = t;
        }
        const bool acc = i == n && okv_grammar_accepting(gram, s);
        printf("%s %ld", acc ? "accept" : "reject", i);
        if (i == n && !acc) {
            const long k = shortest_completion(s, comp, (long)sizeof comp);
            putchar(' ');
            if (k < 0)
                printf("none");
            else
                put_hex(comp, (size_t)k);
        }
        if (okv_grammar_overflowed(gram))
            printf(" overflow");
        putchar('\n');
    }
out:
    okv_grammar_free(gram);
    return rc;
}
