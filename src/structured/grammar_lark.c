/* Lark grammars (the syntax of the Python `lark` package, which vLLM's documentation uses for
 * structured_outputs.grammar and which vLLM turns into GBNF for its grammar backends) read into
 * the GBNF of grammar_parse.c, so that the recognizer (grammar.c) takes them unchanged.
 *
 * What is read (lark's own grammar of its syntax, lark/grammars/lark.lark, is the reference):
 *   rule         name: expansions, with the prefixes ? ! _ and a priority .N (both dropped: they
 *                shape Lark's tree, not the language); TERMINAL: expansions likewise. An item ends
 *                at the end of its line unless the next line (after blank and comment lines)
 *                starts with |; inside ( ) and [ ] newlines are spaces
 *   expansions   alternatives separated by |, each a sequence of items; "-> alias" after one is
 *                dropped
 *   items        name, "literal" (Python escapes; "..."i case-insensitive), /regex/flags (regex.c's
 *                Python subset; flags i, s, m, u, l), "a".."z" (a range of code points), ( ... ),
 *                [ ... ] (optional), each with one of * + ? ~n ~n..m
 *   comments     // and # to the end of the line
 *   %import      common.NAME [-> ALIAS] and common (A, B, ...): the terminals of lark's
 *                common.lark (numbers, strings, names, whitespace, comments), written here in
 *                GBNF from their definitions there
 *   %ignore      terminals (names, literals, regexes) that may stand between any two tokens,
 *                and before the first and after the last, as Lark's lexer drops them: here any
 *                number of them is allowed before each token of a rule (a literal, a regex or a
 *                TERMINAL named in a lowercase rule) and at the end of the text
 * The grammar starts at the rule `start`.
 *
 * How it is read: as a context-free grammar over characters, the way Lark's Earley parser with
 * its default dynamic lexer reads it, not with a longest-match lexer (lexer="basic" or "contextual"
 * can refuse a text that this accepts, e.g. NAME NAME written without a space between). A rule
 * that begins with itself (expr: expr "+" term | term: direct left recursion, which Earley takes
 * and the recognizer cannot) is rewritten to the same language without it:
 * expr: (term) ("+" term)*. Left recursion through other rules is refused, naming the rule.
 * Refused by name: templates (name{...}), %declare, %override, %extend, imports from other
 * modules than common, regex constructs outside regex.c's subset (lookarounds, backreferences).
 *
 * The output keeps each rule on the line where Lark's text has it, so that errors found in the GBNF
 * (an undefined name, left recursion) name the right line; rules made here come after the last. */
#include "structured/grammar.h"
#include "structured/grammar_internal.h"
#include "structured/regex.h"
#include "util/strbuf.h"
#include "tokenizer/tok_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 256
#define MAX_IGNORE 32

struct lk {
    const char *t;
    size_t n, pos;
    enum okv_status st;
    struct okv_strbuf o;       /* the GBNF written so far */
    int line_out;              /* newlines written to o */
    size_t line_at;            /* to_line's place in the text, and the newlines before it */
    int line_in;
    int depth;                 /* ( [ open */
    bool has_start;
    bool has_ignore;           /* the grammar has %ignore lines (found before the rules are read) */
    char *ignore[MAX_IGNORE];  /* each %ignore's GBNF */
    int n_ignore;
    unsigned imported;         /* common terminals used (bits of COMMON) */
    /* %import's names: each user name and the common terminal it stands for */
    char *imp_name[64];
    int imp_of[64];
    int n_imp;
    bool in_rule;              /* the rule being read is a lowercase rule: its tokens may have ignored text before them */
};

