/* label: unit */
/* GBNF grammars (src/structured/grammar.c): sentences and non-sentences of a dozen grammars,
 * the byte at which a text stops being a prefix of any sentence (and no earlier), UTF-8 by
 * code point, every compile error named with its line and column, that no state reached is a
 * dead end (random walks, then a completion from every state, along okv_grammar_min_to_accept,
 * whose distances a breadth-first search confirms where it can), the depth, parse and state limits
 * (-1 and overflowed(), no crash), four threads sharing one grammar, and nothing leaked.
 * Against Lark on random texts: tests/sh/test_grammar_ref.sh. */
#include "structured/grammar.h"
#include "testutil.h"

#include <pthread.h>
#include <string.h>

static okv_grammar *compile_root(const char *text, const char *root)
{
    okv_grammar *g = NULL;
    const enum okv_status st = okv_grammar_compile(text, strlen(text), root, &g);
    CHECK(st == OKV_OK, "grammar {%s}: %s", text, okv_last_error());
    return g;
}

static okv_grammar *compile(const char *text) { return compile_root(text, NULL); }

/* Feed text to g: the byte that gave -1 (*fail_at, -1 if none) and whether the whole text is a
 * sentence. */
static bool feed(okv_grammar *g, const char *text, size_t n, long *fail_at)
{
    int s = okv_grammar_start(g);
    *fail_at = -1;
    for (size_t i = 0; i < n; i++) {
        s = okv_grammar_next(g, s, (uint8_t)text[i]);
        if (s < 0) {
            *fail_at = (long)i;
            return false;
        }
    }
    return okv_grammar_accepting(g, s);
}

/* expect_fail: the byte that must give -1 (-1: none, the text is a prefix; -2: a sentence) */
static void expect_g(okv_grammar *g, const char *gtext, const char *text, long expect_fail)
{
    long fail_at;
    const bool m = feed(g, text, strlen(text), &fail_at);
    if (expect_fail == -2)
        CHECK(m, "{%s} must accept \"%s\" (refused at byte %ld)", gtext, text, fail_at);
    else
        CHECK(!m && fail_at == expect_fail, "{%s} on \"%s\": refused at byte %ld, not %ld (accepted %d)", gtext, text,
              fail_at, expect_fail, m);
}

static void expect(const char *gtext, const char *text, long expect_fail)
{
    okv_grammar *g = compile(gtext);
    if (!g)
        return;
    expect_g(g, gtext, text, expect_fail);
    CHECK(!okv_grammar_overflowed(g), "{%s}: overflowed on \"%s\"", gtext, text);
    okv_grammar_free(g);
}

#define ACCEPT(g, t) expect(g, t, -2)
#define PREFIX(g, t) expect(g, t, -1)   /* every byte taken, not a sentence yet */
#define FAILS_AT(g, t, i) expect(g, t, i)

static void expect_error(const char *text, const char *needle, const char *needle2)
{
    okv_grammar *g = (okv_grammar *)1;
    const enum okv_status st = okv_grammar_compile(text, strlen(text), NULL, &g);
    CHECK(st == OKV_ERR_INVALID_ARG, "{%s}: status %s, want invalid argument", text, okv_status_str(st));
    CHECK(g == NULL, "{%s}: out not cleared on error", text);
    CHECK(strstr(okv_last_error(), needle), "{%s}: error \"%s\" does not name \"%s\"", text, okv_last_error(), needle);
    if (needle2)
        CHECK(strstr(okv_last_error(), needle2), "{%s}: error \"%s\" does not say \"%s\"", text, okv_last_error(), needle2);
    okv_grammar_free(g);
}

/* ---- sentences and non-sentences ---- */

static const char *const JSON_G =
    "root   ::= value\n"
    "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\"\n"
    "member ::= string ws \":\" ws value ws\n"
    "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"\\\\/bfnrt] )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )?\n"
    "ws     ::= [ \\t\\n]*\n";

static const char *const ARITH_G =
    "root   ::= expr\n"
    "expr   ::= term ( (\"+\" | \"-\") term )*\n"
    "term   ::= factor ( (\"*\" | \"/\") factor )*\n"
    "factor ::= number | \"(\" expr \")\" | \"-\" factor\n"
    "number ::= [0-9]+\n";

static const char *const CSV_G =
    "root  ::= field (\",\" field)* \"\\n\"?\n"
    "field ::= [^,\"\\n]* | \"\\\"\" ( [^\"] | \"\\\"\\\"\" )* \"\\\"\"\n";

