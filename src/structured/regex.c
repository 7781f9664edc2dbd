/* Structured output: a regular expression compiled to a byte-level DFA (regex.h).
 *
 * The subset of Python `re` syntax taken (anything else is refused by name, with its offset):
 *   literals       any UTF-8 character; \xhh \uhhhh \Uhhhhhhhh \0 \a \f \n \r \t \v; a
 *                  backslash before any other ASCII non-letter, non-digit (\. \* \/ \- ...)
 *                  or before a non-ASCII character is that character
 *   sets           \d = [0-9], \w = [A-Za-z0-9_], \s = [ \t\n\r\f\v] (ASCII, as re.ASCII: for a
 *                  str pattern Python's own are Unicode); \D \W \S their complements over all
 *                  of Unicode; . = any code point but \n (no DOTALL)
 *   classes        [...] and [^...] with ranges by code point ([à-ÿ], [一-龥]), the escapes
 *                  above, \b (backspace) and \d \w \s \D \W \S inside; ] first is literal
 *   groups         (...), (?:...), (?P<name>...) (all the same here: nothing is captured),
 *                  (?#comment)
 *   alternation    |, empty branches included
 *   quantifiers    * + ? {n} {n,} {,m} {n,m} {,} with n, m <= 1000, and the lazy forms
 *                  (*? +? ?? {n,m}?), which for a full match mean the same; a { that does not
 *                  make one of these is a literal, as in Python
 *   anchors        ^ where nothing can have been read yet (at the start of the pattern, of a
 *                  group or branch there) and $ where nothing can follow (only )s after it):
 *                  there they always hold for a full match, so they are dropped
 * Refused: backreferences (\1, (?P=name)), lookarounds, atomic groups and possessive
 * quantifiers, conditionals, inline flags ((?i) ...), \b \B \A \Z \N{...} outside classes,
 * other octal escapes, ^ and $ anywhere else.
 *
 * The pipeline: the pattern parses to a syntax tree whose leaves are sets of code points.
 * Each set becomes the alternatives of UTF-8 byte-range sequences (utf8_split: a range is cut
 * where the encoded length changes and where a continuation byte would not span its whole
 * 0x80-0xbf, so that each piece is a product of byte ranges; surrogates are cut out). The tree
 * then becomes a Thompson NFA over bytes, built back to front (each node is compiled knowing
 * the state that follows it), bounded repetition by copying. Subset construction gives the DFA,
 * one byte interval at a time (the bytes between two range ends lead to the same set). Last,
 * the states from which no accepting state can be reached are removed, so that a byte which
 * cannot be part of any full match gives -1 straight away. */
#include "structured/regex.h"
#include "util/strbuf.h"
#include "tokenizer/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEAT 1000        /* the largest count in {n,m} */
#define MAX_NEST 256           /* groups within groups */
#define MAX_NFA 500000         /* NFA states: bounded repetition copies its operand */
#define MAX_SET_POOL (1 << 25) /* NFA state ids held by all DFA states' sets together */
#define MAX_CP 0x10ffffu

struct okv_regex {
    int32_t n_states;
    int32_t start;
    int16_t *next;       /* (n_states, 256): the state after a byte, -1 none */
    uint8_t *accepting;  /* (n_states) */
};

/* ---- the syntax tree ---- */

enum { A_SET, A_CAT, A_ALT, A_REPEAT };

struct anode {
    uint8_t kind;
    int32_t child;     /* A_CAT, A_ALT: the first of a list chained by sib (A_CAT's is last to first); A_REPEAT: the operand */
    int32_t sib;       /* next in the parent's list, -1 at its end */
    int32_t a, b;      /* A_SET: ranges [a, b) of the range pool; A_REPEAT: min, max (-1: unbounded) */
};

struct crange { uint32_t lo, hi; };   /* code points lo..hi, inclusive */

struct rbuf { struct crange *r; int n, cap; };

struct parser {
    const char *pat;
    size_t len, pos;
    enum okv_status st;   /* of the first error; OKV_OK while none */
    struct anode *nodes;
    int n_nodes, cap_nodes;
    struct rbuf ranges;   /* every A_SET's ranges, one after another */
    int depth;            /* groups open */
    bool at_start;        /* nothing can have been read before this point */
    int n_carets;         /* ^s taken so far */
    unsigned flags;       /* OKV_REGEX_ICASE, OKV_REGEX_DOTALL, OKV_REGEX_UNICODE (okv_regex_to_gbnf's) */
    bool in_negated;      /* reading a [^...] class */
};

static int perr(struct parser *p, enum okv_status st, size_t at, const char *what)
{
    if (p->st == OKV_OK) {
        p->st = st;
        okv_set_error(st, "regex: %s at byte %zu", what, at);
    }
    return -1;
}

static int nomem(struct parser *p)
{
    if (p->st == OKV_OK) {
        p->st = OKV_ERR_NO_MEMORY;
        okv_set_error(OKV_ERR_NO_MEMORY, "regex: no memory");
    }
    return -1;
}

static bool rbuf_add(struct rbuf *b, uint32_t lo, uint32_t hi)
{
    if (b->n == b->cap) {
        const int cap = b->cap ? 2 * b->cap : 16;
        struct crange *r = okv_realloc(b->r, sizeof *r * (size_t)cap, OKV_TAG_SERVER);
        if (!r)
            return false;
        b->r = r;
        b->cap = cap;
    }
    b->r[b->n++] = (struct crange){lo, hi};
    return true;
}

static int new_node(struct parser *p, int kind)
{
    if (p->n_nodes == p->cap_nodes) {
        const int cap = p->cap_nodes ? 2 * p->cap_nodes : 64;
        struct anode *n = okv_realloc(p->nodes, sizeof *n * (size_t)cap, OKV_TAG_SERVER);
        if (!n)
            return nomem(p);
        p->nodes = n;
        p->cap_nodes = cap;
    }
    p->nodes[p->n_nodes] = (struct anode){.kind = (uint8_t)kind, .child = -1, .sib = -1};
    return p->n_nodes++;
}