/* lark's common.lark, in GBNF; each may use those before it. DEPS: what each needs. */
static const struct { const char *name, *gbnf; unsigned deps; } COMMON[] = {
    {"DIGIT", "[0-9]", 0},
    {"HEXDIGIT", "[a-fA-F0-9]", 0},
    {"INT", "[0-9]+", 0},
    {"SIGNED_INT", "[+\\-]? lark-common-INT", 1u << 2},
    {"DECIMAL", "lark-common-INT \".\" lark-common-INT? | \".\" lark-common-INT", 1u << 2},
    {"_EXP", "[eE] lark-common-SIGNED_INT", 1u << 3 | 1u << 2},
    {"FLOAT", "lark-common-INT lark-common-_EXP | lark-common-DECIMAL lark-common-_EXP?",
     1u << 2 | 1u << 3 | 1u << 4 | 1u << 5},
    {"SIGNED_FLOAT", "[+\\-]? lark-common-FLOAT", 1u << 6 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5},
    {"NUMBER", "lark-common-FLOAT | lark-common-INT", 1u << 6 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5},
    {"SIGNED_NUMBER", "[+\\-]? lark-common-NUMBER", 1u << 8 | 1u << 6 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5},
    /* "\"" .*? (?<!\\)(\\\\)*? "\"": the first quote not escaped ends it, no newline inside */
    {"ESCAPED_STRING", "\"\\\"\" ( [^\"\\\\\\n] | \"\\\\\" [^\\n] )* \"\\\"\"", 0},
    {"LCASE_LETTER", "[a-z]", 0},
    {"UCASE_LETTER", "[A-Z]", 0},
    {"LETTER", "[A-Za-z]", 0},
    {"WORD", "[A-Za-z]+", 0},
    {"CNAME", "[_A-Za-z] [_A-Za-z0-9]*", 0},
    {"WS_INLINE", "[ \\t]+", 0},
    {"WS", "[ \\t\\x0C\\r\\n]+", 0},
    {"CR", "\"\\r\"", 0},
    {"LF", "\"\\n\"", 0},
    {"NEWLINE", "( \"\\r\"? \"\\n\" )+", 0},
    {"SH_COMMENT", "\"#\" [^\\n]*", 0},
    {"CPP_COMMENT", "\"//\" [^\\n]*", 0},
    /* C's comments: the first star-slash after the opening slash-star ends one (common.lark's non-greedy regex) */
    {"C_COMMENT", "\"/*\" ( [^*] | \"*\"+ [^*/] )* \"*\"+ \"/\"", 0},
    {"SQL_COMMENT", "\"--\" [^\\n]*", 0},
};
#define N_COMMON (int)(sizeof COMMON / sizeof COMMON[0])

/* ---- output ---- */

static void put(struct lk *L, const char *s, size_t n)
{
    okv_sb_put(&L->o, s, n);
    for (size_t i = 0; i < n; i++)
        L->line_out += s[i] == '\n';
}

static void puts_(struct lk *L, const char *s) { put(L, s, strlen(s)); }

