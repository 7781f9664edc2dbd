/* GBNF text to the flat rule tables of grammar_internal.h, and the checks that let the
 * recognizer (grammar.c) promise that no state it gives is a dead end.
 *
 * The syntax, llama.cpp's (grammars/README.md there) with the differences noted:
 *   grammar      rule+, with spaces, tabs, newlines and # comments (to the end of the line)
 *                between any two items
 *   rule         name ::= alternatives; a rule runs until the next `name ::=` (llama.cpp ends
 *                one at a newline, except inside parentheses and after ::= or |; every grammar
 *                it reads means the same here). A rule is defined once.
 *   alternatives sequence | sequence | ...; an empty sequence derives the empty text
 *   sequence     items, each followed by any number of postfixes
 *   item         a rule name (letters, digits, - and _; used before its definition is fine),
 *                "literal", [class], [^class] (the complement over all code points), . (any
 *                code point, newline included, as in llama.cpp) or ( alternatives )
 *   postfix      * + ? {m} {m,} {m,n} with m, n <= OKV_GRAMMAR_MAX_REPEAT. As in llama.cpp it
 *                applies to everything since the start of the last item: "ab"* repeats "ab",
 *                and x{2}{3} is x{6}
 *   escapes      \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH, in literals and classes;
 *                other characters stand for themselves, as UTF-8. In a class a-b is a range
 *                of code points and - first or last is itself; ] ends the class.
 * A grammar in Lark's syntax as a whole is read by grammar_lark.c (into this GBNF); Lark's constructs
 * inside a GBNF grammar (name: ..., ?name:, %import, /regex/, // comments) are refused with a message
 * that asks for GBNF.
 *
 * Groups and repetitions become rules of their own, as in llama.cpp: x* is R ::= x R | (the
 * empty text), x+ is x R, x{m,n} is m copies of x then O(n-m) where O(k) ::= x O(k-1) | and
 * x? is x{0,1}. The chain nests the optional copies so that x{0,3} reading x has one parse,
 * not three; the recursive reference comes last in its alternative, where the recognizer
 * pushes nothing, so a repetition never deepens the parse stack.
 *
 * The checks, over the rules reachable from the start rule (the others are never entered):
 *   - left recursion: a rule that can derive a text that begins with itself, nothing read,
 *     with more of some alternative left to read after it (expr ::= expr "+" term), would make
 *     the recognizer push without end; refused, naming the rule. Where each such return comes
 *     last in its alternative (what ("a"?)* becomes: R ::= G R | with G nullable) nothing is
 *     pushed and the recognizer sees it has been there before, so that is taken, which
 *     llama.cpp refuses;
 *   - every rule derives some finite text; otherwise a parse could enter one and never end. */
#include "structured/grammar_internal.h"
#include "structured/grammar.h"
#include "tokenizer/tok_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 256           /* parentheses within parentheses */
#define MAX_ELEMS (1 << 20)    /* elements of all rules, once repetitions are expanded */

struct prule {
    char *name;                /* NULL: made for a group or repetition inside rule `owner` */
    int32_t owner;             /* the named rule whose text made this one (itself if named) */
    bool defined;
    size_t at;                 /* named: the offset of its definition, or of its first use until defined */
    struct gram_elem *e;       /* the alternatives, separated by GE_END (none after the last) */
    int32_t n, cap;
};

struct builder {
    const char *text;
    size_t len, pos;
    enum okv_status st;        /* of the first error; OKV_OK while none */
    struct prule *rules;
    int32_t n_rules, cap_rules;
    int32_t *named;            /* the named rules, in order of first mention */
    int32_t n_named, cap_named;
    int32_t *name_hash;        /* the named rules by name, -1 empty; a power of two, at most half full */
    uint32_t name_hash_cap;
    struct gram_range *ranges; /* every set's ranges, one set after another */
    int32_t n_ranges, cap_ranges;
    int32_t *set_off;          /* (n_sets + 1) */
    int32_t n_sets, cap_sets;
    struct gram_range *tmp;    /* the class being read */
    int32_t n_tmp, cap_tmp;
    long n_elems;
    int depth;                 /* parentheses open */
    int lark_lines;            /* gram_parse's: the Lark text's lines (0: the text is the user's GBNF) */
};

/* ---- errors ---- */

void gram_error(const char *what, const char *text, size_t len, size_t at, int lines_only, const char *fmt,
                va_list ap)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < len; i++) {
        if (text[i] == '\n')
            line++, col = 1;
        else
            col++;
    }
    char msg[320];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (lines_only <= 0)
        okv_set_error(OKV_ERR_INVALID_ARG, "%s: line %d, column %d: %s", what, line, col, msg);
    else if (line <= lines_only)
        okv_set_error(OKV_ERR_INVALID_ARG, "%s: line %d: %s", what, line, msg);
    else
        okv_set_error(OKV_ERR_INVALID_ARG, "%s: %s", what, msg);
}