static int cmp_range(const void *x, const void *y)
{
    const struct crange *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Sort and merge b's ranges; with negate, replace them by their complement over 0..U+10FFFF. */
static bool normalize(struct rbuf *b, bool negate)
{
    if (b->n > 1)
        qsort(b->r, (size_t)b->n, sizeof *b->r, cmp_range);
    int m = 0;
    for (int i = 0; i < b->n; i++) {
        if (m > 0 && b->r[i].lo <= b->r[m - 1].hi + 1) {
            if (b->r[i].hi > b->r[m - 1].hi)
                b->r[m - 1].hi = b->r[i].hi;
        } else {
            b->r[m++] = b->r[i];
        }
    }
    b->n = m;
    if (!negate)
        return true;
    struct rbuf c = {0};
    uint32_t from = 0;
    bool ok = true;
    for (int i = 0; i < b->n && ok; i++) {
        if (b->r[i].lo > from)
            ok = rbuf_add(&c, from, b->r[i].lo - 1);
        from = b->r[i].hi + 1;
    }
    if (ok && from <= MAX_CP)
        ok = rbuf_add(&c, from, MAX_CP);
    okv_free(b->r);
    *b = c;
    return ok;
}

/* The ASCII sets of \d \w \s (letter 'd', 'w', 's'); upper case adds the complement. With unicode (Python's str
 * patterns, OKV_REGEX_UNICODE): \s is Python's whitespace, and \d \w, whose Unicode sets are large, are taken
 * on the safe side: a set that holds only characters Python's holds, so that every text matched here matches
 * there. Where the set is taken whole (\d, or \D inside [^...]) that is the ASCII set; where its complement is
 * (\D, or \d inside [^...]) the ASCII set plus every non-ASCII character is complemented. */
static bool add_perl_set(struct rbuf *b, char letter, bool unicode, bool in_negated)
{
    static const struct crange d[] = {{'0', '9'}, {0x80, MAX_CP}};
    static const struct crange w[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}, {0x80, MAX_CP}};
    static const struct crange s[] = {{'\t', '\r'}, {' ', ' '}};
    static const struct crange us[] = {{'\t', '\r'}, {0x1c, ' '}, {0x85, 0x85}, {0xa0, 0xa0}, {0x1680, 0x1680},
                                       {0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f},
                                       {0x3000, 0x3000}};
    const char l = (char)(letter | 0x20);
    /* the non-ASCII range (last) joins \d or \w where the complement of the set is what is taken */
    const bool wide = unicode && (in_negated != (letter != l));
    const struct crange *set = l == 'd' ? d : l == 'w' ? w : unicode ? us : s;
    const int n = l == 'd' ? 1 + wide : l == 'w' ? 4 + wide : unicode ? 10 : 2;
    if (letter == l) {
        for (int i = 0; i < n; i++)
            if (!rbuf_add(b, set[i].lo, set[i].hi))
                return false;
        return true;
    }
    uint32_t from = 0;
    for (int i = 0; i < n; i++) {
        if (!rbuf_add(b, from, set[i].lo - 1))
            return false;
        from = set[i].hi + 1;
    }
    return from > MAX_CP || rbuf_add(b, from, MAX_CP);
}

/* A new A_SET node holding the ranges of b (normalized here; b is emptied, not freed). */
static int set_node(struct parser *p, struct rbuf *b, bool negate)
{
    if (p->flags & OKV_REGEX_ICASE) {   /* each ASCII letter's other case too, before a class's negation */
        const int n = b->n;
        for (int i = 0; i < n; i++) {
            const uint32_t lo = b->r[i].lo, hi = b->r[i].hi;
            const uint32_t ul = lo > 'A' ? lo : 'A', uh = hi < 'Z' ? hi : 'Z';
            const uint32_t ll = lo > 'a' ? lo : 'a', lh = hi < 'z' ? hi : 'z';
            if ((ul <= uh && !rbuf_add(b, ul + 32, uh + 32)) || (ll <= lh && !rbuf_add(b, ll - 32, lh - 32)))
                return nomem(p);
            if (negate && hi >= 0x80 && (p->flags & OKV_REGEX_UNICODE))   /* Python folds those too */
                return perr(p, OKV_ERR_INVALID_ARG, p->pos, "a case-insensitive [^...] with non-ASCII characters is "
                            "not supported");
        }
        /* the non-ASCII characters that Python's IGNORECASE (str patterns) folds onto ASCII letters */
        static const struct { uint32_t ascii, other; } fold[] = {
            {'i', 0x130}, {'i', 0x131}, {'s', 0x17f}, {'k', 0x212a}};
        if (p->flags & OKV_REGEX_UNICODE)
            for (int f = 0, m = b->n; f < 4; f++)
                for (int i = 0; i < m; i++)
                    if (b->r[i].lo <= fold[f].ascii && fold[f].ascii <= b->r[i].hi) {
                        if (!rbuf_add(b, fold[f].other, fold[f].other))
                            return nomem(p);
                        break;
                    }
    }
    if (!normalize(b, negate))
        return nomem(p);
    const int id = new_node(p, A_SET);
    if (id < 0)
        return -1;
    p->nodes[id].a = p->ranges.n;
    for (int i = 0; i < b->n; i++)
        if (!rbuf_add(&p->ranges, b->r[i].lo, b->r[i].hi))
            return nomem(p);
    p->nodes[id].b = p->ranges.n;
    b->n = 0;
    return id;
}

/* Decode the UTF-8 character at p->pos (strict: no overlong forms, surrogates or code points
 * past U+10FFFF: the tokenizer's decoder); -1 after an error. */