static const char *const KV_G =
    "# key=value pairs, ; between\n"
    "root ::= pair ( \";\" \" \"? pair )*   # at least one\n"
    "pair ::= key \"=\" val\n"
    "key  ::= [a-zA-Z_] [a-zA-Z0-9_-]*\n"
    "val  ::= [0-9]+\n"
    "       | \"'\" [^']* \"'\"\n";

static void test_sentences(void)
{
    ACCEPT(JSON_G, "{\"a\": [1, 2.5, -0, \"x\\\"y\", true, null], \"b\": {}}");
    ACCEPT(JSON_G, "[]");
    ACCEPT(JSON_G, "\"\\n\"");
    PREFIX(JSON_G, "{\"a\": [1, ");
    FAILS_AT(JSON_G, "{\"a\" 1}", 5);
    FAILS_AT(JSON_G, "[01]", 2);
    FAILS_AT(JSON_G, "tru e", 3);
    FAILS_AT(JSON_G, "\"\\q\"", 2);
    FAILS_AT(JSON_G, "[1,]", 3);

    ACCEPT(ARITH_G, "1+2*3");
    ACCEPT(ARITH_G, "((((1))))");
    ACCEPT(ARITH_G, "-(2-(3*-4))/(5)");
    PREFIX(ARITH_G, "((1+2)*(3");
    PREFIX(ARITH_G, "");
    FAILS_AT(ARITH_G, "(1+2))", 5);
    FAILS_AT(ARITH_G, "1+*2", 2);
    FAILS_AT(ARITH_G, "()", 1);
    FAILS_AT(ARITH_G, "1 + 2", 1);

    ACCEPT(CSV_G, "a,b,c\n");
    ACCEPT(CSV_G, "a,,\"q,\"\"x\"\"\",d");
    ACCEPT(CSV_G, "");
    PREFIX(CSV_G, "a,\"open");
    FAILS_AT(CSV_G, "a,b\nc", 4);
    FAILS_AT(CSV_G, "a\"b", 1);
    FAILS_AT(CSV_G, "\"x\"y", 3);

    ACCEPT(KV_G, "a=1; b_2='x y';c-d=''");
    ACCEPT(KV_G, "_=0");
    PREFIX(KV_G, "a=1;");
    FAILS_AT(KV_G, "a=1;;", 4);
    FAILS_AT(KV_G, "1a=2", 0);
    FAILS_AT(KV_G, "a=1;  b=2", 5);
    FAILS_AT(KV_G, "a=x", 2);

    /* repetition bounds */
    const char *rep = "root ::= \"a\"{2,4} \"b\"{3} (\"cd\"){0,2} \"e\"{1,}";
    ACCEPT(rep, "aabbbe");
    ACCEPT(rep, "aaaabbbcdcdeee");
    FAILS_AT(rep, "abbb", 1);
    FAILS_AT(rep, "aaaaab", 4);
    FAILS_AT(rep, "aabbbb", 5);
    FAILS_AT(rep, "aabbbcdcdcd", 9);
    PREFIX(rep, "aabbbcd");
    ACCEPT("root ::= \"ab\"* \"c\"", "ababc");   /* a postfix repeats the whole literal */
    FAILS_AT("root ::= \"ab\"* \"c\"", "abac", 3);
    ACCEPT("root ::= \"x\"{2}{3}", "xxxxxx");       /* and repeats a repetition */
    FAILS_AT("root ::= \"x\"{2}{3}", "xxxxxxx", 6);
    ACCEPT("root ::= \"x\"{0} \"y\"", "y");
    ACCEPT("root ::= \"x\"{0,0} \"y\"?", "");
    char buf[1002];
    memset(buf, 'a', 1001);
    buf[1001] = 0;
    FAILS_AT("root ::= \"a\"{1000}", buf, 1000);
    buf[1000] = 0;
    ACCEPT("root ::= \"a\"{1000}", buf);
    ACCEPT("root ::= [a-z]{1,1000}", buf);

    /* alternatives, groups, empty ones, rules over lines, comments */
    ACCEPT("root ::= \"a\" | \"b\" | ", "");
    ACCEPT("root ::= ( \"a\" | ) \"b\"", "b");
    ACCEPT("root ::= (\"for\" | \"foreach\" | \"form\" \"at\"?) \";\"", "format;");
    ACCEPT("root ::= (\"for\" | \"foreach\" | \"form\" \"at\"?) \";\"", "foreach;");
    FAILS_AT("root ::= (\"for\" | \"foreach\" | \"form\" \"at\"?) \";\"", "forma;", 5);
    const char *multi = "root ::=\n  \"a\"   # first\n  b\n  | \"c\"\nb ::= \"b\"\n\n# the end\n";
    ACCEPT(multi, "ab");
    ACCEPT(multi, "c");
    FAILS_AT(multi, "ac", 1);
    /* a^n b^n and nested brackets: beyond any finite automaton */
    const char *anbn = "root ::= \"a\" root \"b\" | \"\"";
    ACCEPT(anbn, "aaabbb");
    FAILS_AT(anbn, "aaabbbb", 6);
    PREFIX(anbn, "aaabb");
    const char *br = "root ::= item*\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\" | \"x\"";
    ACCEPT(br, "x([x]())[[x]]");
    FAILS_AT(br, "([)]", 2);
    /* nullable repetitions: ("a"? "b"?)* is taken (llama.cpp calls it left recursion) */
    ACCEPT("root ::= (\"a\"? \"b\"?)* \"c\"", "abbaac");
    ACCEPT("root ::= (\"a\"*)* \"c\"", "c");
    ACCEPT("root ::= (\"a\"*)+ \"c\"", "aac");
    /* another start rule, and escapes */
    okv_grammar *g = compile_root("root ::= \"r\"\nother ::= \"o\" [\\x41-\\u0043] \"\\t\\\\\\[\\]\"", "other");
    if (g) {
        long f;
        CHECK(feed(g, "oB\t\\[]", 6, &f), "another start rule: fails at %ld", f);
        okv_grammar_free(g);
    }
}