static int perr(struct builder *b, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(struct builder *b, size_t at, const char *fmt, ...)
{
    if (b->st != OKV_OK)
        return -1;
    b->st = OKV_ERR_INVALID_ARG;
    va_list ap;
    va_start(ap, fmt);
    gram_error(b->lark_lines ? "grammar (Lark)" : "grammar", b->text, b->len, at, b->lark_lines, fmt, ap);
    va_end(ap);
    return -1;
}

static int nomem(struct builder *b)
{
    if (b->st == OKV_OK) {
        b->st = OKV_ERR_NO_MEMORY;
        okv_set_error(OKV_ERR_NO_MEMORY, "grammar: no memory");
    }
    return -1;
}

static int lark(struct builder *b, size_t at, const char *what)
{
    return perr(b, at, "%s is Lark syntax, not GBNF; give the grammar in GBNF, e.g. root ::= \"a\" rest", what);
}

/* Room for need items in the array at *pp (of *cap items of size size). */
static bool reserve(struct builder *b, void *pp, int32_t *cap, long need, size_t size)
{
    if (need <= *cap)
        return true;
    long c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *p;
    memcpy(&p, pp, sizeof p);   /* pp points at a typed pointer; memcpy keeps this free of aliasing casts */
    void *q = okv_realloc(p, size * (size_t)c, OKV_TAG_SERVER);
    if (!q)
        return nomem(b), false;
    memcpy(pp, &q, sizeof q);
    *cap = (int32_t)c;
    return true;
}

/* A printable name for the byte at, for "unexpected ..." messages. */
static const char *describe(const struct builder *b, size_t at, char *buf, size_t n)
{
    const unsigned char c = (unsigned char)b->text[at];
    if (c > 0x20 && c < 0x7f)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", c);
    return buf;
}

/* ---- rules, elements, sets ---- */

static uint32_t name_key(const char *name, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)name[i]) * 16777619u;
    return h;
}

/* The slot of name[0..n) in b->name_hash: where it is, or the empty slot where it would go. */
static uint32_t name_slot(const struct builder *b, const char *name, size_t n)
{
    const uint32_t mask = b->name_hash_cap - 1;
    uint32_t i = name_key(name, n) & mask;
    for (; b->name_hash[i] >= 0; i = (i + 1) & mask) {
        const char *s = b->rules[b->name_hash[i]].name;
        if (strlen(s) == n && !memcmp(s, name, n))
            break;
    }
    return i;
}

/* Room in b->name_hash for one more name. */
static bool name_hash_reserve(struct builder *b)
{
    if ((uint32_t)(b->n_named + 1) * 2 <= b->name_hash_cap)
        return true;
    const uint32_t cap = b->name_hash_cap ? b->name_hash_cap * 2 : 64;
    int32_t *t = okv_malloc(sizeof *t * cap, OKV_TAG_SERVER);
    if (!t)
        return nomem(b), false;
    memset(t, 0xff, sizeof *t * cap);
    okv_free(b->name_hash);
    b->name_hash = t;
    b->name_hash_cap = cap;
    for (int32_t k = 0; k < b->n_named; k++) {
        const char *s = b->rules[b->named[k]].name;
        b->name_hash[name_slot(b, s, strlen(s))] = b->named[k];
    }
    return true;
}

static int32_t new_rule(struct builder *b, const char *name, size_t n, int32_t owner, size_t at)
{
    if (!reserve(b, &b->rules, &b->cap_rules, b->n_rules + 1L, sizeof *b->rules))
        return -1;
    if (name && (!name_hash_reserve(b) || !reserve(b, &b->named, &b->cap_named, b->n_named + 1L, sizeof *b->named)))
        return -1;
    const int32_t id = b->n_rules;
    struct prule *r = &b->rules[id];
    *r = (struct prule){.owner = owner < 0 ? id : owner, .at = at};
    if (name) {
        if (!(r->name = okv_malloc(n + 1, OKV_TAG_SERVER)))
            return nomem(b);
        memcpy(r->name, name, n);
        r->name[n] = 0;
        b->name_hash[name_slot(b, name, n)] = id;
        b->named[b->n_named++] = id;
    }
    b->n_rules++;
    return id;
}

/* The named rule name[0..n), made (undefined) at its first mention. */
static int32_t symbol(struct builder *b, const char *name, size_t n, size_t at)
{
    if (b->name_hash_cap) {
        const int32_t id = b->name_hash[name_slot(b, name, n)];
        if (id >= 0)
            return id;
    }
    return new_rule(b, name, n, -1, at);
}

static bool emit(struct builder *b, int32_t r, int32_t kind, int32_t v)
{
    if (++b->n_elems > MAX_ELEMS)
        return perr(b, b->pos, "the grammar is too large: more than %d elements once repetitions are expanded", MAX_ELEMS),
               false;
    struct prule *pr = &b->rules[r];
    if (!reserve(b, &pr->e, &pr->cap, pr->n + 1L, sizeof *pr->e))
        return false;
    pr->e[pr->n++] = (struct gram_elem){kind, v};
    return true;
}

static int cmp_range(const void *x, const void *y)
{
    const struct gram_range *a = x, *c = y;
    return a->lo < c->lo ? -1 : a->lo > c->lo;
}

static bool add_range(struct builder *b, struct gram_range **r, int32_t *n, int32_t *cap, uint32_t lo, uint32_t hi)
{
    if (!reserve(b, r, cap, *n + 1L, sizeof **r))
        return false;
    (*r)[(*n)++] = (struct gram_range){lo, hi};
    return true;
}

/* A new set from the ranges in b->tmp: sorted and merged, complemented over all code points
 * with negate, surrogates cut out. Its id; -1 (reported) when it holds no character. */