static int64_t read_char(struct parser *p)
{
    uint32_t cp;
    const int n = okv_utf8_decode((const unsigned char *)p->pat + p->pos, p->len - p->pos, &cp);
    if (n == 0) {   /* a lead byte with too few bytes after it is told apart */
        const uint8_t c = (uint8_t)p->pat[p->pos];
        const size_t need = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        return perr(p, OKV_ERR_INVALID_ARG, p->pos, need > p->len - p->pos ? "truncated UTF-8 character in the pattern"
                                                                          : "invalid UTF-8 in the pattern");
    }
    p->pos += (size_t)n;
    return cp;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

enum { ESC_ERROR = -1, ESC_CHAR = 0, ESC_SET = 1 };

/* The escape at p->pos (a backslash): a single code point (*cp, ESC_CHAR) or, for \d \w \s and
 * their complements, ranges added to set (ESC_SET). in_class: inside [...], where \b is a
 * backspace and the anchors mean nothing. */
static int read_escape(struct parser *p, bool in_class, uint32_t *cp, struct rbuf *set)
{
    const size_t at = p->pos;
    char msg[96];
    if (++p->pos >= p->len)
        return perr(p, OKV_ERR_INVALID_ARG, at, "a trailing backslash"), ESC_ERROR;
    const char c = p->pat[p->pos];
    if ((unsigned char)c >= 0x80) {   /* \é: the character itself */
        const int64_t v = read_char(p);
        if (v < 0)
            return ESC_ERROR;
        *cp = (uint32_t)v;
        return ESC_CHAR;
    }
    p->pos++;
    switch (c) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S':
        return add_perl_set(set, c, p->flags & OKV_REGEX_UNICODE, in_class && p->in_negated) ? ESC_SET
                                                                                           : (nomem(p), ESC_ERROR);
    case 'n': *cp = '\n'; return ESC_CHAR;
    case 't': *cp = '\t'; return ESC_CHAR;
    case 'r': *cp = '\r'; return ESC_CHAR;
    case 'f': *cp = '\f'; return ESC_CHAR;
    case 'v': *cp = '\v'; return ESC_CHAR;
    case 'a': *cp = 7; return ESC_CHAR;
    case 'x': case 'u': case 'U': {
        const int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            const int h = p->pos < p->len ? hexval(p->pat[p->pos]) : -1;
            if (h < 0) {
                snprintf(msg, sizeof msg, "incomplete escape \\%c (%d hex digits needed)", c, nd);
                return perr(p, OKV_ERR_INVALID_ARG, at, msg), ESC_ERROR;
            }
            v = v << 4 | (uint32_t)h;
            p->pos++;
        }
        if (v > MAX_CP)
            return perr(p, OKV_ERR_INVALID_ARG, at, "escape \\U past U+10FFFF"), ESC_ERROR;
        if (v >= 0xd800 && v <= 0xdfff)   /* Python would take it, but no UTF-8 text holds one */
            return perr(p, OKV_ERR_INVALID_ARG, at, "a surrogate code point cannot appear in UTF-8 text"), ESC_ERROR;
        *cp = v;
        return ESC_CHAR;
    }
    case '0':
        if (p->pos < p->len && p->pat[p->pos] >= '0' && p->pat[p->pos] <= '7')
            return perr(p, OKV_ERR_INVALID_ARG, at, "octal escapes are not supported (use \\xhh)"), ESC_ERROR;
        *cp = 0;
        return ESC_CHAR;
    case 'b':
        if (in_class) {
            *cp = 8;
            return ESC_CHAR;
        }
        return perr(p, OKV_ERR_INVALID_ARG, at, "word boundary \\b is not supported"), ESC_ERROR;
    case 'B':
        return perr(p, OKV_ERR_INVALID_ARG, at, "non-boundary \\B is not supported"), ESC_ERROR;
    case 'A':
        return perr(p, OKV_ERR_INVALID_ARG, at, "anchor \\A is not supported (use a leading ^)"), ESC_ERROR;
    case 'Z':
        return perr(p, OKV_ERR_INVALID_ARG, at, "anchor \\Z is not supported (use a trailing $)"), ESC_ERROR;
    case 'N':
        return perr(p, OKV_ERR_INVALID_ARG, at, "named character escape \\N{...} is not supported"), ESC_ERROR;
    default:
        break;
    }
    if (c >= '1' && c <= '9') {
        snprintf(msg, sizeof msg, in_class ? "octal escape \\%c is not supported" : "backreference \\%c is not supported", c);
        return perr(p, OKV_ERR_INVALID_ARG, at, msg), ESC_ERROR;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        snprintf(msg, sizeof msg, "bad escape \\%c", c);
        return perr(p, OKV_ERR_INVALID_ARG, at, msg), ESC_ERROR;
    }
    *cp = (uint8_t)c;   /* \. \* \\ \/ \- \  ...: the character itself */
    return ESC_CHAR;
}

/* [...] at p->pos: a new A_SET node. */
static int parse_class(struct parser *p)
{
    const size_t open = p->pos++;
    struct rbuf b = {0};
    bool negate = false;
    char msg[96];
    if (p->pos < p->len && p->pat[p->pos] == '^') {
        negate = true;
        p->pos++;
    }
    p->in_negated = negate;
    bool first = true;
    for (;;) {
        if (p->pos >= p->len) {
            okv_free(b.r);
            return perr(p, OKV_ERR_INVALID_ARG, open, "unterminated character set");
        }
        if (p->pat[p->pos] == ']' && !first)
            break;
        first = false;
        /* one item: a character, a range of them, or a set escape */
        const size_t item = p->pos;
        uint32_t lo, hi;
        int k = ESC_CHAR;
        if (p->pat[p->pos] == '\\') {
            k = read_escape(p, true, &lo, &b);
        } else {
            const int64_t v = read_char(p);
            k = v < 0 ? ESC_ERROR : ESC_CHAR;
            lo = (uint32_t)v;
        }
        if (k == ESC_ERROR)
            goto fail;
        const bool range = p->pos + 1 < p->len && p->pat[p->pos] == '-' && p->pat[p->pos + 1] != ']';
        if (!range) {
            if (k == ESC_CHAR && !rbuf_add(&b, lo, lo))
                goto nomem;
            continue;
        }
        p->pos++;   /* the '-' */
        int k2;
        if (p->pat[p->pos] == '\\') {
            k2 = read_escape(p, true, &hi, &b);
        } else {
            const int64_t v = read_char(p);
            k2 = v < 0 ? ESC_ERROR : ESC_CHAR;
            hi = (uint32_t)v;
        }
        if (k2 == ESC_ERROR)
            goto fail;
        if (k == ESC_SET || k2 == ESC_SET || hi < lo) {
            snprintf(msg, sizeof msg, "bad character range %.*s", (int)(p->pos - item < 40 ? p->pos - item : 40), p->pat + item);
            perr(p, OKV_ERR_INVALID_ARG, item, msg);
            goto fail;
        }
        if (!rbuf_add(&b, lo, hi))
            goto nomem;
    }
    p->pos++;   /* the ']' */
    p->in_negated = false;
    const int id = set_node(p, &b, negate);
    okv_free(b.r);
    return id;
nomem:
    nomem(p);
fail:
    okv_free(b.r);
    return -1;
}

/* The decimal digits at pos (-1 for none; saturating past 10^6): the offset after them. */
static size_t read_count(const struct parser *p, size_t pos, long *v)
{
    *v = -1;
    for (; pos < p->len && p->pat[pos] >= '0' && p->pat[pos] <= '9'; pos++)
        *v = *v < 0 ? p->pat[pos] - '0' : *v >= 1000000 ? *v : *v * 10 + (p->pat[pos] - '0');
    return pos;
}

/* At p->pos, a {n}, {n,}, {,m}, {n,m} or {,} quantifier (Python's syntax: digits only)? If so,
 * its bounds and the offset after it; otherwise the { is a literal. */
static bool brace_quantifier(const struct parser *p, size_t pos, long *min, long *max, size_t *end)
{
    size_t i = pos + 1;
    long lo = -1, hi = -1;
    if (i < p->len && p->pat[i] == '}')
        return false;   /* {} is two literals */
    i = read_count(p, i, &lo);
    if (i < p->len && p->pat[i] == ',') {
        i = read_count(p, i + 1, &hi);
    } else {
        hi = lo;
    }
    if (i >= p->len || p->pat[i] != '}')
        return false;
    *min = lo < 0 ? 0 : lo;
    *max = hi;   /* -1: unbounded */
    *end = i + 1;
    return true;
}