/* Lark's syntax (grammar_lark.c), a few exact cases; tests/sh/test_grammar_ref.sh compares its languages with
 * Lark's own parser on random texts */
static void test_lark(void)
{
    static const char *const SQL =   /* vLLM's documentation's example of structured_outputs.grammar */
        "?start: select_statement\n"
        "?select_statement: \"SELECT \" column_list \" FROM \" table_name\n"
        "?column_list: column_name (\",\" column_name)*\n"
        "?table_name: identifier\n"
        "?column_name: identifier\n"
        "?identifier: /[a-zA-Z_][a-zA-Z0-9_]*/\n";
    ACCEPT(SQL, "SELECT a,b_1 FROM t");
    FAILS_AT(SQL, "SELECT a, FROM t", 9);
    PREFIX(SQL, "SELECT a FROM ");
    static const char *const CALC =   /* left recursion, %import, %ignore, aliases, continuation lines, comments */
        "?start: sum   // a sum\n"
        "?sum: product\n"
        "    | sum \"+\" product -> add\n"
        "    # a comment between the alternatives\n"
        "    | sum \"-\" product -> sub\n"
        "?product: atom | product \"*\" atom\n"
        "?atom: NUMBER | \"-\" atom | NAME | \"(\" sum \")\"\n"
        "%import common.CNAME -> NAME\n"
        "%import common (NUMBER, WS_INLINE)\n"
        "%ignore WS_INLINE\n";
    ACCEPT(CALC, "1+2*3");
    ACCEPT(CALC, " ( x_1 - 2.5e3 ) * -y ");
    ACCEPT(CALC, "1-2-3");
    FAILS_AT(CALC, "1 2", 2);
    FAILS_AT(CALC, "1+\n2", 2);
    PREFIX(CALC, "(1+");
    static const char *const MISC =
        "start: \"let\"i NAME \"=\" DIGITS \"a\"..\"c\" ~ 2 [\"!\"] \"\\u00e9\"\n"
        "NAME.2: /[a-z]+/\n"
        "DIGITS: (\"0\"..\"9\")+\n"
        "%ignore \" \"\n";
    ACCEPT(MISC, "LeT x = 42 ab \xc3\xa9");
    ACCEPT(MISC, "let x=1cc!\xc3\xa9");
    PREFIX(MISC, "let x=1 a a");   /* each a..c is a token: ignored spaces between them */
    FAILS_AT(MISC, "let x=1 ad", 9);
    FAILS_AT(MISC, "let x=1ab\xc3\xa8", 10);
}