static int32_t new_set(struct builder *b, bool negate, size_t at)
{
    struct gram_range *t = b->tmp;
    int32_t n = b->n_tmp;
    if (n > 1)
        qsort(t, (size_t)n, sizeof *t, cmp_range);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m > 0 && t[i].lo <= t[m - 1].hi + 1) {
            if (t[i].hi > t[m - 1].hi)
                t[m - 1].hi = t[i].hi;
        } else {
            t[m++] = t[i];
        }
    }
    if (!reserve(b, &b->set_off, &b->cap_sets, b->n_sets + 2L, sizeof *b->set_off))
        return -1;
    const int32_t first = b->n_ranges;
    /* the ranges to keep, as [lo, hi] pieces; complemented on the fly */
    uint32_t from = 0;
    for (int32_t i = 0; i <= m; i++) {
        uint32_t lo, hi;
        if (negate) {
            if (i < m && t[i].lo == 0) {
                from = t[i].hi + 1;
                continue;
            }
            lo = from;
            hi = i < m ? t[i].lo - 1 : GRAM_MAX_CP;
            if (i < m)
                from = t[i].hi + 1;
            if (lo > hi || lo > GRAM_MAX_CP)
                continue;
        } else {
            if (i == m)
                break;
            lo = t[i].lo, hi = t[i].hi;
        }
        /* cut out U+D800..U+DFFF: no UTF-8 text holds one */
        if (lo < 0xd800 && !add_range(b, &b->ranges, &b->n_ranges, &b->cap_ranges, lo, hi < 0xd7ff ? hi : 0xd7ff))
            return -1;
        if (hi > 0xdfff && !add_range(b, &b->ranges, &b->n_ranges, &b->cap_ranges, lo > 0xe000 ? lo : 0xe000, hi))
            return -1;
    }
    if (b->n_ranges == first)
        return perr(b, at, "the character class matches no character");
    if (b->n_sets == 0)
        b->set_off[0] = 0;
    b->set_off[++b->n_sets] = b->n_ranges;
    return b->n_sets - 1;
}

static int32_t char_set(struct builder *b, uint32_t lo, uint32_t hi, bool negate, size_t at)
{
    b->n_tmp = 0;
    if (!add_range(b, &b->tmp, &b->n_tmp, &b->cap_tmp, lo, hi))
        return -1;
    return new_set(b, negate, at);
}

/* ---- the lexical level ---- */

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* The offset after the spaces, newlines and # comments from pos. */
static size_t skip_space(const struct builder *b, size_t pos)
{
    while (pos < b->len) {
        const char c = b->text[pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            pos++;
        } else if (c == '#') {
            while (pos < b->len && b->text[pos] != '\n')
                pos++;
        } else {
            break;
        }
    }
    return pos;
}

static size_t name_end(const struct builder *b, size_t pos)
{
    while (pos < b->len && is_name_char(b->text[pos]))
        pos++;
    return pos;
}

/* Does a definition `name ::=` start at pos? */
static bool rule_starts_at(const struct builder *b, size_t pos)
{
    const size_t e = name_end(b, pos);
    if (e == pos)
        return false;
    const size_t c = skip_space(b, e);
    return c + 3 <= b->len && !memcmp(b->text + c, "::=", 3);
}

/* A Lark rule head (name:, ?name:, !name:) at pos? */
static bool lark_rule_at(const struct builder *b, size_t pos)
{
    if (pos < b->len && (b->text[pos] == '?' || b->text[pos] == '!'))
        pos++;
    const size_t e = name_end(b, pos);
    if (e == pos)
        return false;
    size_t c = e;
    while (c < b->len && (b->text[c] == ' ' || b->text[c] == '\t'))
        c++;
    return c < b->len && b->text[c] == ':' && (c + 1 >= b->len || b->text[c + 1] != ':');
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The UTF-8 character at b->pos (strict: no overlong forms, surrogates or code points past
 * U+10FFFF: the tokenizer's decoder), moving past it; -1 after an error. */
static int64_t read_utf8(struct builder *b)
{
    uint32_t cp;
    const int n = okv_utf8_decode((const unsigned char *)b->text + b->pos, b->len - b->pos, &cp);
    if (n == 0)
        return perr(b, b->pos, "invalid UTF-8 in the grammar (byte 0x%02x: a stray, overlong, surrogate or "
                    "truncated character)", (uint8_t)b->text[b->pos]);
    b->pos += (size_t)n;
    return cp;
}

/* A character of a literal or class at b->pos, raw or escaped, moving past it; -1 on error. */
static int64_t read_char(struct builder *b)
{
    const size_t at = b->pos;
    if (b->text[at] != '\\')
        return read_utf8(b);
    if (at + 1 >= b->len)
        return perr(b, at, "a backslash at the end of the grammar");
    const char e = b->text[at + 1];
    b->pos = at + 2;
    switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\': case '"': case '[': case ']': case '-': case '^': return (unsigned char)e;
    case 'x': case 'u': case 'U': {
        const int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            const int h = b->pos < b->len ? hexval(b->text[b->pos]) : -1;
            if (h < 0)
                return perr(b, at, "the escape \\%c needs %d hex digits", e, nd);
            v = v << 4 | (uint32_t)h;
            b->pos++;
        }
        if (v > GRAM_MAX_CP)
            return perr(b, at, "the escape \\%c%.*s is past U+10FFFF", e, nd, b->text + at + 2);
        if (v >= 0xd800 && v <= 0xdfff)
            return perr(b, at, "the escape \\%c%.*s is a surrogate, which no UTF-8 text holds", e, nd, b->text + at + 2);
        return v;
    }
    default: {
        char d[16];
        return perr(b, at, "unknown escape \\ followed by %s (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \\x \\u \\U)",
                    describe(b, at + 1, d, sizeof d));
    }
    }
}

/* ---- the syntax ---- */

static bool parse_alternates(struct builder *b, int32_t r);