static void putf(struct lk *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct lk *L, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put(L, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

/* ---- errors ---- */

static bool lerr(struct lk *L, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool lerr(struct lk *L, size_t at, const char *fmt, ...)
{
    if (L->st != OKV_OK)
        return false;
    L->st = OKV_ERR_INVALID_ARG;
    va_list ap;
    va_start(ap, fmt);
    gram_error("grammar (Lark)", L->t, L->n, at, 0, fmt, ap);
    va_end(ap);
    return false;
}

/* the character at pos for a message: 'c', the whole UTF-8 character, or the byte's value where it is not one */
static const char *describe(const struct lk *L, size_t pos, char *buf, size_t cap)
{
    uint32_t cp;
    const int k = pos < L->n ? okv_utf8_decode((const unsigned char *)L->t + pos, L->n - pos, &cp) : 0;
    if (k <= 0)
        snprintf(buf, cap, "byte 0x%02x", pos < L->n ? (unsigned char)L->t[pos] : 0);
    else if (cp < 0x20 || cp == 0x7f)
        snprintf(buf, cap, "U+%04X", (unsigned)cp);
    else
        snprintf(buf, cap, "'%.*s'", k, L->t + pos);
    return buf;
}

/* n bytes of s or fewer, ending at a UTF-8 character's boundary */
static int utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return (int)n;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    return (int)max;
}

/* ---- reading ---- */

static bool at_end(const struct lk *L) { return L->pos >= L->n; }
static char cur(const struct lk *L) { return L->pos < L->n ? L->t[L->pos] : 0; }

/* Skip spaces, tabs and comments; newlines too when nl. */
static void skip(struct lk *L, bool nl)
{
    while (L->pos < L->n) {
        const char c = L->t[L->pos];
        if (c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n')) {
            L->pos++;
        } else if (c == '#' || (c == '/' && L->pos + 1 < L->n && L->t[L->pos + 1] == '/')) {
            while (L->pos < L->n && L->t[L->pos] != '\n')
                L->pos++;
        } else {
            break;
        }
    }
}

/* At a newline whose next non-blank, non-comment line starts with |: step past the newlines. */
static bool continuation(struct lk *L)
{
    const size_t save = L->pos;
    skip(L, true);
    if (cur(L) == '|')
        return true;
    L->pos = save;
    return false;
}

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* A name at pos (letters, digits, _; not starting with a digit): its length, 0 if none. */
static size_t name_len(const struct lk *L, size_t pos)
{
    size_t k = 0;
    if (pos < L->n && (isalpha((unsigned char)L->t[pos]) || L->t[pos] == '_'))
        while (pos + k < L->n && name_char(L->t[pos + k]))
            k++;
    return k;
}

static bool is_terminal_name(const char *s, size_t k)
{
    size_t i = 0;
    while (i < k && s[i] == '_')
        i++;
    return i < k && isupper((unsigned char)s[i]);
}

/* The user's name for an imported common terminal: its index in COMMON, or -1. */
static int imported_as(const struct lk *L, const char *s, size_t k)
{
    for (int i = 0; i < L->n_imp; i++)
        if (strlen(L->imp_name[i]) == k && !memcmp(L->imp_name[i], s, k))
            return L->imp_of[i];
    return -1;
}

/* Before a token of a lowercase rule: the ignored text that may come first. */
static void ignore_before(struct lk *L)
{
    if (L->in_rule && L->has_ignore)
        puts_(L, " lark-ignore");
}

static void put_cp(struct lk *L, uint32_t cp) { putf(L, "\\U%08X", (unsigned)cp); }

/* A "string" at pos: its code points into cps (up to max; the count in *n), with Python's escapes; pos past it
 * and its i flag (*ci). */
static bool read_string(struct lk *L, uint32_t *cps, size_t max, size_t *n, bool *ci)
{
    const size_t open = L->pos++;
    *n = 0;
    for (;;) {
        if (at_end(L) || cur(L) == '\n')
            return lerr(L, open, "an unterminated string literal");
        uint32_t cp;
        char c = cur(L);
        if (c == '"') {
            L->pos++;
            break;
        }
        if (c == '\\') {
            const size_t at = L->pos;
            if (L->pos + 1 >= L->n)
                return lerr(L, at, "a backslash at the end of the grammar");
            c = L->t[L->pos + 1];
            L->pos += 2;
            int nd = 0;
            switch (c) {
            case 'n': cp = '\n'; break;
            case 't': cp = '\t'; break;
            case 'r': cp = '\r'; break;
            case 'f': cp = '\f'; break;
            case 'v': cp = '\v'; break;
            case 'a': cp = '\a'; break;
            case 'b': cp = '\b'; break;
            case '0': cp = 0; break;
            case '\\': cp = '\\'; break;
            case '"': cp = '"'; break;
            case '\'': cp = '\''; break;
            case 'x': nd = 2; break;
            case 'u': nd = 4; break;
            case 'U': nd = 8; break;
            default:   /* as Python keeps an unknown escape: the backslash and the character */
                if (*n + 1 >= max)
                    return lerr(L, open, "a string literal longer than %zu characters", max - 1);
                cps[(*n)++] = '\\';
                L->pos--;   /* the character is read as itself below */
                continue;
            }
            if (nd) {
                cp = 0;
                for (int i = 0; i < nd; i++, L->pos++) {
                    const char h = cur(L);
                    if (!isxdigit((unsigned char)h))
                        return lerr(L, at, "the escape \\%c needs %d hex digits", c, nd);
                    cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
                }
                if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                    return lerr(L, at, "the escape \\%c is past U+10FFFF or a surrogate", c);
            }
        } else {
            uint32_t u;
            const int k = okv_utf8_decode((const unsigned char *)L->t + L->pos, L->n - L->pos, &u);
            if (k <= 0)
                return lerr(L, L->pos, "invalid UTF-8 in the grammar");
            cp = u;
            L->pos += (size_t)k;
        }
        if (*n >= max)
            return lerr(L, open, "a string literal longer than %zu characters", max);
        cps[(*n)++] = cp;
    }
    *ci = cur(L) == 'i' && !name_char(L->pos + 1 < L->n ? L->t[L->pos + 1] : 0);
    if (*ci)
        L->pos++;
    return true;
}

static void put_literal(struct lk *L, const uint32_t *cps, size_t n, bool ci)
{
    if (n == 0) {
        puts_(L, " \"\"");
        return;
    }
    puts_(L, " (");
    for (size_t i = 0; i < n; i++) {
        const uint32_t c = cps[i];
        if (ci && c < 128 && isalpha((int)c)) {
            putf(L, " [%c%c]", (char)tolower((int)c), (char)toupper((int)c));
        } else {
            puts_(L, " [");
            put_cp(L, c);
            puts_(L, "]");
        }
    }
    puts_(L, " )");
}

static bool expansions(struct lk *L);

/* /regex/flags at pos */
static bool regex_item(struct lk *L)
{
    const size_t open = L->pos++;
    size_t e = L->pos;
    while (e < L->n && L->t[e] != '/' && L->t[e] != '\n')
        e += L->t[e] == '\\' && e + 1 < L->n ? 2 : 1;
    if (e >= L->n || L->t[e] != '/')
        return lerr(L, open, "an unterminated /regular expression/");
    unsigned flags = OKV_REGEX_UNICODE;   /* Lark's patterns are Python str patterns */
    size_t f = e + 1;
    for (; f < L->n && isalpha((unsigned char)L->t[f]); f++) {
        const char c = L->t[f];
        if (c == 'i')
            flags |= OKV_REGEX_ICASE;
        else if (c == 's')
            flags |= OKV_REGEX_DOTALL;
        else if (c == 'x')
            return lerr(L, f, "the regex flag x (verbose) is not supported; write the pattern without it");
        else if (c != 'm' && c != 'u' && c != 'l')   /* m: ^ $ are only taken at the ends anyway; u, l: no effect here */
            return lerr(L, f, "unknown regex flag '%c' (Lark's: i m s l u x)", c);
    }
    char *g = NULL;
    const enum okv_status st = okv_regex_to_gbnf(L->t + L->pos, e - L->pos, flags, &g);
    if (st != OKV_OK) {
        if (st == OKV_ERR_NO_MEMORY)
            return L->st = st, false;
        char msg[256];
        snprintf(msg, sizeof msg, "%s", okv_last_error());
        return lerr(L, open, "in /%.*s/: %s", utf8_cut(L->t + L->pos, e - L->pos, 60), L->t + L->pos, msg);
    }
    ignore_before(L);
    puts_(L, " ");
    puts_(L, g);
    okv_free(g);
    L->pos = f;
    return true;
}

/* an atom: ( ... ), [ ... ], a string (or a range of two), a regex, a name */
static bool atom(struct lk *L)
{
    const size_t at = L->pos;
    const char c = cur(L);
    if (c == '(' || c == '[') {
        if (++L->depth > MAX_NEST)
            return lerr(L, at, "parentheses nested too deeply (%d at most)", MAX_NEST);
        L->pos++;
        puts_(L, " (");
        if (!expansions(L))
            return false;
        skip(L, true);
        if (cur(L) != (c == '(' ? ')' : ']'))
            return lerr(L, at, "an unclosed '%c'", c);
        L->pos++;
        L->depth--;
        puts_(L, c == '(' ? " )" : " )?");
        return true;
    }
    if (c == '"') {
        uint32_t cps[1024];
        size_t n;
        bool ci;
        if (!read_string(L, cps, sizeof cps / sizeof cps[0], &n, &ci))
            return false;
        const size_t save = L->pos;
        skip(L, false);
        if (cur(L) == '.' && L->pos + 1 < L->n && L->t[L->pos + 1] == '.') {   /* "a".."z" */
            L->pos += 2;
            skip(L, false);
            uint32_t hi[4];
            size_t hn;
            bool hci;
            if (cur(L) != '"')
                return lerr(L, at, "a range needs a string after '..' (\"a\"..\"z\")");
            if (!read_string(L, hi, 4, &hn, &hci))
                return false;
            if (n != 1 || hn != 1)
                return lerr(L, at, "a range's ends must be one character each (\"a\"..\"z\")");
            if (cps[0] > hi[0])
                return lerr(L, at, "the range's ends are out of order");
            ignore_before(L);
            puts_(L, " [");
            put_cp(L, cps[0]);
            puts_(L, "-");
            put_cp(L, hi[0]);
            puts_(L, "]");
            return true;
        }
        L->pos = save;
        ignore_before(L);
        put_literal(L, cps, n, ci);
        return true;
    }
    if (c == '/')
        return regex_item(L);
    const size_t k = name_len(L, at);
    if (k == 0) {
        if (at_end(L))
            return lerr(L, at, "the grammar ends inside a rule");
        char d[24];
        return lerr(L, at, "unexpected %s", describe(L, at, d, sizeof d));
    }
    L->pos += k;
    if (cur(L) == '{')
        return lerr(L, at, "templates (%.*s{...}) are not supported", (int)k, L->t + at);
    if (is_terminal_name(L->t + at, k))
        ignore_before(L);
    puts_(L, " ");
    put(L, L->t + at, k);
    return true;
}

static bool read_number(struct lk *L, long *v)
{
    skip(L, false);
    const size_t at = L->pos;
    long x = 0;
    while (isdigit((unsigned char)cur(L)) && x <= OKV_GRAMMAR_MAX_REPEAT)
        x = x * 10 + (L->t[L->pos++] - '0');
    if (L->pos == at)
        return lerr(L, at, "expected a number after '~'");
    if (x > OKV_GRAMMAR_MAX_REPEAT)
        return lerr(L, at, "the repetition count is too large (%d at most)", OKV_GRAMMAR_MAX_REPEAT);
    *v = x;
    return true;
}

/* an atom and its operator; the atom's output is wrapped so that the operator takes all of it */
static bool expr(struct lk *L)
{
    puts_(L, " (");
    if (!atom(L))
        return false;
    puts_(L, " )");
    skip(L, false);
    const char c = cur(L);
    const char next = L->pos + 1 < L->n ? L->t[L->pos + 1] : 0;
    if (c == '*' || c == '+' || (c == '?' && !(next >= 'a' && next <= 'z'))) {
        put(L, &c, 1);
        L->pos++;
    } else if (c == '~') {
        L->pos++;
        long lo, hi;
        if (!read_number(L, &lo))
            return false;
        hi = lo;
        skip(L, false);
        if (cur(L) == '.' && L->pos + 1 < L->n && L->t[L->pos + 1] == '.') {
            L->pos += 2;
            if (!read_number(L, &hi))
                return false;
            if (hi < lo)
                return lerr(L, L->pos, "the repetition bounds are out of order: ~ %ld..%ld", lo, hi);
        }
        putf(L, "{%ld,%ld}", lo, hi);
    }
    return true;
}

/* Where a sequence ends: |, a closing bracket, ->, the end of the line (outside brackets), the end. */
static bool seq_end(struct lk *L)
{
    skip(L, L->depth > 0);
    const char c = cur(L);
    return at_end(L) || c == '|' || c == ')' || c == ']' || c == '\n' || (c == '-' && L->pos + 1 < L->n &&
                                                                          L->t[L->pos + 1] == '>');
}

static bool expansions(struct lk *L)
{
    for (bool first = true;; first = false) {
        if (!first)
            puts_(L, " |");
        while (!seq_end(L))
            if (!expr(L))
                return false;
        if (cur(L) == '-') {   /* -> alias: names a tree node, not part of the language */
            L->pos += 2;
            skip(L, false);
            const size_t k = name_len(L, L->pos);
            if (k == 0)
                return lerr(L, L->pos, "expected a name after '->'");
            L->pos += k;
            skip(L, L->depth > 0);
        }
        if (cur(L) == '\n' && L->depth == 0 && !continuation(L))
            return true;
        if (cur(L) != '|')
            return true;
        L->pos++;
    }
}

/* ---- rules and statements ---- */

/* to the line where the text has it */
static void to_line(struct lk *L, size_t at)
{
    if (at < L->line_at)   /* counted from where the last call left off (items come in order) */
        L->line_at = 0, L->line_in = 0;
    for (; L->line_at < at; L->line_at++)
        L->line_in += L->t[L->line_at] == '\n';
    const int line = L->line_in;
    while (L->line_out < line && !L->o.oom)
        puts_(L, "\n");
}

static int common_index(const char *s, size_t k)
{
    for (int i = 0; i < N_COMMON; i++)
        if (strlen(COMMON[i].name) == k && !memcmp(COMMON[i].name, s, k))
            return i;
    return -1;
}

static bool add_import(struct lk *L, size_t at, const char *cname, size_t ck, const char *uname, size_t uk)
{
    const int ci = common_index(cname, ck);
    if (ci < 0)
        return lerr(L, at, "common.%.*s is not among the common terminals built in (DIGIT, HEXDIGIT, INT, SIGNED_INT, "
                    "DECIMAL, FLOAT, SIGNED_FLOAT, NUMBER, SIGNED_NUMBER, ESCAPED_STRING, LETTER, WORD, CNAME, WS, "
                    "WS_INLINE, NEWLINE, CR, LF, *_COMMENT, ...)", (int)ck, cname);
    if (L->n_imp >= (int)(sizeof L->imp_name / sizeof L->imp_name[0]))
        return lerr(L, at, "too many %%imports");
    char *nm = okv_malloc(uk + 1, OKV_TAG_SERVER);
    if (!nm)
        return L->st = okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory"), false;
    memcpy(nm, uname, uk);
    nm[uk] = 0;
    L->imp_name[L->n_imp] = nm;
    L->imp_of[L->n_imp++] = ci;
    L->imported |= 1u << ci | COMMON[ci].deps;
    /* the user's name for it, a rule on this line (several on one line: GBNF ends a rule at the next head) */
    to_line(L, at);
    if (L->o.len && L->o.s[L->o.len - 1] != '\n')
        puts_(L, " ");
    put(L, uname, uk);
    puts_(L, " ::= lark-common-");
    puts_(L, COMMON[ci].name);
    return true;
}

static bool statement(struct lk *L)
{
    const size_t at = L->pos++;
    const size_t k = name_len(L, L->pos);
    const char *w = L->t + L->pos;
    L->pos += k;
    skip(L, false);
    if (k == 6 && !memcmp(w, "ignore", 6)) {
        if (L->n_ignore >= MAX_IGNORE)
            return lerr(L, at, "more than %d %%ignore lines", MAX_IGNORE);
        /* the ignored terminal's GBNF, written apart (no ignore inside it) */
        const struct okv_strbuf saved = L->o;
        const int saved_line = L->line_out;
        const bool saved_rule = L->in_rule;
        L->o = (struct okv_strbuf){.tag = OKV_TAG_SERVER};
        L->in_rule = false;
        const bool ok = expansions(L);
        char *g = L->o.s;
        const bool oom = L->o.oom;
        L->o = saved;
        L->line_out = saved_line;
        L->in_rule = saved_rule;
        if (!ok || oom) {
            okv_free(g);
            return ok ? (L->st = okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory"), false) : false;
        }
        L->ignore[L->n_ignore++] = g;
        return true;
    }
    if (k == 6 && !memcmp(w, "import", 6)) {
        const size_t mk = name_len(L, L->pos);
        if (mk != 6 || memcmp(L->t + L->pos, "common", 6) != 0)
            return lerr(L, at, "%%import: only the terminals of lark's 'common' module are built in (%%import "
                        "common.NAME)");
        L->pos += mk;
        if (cur(L) == '.') {   /* common.NAME [-> ALIAS] */
            L->pos++;
            const size_t nk = name_len(L, L->pos);
            const char *nm = L->t + L->pos;
            if (nk == 0)
                return lerr(L, L->pos, "expected a name after 'common.'");
            L->pos += nk;
            if (cur(L) == '.')
                return lerr(L, at, "%%import: only the terminals of lark's 'common' module are built in");
            skip(L, false);
            const char *un = nm;
            size_t uk = nk;
            if (cur(L) == '-' && L->pos + 1 < L->n && L->t[L->pos + 1] == '>') {
                L->pos += 2;
                skip(L, false);
                uk = name_len(L, L->pos);
                un = L->t + L->pos;
                if (uk == 0)
                    return lerr(L, L->pos, "expected a name after '->'");
                L->pos += uk;
            }
            return add_import(L, at, nm, nk, un, uk);
        }
        skip(L, false);
        if (cur(L) != '(')
            return lerr(L, at, "expected %%import common.NAME or %%import common (A, B)");
        L->pos++;
        for (;;) {
            skip(L, true);
            const size_t nk = name_len(L, L->pos);
            if (nk == 0)
                return lerr(L, L->pos, "expected a name in %%import common (...)");
            const char *nm = L->t + L->pos;
            L->pos += nk;
            if (!add_import(L, at, nm, nk, nm, nk))
                return false;
            skip(L, true);
            if (cur(L) == ')') {
                L->pos++;
                return true;
            }
            if (cur(L) != ',')
                return lerr(L, L->pos, "expected ',' or ')' in %%import common (...)");
            L->pos++;
        }
    }
    return lerr(L, at, "%%%.*s is not supported (%%import common.NAME and %%ignore are)", (int)k, w);
}

static bool rule(struct lk *L)
{
    const size_t at = L->pos;
    size_t p = L->pos;
    if (cur(L) == '!' || cur(L) == '?')
        p++;
    if (p < L->n && L->t[p] == '?')   /* !?name is not Lark's, ?_name and !_name are */
        return lerr(L, at, "unexpected '?'");
    const size_t k = name_len(L, p);
    if (k == 0)
        return lerr(L, at, "expected a rule (name: ...), a terminal (NAME: ...) or a %%statement");
    const char *nm = L->t + p;
    L->pos = p + k;
    if (cur(L) == '{')
        return lerr(L, at, "templates (%.*s{...}) are not supported", (int)k, nm);
    if (cur(L) == '.') {   /* a priority: dropped */
        L->pos++;
        if (cur(L) == '-')
            L->pos++;
        if (!isdigit((unsigned char)cur(L)))
            return lerr(L, L->pos, "expected a number after '.' (a priority)");
        while (isdigit((unsigned char)cur(L)))
            L->pos++;
    }
    skip(L, false);
    if (cur(L) != ':')
        return lerr(L, L->pos, "expected ':' after the name '%.*s'", (int)k, nm);
    L->pos++;
    if (imported_as(L, nm, k) >= 0)
        return lerr(L, at, "'%.*s' is defined here and imported", (int)k, nm);
    const bool terminal = is_terminal_name(nm, k);
    if (!terminal && k == 5 && !memcmp(nm, "start", 5))
        L->has_start = true;
    to_line(L, at);
    if (L->o.len && L->o.s[L->o.len - 1] != '\n')
        puts_(L, "\n");
    put(L, nm, k);
    puts_(L, " ::=");
    L->in_rule = !terminal;
    const bool ok = expansions(L);
    L->in_rule = false;
    puts_(L, "\n");
    return ok;
}

/* Direct left recursion (R ::= R a | b) rewritten as R ::= (b) (a)*: the GBNF of a rule is written as its
 * alternatives at the top level, " | " apart (groups are parenthesized), so they can be split there. */
static char *unleft(const char *name, size_t nk, const char *body, size_t bn, bool *changed)
{
    *changed = false;
    /* split body at top-level " |" */
    const char *alt[4096];
    size_t an[4096];
    int n = 0, depth = 0;
    size_t start = 0;
    bool in_class = false;
    for (size_t i = 0; i <= bn; i++) {
        const char c = i < bn ? body[i] : 0;
        if (i < bn && c == '\\') {
            i++;
            continue;
        }
        if (in_class) {
            in_class = c != ']';
            continue;
        }
        if (c == '[')
            in_class = true;
        else if (c == '"')
            for (i++; i < bn && body[i] != '"'; i++)
                i += body[i] == '\\';
        else if (c == '(')
            depth++;
        else if (c == ')')
            depth--;
        if (i == bn || (c == '|' && depth == 0)) {
            if (n == 4096)
                return NULL;
            alt[n] = body + start;
            an[n++] = (i < bn ? i : bn) - start;
            start = i + 1;
        }
    }
    /* an alternative that starts with " ( name )" (what expr() writes for the name) */
    char head[300];
    const int hn = snprintf(head, sizeof head, " ( %.*s )", (int)nk, name);
    bool any = false, rest = false;
    for (int i = 0; i < n; i++) {
        const bool rec = an[i] >= (size_t)hn && !memcmp(alt[i], head, (size_t)hn);
        any |= rec;
        rest |= !rec;
    }
    if (!any || !rest)
        return NULL;
    struct okv_strbuf tmp = {.tag = OKV_TAG_SERVER};
    okv_sb_puts(&tmp, " (");
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (an[i] >= (size_t)hn && !memcmp(alt[i], head, (size_t)hn))
            continue;
        okv_sb_puts(&tmp, first ? "" : " |");
        okv_sb_put(&tmp, alt[i], an[i]);
        first = false;
    }
    okv_sb_puts(&tmp, " ) (");
    first = true;
    for (int i = 0; i < n; i++) {
        if (!(an[i] >= (size_t)hn && !memcmp(alt[i], head, (size_t)hn)))
            continue;
        if (an[i] == (size_t)hn)   /* R: R | ...: adds nothing */
            continue;
        okv_sb_puts(&tmp, first ? "" : " |");
        okv_sb_put(&tmp, alt[i] + hn, an[i] - (size_t)hn);
        first = false;
    }
    okv_sb_puts(&tmp, first ? " \"\" )" : " )*");
    if (tmp.oom) {
        okv_free(tmp.s);
        return NULL;
    }
    *changed = true;
    return tmp.s;
}

/* Rewrite each rule of the GBNF text whose alternatives begin with itself. */
static bool remove_left_recursion(struct lk *L)
{
    struct okv_strbuf R = {.tag = OKV_TAG_SERVER};
    const char *s = L->o.s ? L->o.s : "";
    const size_t n = L->o.len;
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n')
            e++;
        /* a line "name ::= body" (every rule is on one line) */
        const char *def = NULL;
        for (size_t q = i; q + 4 <= e && !def; q++)
            if (!memcmp(s + q, " ::=", 4))
                def = s + q;
        bool done = false;
        if (def) {
            const size_t nk = (size_t)(def - (s + i));
            bool changed;
            char *nb = unleft(s + i, nk, def + 4, (size_t)(s + e - (def + 4)), &changed);
            if (nb) {
                okv_sb_put(&R, s + i, nk + 4);
                okv_sb_puts(&R, nb);
                okv_free(nb);
                done = true;
            }
        }
        if (!done)
            okv_sb_put(&R, s + i, e - i);
        if (e < n)
            okv_sb_put(&R, "\n", 1);
        i = e + 1;
    }
    if (R.oom) {
        okv_free(R.s);
        L->st = okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory");
        return false;
    }
    okv_free(L->o.s);
    L->o = R;
    return true;
}

bool gram_is_lark(const char *text, size_t len)
{
    /* GBNF has "::=" outside its literals and classes; a Lark grammar has "name:" heads or %statements */
    bool any_head = false;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        size_t p = i;
        while (p < e && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r'))
            p++;
        if (p < e && text[p] == '%')
            any_head = true;
        if (p < e && (text[p] == '?' || text[p] == '!'))
            p++;
        size_t k = p;
        while (k < e && (isalnum((unsigned char)text[k]) || text[k] == '_'))
            k++;
        if (k > p) {
            size_t q = k;
            if (q < e && text[q] == '.')   /* priority */
                for (q++; q < e && (isdigit((unsigned char)text[q]) || text[q] == '-'); q++) {
                }
            while (q < e && (text[q] == ' ' || text[q] == '\t'))
                q++;
            if (q + 2 < e && text[q] == ':' && text[q + 1] == ':' && text[q + 2] == '=')
                return false;   /* a GBNF rule head */
            if (q < e && text[q] == ':')
                any_head = true;
        }
        i = e + 1;
    }
    return any_head;
}

enum okv_status gram_lark_to_gbnf(const char *text, size_t len, char **out)
{
    *out = NULL;
    struct lk L = {.t = text, .n = len, .o = {.tag = OKV_TAG_SERVER}};
    for (size_t i = 0; i < len;) {   /* %ignore may come after the rules it applies to */
        size_t p = i;
        while (p < len && (text[p] == ' ' || text[p] == '\t'))
            p++;
        if (len - p >= 7 && !memcmp(text + p, "%ignore", 7))
            L.has_ignore = true;
        while (i < len && text[i] != '\n')
            i++;
        i++;
    }
    for (;;) {
        skip(&L, true);
        if (at_end(&L) || L.st != OKV_OK)
            break;
        if (cur(&L) == '%' ? !statement(&L) : !rule(&L))
            break;
        skip(&L, false);
        if (!at_end(&L) && cur(&L) != '\n') {
            char d[24];
            lerr(&L, L.pos, "unexpected %s after the end of an item", describe(&L, L.pos, d, sizeof d));
        }
    }
    if (L.st == OKV_OK && !L.has_start)
        lerr(&L, 0, "no rule named 'start' (a Lark grammar starts there)");
    if (L.st == OKV_OK) {
        /* the rules made here, after the last line */
        puts_(&L, "\nlark-top ::= start");
        if (L.n_ignore) {
            puts_(&L, " lark-ignore\nlark-ignore ::= (");
            for (int i = 0; i < L.n_ignore; i++) {
                puts_(&L, i ? " | (" : " (");
                puts_(&L, L.ignore[i]);
                puts_(&L, " )");
            }
            puts_(&L, " )*");
        }
        puts_(&L, "\n");
        for (int i = 0; i < N_COMMON; i++)
            if (L.imported & 1u << i) {
                puts_(&L, "lark-common-");
                puts_(&L, COMMON[i].name);
                puts_(&L, " ::= ");
                puts_(&L, COMMON[i].gbnf);
                puts_(&L, "\n");
            }
        if (L.o.oom)
            L.st = okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory");
        else
            remove_left_recursion(&L);
    }
    for (int i = 0; i < L.n_ignore; i++)
        okv_free(L.ignore[i]);
    for (int i = 0; i < L.n_imp; i++)
        okv_free(L.imp_name[i]);
    if (L.st != OKV_OK) {
        okv_free(L.o.s);
        return L.st;
    }
    *out = L.o.s;
    return OKV_OK;
}
