/* okv_json_check: the structured-output recognizer's verdict on documents, for
 * tests/py/check_json_ref.py to compare with Python's json module.
 *
 * usage: okv_json_check [--object]  < lines
 * Each input line is a document in hex (so that any byte, newlines included, can be
 * given); each output line is "complete", "prefix" (every byte accepted, not complete) or
 * "fail N" (byte N refused). --object: the top-level value must be an object. */
#include "oasiskv/structured.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexv(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int main(int argc, char **argv)
{
    const bool object_only = argc > 1 && strcmp(argv[1], "--object") == 0;
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    while (line && fgets(line, (int)cap, stdin)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        struct okv_json_state s;
        okv_json_init(&s, object_only);
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
    return 0;
}