/* "..." at b->pos: one GE_CHAR per character, into rule r. */
static bool parse_literal(struct builder *b, int32_t r)
{
    const size_t open = b->pos++;
    for (;;) {
        if (b->pos >= b->len)
            return perr(b, open, "an unterminated string literal"), false;
        if (b->text[b->pos] == '"') {
            b->pos++;
            return true;
        }
        const size_t at = b->pos;
        const int64_t cp = read_char(b);
        if (cp < 0)
            return false;
        const int32_t s = char_set(b, (uint32_t)cp, (uint32_t)cp, false, at);
        if (s < 0 || !emit(b, r, GE_CHAR, s))
            return false;
    }
}

/* [...] or [^...] at b->pos. */
static bool parse_class(struct builder *b, int32_t r)
{
    const size_t open = b->pos++;
    bool negate = false;
    if (b->pos < b->len && b->text[b->pos] == '^') {
        negate = true;
        b->pos++;
    }
    b->n_tmp = 0;
    for (;;) {
        if (b->pos >= b->len)
            return perr(b, open, "an unterminated character class ([ without ])"), false;
        if (b->text[b->pos] == ']')
            break;
        const size_t item = b->pos;
        const int64_t lo = read_char(b);
        if (lo < 0)
            return false;
        int64_t hi = lo;
        if (b->pos + 1 < b->len && b->text[b->pos] == '-' && b->text[b->pos + 1] != ']') {
            b->pos++;
            if ((hi = read_char(b)) < 0)
                return false;
            if (hi < lo)
                return perr(b, item, "the character range %.*s is out of order", (int)(b->pos - item), b->text + item), false;
        }
        if (!add_range(b, &b->tmp, &b->n_tmp, &b->cap_tmp, (uint32_t)lo, (uint32_t)hi))
            return false;
    }
    b->pos++;
    if (b->n_tmp == 0 && !negate)
        return perr(b, open, "an empty character class []"), false;
    const int32_t s = new_set(b, negate, open);
    return s >= 0 && emit(b, r, GE_CHAR, s);
}

/* ( alternatives ) at b->pos: a rule of its own, referred to from r. */
static bool parse_group(struct builder *b, int32_t r)
{
    const size_t open = b->pos++;
    if (b->depth >= MAX_NEST)
        return perr(b, open, "parentheses nested too deeply (%d at most)", MAX_NEST), false;
    const int32_t g = new_rule(b, NULL, 0, b->rules[r].owner, open);
    if (g < 0)
        return false;
    b->depth++;
    const bool ok = parse_alternates(b, g);
    b->depth--;
    if (!ok)
        return false;
    if (b->pos >= b->len || b->text[b->pos] != ')')
        return perr(b, open, "an unclosed '('"), false;
    b->pos++;
    return emit(b, r, GE_REF, g);
}

/* The decimal number at b->pos (saturating), -1 if none. */
static long read_count(struct builder *b)
{
    long v = -1;
    for (; b->pos < b->len && b->text[b->pos] >= '0' && b->text[b->pos] <= '9'; b->pos++)
        v = v < 0 ? b->text[b->pos] - '0' : v >= 100000000 ? v : v * 10 + (b->text[b->pos] - '0');
    return v;
}

/* {m}, {m,} or {m,n} at b->pos: the bounds (*max -1: none). */
static bool parse_bounds(struct builder *b, long *min, long *max)
{
    const size_t open = b->pos++;
    b->pos = skip_space(b, b->pos);
    if ((*min = read_count(b)) < 0)
        return perr(b, open, "expected a number after '{' (the forms are {m}, {m,} and {m,n})"), false;
    b->pos = skip_space(b, b->pos);
    *max = *min;
    if (b->pos < b->len && b->text[b->pos] == ',') {
        b->pos = skip_space(b, b->pos + 1);
        *max = read_count(b);
        b->pos = skip_space(b, b->pos);
    }
    if (b->pos >= b->len || b->text[b->pos] != '}')
        return perr(b, open, "expected '}' to end the repetition (the forms are {m}, {m,} and {m,n})"), false;
    b->pos++;
    if (*min > OKV_GRAMMAR_MAX_REPEAT || *max > OKV_GRAMMAR_MAX_REPEAT)
        return perr(b, open, "the repetition bound %ld is too large (%d at most)", *min > *max ? *min : *max,
                    OKV_GRAMMAR_MAX_REPEAT), false;
    if (*max >= 0 && *max < *min)
        return perr(b, open, "the repetition bounds are out of order: {%ld,%ld}", *min, *max), false;
    return true;
}

static bool emit_all(struct builder *b, int32_t r, const struct gram_elem *e, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (!emit(b, r, e[i].kind, e[i].v))
            return false;
    return true;
}

/* Repeat the elements of rule r from `last` on, min to max (-1: any number of) times. */
static bool repeat(struct builder *b, int32_t r, int32_t last, long min, long max, size_t at)
{
    const int32_t k = b->rules[r].n - last;
    if (k == 0)   /* "" or () repeated: still the empty text */
        return true;
    struct gram_elem *atom = okv_malloc(sizeof *atom * (size_t)k, OKV_TAG_SERVER);
    if (!atom)
        return nomem(b), false;
    memcpy(atom, b->rules[r].e + last, sizeof *atom * (size_t)k);
    b->rules[r].n = last;
    b->n_elems -= k;
    bool ok = true;
    for (long i = 0; i < min && ok; i++)
        ok = emit_all(b, r, atom, k);
    const int32_t owner = b->rules[r].owner;
    if (ok && max < 0) {   /* R ::= x R | */
        const int32_t g = new_rule(b, NULL, 0, owner, at);
        ok = g >= 0 && emit_all(b, g, atom, k) && emit(b, g, GE_REF, g) && emit(b, g, GE_END, 0) && emit(b, r, GE_REF, g);
    } else if (ok && max > min) {   /* O(1) ::= x |, O(k) ::= x O(k-1) | */
        int32_t prev = -1;
        for (long i = min; i < max && ok; i++) {
            const int32_t g = new_rule(b, NULL, 0, owner, at);
            ok = g >= 0 && emit_all(b, g, atom, k) && (prev < 0 || emit(b, g, GE_REF, prev)) && emit(b, g, GE_END, 0);
            prev = g;
        }
        ok = ok && emit(b, r, GE_REF, prev);
    }
    okv_free(atom);
    return ok;
}