/* okv_grammar_min_to_accept after text (-1 when the text is refused) */
static int min_after(const char *gtext, const char *text)
{
    okv_grammar *g = compile(gtext);
    if (!g)
        return -2;
    int s = okv_grammar_start(g);
    for (size_t i = 0; text[i] && s >= 0; i++)
        s = okv_grammar_next(g, s, (uint8_t)text[i]);
    const int d = s >= 0 ? okv_grammar_min_to_accept(g, s) : -1;
    CHECK(okv_grammar_min_to_accept(g, -1) == -1 && okv_grammar_min_to_accept(g, okv_grammar_n_states(g)) == -1,
          "min_to_accept of states that do not exist");
    okv_grammar_free(g);
    return d;
}

static void test_min_to_accept(void)
{
    int d;
    CHECK((d = min_after(ARITH_G, "")) == 1, "arith, nothing read: %d", d);
    CHECK((d = min_after(ARITH_G, "((1+")) == 3, "arith ((1+: %d", d);
    CHECK((d = min_after(ARITH_G, "((1+2))")) == 0, "arith ((1+2)): %d", d);
    CHECK((d = min_after(JSON_G, "{\"ab")) == 4, "json {\"ab: %d", d);   /* ":0} */
    CHECK((d = min_after("root ::= \"\xc3\xa9\xe4\xb8\xad\"", "\xc3")) == 4, "a partial character: %d", d);
    CHECK((d = min_after("root ::= [\xe4\xb8\x80-\xe9\xbe\xa5] | \"\xc3\xa9\xc3\xa9\"", "")) == 3, "the shorter "
          "alternative in bytes: %d", d);
    CHECK((d = min_after("root ::= \"a\" root \"b\" | \"\"", "aaa")) == 3, "a^n b^n: %d", d);
    CHECK((d = min_after("root ::= \"x\"{3,} \"y\"?", "x")) == 2, "x{3,}: %d", d);
}

static void test_utf8(void)
{
    const char *greek = "root ::= [\xce\xb1-\xcf\x89]+ (\" \" [\xd0\x90-\xd0\xaf\xd0\xb0-\xd1\x8f]{1,3})?";   /* [α-ω]+ [А-Яа-я]{1,3} */
    ACCEPT(greek, "\xce\xb1\xce\xb2\xcf\x89");                  /* αβω */
    ACCEPT(greek, "\xce\xbb \xd0\x94\xd0\xb0");                 /* λ Да */
    PREFIX(greek, "\xce");                                       /* half of α */
    FAILS_AT(greek, "\xce\xb0", 1);                              /* U+03B0, just before α */
    FAILS_AT(greek, "\xcf\x8a", 1);                              /* U+03CA, just after ω */
    FAILS_AT(greek, "a", 0);
    FAILS_AT(greek, "\xce\xb1 \xd0\x94\xd0\x94\xd0\x94\xd0\x94", 9);
    /* . is any code point, newline included; never invalid UTF-8 */
    const char *dot = "root ::= \"<\" . \">\"";
    ACCEPT(dot, "<a>");
    ACCEPT(dot, "<\n>");
    ACCEPT(dot, "<\xc3\xa9>");
    ACCEPT(dot, "<\xe4\xb8\xad>");
    ACCEPT(dot, "<\xf0\x9f\x98\x80>");
    ACCEPT(dot, "<\xf4\x8f\xbf\xbf>");                           /* U+10FFFF */
    FAILS_AT(dot, "<\x80>", 1);                                  /* a stray continuation byte */
    FAILS_AT(dot, "<\xc0\xaf>", 1);                              /* overlong */
    FAILS_AT(dot, "<\xc1\xbf>", 1);
    FAILS_AT(dot, "<\xe0\x80\x80>", 2);
    FAILS_AT(dot, "<\xf0\x80\x80\x80>", 2);
    FAILS_AT(dot, "<\xed\xa0\x80>", 2);                          /* a surrogate */
    FAILS_AT(dot, "<\xf4\x90\x80\x80>", 2);                      /* past U+10FFFF */
    FAILS_AT(dot, "<\xf5\x80\x80\x80>", 1);
    FAILS_AT(dot, "<\xff>", 1);
    FAILS_AT(dot, "<\xc3\xc3>", 2);
    FAILS_AT(dot, "<\xc3\xa9\xa9>", 3);
    FAILS_AT(dot, "<ab>", 2);
    /* negated classes take the other code points; a range across encoding lengths */
    const char *neg = "root ::= [^\"\\\\a\xe4\xb8\x80-\xe9\xbe\xa5]*";   /* [^"\\a一-龥]* */
    ACCEPT(neg, "b\xc3\xa9\xea\xb0\x80\n\xf0\x9f\x98\x80");
    FAILS_AT(neg, "b\xe4\xb8\xad", 2);                           /* E4 B8 lies wholly inside 一-龥 */
    FAILS_AT(neg, "\"", 0);
    FAILS_AT(neg, "xa", 1);
    ACCEPT("root ::= [\\u07ff-\\u0800]+", "\xdf\xbf\xe0\xa0\x80");
    FAILS_AT("root ::= [\\u07ff-\\u0800]+", "\xdf\xbe", 1);
    ACCEPT("root ::= [\\x00-\\U0010FFFF]", "\xed\x9f\xbf");      /* U+D7FF: the surrogates cut out of a range, not more */
    ACCEPT("root ::= [\\x00-\\U0010FFFF]", "\xee\x80\x80");      /* U+E000 */
    FAILS_AT("root ::= [\\x00-\\U0010FFFF]", "\xed\xa0\x80", 1);
    /* literals by code point, raw or escaped */
    ACCEPT("root ::= \"\xc3\xa9\\u00e9\\U0001F600\\x41\"", "\xc3\xa9\xc3\xa9\xf0\x9f\x98\x80" "A");
    ACCEPT("root ::= \"\xf0\x9f\x98\x80\"+", "\xf0\x9f\x98\x80\xf0\x9f\x98\x80");
    FAILS_AT("root ::= \"\xf0\x9f\x98\x80\"+", "\xf0\x9f\x98\x81", 3);
    okv_grammar *g = compile("root ::= \"a\\x00b\"");   /* the NUL character */
    if (g) {
        long f;
        CHECK(feed(g, "a\0b", 3, &f), "a NUL in a literal: fails at %ld", f);
        okv_grammar_free(g);
    }
}