/* At p->pos a quantifier? Its bounds, moving past it. */
static bool read_quantifier(struct parser *p, long *min, long *max)
{
    if (p->pos >= p->len)
        return false;
    const char c = p->pat[p->pos];
    size_t end;
    if (c == '*' || c == '+' || c == '?') {
        *min = c == '+';
        *max = c == '?' ? 1 : -1;
        p->pos++;
        return true;
    }
    if (c == '{' && brace_quantifier(p, p->pos, min, max, &end)) {
        p->pos = end;
        return true;
    }
    return false;
}

static bool is_quantifier_at(const struct parser *p, size_t pos)
{
    long a, b;
    size_t e;
    if (pos >= p->len)
        return false;
    const char c = p->pat[pos];
    return c == '*' || c == '+' || c == '?' || (c == '{' && brace_quantifier(p, pos, &a, &b, &e));
}

static int parse_alt(struct parser *p);

/* (...) at p->pos, the (?...) extensions included: the group's node; -2 for a comment (nothing). */
static int parse_group(struct parser *p)
{
    const size_t open = p->pos++;
    if (p->pos < p->len && p->pat[p->pos] == '?') {
        const char *s = p->pat + p->pos + 1;
        const size_t left = p->len - p->pos - 1;
        if (left >= 1 && s[0] == ':') {
            p->pos += 2;
        } else if (left >= 1 && s[0] == '#') {   /* a comment, up to the first ) */
            const char *e = memchr(s, ')', left);
            if (!e)
                return perr(p, OKV_ERR_INVALID_ARG, open, "missing ), unterminated comment");
            p->pos = (size_t)(e - p->pat) + 1;
            return -2;
        } else if (left >= 2 && s[0] == 'P' && s[1] == '<') {   /* a named group: the name is of no use here */
            size_t i = 2;
            while (i < left && (s[i] == '_' || (s[i] >= '0' && s[i] <= '9') || ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z')
                                || (unsigned char)s[i] >= 0x80))
                i++;
            if (i == 2 || i >= left || s[i] != '>' || (s[2] >= '0' && s[2] <= '9'))
                return perr(p, OKV_ERR_INVALID_ARG, open, "bad group name in (?P<name>...)");
            p->pos += 1 + i + 1;
        } else if (left >= 2 && s[0] == 'P' && s[1] == '=') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "backreference (?P=name) is not supported");
        } else if (left >= 1 && s[0] == '=') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "lookahead (?=...) is not supported");
        } else if (left >= 1 && s[0] == '!') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "negative lookahead (?!...) is not supported");
        } else if (left >= 2 && s[0] == '<' && s[1] == '=') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "lookbehind (?<=...) is not supported");
        } else if (left >= 2 && s[0] == '<' && s[1] == '!') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "negative lookbehind (?<!...) is not supported");
        } else if (left >= 1 && s[0] == '>') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "atomic group (?>...) is not supported");
        } else if (left >= 1 && s[0] == '(') {
            return perr(p, OKV_ERR_INVALID_ARG, open, "conditional group (?(...)...) is not supported");
        } else if (left >= 1 && (s[0] == '-' || (s[0] && strchr("aiLmsux", s[0])))) {
            return perr(p, OKV_ERR_INVALID_ARG, open, "inline flags (?aiLmsux) are not supported");
        } else {
            return perr(p, OKV_ERR_INVALID_ARG, open, "unknown group extension (?");
        }
    }
    if (++p->depth > MAX_NEST)
        return perr(p, OKV_ERR_INVALID_ARG, open, "groups nested too deeply (256 at most)");
    const int id = parse_alt(p);
    p->depth--;
    if (id < 0)
        return -1;
    if (p->pos >= p->len || p->pat[p->pos] != ')')
        return perr(p, OKV_ERR_INVALID_ARG, open, "missing ), unterminated group");
    p->pos++;
    return id;
}

/* One atom at p->pos (not a quantifier, |, ) or anchor): its node. */
static int parse_atom(struct parser *p)
{
    const char c = p->pat[p->pos];
    struct rbuf b = {0};
    uint32_t cp;
    int id;
    if (c == '(')
        return parse_group(p);
    if (c == '[')
        return parse_class(p);
    if (c == '.') {
        p->pos++;
        if (p->flags & OKV_REGEX_DOTALL)   /* every code point */
            id = set_node(p, &b, true);
        else
            id = rbuf_add(&b, '\n', '\n') ? set_node(p, &b, true) : nomem(p);
        okv_free(b.r);
        return id;
    }
    if (c == '\\') {
        const int k = read_escape(p, false, &cp, &b);
        if (k == ESC_ERROR) {
            okv_free(b.r);
            return -1;
        }
    } else {
        const int64_t v = read_char(p);
        if (v < 0)
            return -1;
        cp = (uint32_t)v;
    }
    if (b.n == 0 && !rbuf_add(&b, cp, cp))
        id = nomem(p);
    else
        id = set_node(p, &b, false);
    okv_free(b.r);
    return id;
}

/* A concatenation of quantified atoms, up to |, ) or the end. Its A_CAT node holds the pieces
 * last to first, the order the NFA is built in. */
