/* label: unit */
/* Guided regex (src/structured/regex.c): full matches and non-matches, the byte at which a text
 * stops being a prefix of any match (and no earlier), `.`, classes and \D \W \S over multi-byte
 * UTF-8 and the invalid forms they must refuse, every refused construct named in its error,
 * the state cap, no dead states, and nothing leaked. Against Python's re on random texts:
 * tests/sh/test_regex_ref.sh. */
#include "structured/regex.h"
#include "testutil.h"

#include <string.h>

static okv_regex *compile(const char *pat)
{
    okv_regex *re = NULL;
    const enum okv_status st = okv_regex_compile(pat, strlen(pat), &re);
    CHECK(st == OKV_OK, "/%s/: %s", pat, okv_last_error());
    return re;
}

/* Feed text to re: the byte that gave -1 (*fail_at, -1 if none) and whether the whole text
 * fully matches. */
static bool feed(const okv_regex *re, const char *text, size_t n, long *fail_at)
{
    int s = okv_regex_start(re);
    *fail_at = -1;
    for (size_t i = 0; i < n; i++) {
        s = okv_regex_next(re, s, (uint8_t)text[i]);
        if (s < 0) {
            *fail_at = (long)i;
            return false;
        }
    }
    return okv_regex_accepting(re, s);
}

/* expect_fail: the byte that must give -1 (-1: none, the text is a prefix; -2: it matches) */
static void expect(const char *pat, const char *text, long expect_fail)
{
    okv_regex *re = compile(pat);
    if (!re)
        return;
    long fail_at;
    const bool m = feed(re, text, strlen(text), &fail_at);
    if (expect_fail == -2)
        CHECK(m, "/%s/ must fully match \"%s\" (fails at %ld)", pat, text, fail_at);
    else
        CHECK(!m && fail_at == expect_fail, "/%s/ on \"%s\": refused at byte %ld, not %ld (match %d)", pat, text, fail_at,
              expect_fail, m);
    okv_regex_free(re);
}

#define MATCH(p, t) expect(p, t, -2)
#define PREFIX(p, t) expect(p, t, -1)   /* every byte taken, no full match yet */
#define FAILS_AT(p, t, i) expect(p, t, i)

static void expect_error(const char *pat, enum okv_status want, const char *needle)
{
    okv_regex *re = (okv_regex *)1;
    const enum okv_status st = okv_regex_compile(pat, strlen(pat), &re);
    CHECK(st == want, "/%s/: status %s, want %s", pat, okv_status_str(st), okv_status_str(want));
    CHECK(re == NULL, "/%s/: out not cleared on error", pat);
    CHECK(strstr(okv_last_error(), needle), "/%s/: error \"%s\" does not name \"%s\"", pat, okv_last_error(), needle);
    okv_regex_free(re);
}

/* Every state can reach an accepting one (the API's promise), by a search over all bytes. */
static void check_no_dead_states(const char *pat)
{
    okv_regex *re = compile(pat);
    if (!re)
        return;
    const int n = okv_regex_n_states(re);
    bool *live = calloc((size_t)n, 1);
    for (int s = 0; s < n; s++)
        live[s] = okv_regex_accepting(re, s);
    for (bool changed = true; changed;) {
        changed = false;
        for (int s = 0; s < n; s++)
            for (int c = 0; c < 256 && !live[s]; c++) {
                const int t = okv_regex_next(re, s, (uint8_t)c);
                CHECK(t >= -1 && t < n, "/%s/: transition out of range", pat);
                if (t >= 0 && live[t])
                    live[s] = changed = true;
            }
    }
    int dead = 0;
    for (int s = 0; s < n; s++)
        dead += !live[s];
    CHECK(dead == 0, "/%s/: %d of %d states cannot reach a full match", pat, dead, n);
    CHECK(okv_regex_start(re) >= 0 && okv_regex_start(re) < n, "/%s/: start out of range", pat);
    CHECK(okv_regex_next(re, 0, 'a') >= -1 && okv_regex_next(re, -1, 'a') == -1, "/%s/: -1 stays -1", pat);
    free(live);
    okv_regex_free(re);
}