/* ---- errors ---- */

static void test_errors(void)
{
    expect_error("root ::= value\nvalue ::= \"x\" | nmber\n", "undefined rule 'nmber'", "line 2, column 17");
    expect_error("value ::= \"x\"", "no rule named 'root'", NULL);
    expect_error("", "empty", NULL);
    expect_error("  # only a comment\n\n", "empty", NULL);
    expect_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]", "rule 'expr' is left-recursive", "line 2");
    expect_error("root ::= a\na ::= b \"x\" | \"y\"\nb ::= c\nc ::= a \"z\" | \"w\"", "left-recursive", "'a'");
    expect_error("root ::= ws root \"x\" | \"y\"\nws ::= \" \"*", "rule 'root' is left-recursive", NULL);   /* through a nullable */
    expect_error("root ::= \"(\" root \")\"", "rule 'root' derives no finite text", "line 1");
    expect_error("root ::= a | \"x\" b\na ::= \"y\"\nb ::= \"z\" b", "rule 'b' derives no finite text", "line 3");
    expect_error("root ::= \"a\" (\"b\" root)", "rule 'root' derives no finite text", NULL);
    expect_error("root ::= \"a\"{3,2}", "out of order", "column 13");
    expect_error("root ::= \"a\"{1001}", "too large", "1000");
    expect_error("root ::= \"a\"{2,5000}", "5000", NULL);
    expect_error("root ::= \"y\"{1000}{1000}{2}", "too large", "elements");
    expect_error("root ::= \"a\"{,3}", "expected a number", NULL);
    expect_error("root ::= \"a\"{3", "expected '}'", NULL);
    expect_error("root ::= [z-a]", "range z-a is out of order", NULL);
    expect_error("root ::= \"abc", "unterminated string literal", "column 10");
    expect_error("root ::= [abc", "unterminated character class", NULL);
    expect_error("root ::= []", "empty character class", NULL);
    expect_error("root ::= [^\\x00-\\U0010FFFF]", "matches no character", NULL);
    expect_error("root ::= (\"a\" | \"b\"\nx ::= \"c\"", "unclosed '('", "line 1, column 10");
    expect_error("root ::= \"a\" )", "unbalanced ')'", NULL);
    expect_error("root ::= * \"a\"", "nothing to repeat", NULL);
    expect_error("root ::= \"a\" | +", "nothing to repeat", NULL);
    expect_error("root ::= \"\\q\"", "unknown escape", NULL);
    expect_error("root ::= \"\\x4\"", "\\x needs 2 hex digits", NULL);
    expect_error("root ::= \"\\ud800\"", "surrogate", NULL);
    expect_error("root ::= \"\\U00110000\"", "past U+10FFFF", NULL);
    expect_error("root ::= \"a\xff\"", "invalid UTF-8", "column 12");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", "defined twice", "line 2");
    expect_error("root = \"a\"", "expected ::=", NULL);
    expect_error("root ::= \"a\" @", "unexpected '@'", NULL);
    expect_error("::= \"a\"", "expected a rule name", NULL);
    /* Lark's syntax inside a GBNF grammar (one with ::=): refused, asking for GBNF; a Lark grammar's own errors name
     * its line (grammar_lark.c; its languages are checked against Lark's parser in tests/sh/test_grammar_ref.sh) */
    expect_error("root ::= \"a\"\n%import common.WS", "Lark syntax", "line 2");
    expect_error("root ::= /[a-z]+/", "Lark syntax", NULL);
    expect_error("root ::= a\na: \"x\"", "Lark syntax", "line 2");
    expect_error("?start: value", "undefined rule 'value'", "Lark");
    expect_error("start: \"a\"\n\nb: \"x\" ~ 3..1", "out of order", "line 3");
    expect_error("start: a\na: a \"x\" | b\nb: a", "left-recursive", "line");
    expect_error("a: \"x\"", "no rule named 'start'", NULL);
    /* deep nesting of parentheses, and of rules before the first character */
    char deep[700];
    memset(deep, 0, sizeof deep);
    strcpy(deep, "root ::= ");
    memset(deep + 9, '(', 300);
    strcat(deep, "\"a\"");
    memset(deep + strlen(deep), ')', 300);
    expect_error(deep, "nested too deeply", NULL);
    char chain[4000];
    size_t n = 0;
    n += (size_t)snprintf(chain + n, sizeof chain - n, "root ::= r0\n");
    for (int i = 0; i < 80; i++)
        n += (size_t)snprintf(chain + n, sizeof chain - n, "r%d ::= r%d \"x\"\n", i, i + 1);
    snprintf(chain + n, sizeof chain - n, "r80 ::= \"y\"\n");
    expect_error(chain, "more than 64 rules", NULL);
    okv_grammar *g = NULL;
    CHECK(okv_grammar_compile("root ::= \"a\" junk", 12, NULL, &g) == OKV_OK, "the length bounds the text: %s",
          okv_last_error());
    okv_grammar_free(g);
    okv_grammar_free(NULL);
}