static int parse_cat(struct parser *p)
{
    const int cat = new_node(p, A_CAT);
    if (cat < 0)
        return -1;
    char msg[96];
    while (p->pos < p->len && p->pat[p->pos] != '|' && p->pat[p->pos] != ')') {
        const size_t at = p->pos;
        const char c = p->pat[at];
        if (c == '^') {
            if (!p->at_start)
                return perr(p, OKV_ERR_INVALID_ARG, at, "^ is only supported at the start of the pattern");
            p->pos++;
            p->n_carets++;
            if (is_quantifier_at(p, p->pos))
                return perr(p, OKV_ERR_INVALID_ARG, p->pos, "nothing to repeat");
            continue;
        }
        if (c == '$') {
            size_t i = at + 1;
            while (i < p->len && p->pat[i] == ')')
                i++;
            if (i < p->len)
                return perr(p, OKV_ERR_INVALID_ARG, at, "$ is only supported at the end of the pattern");
            p->pos++;
            continue;
        }
        if (is_quantifier_at(p, at))
            return perr(p, OKV_ERR_INVALID_ARG, at, "nothing to repeat");
        const int carets = p->n_carets;
        int atom = parse_atom(p);
        if (atom == -2) {   /* a comment */
            if (is_quantifier_at(p, p->pos))
                return perr(p, OKV_ERR_INVALID_ARG, p->pos, "nothing to repeat");
            continue;
        }
        if (atom < 0)
            return -1;
        p->at_start = false;
        long min, max;
        const size_t qat = p->pos;
        if (read_quantifier(p, &min, &max)) {
            if (min > MAX_REPEAT || max > MAX_REPEAT) {
                snprintf(msg, sizeof msg, "repetition count %ld is more than %d", min > MAX_REPEAT ? min : max, MAX_REPEAT);
                return perr(p, OKV_ERR_INVALID_ARG, qat, msg);
            }
            if (max >= 0 && min > max)
                return perr(p, OKV_ERR_INVALID_ARG, qat, "min repeat greater than max repeat");
            if (p->n_carets > carets && (max < 0 || max > 1))   /* a second pass would not be at the start */
                return perr(p, OKV_ERR_INVALID_ARG, qat, "a group holding ^ cannot repeat");
            if (p->pos < p->len && p->pat[p->pos] == '?')
                p->pos++;   /* lazy: the same set of full matches */
            else if (p->pos < p->len && p->pat[p->pos] == '+')
                return perr(p, OKV_ERR_INVALID_ARG, p->pos, "possessive quantifier is not supported");
            if (is_quantifier_at(p, p->pos))
                return perr(p, OKV_ERR_INVALID_ARG, p->pos, "multiple repeat");
            const int r = new_node(p, A_REPEAT);
            if (r < 0)
                return -1;
            p->nodes[r].child = atom;
            p->nodes[r].a = (int32_t)min;
            p->nodes[r].b = (int32_t)max;
            atom = r;
        }
        p->nodes[atom].sib = p->nodes[cat].child;
        p->nodes[cat].child = atom;
    }
    return cat;
}

static int parse_alt(struct parser *p)
{
    const bool start = p->at_start;
    int first = -1, last = -1, n = 0;
    for (;;) {
        p->at_start = start;
        const int cat = parse_cat(p);
        if (cat < 0)
            return -1;
        if (last >= 0)
            p->nodes[last].sib = cat;
        else
            first = cat;
        last = cat;
        n++;
        if (p->pos >= p->len || p->pat[p->pos] != '|')
            break;
        p->pos++;
    }
    p->at_start = false;
    if (n == 1)
        return first;
    const int alt = new_node(p, A_ALT);
    if (alt < 0)
        return -1;
    p->nodes[alt].child = first;
    return alt;
}

/* ---- UTF-8 byte sequences of a code-point range ---- */

/* A sequence of 1-4 byte ranges: byte i of the encoding lies in lo[i]..hi[i]. */
struct useq { int n; uint8_t lo[4], hi[4]; };

static int utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

/* Cut lo..hi (no surrogates inside) into pieces whose encodings are all of one length and
 * whose every code point between the ends is a product of the ends' byte ranges: within a
 * piece, below the first byte where lo's and hi's encodings differ, lo's continuation bytes
 * must all be 0x80 and hi's all 0xbf. Recursion depth is at most a few levels per byte. */
static int utf8_split(uint32_t lo, uint32_t hi, struct useq *out, int n, int cap)
{
    static const uint32_t len_end[] = {0x7f, 0x7ff, 0xffff};
    if (lo > hi)
        return n;
    for (int i = 0; i < 3; i++)
        if (lo <= len_end[i] && hi > len_end[i]) {
            n = utf8_split(lo, len_end[i], out, n, cap);
            return utf8_split(len_end[i] + 1, hi, out, n, cap);
        }
    uint8_t a[4], b[4];
    const int len = utf8_encode(lo, a);
    utf8_encode(hi, b);
    for (int i = 1; i < len; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;   /* the low bits that i continuation bytes carry */
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                n = utf8_split(lo, lo | m, out, n, cap);
                return utf8_split((lo | m) + 1, hi, out, n, cap);
            }
            if ((hi & m) != m) {
                n = utf8_split(lo, (hi & ~m) - 1, out, n, cap);
                return utf8_split(hi & ~m, hi, out, n, cap);
            }
        }
    }
    if (n < cap) {
        out[n].n = len;
        memcpy(out[n].lo, a, 4);
        memcpy(out[n].hi, b, 4);
    }
    return n + 1;
}

/* ---- the NFA (Thompson, over bytes) ---- */

enum { N_BYTE, N_EPS, N_MATCH, N_FAIL };

struct nstate {
    uint8_t kind;
    uint8_t lo, hi;   /* N_BYTE: the byte range that leads to out */
    int32_t out;      /* N_BYTE, N_EPS */
    int32_t out2;     /* N_EPS: a second way on, -1 none */
};

/* A byte state already made for the set being built: the same range to the same state is one state. */
struct tail { uint8_t lo, hi; int32_t out, id; };
#define TAIL_CACHE 256

struct nfa {
    struct nstate *s;
    int n, cap;
    struct parser *p;   /* where errors go */
    /* scratch of the set being built, here rather than on the stack of the recursion */
    struct useq seq[64];
    struct tail cache[TAIL_CACHE];
    int n_cache;
};

static int nfa_add(struct nfa *f, int kind, int lo, int hi, int out, int out2)
{
    if (f->n >= MAX_NFA) {
        if (f->p->st == OKV_OK) {
            f->p->st = OKV_ERR_UNSUPPORTED;
            okv_set_error(OKV_ERR_UNSUPPORTED, "regex: the pattern is too large (its NFA passes %d states; "
                                               "large bounded repeats multiply)", MAX_NFA);
        }
        return -1;
    }
    if (f->n == f->cap) {
        const int cap = f->cap ? 2 * f->cap : 256;
        struct nstate *s = okv_realloc(f->s, sizeof *s * (size_t)cap, OKV_TAG_SERVER);
        if (!s)
            return nomem(f->p);
        f->s = s;
        f->cap = cap;
    }
    f->s[f->n] = (struct nstate){(uint8_t)kind, (uint8_t)lo, (uint8_t)hi, out, out2};
    return f->n++;
}

static int tail_state(struct nfa *f, int lo, int hi, int out)
{
    for (int i = 0; i < f->n_cache; i++)
        if (f->cache[i].lo == lo && f->cache[i].hi == hi && f->cache[i].out == out)
            return f->cache[i].id;
    const int id = nfa_add(f, N_BYTE, lo, hi, out, -1);
    if (id >= 0 && f->n_cache < TAIL_CACHE)
        f->cache[f->n_cache++] = (struct tail){(uint8_t)lo, (uint8_t)hi, out, id};
    return id;
}

