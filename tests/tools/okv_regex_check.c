/* okv_regex_check: the regex DFA's verdicts (src/structured/regex.c), for
 * tests/py/check_regex_ref.py to compare with Python's re.
 *
 * usage: okv_regex_check PATTERN_HEX               < lines
 *        okv_regex_check PATTERN_HEX --walk N SEED
 * The pattern and every text are given in hex, so that any byte can be. The first output line
 * is "states N", or "error: STATUS: MESSAGE" (exit 3) when the pattern does not compile.
 * Each input line then gets one output line: "match", "prefix" (every byte taken, no full
 * match) or "fail N" (byte N gave -1), followed by a witness for each prefix the DFA took
 * (lengths 0 .. the text's length, or .. N): the bytes of a shortest completion from there to
 * a full match, in hex ("-" when empty), which Python checks. --walk: N random full matches,
 * each a walk over the bytes the DFA allows, one per line in hex ("-" when empty).
 * The tool also checks the API's promise that no state is dead (exit 4 otherwise). */
#include "structured/regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexline.h"

static const okv_regex *re;
static int *dist;   /* (n_states): bytes to the nearest accepting state */

/* Breadth first from the accepting states over the reversed transitions. */
static int compute_dist(void)
{
    const int n = okv_regex_n_states(re);
    int *queue = malloc(sizeof *queue * (size_t)n);
    dist = malloc(sizeof *dist * (size_t)n);
    int head = 0, tail = 0;
    for (int s = 0; s < n; s++) {
        dist[s] = okv_regex_accepting(re, s) ? 0 : -1;
        if (!dist[s])
            queue[tail++] = s;
    }
    while (head < tail) {   /* quadratic, but n <= 4096 and this is a test */
        const int t = queue[head++];
        for (int s = 0; s < n; s++) {
            if (dist[s] >= 0)
                continue;
            for (int c = 0; c < 256; c++)
                if (okv_regex_next(re, s, (uint8_t)c) == t) {
                    dist[s] = dist[t] + 1;
                    queue[tail++] = s;
                    break;
                }
        }
    }
    free(queue);
    for (int s = 0; s < n; s++)
        if (dist[s] < 0) {
            printf("dead state %d\n", s);
            return 4;
        }
    return 0;
}

/* a shortest completion from s: the lowest byte that brings dist down, each time */
static void put_witness(int s)
{
    uint8_t buf[4096];
    size_t n = 0;
    while (dist[s] > 0 && n < sizeof buf) {
        for (int c = 0; c < 256; c++) {
            const int t = okv_regex_next(re, s, (uint8_t)c);
            if (t >= 0 && dist[t] == dist[s] - 1) {
                buf[n++] = (uint8_t)c;
                s = t;
                break;
            }
        }
    }
    put_hex(buf, n);
}

static void walk(void)
{
    uint8_t buf[8192];
    size_t n = 0;
    int s = okv_regex_start(re);
    for (;;) {
        if (okv_regex_accepting(re, s) && (next_rand() % 4 == 0 || n >= 40))
            break;
        int allowed[256], na = 0, ascii[256], nascii = 0;
        for (int c = 0; c < 256; c++)
            if (okv_regex_next(re, s, (uint8_t)c) >= 0) {
                allowed[na++] = c;
                if (c >= 0x20 && c < 0x7f)
                    ascii[nascii++] = c;
            }
        if (na == 0)   /* accepting with nowhere to go */
            break;
        int c;
        if (n >= 40) {   /* long enough: head for the nearest full match */
            c = -1;
            for (int i = 0; i < na && c < 0; i++)
                if (dist[okv_regex_next(re, s, (uint8_t)allowed[i])] == dist[s] - 1)
                    c = allowed[i];
        } else if (nascii > 0 && next_rand() % 2) {
            c = ascii[next_rand() % (uint64_t)nascii];
        } else {
            c = allowed[next_rand() % (uint64_t)na];
        }
        buf[n++] = (uint8_t)c;
        s = okv_regex_next(re, s, (uint8_t)c);
    }
    put_hex(buf, n);
    putchar('\n');
}

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 5 && !strcmp(argv[2], "--walk"))) {
        fprintf(stderr, "usage: okv_regex_check PATTERN_HEX [--walk N SEED] < hex lines\n");
        return 2;
    }
    const long plen = unhex(argv[1]);
    if (plen < 0) {
        fprintf(stderr, "bad hex pattern\n");
        return 2;
    }
    okv_regex *r = NULL;
    const enum okv_status st = okv_regex_compile(argv[1], (size_t)plen, &r);
    if (st != OKV_OK) {
        printf("error: %s: %s\n", okv_status_str(st), okv_last_error());
        return 3;
    }
    re = r;
    printf("states %d\n", okv_regex_n_states(re));
    int rc = compute_dist();
    if (rc)
        goto out;
    if (argc == 5) {
        const long n = atol(argv[3]);
        rng = 88172645463325252ull ^ (uint64_t)atol(argv[4]) * 0x9e3779b97f4a7c15ull;
        for (long i = 0; i < n; i++)
            walk();
        goto out;
    }
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        const long n = unhex(line);
        if (n < 0) {
            printf("bad line\n");
            continue;
        }
        const uint8_t *b = (const uint8_t *)line;
        int s = okv_regex_start(re);
        long i = 0;
        static int states[sizeof line / 2 + 1];
        states[0] = s;
        for (; i < n; i++) {
            s = okv_regex_next(re, s, b[i]);
            if (s < 0)
                break;
            states[i + 1] = s;
        }
        if (i < n)
            printf("fail %ld", i);
        else
            printf(okv_regex_accepting(re, s) ? "match" : "prefix");
        for (long k = 0; k <= i && k <= n; k++) {
            putchar(' ');
            put_witness(states[k]);
        }
        putchar('\n');
    }
out:
    free(dist);
    okv_regex_free(r);
    return rc;
}