static void test_basics(void)
{
    MATCH("abc", "abc");
    PREFIX("abc", "ab");
    FAILS_AT("abc", "abx", 2);
    FAILS_AT("abc", "abcd", 3);
    MATCH("", "");
    FAILS_AT("", "a", 0);
    MATCH("a|b|", "");
    MATCH("a|b|", "b");
    MATCH("(ab|a)(c|bcd)", "abcd");
    MATCH("(ab|a)(c|bcd)", "abc");
    FAILS_AT("(ab|ac)d", "ae", 1);
    MATCH("a*", "");
    MATCH("a*", "aaaa");
    MATCH("a+b?", "aab");
    FAILS_AT("a+b?", "abb", 2);
    PREFIX("a+", "");
    MATCH("x{3}", "xxx");
    PREFIX("x{3}", "xx");
    FAILS_AT("x{3}", "xxxx", 3);
    MATCH("x{2,4}", "xxxx");
    FAILS_AT("x{2,4}", "xxxxx", 4);
    MATCH("x{2,}", "xxxxxxx");
    MATCH("x{,2}", "");
    FAILS_AT("x{,2}", "xxx", 2);
    MATCH("x{,}", "xxx");
    MATCH("a{0}b", "b");
    MATCH("(?:ab){1,3}c", "ababc");
    FAILS_AT("(?:ab){1,3}c", "abababab", 6);
    MATCH("a+?b??c*?", "aab");   /* lazy: the same full matches */
    MATCH("(ab){2,}?", "ababab");
    MATCH("(a*)*b", "aaab");
    MATCH("((a|b)*c)+", "abcbbc");
    MATCH("^(yes|no)$", "yes");
    FAILS_AT("^(yes|no)$", "yes\n", 3);
    MATCH("(^a|b)c$", "ac");
    MATCH("(?P<word>[a-z]+)-(?#a comment)\\d", "ab-7");
    /* a { that does not make a quantifier is a literal, as in Python */
    MATCH("a{", "a{");
    MATCH("{}a", "{}a");
    MATCH("x{1,2", "x{1,2");
    MATCH("\\{\"a\": \\d+\\}", "{\"a\": 12}");
    FAILS_AT("\\{\"a\": \\d+\\}", "{\"a\": }", 6);
    /* a thousand copies */
    char buf[1002];
    memset(buf, 'a', 1001);
    buf[1001] = 0;
    FAILS_AT("a{1000}", buf, 1000);
    buf[1000] = 0;
    MATCH("a{1000}", buf);
    buf[999] = 0;
    PREFIX("a{1000}", buf);
}