/* ---- no dead ends ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A shortest completion from s into path (cap bytes), checked byte by byte: at each step a
 * byte that brings okv_grammar_min_to_accept down by one must exist, and the end must accept.
 * Its length, -1 when that fails. */
static long completion(okv_grammar *g, int s, uint8_t *path, long cap)
{
    long n = 0;
    const int d0 = okv_grammar_min_to_accept(g, s);
    for (int d = d0; d > 0; d--) {
        int next = -1;
        for (int c = 0; c < 256 && next < 0; c++) {
            const int t = okv_grammar_next(g, s, (uint8_t)c);
            if (t >= 0 && okv_grammar_min_to_accept(g, t) == d - 1) {
                next = t;
                if (n < cap)
                    path[n++] = (uint8_t)c;
            }
        }
        if (next < 0)
            return -1;
        s = next;
    }
    return d0 >= 0 && okv_grammar_accepting(g, s) ? n : -1;
}

/* Breadth first from s over all bytes, at most budget states: the distance to the nearest
 * accepting state, -1 if not found within the budget. An independent check of
 * okv_grammar_min_to_accept where the states near s are few. */
static long bfs_distance(okv_grammar *g, int s, int budget)
{
    static int queue[OKV_GRAMMAR_MAX_STATES], dist[OKV_GRAMMAR_MAX_STATES];
    static unsigned stamp[OKV_GRAMMAR_MAX_STATES], gen;
    gen++;
    int head = 0, tail = 0;
    stamp[s] = gen;
    dist[s] = 0;
    queue[tail++] = s;
    while (head < tail) {
        const int t = queue[head++];
        if (okv_grammar_accepting(g, t))
            return dist[t];
        for (int c = 0; c < 256; c++) {
            const int u = okv_grammar_next(g, t, (uint8_t)c);
            if (u < 0 || stamp[u] == gen)
                continue;
            if (tail >= budget)
                return -1;
            stamp[u] = gen;
            dist[u] = dist[t] + 1;
            queue[tail++] = u;
        }
    }
    return -1;
}

/* Random walks that take random allowed bytes, then head for a sentence along a shortest
 * completion: each finishes accepted; then from every state reached, the same. Where a breadth
 * first search over all bytes finds the nearest sentence within a small budget, its distance is
 * okv_grammar_min_to_accept's. */