/* The states of AST node `node`, followed by state `next`: their entry state, -1 on error. */
static int nfa_build(struct nfa *f, const struct parser *p, int node, int next)
{
    const struct anode *a = &p->nodes[node];
    switch (a->kind) {
    case A_CAT: {
        int cur = next;
        for (int c = a->child; c >= 0 && cur >= 0; c = p->nodes[c].sib)
            cur = nfa_build(f, p, c, cur);
        return cur;
    }
    case A_ALT: {
        int entry = -1;
        for (int c = a->child; c >= 0; c = p->nodes[c].sib) {
            const int s = nfa_build(f, p, c, next);
            if (s < 0)
                return -1;
            entry = entry < 0 ? s : nfa_add(f, N_EPS, 0, 0, s, entry);
            if (entry < 0)
                return -1;
        }
        return entry;
    }
    case A_REPEAT: {
        const int min = a->a, max = a->b;
        int cur = next;
        if (max < 0) {   /* the loop: L -> operand -> L, or L -> next */
            const int loop = nfa_add(f, N_EPS, 0, 0, -1, next);
            if (loop < 0)
                return -1;
            const int body = nfa_build(f, p, a->child, loop);
            if (body < 0)
                return -1;
            f->s[loop].out = body;
            cur = loop;
        } else {   /* max - min optional copies: (x(x(x)?)?)? built inside out */
            for (int i = 0; i < max - min && cur >= 0; i++) {
                const int body = nfa_build(f, p, a->child, cur);
                cur = body < 0 ? -1 : nfa_add(f, N_EPS, 0, 0, body, next);
            }
        }
        for (int i = 0; i < min && cur >= 0; i++)
            cur = nfa_build(f, p, a->child, cur);
        return cur;
    }
    case A_SET: {
        /* one chain of byte states per UTF-8 sequence, the chains tried side by side; chains
         * share their common tails (the continuation bytes), so that the DFA does not tell
         * apart states that only differ in which chain they are on */
        struct useq *seq = f->seq;
        int entry = -1;
        f->n_cache = 0;
        for (int r = a->a; r < a->b; r++) {
            const struct crange cr = p->ranges.r[r];
            int nseq = 0;
            if (cr.lo < 0xd800)   /* surrogates have no UTF-8 encoding: cut them out */
                nseq = utf8_split(cr.lo, cr.hi < 0xd7ff ? cr.hi : 0xd7ff, seq, nseq, 64);
            if (cr.hi > 0xdfff)
                nseq = utf8_split(cr.lo > 0xe000 ? cr.lo : 0xe000, cr.hi, seq, nseq, 64);
            OKV_ASSERT(nseq <= 64);   /* a range splits into at most 1 + 3 + 2 * 5 + 7 pieces */
            for (int i = 0; i < nseq; i++) {
                int t = next;
                for (int k = seq[i].n - 1; k >= 0 && t >= 0; k--)
                    t = tail_state(f, seq[i].lo[k], seq[i].hi[k], t);
                entry = t < 0 ? -1 : entry < 0 ? t : nfa_add(f, N_EPS, 0, 0, t, entry);
                if (entry < 0)
                    return -1;
            }
        }
        /* an empty set ([^\s\S]): a state with no way on */
        return entry >= 0 ? entry : nfa_add(f, N_FAIL, 0, 0, -1, -1);
    }
    }
    return -1;
}

/* ---- subset construction ---- */

struct dfa_build {
    const struct nfa *f;
    int32_t *mark;       /* (nfa states): == gen when visited in this closure */
    int32_t gen;
    int32_t *stack;      /* (nfa states) */
    int32_t *seeds;      /* (nfa states): where one byte leads from a set */
    int32_t *tmp;        /* (nfa states): the closure being built */
    int32_t *pool;       /* the sets of all DFA states, one after another */
    size_t pool_n, pool_cap;
    size_t *set_off;     /* (MAX_STATES + 1) */
    int32_t *set_len;    /* (MAX_STATES) */
    int32_t *hash;       /* (HASH_SIZE): a DFA state, -1 empty */
    int32_t n;
    int32_t *trans;      /* (MAX_STATES, 256) */
};

#define HASH_SIZE (4 * OKV_REGEX_MAX_STATES)

static int cmp_i32(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static uint32_t set_hash(const int32_t *s, int n)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint32_t)s[i]) * 16777619u;
    return h;
}

/* The states reachable from seeds[0..ns) by epsilon moves, those that read a byte or match,
 * sorted into d->tmp; returns how many. */
static int closure(struct dfa_build *d, const int32_t *seeds, int ns)
{
    const struct nstate *s = d->f->s;
    int top = 0, n = 0;
    d->gen++;
    for (int i = 0; i < ns; i++)
        if (d->mark[seeds[i]] != d->gen) {
            d->mark[seeds[i]] = d->gen;
            d->stack[top++] = seeds[i];
        }
    while (top > 0) {
        const int x = d->stack[--top];
        if (s[x].kind == N_EPS) {
            const int32_t o[2] = {s[x].out, s[x].out2};
            for (int k = 0; k < 2; k++)
                if (o[k] >= 0 && d->mark[o[k]] != d->gen) {
                    d->mark[o[k]] = d->gen;
                    d->stack[top++] = o[k];
                }
        } else if (s[x].kind != N_FAIL) {
            d->tmp[n++] = x;
        }
    }
    qsort(d->tmp, (size_t)n, sizeof *d->tmp, cmp_i32);
    return n;
}

/* The DFA state of the set in d->tmp[0..n), added if new: its id, -1 for the empty set, -2
 * past the state cap, -3 out of memory, -4 past MAX_SET_POOL. */
static int intern(struct dfa_build *d, int n)
{
    if (n == 0)
        return -1;
    uint32_t h = set_hash(d->tmp, n) & (HASH_SIZE - 1);
    for (; d->hash[h] >= 0; h = (h + 1) & (HASH_SIZE - 1)) {
        const int id = d->hash[h];
        if (d->set_len[id] == n && !memcmp(d->pool + d->set_off[id], d->tmp, sizeof *d->tmp * (size_t)n))
            return id;
    }
    if (d->n >= OKV_REGEX_MAX_STATES)
        return -2;
    if (d->pool_n + (size_t)n > d->pool_cap) {
        size_t cap = d->pool_cap ? 2 * d->pool_cap : 4096;
        while (cap < d->pool_n + (size_t)n)
            cap *= 2;
        if (cap > MAX_SET_POOL)
            return -4;
        int32_t *pool = okv_realloc(d->pool, sizeof *pool * cap, OKV_TAG_SERVER);
        if (!pool)
            return -3;
        d->pool = pool;
        d->pool_cap = cap;
    }
    const int id = d->n++;
    memcpy(d->pool + d->pool_n, d->tmp, sizeof *d->tmp * (size_t)n);
    d->set_off[id] = d->pool_n;
    d->set_len[id] = n;
    d->pool_n += (size_t)n;
    d->hash[h] = id;
    return id;
}

