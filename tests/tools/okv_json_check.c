/* okv_json_check: the structured-output recognizer's verdict on documents, for
 * tests/py/check_json_ref.py to compare with Python's json module (and jsonschema).
 *
 * usage: okv_json_check [--object | --schema FILE]  < lines
 *        okv_json_check --schema FILE --walk N SEED
 * Each input line is a document in hex (so that any byte, newlines included, can be
 * given); each output line is "complete", "prefix" (every byte accepted, not complete) or
 * "fail N" (byte N refused). --object: the top-level value must be an object; --schema: it
 * must follow the JSON schema in FILE (a compile error is printed as "error: ..." and the
 * status is 3). --walk: N documents, each a random walk over the bytes the recognizer
 * accepts (printable ASCII, others now and then) until it is complete (or 4,000 bytes), one
 * per line in hex ("stuck" for a walk that found no byte to go on with, "long" for one that
 * reached 4,000 bytes unfinished). */
#include "oasiskv/structured.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexv(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void init(struct okv_json_state *s, bool object_only, const okv_json_schema *sch)
{
    if (sch)
        okv_json_init_schema(s, sch);
    else
        okv_json_init(s, object_only);
}

int main(int argc, char **argv)
{
    const bool object_only = argc > 1 && strcmp(argv[1], "--object") == 0;
    okv_json_schema *sch = NULL;
    if (argc > 2 && strcmp(argv[1], "--schema") == 0) {
        FILE *f = fopen(argv[2], "rb");
        static char text[1 << 20];
        size_t n = f ? fread(text, 1, sizeof text, f) : 0;
        if (f)
            fclose(f);
        if (okv_json_schema_compile(text, n, &sch) != OKV_OK) {
            printf("error: %s\n", okv_last_error());
            return 3;
        }
        if (argc > 5 && strcmp(argv[3], "--walk") == 0) {
            const int count = atoi(argv[4]);
            rng ^= strtoull(argv[5], NULL, 10) * 0x9E3779B97F4A7C15ull;
            for (int d = 0; d < count; d++) {
                struct okv_json_state s;
                init(&s, false, sch);
                char doc[4001];
                int len = 0;
                bool stuck = false;
                while (!okv_json_complete(&s) && len < 4000) {
                    /* the accepted bytes among printable ASCII (and whitespace, less often) */
                    uint8_t ok[256];
                    int nk = 0;
                    for (int c = 32; c < 256; c++) {
                        if (c >= 127 && nk > 0 && ok[nk - 1] < 127 && next() % 8)
                            break;   /* non-ASCII bytes now and then, and whenever nothing else goes */
                        struct okv_json_state t = s;
                        if (okv_json_feed(&t, (uint8_t)c))
                            ok[nk++] = (uint8_t)c;
                    }
                    if (nk == 0) {
                        stuck = true;
                        break;
                    }
                    /* prefer closing when a value may end: walks stay short */
                    uint8_t c = ok[next() % (uint64_t)nk];
                    if (len > 200) {   /* wind down: close a string, then the containers */
                        static const uint8_t pref[] = {'"', ']', '}', ','};
                        bool found = false;
                        for (size_t p = 0; p < sizeof pref && !found; p++)
                            for (int k = 0; k < nk && !found; k++)
                                if (ok[k] == pref[p])
                                    c = pref[p], found = true;
                    }
                    if (c == ' ' && next() % 4)
                        c = ok[next() % (uint64_t)nk];
                    okv_json_feed(&s, c);
                    doc[len++] = (char)c;
                }
                if (stuck || !okv_json_complete(&s)) {
                    printf(stuck ? "stuck\n" : "long\n");
                    continue;
                }
                for (int i = 0; i < len; i++)
                    printf("%02x", (unsigned char)doc[i]);
                printf("\n");
            }
            okv_json_schema_free(sch);
            return 0;
        }
    }
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    while (line && fgets(line, (int)cap, stdin)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        struct okv_json_state s;
        init(&s, object_only, sch);
        long at = -1;
        for (size_t i = 0; i + 1 < n + 1 && i / 2 < n / 2; i++) {
            const int hi = hexv(line[2 * i]), lo = hexv(line[2 * i + 1]);
            if (2 * i + 1 >= n || hi < 0 || lo < 0)
                break;
            if (!okv_json_feed(&s, (uint8_t)(hi * 16 + lo))) {
                at = (long)i;
                break;
            }
        }
        if (at >= 0)
            printf("fail %ld\n", at);
        else
            printf("%s\n", okv_json_complete(&s) ? "complete" : "prefix");
    }
    free(line);
    okv_json_schema_free(sch);
    return 0;
}