/* Items and their postfixes into rule r, up to |, ), the next rule or the end. */
static bool parse_sequence(struct builder *b, int32_t r)
{
    int32_t last = -1;   /* where the last item's elements start in r; -1: none yet */
    char d[16];
    for (;;) {
        b->pos = skip_space(b, b->pos);
        if (b->pos >= b->len)
            return true;
        const size_t at = b->pos;
        const char c = b->text[at];
        if (c == '|' || c == ')')
            return true;
        if (is_name_char(c)) {
            if (rule_starts_at(b, at))
                return true;
            if (lark_rule_at(b, at))
                return lark(b, at, "a rule head 'name:'"), false;
            const size_t e = name_end(b, at);
            const int32_t ref = symbol(b, b->text + at, e - at, at);
            last = b->rules[r].n;
            b->pos = e;
            if (ref < 0 || !emit(b, r, GE_REF, ref))
                return false;
            continue;
        }
        if (c == '"' || c == '[' || c == '.' || c == '(') {
            last = b->rules[r].n;
            bool ok;
            if (c == '"') {
                ok = parse_literal(b, r);
            } else if (c == '[') {
                ok = parse_class(b, r);
            } else if (c == '(') {
                ok = parse_group(b, r);
            } else {   /* . : the complement of nothing */
                b->pos++;
                b->n_tmp = 0;
                const int32_t any = new_set(b, true, at);
                ok = any >= 0 && emit(b, r, GE_CHAR, any);
            }
            if (!ok)
                return false;
            continue;
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0)
                return perr(b, at, "nothing to repeat before '%c'", c), false;
            long min = c == '+', max = c == '?' ? 1 : -1;
            if (c == '{') {
                if (!parse_bounds(b, &min, &max))
                    return false;
            } else {
                b->pos++;
            }
            if (!repeat(b, r, last, min, max, at))
                return false;
            continue;
        }
        if (c == '/')
            return lark(b, at, b->pos + 1 < b->len && b->text[at + 1] == '/' ? "a // comment" : "a /regular expression/"),
                   false;
        if (c == '%' || c == '~')
            return lark(b, at, c == '%' ? "a %directive" : "repetition with ~"), false;
        return perr(b, at, "unexpected %s", describe(b, at, d, sizeof d)), false;
    }
}

static bool parse_alternates(struct builder *b, int32_t r)
{
    for (;;) {
        if (!parse_sequence(b, r))
            return false;
        if (b->pos >= b->len || b->text[b->pos] != '|')
            return true;
        b->pos++;
        if (!emit(b, r, GE_END, 0))
            return false;
    }
}

/* name ::= alternatives, at b->pos (past any space). */
static bool parse_rule(struct builder *b)
{
    const size_t at = b->pos;
    const char c = b->text[at];
    char d[16];
    if (c == '%')
        return lark(b, at, "a %directive (%import, %ignore)"), false;
    if (c == '/' && at + 1 < b->len && b->text[at + 1] == '/')
        return lark(b, at, "a // comment"), false;
    if (lark_rule_at(b, at))
        return lark(b, at, c == '?' || c == '!' ? "a rule head '?name:'" : "a rule head 'name:'"), false;
    const size_t e = name_end(b, at);
    if (e == at)
        return perr(b, at, "expected a rule name (name ::= ...), found %s", describe(b, at, d, sizeof d)), false;
    const size_t op = skip_space(b, e);
    if (op + 3 > b->len || memcmp(b->text + op, "::=", 3))
        return perr(b, op, "expected ::= after the rule name '%.*s'", (int)(e - at), b->text + at), false;
    const int32_t r = symbol(b, b->text + at, e - at, at);
    if (r < 0)
        return false;
    if (b->rules[r].defined) {
        int line = 1;
        for (size_t i = 0; i < b->rules[r].at; i++)
            line += b->text[i] == '\n';
        return perr(b, at, "the rule '%s' is defined twice (first on line %d)", b->rules[r].name, line), false;
    }
    b->rules[r].defined = true;
    b->rules[r].at = at;
    b->pos = op + 3;
    if (!parse_alternates(b, r))
        return false;
    if (b->pos < b->len && b->text[b->pos] == ')')
        return perr(b, b->pos, "an unbalanced ')'"), false;
    return true;
}

/* ---- checks and the flat tables ---- */

static int32_t sat_add(int64_t a, int64_t b)
{
    return a + b < GRAM_INF_LEN ? (int32_t)(a + b) : GRAM_INF_LEN;
}

/* The bytes of the shortest UTF-8 character in set s. */
static int32_t char_cost(const struct gram_rules *g, int32_t s)
{
    const uint32_t cp = g->ranges[g->set_off[s]].lo;
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

static void heap_push(int64_t *h, int32_t *n, int64_t v)
{
    int32_t i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2)
        h[i] = h[(i - 1) / 2];
    h[i] = v;
}