/* Build every DFA state's transitions, breadth first from the start set. */
static enum okv_status subset(struct dfa_build *d, int nfa_start)
{
    const struct nstate *s = d->f->s;
    int32_t bounds[2 * 256 + 2];
    if (intern(d, closure(d, &nfa_start, 1)) != 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "regex: the pattern matches no text");
    for (int id = 0; id < d->n; id++) {
        /* the byte intervals on which the set's ranges all agree */
        int nb = 0;
        bool seen[257] = {false};
        seen[0] = seen[256] = true;
        for (int i = 0; i < d->set_len[id]; i++) {
            const struct nstate *x = &s[d->pool[d->set_off[id] + (size_t)i]];
            if (x->kind == N_BYTE)
                seen[x->lo] = seen[x->hi + 1] = true;
        }
        for (int b = 0; b <= 256; b++)
            if (seen[b])
                bounds[nb++] = b;
        for (int k = 0; k + 1 < nb; k++) {
            const int c = bounds[k];
            int ns = 0;
            for (int i = 0; i < d->set_len[id]; i++) {   /* the pool may move in intern: index it afresh */
                const struct nstate *x = &s[d->pool[d->set_off[id] + (size_t)i]];
                if (x->kind == N_BYTE && x->lo <= c && c <= x->hi)
                    d->seeds[ns++] = x->out;
            }
            const int t = ns > 0 ? intern(d, closure(d, d->seeds, ns)) : -1;
            if (t == -2)
                return okv_set_error(OKV_ERR_UNSUPPORTED, "regex: the pattern needs more than %d DFA states",
                                     OKV_REGEX_MAX_STATES);
            if (t == -3)
                return okv_set_error(OKV_ERR_NO_MEMORY, "regex: no memory");
            if (t == -4)
                return okv_set_error(OKV_ERR_UNSUPPORTED, "regex: the pattern is too large (its DFA states "
                                                          "hold more than %d NFA states together)", MAX_SET_POOL);
            for (int b = c; b < bounds[k + 1]; b++)
                d->trans[(size_t)id * 256 + (size_t)b] = t;
        }
    }
    return OKV_OK;
}

/* Keep the states from which an accepting state can be reached (the others lead nowhere, so
 * bytes into them become -1) and pack the result into re. */
static enum okv_status prune(const struct dfa_build *d, int match_state, okv_regex *re)
{
    const int n = d->n;
    enum okv_status st = OKV_ERR_NO_MEMORY;
    int32_t *in_off = okv_calloc((size_t)n + 1, sizeof *in_off, OKV_TAG_SERVER);   /* reverse edges, CSR */
    int32_t *in_src = okv_malloc(sizeof *in_src * (size_t)n * 256, OKV_TAG_SERVER);
    int32_t *queue = okv_malloc(sizeof *queue * (size_t)n, OKV_TAG_SERVER);
    int32_t *newid = okv_malloc(sizeof *newid * (size_t)n, OKV_TAG_SERVER);
    uint8_t *acc = okv_calloc((size_t)n, 1, OKV_TAG_SERVER);
    if (!in_off || !in_src || !queue || !newid || !acc)
        goto done;
    for (size_t e = 0; e < (size_t)n * 256; e++)
        if (d->trans[e] >= 0)
            in_off[d->trans[e] + 1]++;
    for (int i = 0; i < n; i++)
        in_off[i + 1] += in_off[i];
    int32_t *fill = queue;   /* borrowed as each target's next free slot until the search */
    memcpy(fill, in_off, sizeof *fill * (size_t)n);
    for (size_t e = 0; e < (size_t)n * 256; e++)
        if (d->trans[e] >= 0)
            in_src[fill[d->trans[e]]++] = (int32_t)(e / 256);
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++) {
        newid[i] = -1;
        for (int k = 0; k < d->set_len[i]; k++)
            if (d->pool[d->set_off[i] + (size_t)k] == match_state)
                acc[i] = 1;
        if (acc[i]) {
            newid[i] = 0;
            queue[tail++] = i;
        }
    }
    while (head < tail) {
        const int t = queue[head++];
        for (int k = in_off[t]; k < in_off[t + 1]; k++)
            if (newid[in_src[k]] < 0) {
                newid[in_src[k]] = 0;
                queue[tail++] = in_src[k];
            }
    }
    if (newid[0] < 0) {
        st = okv_set_error(OKV_ERR_INVALID_ARG, "regex: the pattern matches no text");
        goto done;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (newid[i] >= 0)
            newid[i] = m++;   /* the start, state 0, stays 0 */
    re->next = okv_malloc(sizeof *re->next * (size_t)m * 256, OKV_TAG_SERVER);
    re->accepting = okv_malloc((size_t)m, OKV_TAG_SERVER);
    if (!re->next || !re->accepting)
        goto done;
    for (int i = 0; i < n; i++) {
        if (newid[i] < 0)
            continue;
        const size_t row = (size_t)newid[i] * 256;
        for (int c = 0; c < 256; c++) {
            const int t = d->trans[(size_t)i * 256 + (size_t)c];
            re->next[row + (size_t)c] = (int16_t)(t >= 0 ? newid[t] : -1);
        }
        re->accepting[newid[i]] = acc[i];
    }
    re->n_states = m;
    re->start = 0;
    st = OKV_OK;
done:
    if (st == OKV_ERR_NO_MEMORY)
        okv_set_error(st, "regex: no memory");
    okv_free(in_off);
    okv_free(in_src);
    okv_free(queue);
    okv_free(newid);
    okv_free(acc);
    return st;
}

/* ---- the syntax tree as GBNF ---- */

