/* The test tools' line format (okv_regex_check, okv_grammar_check): texts as hex lines ("-" for the empty
 * text) in and out, and the xorshift generator of their random walks. Header-only: each tool is one file. */
#ifndef OKV_TESTS_HEXLINE_H
#define OKV_TESTS_HEXLINE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int hexv(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* hex text to bytes in place; the byte count, -1 when malformed */
static long unhex(char *s)
{
    size_t n = strcspn(s, "\r\n");
    s[n] = 0;
    if (n == 1 && s[0] == '-')
        return 0;
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        const int a = hexv(s[i]), b = hexv(s[i + 1]);
        if (a < 0 || b < 0)
            return -1;
        s[i / 2] = (char)(a << 4 | b);
    }
    return (long)(n / 2);
}

static void put_hex(const uint8_t *b, size_t n)
{
    if (!n)
        putchar('-');
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
}

static uint64_t rng;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#endif