static void test_escapes_and_classes(void)
{
    MATCH("\\d+(\\.\\d+)?", "12.50");
    FAILS_AT("\\d+(\\.\\d+)?", "12.x", 3);
    MATCH("\\w+@\\w+\\.(com|org)", "a_b9@x.org");
    MATCH("\\s*\\S+\\s*", " \t\n\r\f\vab \n");
    MATCH("\\n\\t\\r\\f\\v\\a", "\n\t\r\f\v\a");
    okv_regex *re = compile("a\\0b");   /* \0 is the NUL byte, which the texts above cannot hold */
    if (re) {
        long fail_at;
        CHECK(feed(re, "a\0b", 3, &fail_at), "a\\0b on a NUL b");
        okv_regex_free(re);
    }
    MATCH("a\\.b\\*c\\/\\-\\\\\\(\\)\\[\\]\\{\\}\\|\\^\\$\\?\\+", "a.b*c/-\\()[]{}|^$?+");
    MATCH("\\x41\\u00e9\\U0001F600", "A\xc3\xa9\xf0\x9f\x98\x80");
    MATCH("[a-c]+[^a-c]*", "cabxyz");
    FAILS_AT("[a-c]+[^a-c]*", "abxa", 3);
    MATCH("[]a]+", "]a]");
    MATCH("[-a]+[a-]+", "-aa-");
    MATCH("[\\]\\\\]+", "]\\");
    MATCH("[\\d\\s]+", "1 2\t3");
    MATCH("[^\\W\\d]+", "ab_Z");
    FAILS_AT("[^\\W\\d]+", "ab1", 2);
    MATCH("[\\b]", "\b");
    MATCH("[.*+?]+", ".*+?");
    FAILS_AT("[.]", "a", 0);
    /* ASCII \d \w \s, and complements over all of Unicode */
    FAILS_AT("\\d", "\xd9\xa3", 0);         /* U+0663 ARABIC-INDIC DIGIT THREE: not \d here */
    MATCH("\\D", "\xd9\xa3");
    FAILS_AT("\\w", "\xc3\x9f", 0);         /* ß */
    MATCH("\\W\\W", "\xc3\x9f\xf0\x9f\x98\x80");
    MATCH("\\S", "\xc2\xa0");               /* NO-BREAK SPACE: not \s here */
    FAILS_AT("\\S", " ", 0);
}

static void test_utf8(void)
{
    /* . is any code point but \n, as valid UTF-8 */
    MATCH(".", "a");
    MATCH(".", "\xc3\xa9");                 /* é */
    MATCH(".", "\xe4\xb8\xad");             /* 中 */
    MATCH(".", "\xf0\x9f\x98\x80");         /* 😀 */
    MATCH(".", "\xf4\x8f\xbf\xbf");         /* U+10FFFF */
    MATCH(".", "\xed\x9f\xbf");             /* U+D7FF */
    MATCH(".", "\xee\x80\x80");             /* U+E000 */
    MATCH(".", "\x7f");
    FAILS_AT(".", "\n", 0);
    PREFIX(".", "\xe4\xb8");                /* a truncated character: a prefix, not a match */
    FAILS_AT(".", "\x80", 0);               /* a stray continuation byte */
    FAILS_AT(".", "\xc0\xaf", 0);           /* overlong '/' */
    FAILS_AT(".", "\xc1\xbf", 0);
    FAILS_AT(".", "\xe0\x80\x80", 1);       /* overlong 3-byte */
    FAILS_AT(".", "\xf0\x80\x80\x80", 1);   /* overlong 4-byte */
    FAILS_AT(".", "\xed\xa0\x80", 1);       /* a surrogate, U+D800 */
    FAILS_AT(".", "\xf4\x90\x80\x80", 1);   /* U+110000 */
    FAILS_AT(".", "\xf5\x80\x80\x80", 0);
    FAILS_AT(".", "\xff", 0);
    FAILS_AT(".", "\xc3\xc3", 1);           /* a lead byte where a continuation must be */
    FAILS_AT(".", "\xc3\xa9\xa9", 2);       /* one continuation too many */
    MATCH(".{3}", "a\xc3\xa9\xe4\xb8\xad");
    FAILS_AT(".{3}", "a\xc3\xa9\xe4\xb8\xad\x61", 6);
    /* literals and classes by code point */
    MATCH("\xc3\xa9+", "\xc3\xa9\xc3\xa9");
    FAILS_AT("\xc3\xa9+", "\xc3\xa8", 1);
    MATCH("[\xc3\xa0-\xc3\xbf]+", "\xc3\xa0\xc3\xa9\xc3\xbf");   /* [à-ÿ] */
    FAILS_AT("[\xc3\xa0-\xc3\xbf]", "\xc3\x9f", 1);              /* ß is below à */
    MATCH("[\xe4\xb8\x80-\xe9\xbe\xa5]{2}", "\xe4\xb8\xad\xe6\x96\x87");   /* [一-龥]: 中文 */
    FAILS_AT("[\xe4\xb8\x80-\xe9\xbe\xa5]", "a", 0);
    FAILS_AT("[\xe4\xb8\x80-\xe9\xbe\xa5]", "\xe9\xbe\xa6", 2);   /* U+9FA6, just past 龥 */
    FAILS_AT("[\xe4\xb8\x80-\xe9\xbe\xa5]", "\xe4\xb7\xbf", 1);   /* U+4DFF, just before 一 */
    MATCH("[\xdf\xbf-\xe0\xa0\x80]+", "\xdf\xbf\xe0\xa0\x80");     /* U+07FF-U+0800: across encoding lengths */
    MATCH("[\\u0100-\\U0010ffff]", "\xc4\x80");
    MATCH("[\\u0100-\\U0010ffff]", "\xf4\x8f\xbf\xbf");
    FAILS_AT("[\\u0100-\\U0010ffff]", "\xc3\xbf", 0);         /* no code point from C3 on is in range */
    FAILS_AT("[\\u0100-\\U0010ffff]", "\xed\xa0\x80", 1);          /* no surrogates inside a range */
    MATCH("[^a]", "\n");                    /* a negated class takes \n, as in Python */
    MATCH("[^a]", "\xf0\x9f\x98\x80");
    FAILS_AT("[^a]", "a", 0);
    FAILS_AT("[^a]", "\xed\xa0\x80", 1);
    MATCH("[^\xe4\xb8\x80-\xe9\xbe\xa5" "a]*", "b\xc3\xa9\xea\xb0\x80");
    FAILS_AT("[^\xe4\xb8\x80-\xe9\xbe\xa5" "a]*", "b\xe4\xb8\xad", 2);   /* E4 B8 .. lies inside 一-龥 whatever follows */
    MATCH("(\xf0\x9f\x98\x80|\xe4\xb8\xad\xe6\x96\x87)+", "\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x80");
    FAILS_AT("(\xf0\x9f\x98\x80|\xe4\xb8\xad\xe6\x96\x87)+", "\xe4\xb8\xad\xe4", 3);
    MATCH("\\\xc3\xa9", "\xc3\xa9");        /* an escaped non-ASCII character is itself */
}