static void check_no_dead_ends(const char *gtext)
{
    okv_grammar *g = compile(gtext);
    if (!g)
        return;
    int finished = 0;
    for (int w = 0; w < 100; w++) {
        int s = okv_grammar_start(g);
        const int len = (int)(next_rand() % 30);
        for (int i = 0; i < len; i++) {
            int allowed[256], na = 0;
            for (int c = 0; c < 256; c++)
                if (okv_grammar_next(g, s, (uint8_t)c) >= 0)
                    allowed[na++] = c;
            if (na == 0)
                break;
            s = okv_grammar_next(g, s, (uint8_t)allowed[next_rand() % (uint64_t)na]);
        }
        /* then toward finishing: along a shortest completion */
        uint8_t path[4096];
        const long k = completion(g, s, path, sizeof path);
        for (long i = 0; i < k && s >= 0; i++)
            s = okv_grammar_next(g, s, path[i]);
        finished += s >= 0 && okv_grammar_accepting(g, s);
    }
    CHECK(finished == 100, "{%s}: %d of 100 walks reached a sentence", gtext, finished);
    const int n = okv_grammar_n_states(g);
    int dead = 0, checked = 0, differ = 0;
    for (int s = 0; s < n; s++) {
        uint8_t path[4096];
        dead += completion(g, s, path, sizeof path) < 0;
    }
    /* (a few states only: each search makes new states, and they count toward the limit) */
    for (int s = 0; s < n && s < 40; s++) {
        uint8_t path[4096];
        const long d = bfs_distance(g, s, 300);
        if (d >= 0) {
            checked++;
            differ += d != completion(g, s, path, sizeof path);
        }
    }
    CHECK(dead == 0, "{%s}: %d of %d states have no completion", gtext, dead, n);
    CHECK(differ == 0 && checked > 0, "{%s}: a search finds a nearer sentence from %d of %d states", gtext, differ, checked);
    CHECK(!okv_grammar_overflowed(g), "{%s}: overflowed", gtext);
    const int m = okv_grammar_n_states(g);
    CHECK(okv_grammar_next(g, -1, 'a') == -1 && okv_grammar_next(g, m + 5, 'a') == -1 &&
          okv_grammar_next(g, 1 << 20, 'a') == -1 && !okv_grammar_accepting(g, -1) && !okv_grammar_accepting(g, m),
          "{%s}: states out of range", gtext);
    okv_grammar_free(g);
}

/* ---- limits ---- */

static void test_limits(void)
{
    /* depth: 10^5 open parentheses */
    okv_grammar *g = compile(ARITH_G);
    if (g) {
        int s = okv_grammar_start(g);
        long i = 0;
        for (; i < 100000 && s >= 0; i++)
            s = okv_grammar_next(g, s, '(');
        CHECK(s == -1 && i > 10 && i < 100, "10^5 '(': -1 after %ld", i);
        CHECK(okv_grammar_overflowed(g), "overflowed() after the depth limit");
        /* the grammar stays usable for texts within the limit */
        long f;
        CHECK(feed(g, "((1+2)*3)", 9, &f), "after the overflow: fails at %ld", f);
        okv_grammar_free(g);
    }
    /* parses alive: with 20 runs of a{0,1000}, each run can be the one reading the next a at
     * each of its positions: about 20 (k+1) stacks after k a's, past the limit before k = 1000 */
    char many[400] = "root ::=";
    for (int i = 0; i < 20; i++)
        strcat(many, " \"a\"{0,1000}");
    g = compile(many);
    if (g) {
        int s = okv_grammar_start(g);
        long i = 0;
        for (; i < 3000 && s >= 0; i++)
            s = okv_grammar_next(g, s, 'a');
        CHECK(s == -1 && i > OKV_GRAMMAR_MAX_STACKS / 40 && i < 1000, "stacks: -1 after %ld", i);
        CHECK(okv_grammar_overflowed(g), "overflowed() after the parse limit");
        okv_grammar_free(g);
    }
    /* a large alternation of literals is one parse per alternative at the start */
    char *alts = malloc(12 * 10000 + 16);
    size_t n = (size_t)sprintf(alts, "root ::= \"w0\"");
    for (int i = 1; i < 10000; i++)
        n += (size_t)sprintf(alts + n, " | \"w%d\"", i);
    g = compile(alts);
    if (g) {
        long f;
        CHECK(feed(g, "w9999", 5, &f) && !feed(g, "w10000", 6, &f) && f == 5, "10000 words: w10000 fails at %ld", f);
        CHECK(!okv_grammar_overflowed(g), "10000 words: overflowed");
        okv_grammar_free(g);
    }
    free(alts);
    /* states: 70000 positions in a row */
    g = compile("root ::= (\"x\"{1000}){70}");
    if (g) {
        int s = okv_grammar_start(g);
        long i = 0;
        for (; i < 70000 && s >= 0; i++)
            s = okv_grammar_next(g, s, 'x');
        CHECK(s == -1 && i == OKV_GRAMMAR_MAX_STATES, "states: -1 after %ld", i);
        CHECK(okv_grammar_n_states(g) == OKV_GRAMMAR_MAX_STATES, "%d states", okv_grammar_n_states(g));
        CHECK(okv_grammar_overflowed(g), "overflowed() after the state limit");
        okv_grammar_free(g);
    }
}