/* false: a set that matches nothing (GBNF has no empty class) */
static bool print_gbnf(const struct parser *p, int id, struct okv_strbuf *t)
{
    const struct anode *nd = &p->nodes[id];
    char buf[48];
    switch (nd->kind) {
    case A_SET:
        if (nd->a == nd->b)
            return false;
        okv_sb_puts(t, "[");
        for (int i = nd->a; i < nd->b; i++) {
            const struct crange r = p->ranges.r[i];
            if (r.lo == r.hi)
                snprintf(buf, sizeof buf, "\\U%08X", (unsigned)r.lo);
            else
                snprintf(buf, sizeof buf, "\\U%08X-\\U%08X", (unsigned)r.lo, (unsigned)r.hi);
            okv_sb_puts(t, buf);
        }
        okv_sb_puts(t, "]");
        return true;
    case A_CAT: {   /* children last to first */
        int n = 0;
        for (int c = nd->child; c >= 0; c = p->nodes[c].sib)
            n++;
        okv_sb_puts(t, "(");
        for (int k = n - 1; k >= 0; k--) {
            int c = nd->child;
            for (int j = 0; j < k; j++)
                c = p->nodes[c].sib;
            okv_sb_puts(t, " ");
            if (!print_gbnf(p, c, t))
                return false;
        }
        okv_sb_puts(t, " )");
        return true;
    }
    case A_ALT: {
        okv_sb_puts(t, "(");
        bool any = false;
        for (int c = nd->child; c >= 0; c = p->nodes[c].sib) {
            struct okv_strbuf u = {.tag = OKV_TAG_SERVER};
            if (print_gbnf(p, c, &u)) {   /* a branch that matches nothing is left out */
                if (any)
                    okv_sb_puts(t, " |");
                okv_sb_puts(t, " ");
                okv_sb_put(t, u.s ? u.s : "", u.len);
                any = true;
            }
            t->oom |= u.oom;
            okv_free(u.s);
        }
        okv_sb_puts(t, " )");
        return any;
    }
    default: {   /* A_REPEAT */
        struct okv_strbuf u = {.tag = OKV_TAG_SERVER};
        const bool ok = print_gbnf(p, nd->child, &u);
        t->oom |= u.oom;
        if (ok) {
            okv_sb_puts(t, "(");
            okv_sb_put(t, u.s ? u.s : "", u.len);
            okv_sb_puts(t, ")");
        }
        okv_free(u.s);
        if (!ok)   /* nothing to repeat: only the empty text, where zero copies are allowed */
            return nd->a == 0 ? (okv_sb_puts(t, "()"), true) : false;
        if (nd->b < 0)
            snprintf(buf, sizeof buf, "{%d,}", nd->a);
        else
            snprintf(buf, sizeof buf, "{%d,%d}", nd->a, nd->b);
        okv_sb_puts(t, buf);
        return true;
    }
    }
}

enum okv_status okv_regex_to_gbnf(const char *pattern, size_t len, unsigned flags, char **out)
{
    *out = NULL;
    struct parser p = {.pat = pattern, .len = len, .at_start = true, .flags = flags};
    int root = parse_alt(&p);
    if (root >= 0 && p.pos < p.len)
        root = perr(&p, OKV_ERR_INVALID_ARG, p.pos, "unbalanced parenthesis");
    enum okv_status st = p.st;
    struct okv_strbuf t = {.tag = OKV_TAG_SERVER};
    if (root >= 0) {
        if (!print_gbnf(&p, root, &t))
            st = okv_set_error(OKV_ERR_INVALID_ARG, "regex: no text matches it");
        else if (t.oom)
            st = okv_set_error(OKV_ERR_NO_MEMORY, "regex: no memory");
    }
    okv_free(p.nodes);
    okv_free(p.ranges.r);
    if (st == OKV_OK)
        *out = t.s;
    else
        okv_free(t.s);
    return st;
}

enum okv_status okv_regex_compile(const char *pattern, size_t len, okv_regex **out)
{
    *out = NULL;
    if (!pattern && len > 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "regex: no pattern");
    struct parser p = {.pat = pattern, .len = len, .at_start = true};
    struct nfa f = {.p = &p};
    struct dfa_build d = {.f = &f};
    okv_regex *re = NULL;
    enum okv_status st = OKV_OK;

    int root = parse_alt(&p);
    if (root >= 0 && p.pos < p.len)   /* parse_alt stops only at the end or at a ) */
        root = perr(&p, OKV_ERR_INVALID_ARG, p.pos, "unbalanced parenthesis");
    const int match = root >= 0 ? nfa_add(&f, N_MATCH, 0, 0, -1, -1) : -1;
    const int nfa_start = match >= 0 ? nfa_build(&f, &p, root, match) : -1;
    if (nfa_start < 0) {
        st = p.st != OKV_OK ? p.st : okv_set_error(OKV_ERR_INTERNAL, "regex: NFA construction failed");
        goto done;
    }

    d.mark = okv_calloc((size_t)f.n, sizeof *d.mark, OKV_TAG_SERVER);
    d.stack = okv_malloc(sizeof *d.stack * (size_t)f.n, OKV_TAG_SERVER);
    d.seeds = okv_malloc(sizeof *d.seeds * (size_t)f.n, OKV_TAG_SERVER);
    d.tmp = okv_malloc(sizeof *d.tmp * (size_t)f.n, OKV_TAG_SERVER);
    d.set_off = okv_malloc(sizeof *d.set_off * (OKV_REGEX_MAX_STATES + 1), OKV_TAG_SERVER);
    d.set_len = okv_malloc(sizeof *d.set_len * OKV_REGEX_MAX_STATES, OKV_TAG_SERVER);
    d.hash = okv_malloc(sizeof *d.hash * HASH_SIZE, OKV_TAG_SERVER);
    d.trans = okv_malloc(sizeof *d.trans * (size_t)OKV_REGEX_MAX_STATES * 256, OKV_TAG_SERVER);
    re = okv_calloc(1, sizeof *re, OKV_TAG_SERVER);
    if (!d.mark || !d.stack || !d.seeds || !d.tmp || !d.set_off || !d.set_len || !d.hash || !d.trans || !re) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "regex: no memory");
        goto done;
    }
    memset(d.hash, 0xff, sizeof *d.hash * HASH_SIZE);
    if ((st = subset(&d, nfa_start)) != OKV_OK || (st = prune(&d, match, re)) != OKV_OK)
        goto done;
    *out = re;
    re = NULL;
done:
    okv_regex_free(re);
    okv_free(p.nodes);
    okv_free(p.ranges.r);
    okv_free(f.s);
    okv_free(d.mark);
    okv_free(d.stack);
    okv_free(d.seeds);
    okv_free(d.tmp);
    okv_free(d.pool);
    okv_free(d.set_off);
    okv_free(d.set_len);
    okv_free(d.hash);
    okv_free(d.trans);
    return st;
}

void okv_regex_free(okv_regex *re)
{
    if (!re)
        return;
    okv_free(re->next);
    okv_free(re->accepting);
    okv_free(re);
}

int okv_regex_start(const okv_regex *re) { return re->start; }

int okv_regex_next(const okv_regex *re, int s, uint8_t c)
{
    if (s < 0 || s >= re->n_states)
        return -1;
    return re->next[(size_t)s * 256 + c];
}

bool okv_regex_accepting(const okv_regex *re, int s) { return s >= 0 && s < re->n_states && re->accepting[s]; }

int okv_regex_n_states(const okv_regex *re) { return re->n_states; }