static void test_errors(void)
{
    const enum okv_status bad = OKV_ERR_INVALID_ARG;
    expect_error("(?=a)", bad, "lookahead");
    expect_error("a(?!b)", bad, "negative lookahead");
    expect_error("(?<=a)b", bad, "lookbehind");
    expect_error("(?<!a)b", bad, "negative lookbehind");
    expect_error("(a)\\1", bad, "backreference \\1");
    expect_error("(?P<x>a)(?P=x)", bad, "backreference (?P=name)");
    expect_error("(?i)abc", bad, "inline flags");
    expect_error("a(?s:.)", bad, "inline flags");
    expect_error("\\bword", bad, "word boundary \\b");
    expect_error("a\\B", bad, "\\B");
    expect_error("\\Aa", bad, "\\A");
    expect_error("a\\Z", bad, "\\Z");
    expect_error("a*+", bad, "possessive");
    expect_error("a{1,3}+", bad, "possessive");
    expect_error("(?>a)", bad, "atomic group");
    expect_error("(?(1)a|b)", bad, "conditional");
    expect_error("\\N{DIGIT ONE}", bad, "\\N");
    expect_error("\\012", bad, "octal");
    expect_error("a^b", bad, "^ is only supported at the start");
    expect_error("a$b", bad, "$ is only supported at the end");
    expect_error("(^a)*", bad, "^");
    expect_error("a{1001}", bad, "more than 1000");
    expect_error("a{2,5000}", bad, "more than 1000");
    /* syntax errors, with their offset */
    expect_error("x(ab", bad, "missing ), unterminated group at byte 1");
    expect_error("ab)", bad, "unbalanced parenthesis at byte 2");
    expect_error("a[bc", bad, "unterminated character set at byte 1");
    expect_error("*a", bad, "nothing to repeat at byte 0");
    expect_error("a|+", bad, "nothing to repeat at byte 2");
    expect_error("{2}", bad, "nothing to repeat");
    expect_error("a**", bad, "multiple repeat at byte 2");
    expect_error("a{3,2}", bad, "min repeat greater than max repeat");
    expect_error("[z-a]", bad, "bad character range z-a");
    expect_error("[\\d-z]", bad, "bad character range");
    expect_error("\\q", bad, "bad escape \\q");
    expect_error("a\\", bad, "trailing backslash");
    expect_error("\\x4", bad, "\\x");
    expect_error("\\ud800", bad, "surrogate");
    expect_error("(?P<1>a)", bad, "group name");
    expect_error("(?<n>a)", bad, "unknown group extension");
    expect_error("a\xc3", bad, "UTF-8 character in the pattern at byte 1");
    expect_error("a\xff", bad, "invalid UTF-8 in the pattern at byte 1");
    expect_error("\xed\xa0\x80", bad, "invalid UTF-8");
    expect_error("[^\\s\\S]", bad, "matches no text");
    expect_error("a[^\\d\\D]|b[^\\w\\W]", bad, "matches no text");
    char deep[600];
    memset(deep, '(', 300);
    memset(deep + 300, ')', 300);
    deep[599] = 0;
    deep[299] = 'a';
    expect_error(deep, bad, "nested too deeply");
    okv_regex *re = NULL;
    CHECK(okv_regex_compile("a)", 1, &re) == OKV_OK, "the length bounds the pattern: %s", okv_last_error());
    okv_regex_free(re);
    okv_regex_free(NULL);
}