/* ---- threads ---- */

#define N_TEXTS 400
static char texts[N_TEXTS][64];
static size_t text_len[N_TEXTS];

struct verdict { long fail_at; bool accepted; };

struct job {
    okv_grammar *g;
    int first;
    struct verdict v[N_TEXTS];
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < N_TEXTS; k++) {
            const int t = (j->first + k * 7) % N_TEXTS;
            j->v[t].accepted = feed(j->g, texts[t], text_len[t], &j->v[t].fail_at);
        }
    return NULL;
}

static void test_threads(void)
{
    static const char alpha[] = "0123456789+-*/()  ";
    for (int t = 0; t < N_TEXTS; t++) {   /* half random, half random walks through the grammar */
        text_len[t] = 1 + next_rand() % 40;
        for (size_t i = 0; i < text_len[t]; i++)
            texts[t][i] = alpha[next_rand() % (sizeof alpha - 1)];
    }
    okv_grammar *ref = compile(ARITH_G);
    if (!ref)
        return;
    for (int t = 0; t < N_TEXTS; t += 2) {
        int s = okv_grammar_start(ref);
        size_t n = 0;
        while (n < text_len[t]) {
            int allowed[256], na = 0;
            for (int c = 0; c < 256; c++)
                if (okv_grammar_next(ref, s, (uint8_t)c) >= 0)
                    allowed[na++] = c;
            if (na == 0)
                break;
            const int c = allowed[next_rand() % (uint64_t)na];
            texts[t][n++] = (char)c;
            s = okv_grammar_next(ref, s, (uint8_t)c);
        }
        text_len[t] = n;
    }
    struct verdict want[N_TEXTS];
    for (int t = 0; t < N_TEXTS; t++)
        want[t].accepted = feed(ref, texts[t], text_len[t], &want[t].fail_at);
    okv_grammar *g = compile(ARITH_G);   /* fresh: the threads fill its transitions together */
    static struct job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].g = g;
        jobs[i].first = i * 101;
        CHECK(pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int diff = 0, acc = 0;
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < N_TEXTS; t++)
            diff += jobs[i].v[t].accepted != want[t].accepted || jobs[i].v[t].fail_at != want[t].fail_at;
    for (int t = 0; t < N_TEXTS; t++)
        acc += want[t].accepted;
    CHECK(diff == 0, "%d verdicts of 4 threads differ from one thread's", diff);
    CHECK(acc > 50, "only %d of the texts are sentences", acc);
    okv_grammar_free(g);
    okv_grammar_free(ref);
}

int main(void)
{
    const int64_t live0 = okv_alloc_live_count(OKV_TAG_SERVER);
    test_sentences();
    test_lark();
    test_utf8();
    test_min_to_accept();
    test_errors();
    static const char *const walked[] = {
        JSON_G, ARITH_G, CSV_G, KV_G,
        "root ::= \"a\" root \"b\" | \"\"",
        "root ::= [\xce\xb1-\xcf\x89]+ (\" \" .)?",
        "root ::= (\"a\"? \"b\"?)* \"c\"",
        "root ::= \"x\"{2,5} ([^a-y]{1,3} \"!\")?",
        "root ::= item | \"[\" root (\",\" root)* \"]\"\nitem ::= \"i\" | \"(\" item \")\" | root",
    };
    for (size_t i = 0; i < sizeof walked / sizeof *walked; i++)
        check_no_dead_ends(walked[i]);
    test_limits();
    test_threads();
    CHECK(okv_alloc_live_count(OKV_TAG_SERVER) == live0, "%lld allocations left",
          (long long)(okv_alloc_live_count(OKV_TAG_SERVER) - live0));
    return tu_finish("test_grammar");
}