static int64_t heap_pop(int64_t *h, int32_t *n)
{
    const int64_t top = h[0], last = h[--*n];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= last)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* The fewest bytes each rule derives (rule_min; GRAM_INF_LEN for a rule that derives no finite
 * text) and, for every position, the fewest bytes from there to the end of its alternative
 * (g->pos_min). So a rule is nullable iff its least length is 0. Knuth's generalization of
 * Dijkstra's algorithm: an alternative's length is known once the lengths of all the rules it
 * refers to are, and the least one known is final for its rule, since a sum is never less than
 * its parts; each alternative counts the references still unknown, so the whole is
 * O(size log size) (generated rules chain thousands deep, which rules out iterating to a
 * fixpoint). */
static bool min_lengths(struct gram_rules *g, const int32_t *alt_rule, int32_t *rule_min)
{
    const int32_t n_alts = g->alt_off[g->n_rules];
    int32_t *need = okv_calloc((size_t)n_alts + 1, sizeof *need, OKV_TAG_SERVER);
    int32_t *len = okv_calloc((size_t)n_alts + 1, sizeof *len, OKV_TAG_SERVER);
    int32_t *occ_off = okv_calloc((size_t)g->n_rules + 1, sizeof *occ_off, OKV_TAG_SERVER);
    int32_t *occ = okv_malloc(sizeof *occ * ((size_t)g->n_elems + 1), OKV_TAG_SERVER);
    int32_t *fill = okv_malloc(sizeof *fill * ((size_t)g->n_rules + 1), OKV_TAG_SERVER);
    int64_t *heap = okv_malloc(sizeof *heap * ((size_t)n_alts + 1), OKV_TAG_SERVER);
    uint8_t *done = okv_calloc((size_t)g->n_rules + 1, 1, OKV_TAG_SERVER);
    g->pos_min = okv_malloc(sizeof *g->pos_min * (size_t)g->n_elems, OKV_TAG_SERVER);
    const bool ok = need && len && occ_off && occ && fill && heap && done && g->pos_min;
    if (ok) {
        for (int32_t a = 0; a < n_alts; a++)
            for (int32_t p = g->alt_pos[a]; g->elems[p].kind != GE_END; p++)
                if (g->elems[p].kind == GE_REF)
                    need[a]++, occ_off[g->elems[p].v]++;
                else
                    len[a] = sat_add(len[a], char_cost(g, g->elems[p].v));
        for (int32_t r = 0, sum = 0; r <= g->n_rules; r++) {
            const int32_t c = r < g->n_rules ? occ_off[r] : 0;
            occ_off[r] = sum;
            fill[r] = sum;
            sum += c;
        }
        for (int32_t a = 0; a < n_alts; a++)
            for (int32_t p = g->alt_pos[a]; g->elems[p].kind != GE_END; p++)
                if (g->elems[p].kind == GE_REF)
                    occ[fill[g->elems[p].v]++] = a;
        int32_t n_heap = 0;
        for (int32_t a = 0; a < n_alts; a++)
            if (need[a] == 0)
                heap_push(heap, &n_heap, (int64_t)len[a] << 32 | alt_rule[a]);
        for (int32_t r = 0; r < g->n_rules; r++)
            rule_min[r] = GRAM_INF_LEN;
        while (n_heap > 0) {
            const int64_t top = heap_pop(heap, &n_heap);
            const int32_t r = (int32_t)(top & 0xffffffff);
            if (done[r])
                continue;
            done[r] = 1;
            rule_min[r] = (int32_t)(top >> 32);
            for (int32_t i = occ_off[r]; i < occ_off[r + 1]; i++) {
                const int32_t a = occ[i];
                len[a] = sat_add(len[a], rule_min[r]);
                if (--need[a] == 0 && !done[alt_rule[a]])
                    heap_push(heap, &n_heap, (int64_t)len[a] << 32 | alt_rule[a]);
            }
        }
        for (int32_t a = 0; a < n_alts; a++) {   /* suffix sums, back to front */
            int32_t p = g->alt_pos[a];
            while (g->elems[p].kind != GE_END)
                p++;
            g->pos_min[p] = 0;
            for (p--; p >= g->alt_pos[a]; p--)
                g->pos_min[p] = sat_add(g->pos_min[p + 1], g->elems[p].kind == GE_REF ? rule_min[g->elems[p].v]
                                                                                       : char_cost(g, g->elems[p].v));
        }
    }
    okv_free(need);
    okv_free(len);
    okv_free(occ_off);
    okv_free(occ);
    okv_free(fill);
    okv_free(heap);
    okv_free(done);
    return ok;
}

/* Left recursion through a push, among the reachable rules: a strongly connected component of
 * the "can begin with" graph (r -> v where v is referred to from r after nullable rules only)
 * that holds an edge whose reference is not last in its alternative. The rule to name, -1 if
 * none, -2 out of memory. Tarjan's algorithm without recursion: generated rules can chain
 * thousands deep. */