static void test_state_cap(void)
{
    /* (a|b)*a(a|b){n-1} needs 2^n states: n = 12 fits 4096, n = 13 does not */
    okv_regex *re = compile("(a|b)*a(a|b){11}");
    if (re) {
        CHECK(okv_regex_n_states(re) <= OKV_REGEX_MAX_STATES, "%d states", okv_regex_n_states(re));
        okv_regex_free(re);
    }
    expect_error("(a|b)*a(a|b){12}", OKV_ERR_UNSUPPORTED, "more than 4096 DFA states");
    expect_error(".{0,1000}", OKV_ERR_UNSUPPORTED, "4096");
    expect_error("((((a{1000}){1000}){1000}){1000})", OKV_ERR_UNSUPPORTED, "too large");
    re = compile("[a-z]{1,1000}");
    if (re) {
        CHECK(okv_regex_n_states(re) == 1001, "[a-z]{1,1000}: %d states", okv_regex_n_states(re));
        okv_regex_free(re);
    }
    re = compile(".");
    if (re) {   /* the UTF-8 decoder's states, shared between the sequences: start, done and 7 between */
        CHECK(okv_regex_n_states(re) == 9, ".: %d states", okv_regex_n_states(re));
        okv_regex_free(re);
    }
}

int main(void)
{
    const int64_t live0 = okv_alloc_live_count(OKV_TAG_SERVER);
    test_basics();
    test_escapes_and_classes();
    test_utf8();
    test_errors();
    test_state_cap();
    static const char *const pats[] = {
        "(a|b)*a(a|b){3}", ".*x", "[^a]{2}[\xe4\xb8\x80-\xe9\xbe\xa5]+", "-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?",
        "a[^\\s\\S]|b", "(\\w+\\s?){1,5}",
    };
    for (size_t i = 0; i < sizeof pats / sizeof *pats; i++)
        check_no_dead_states(pats[i]);
    CHECK(okv_alloc_live_count(OKV_TAG_SERVER) == live0, "%lld allocations left",
          (long long)(okv_alloc_live_count(OKV_TAG_SERVER) - live0));
    return tu_finish("test_regex");
}