static int32_t left_recursion(const struct builder *b, const struct gram_rules *g, const uint8_t *reach,
                              const uint8_t *nullable)
{
    const int32_t n = g->n_rules;
    int32_t *eoff = okv_calloc((size_t)n + 1, sizeof *eoff, OKV_TAG_SERVER);
    int32_t *edge = NULL;   /* target << 1 | (not last in the alternative) */
    int32_t *index = okv_malloc(sizeof *index * (size_t)n, OKV_TAG_SERVER);
    int32_t *low = okv_malloc(sizeof *low * (size_t)n, OKV_TAG_SERVER);
    int32_t *comp = okv_malloc(sizeof *comp * (size_t)n, OKV_TAG_SERVER);
    int32_t *stack = okv_malloc(sizeof *stack * (size_t)n, OKV_TAG_SERVER);
    int32_t *call = okv_malloc(sizeof *call * (size_t)n * 2, OKV_TAG_SERVER);   /* (rule, next edge) frames */
    uint8_t *on = okv_calloc((size_t)n, 1, OKV_TAG_SERVER);
    int32_t found = -2;
    if (!eoff || !index || !low || !comp || !stack || !call || !on)
        goto out;
    int32_t n_edges = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t r = 0; r < n; r++) {
            if (pass == 1)
                eoff[r] = n_edges;
            if (!reach[r])
                continue;
            for (int32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++)
                for (int32_t p = g->alt_pos[a]; g->elems[p].kind == GE_REF; p++) {
                    if (pass == 1)
                        edge[n_edges] = g->elems[p].v << 1 | (g->elems[p + 1].kind != GE_END);
                    n_edges++;
                    if (!nullable[g->elems[p].v])
                        break;
                }
        }
        if (pass == 0) {
            if (!(edge = okv_malloc(sizeof *edge * ((size_t)n_edges + 1), OKV_TAG_SERVER)))
                goto out;
            n_edges = 0;
        }
    }
    eoff[n] = n_edges;
    for (int32_t r = 0; r < n; r++)
        index[r] = -1;
    int32_t counter = 0, sp = 0, n_comp = 0;
    for (int32_t root = 0; root < n; root++) {
        if (!reach[root] || index[root] >= 0)
            continue;
        int32_t depth = 0;
        call[0] = root, call[1] = eoff[root];
        index[root] = low[root] = counter++;
        stack[sp++] = root, on[root] = 1;
        while (depth >= 0) {
            const int32_t v = call[2 * depth];
            int32_t *next = &call[2 * depth + 1];
            if (*next < eoff[v + 1]) {
                const int32_t w = edge[(*next)++] >> 1;
                if (index[w] < 0) {
                    index[w] = low[w] = counter++;
                    stack[sp++] = w, on[w] = 1;
                    depth++;
                    call[2 * depth] = w, call[2 * depth + 1] = eoff[w];
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            if (low[v] == index[v]) {
                int32_t w;
                do {
                    w = stack[--sp];
                    on[w] = 0;
                    comp[w] = n_comp;
                } while (w != v);
                n_comp++;
            }
            if (--depth >= 0 && low[v] < low[call[2 * depth]])
                low[call[2 * depth]] = low[v];
        }
    }
    found = -1;
    for (int32_t r = 0; r < n && found < 0; r++)
        for (int32_t i = eoff[r]; i < eoff[r + 1] && found < 0; i++)
            if ((edge[i] & 1) && comp[edge[i] >> 1] == comp[r])
                found = r;
    /* name a rule of the cycle that the text defines (there is one: a group or repetition can
     * come back to itself only last in an alternative); else the rule a group belongs to */
    for (int32_t i = 0, c = found >= 0 ? comp[found] : -1; i < b->n_named && c >= 0; i++)
        if (reach[b->named[i]] && comp[b->named[i]] == c) {
            found = b->named[i];
            break;
        }
out:
    okv_free(eoff);
    okv_free(edge);
    okv_free(index);
    okv_free(low);
    okv_free(comp);
    okv_free(stack);
    okv_free(call);
    okv_free(on);
    return found;
}

/* Lay the rules out flat (out), then check them from the start rule. */
static enum okv_status finish(struct builder *b, const char *root_name, struct gram_rules *g)
{
    for (int32_t i = 0; i < b->n_named; i++) {
        const struct prule *r = &b->rules[b->named[i]];
        if (!r->defined)
            return perr(b, r->at, "undefined rule '%s'", r->name), b->st;
    }
    const int32_t root = b->name_hash_cap ? b->name_hash[name_slot(b, root_name, strlen(root_name))] : -1;
    if (root < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "grammar%s: no rule named '%s', the start rule%s",
                             b->lark_lines ? " (Lark)" : "", root_name,
                             strcmp(root_name, "root") ? "" : " (a GBNF grammar starts at root ::= ...)");
    /* flat: each rule's alternatives, each ended by GE_END */
    int32_t n_alts = 0;
    long n_elems = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        n_alts++;
        n_elems += b->rules[r].n + 1;
        for (int32_t i = 0; i < b->rules[r].n; i++)
            n_alts += b->rules[r].e[i].kind == GE_END;
    }
    g->n_rules = b->n_rules;
    g->n_elems = (int32_t)n_elems;
    g->root = root;
    g->elems = okv_malloc(sizeof *g->elems * (size_t)n_elems, OKV_TAG_SERVER);
    g->alt_off = okv_malloc(sizeof *g->alt_off * ((size_t)b->n_rules + 1), OKV_TAG_SERVER);
    g->alt_pos = okv_malloc(sizeof *g->alt_pos * (size_t)n_alts, OKV_TAG_SERVER);
    int32_t *alt_rule = okv_malloc(sizeof *alt_rule * (size_t)n_alts, OKV_TAG_SERVER);
    uint8_t *reach = okv_calloc((size_t)b->n_rules, 1, OKV_TAG_SERVER);
    uint8_t *nullable = okv_malloc((size_t)b->n_rules, OKV_TAG_SERVER);
    uint8_t *productive = okv_malloc((size_t)b->n_rules, OKV_TAG_SERVER);
    int32_t *queue = okv_malloc(sizeof *queue * (size_t)b->n_rules, OKV_TAG_SERVER);
    int32_t *rule_min = okv_malloc(sizeof *rule_min * (size_t)b->n_rules, OKV_TAG_SERVER);
    enum okv_status st = OKV_OK;
    if (!g->elems || !g->alt_off || !g->alt_pos || !alt_rule || !reach || !nullable || !productive || !queue ||
        !rule_min) {
        st = (nomem(b), b->st);
        goto out;
    }
    int32_t p = 0, a = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        const struct prule *pr = &b->rules[r];
        g->alt_off[r] = a;
        alt_rule[a] = r;
        g->alt_pos[a++] = p;
        for (int32_t i = 0; i < pr->n; i++) {
            g->elems[p++] = pr->e[i];
            if (pr->e[i].kind == GE_END) {
                alt_rule[a] = r;
                g->alt_pos[a++] = p;
            }
        }
        g->elems[p++] = (struct gram_elem){GE_END, 0};
    }
    g->alt_off[b->n_rules] = a;
    /* reachable from the start rule */
    int32_t head = 0, tail = 0;
    reach[root] = 1;
    queue[tail++] = root;
    while (head < tail) {
        const int32_t r = queue[head++];
        for (int32_t i = g->alt_pos[g->alt_off[r]]; i < (r + 1 < g->n_rules ? g->alt_pos[g->alt_off[r + 1]] : g->n_elems); i++)
            if (g->elems[i].kind == GE_REF && !reach[g->elems[i].v]) {
                reach[g->elems[i].v] = 1;
                queue[tail++] = g->elems[i].v;
            }
    }
    g->n_sets = b->n_sets;   /* (the sets are needed for the lengths; moved into g only at the end) */
    g->set_off = b->set_off;
    g->ranges = b->ranges;
    const bool lengths = min_lengths(g, alt_rule, rule_min);
    g->set_off = NULL, g->ranges = NULL;
    if (!lengths) {
        st = (nomem(b), b->st);
        goto out;
    }
    for (int32_t r = 0; r < b->n_rules; r++) {
        nullable[r] = rule_min[r] == 0;
        productive[r] = rule_min[r] < GRAM_INF_LEN;
    }
    const int32_t lr = left_recursion(b, g, reach, nullable);
    if (lr == -2) {
        st = (nomem(b), b->st);
        goto out;
    }
    if (lr >= 0) {
        const struct prule *o = &b->rules[b->rules[lr].owner];
        st = (perr(b, o->at, "the rule '%s' is left-recursive: it can begin with itself before reading anything, which a "
                   "top-down recognizer cannot follow; rewrite it with repetition, e.g. expr ::= term (\"+\" term)*",
                   o->name), b->st);
        goto out;
    }
    /* a rule that derives no finite text: a named one first, else the rule a group belongs to */
    int32_t bad = -1;
    for (int32_t i = 0; i < b->n_named && bad < 0; i++)
        if (reach[b->named[i]] && !productive[b->named[i]])
            bad = b->named[i];
    for (int32_t r = 0; r < b->n_rules && bad < 0; r++)
        if (reach[r] && !productive[r])
            bad = r;
    if (bad >= 0) {
        const struct prule *o = &b->rules[b->rules[bad].owner];
        st = (perr(b, o->at, "%s '%s' derives no finite text (each of its alternatives leads back into a rule that "
                   "never ends), so a generation could never finish", bad == b->rules[bad].owner ? "the rule" :
                   "a group or repetition in the rule", o->name), b->st);
        goto out;
    }
    g->n_sets = b->n_sets;
    g->set_off = b->set_off, b->set_off = NULL;
    g->ranges = b->ranges, b->ranges = NULL;
out:
    okv_free(alt_rule);
    okv_free(reach);
    okv_free(nullable);
    okv_free(productive);
    okv_free(queue);
    okv_free(rule_min);
    return st;
}

void gram_rules_free(struct gram_rules *r)
{
    if (!r)
        return;
    okv_free(r->elems);
    okv_free(r->pos_min);
    okv_free(r->alt_off);
    okv_free(r->alt_pos);
    okv_free(r->set_off);
    okv_free(r->ranges);
    memset(r, 0, sizeof *r);
}

enum okv_status gram_parse(const char *text, size_t len, const char *root_rule, int lark_lines,
                           struct gram_rules *out)
{
    memset(out, 0, sizeof *out);
    struct builder b = {.text = text, .len = len, .lark_lines = lark_lines};
    if (!text && len)
        return okv_set_error(OKV_ERR_INVALID_ARG, "grammar: no text");
    b.pos = skip_space(&b, 0);
    if (b.pos >= len)
        return okv_set_error(OKV_ERR_INVALID_ARG, "grammar: the grammar is empty (no rules; it starts at root ::= ...)");
    enum okv_status st = OKV_OK;
    while (b.pos < len) {
        if (!parse_rule(&b))
            break;
        b.pos = skip_space(&b, b.pos);
    }
    st = b.st != OKV_OK ? b.st : finish(&b, root_rule ? root_rule : "root", out);
    if (st != OKV_OK)
        gram_rules_free(out);
    for (int32_t i = 0; i < b.n_rules; i++) {
        okv_free(b.rules[i].name);
        okv_free(b.rules[i].e);
    }
    okv_free(b.rules);
    okv_free(b.named);
    okv_free(b.name_hash);
    okv_free(b.ranges);
    okv_free(b.set_off);
    okv_free(b.tmp);
    return st;
}
