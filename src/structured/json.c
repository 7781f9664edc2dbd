/* Structured output: an incremental JSON recognizer (RFC 8259) and the token masks it
 * gives over a trie of the vocabulary (include/oasiskv/structured.h).
 *
 * The recognizer reads one byte at a time: a stack of containers (one bit each: object or
 * array), what may come next between values (expect), and the state of the scalar being
 * read (lex: string, escape, \u digits, UTF-8 continuation, the number grammar's states,
 * true / false / null). Strings are checked as UTF-8 (no overlong forms, no surrogates, no
 * code points past U+10FFFF) and refuse control bytes. A number ends at the first byte that
 * cannot continue it, which is then read as structure. */
#include "oasiskv/structured.h"
#include "structured/schema_internal.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { E_VALUE, E_VALUE_OR_END, E_KEY_OR_END, E_KEY, E_COLON, E_AFTER, E_DONE };
enum { L_NONE, L_STR, L_ESC, L_UHEX, L_UTF8, L_MINUS, L_ZERO, L_INT, L_DOT, L_FRAC, L_E, L_ESIGN, L_EXP, L_LIT };

static const char *const k_lit[3] = {"true", "false", "null"};

void okv_json_init(struct okv_json_state *s, bool object_only)
{
    memset(s, 0, sizeof *s);
    s->expect = E_VALUE;
    s->object_only = object_only;
    s->val = -1;
}

void okv_json_init_schema(struct okv_json_state *s, const okv_json_schema *sch)
{
    okv_json_init(s, false);
    s->sch = sch;
    s->val = (int16_t)sch->root;
    if (sch->regex) {   /* the whole text, raw, matches the regex: kpos is its DFA's state */
        s->match = 4;
        s->kpos = (uint16_t)okv_regex_start(sch->regex);
        return;
    }
    if (sch->grammar) {   /* the whole text, raw, is a sentence of the grammar: kpos is its state's number */
        s->match = 6;
        s->kpos = (uint16_t)okv_grammar_start(sch->grammar);
        return;
    }
    if (sch->choice) {   /* the whole text is one of the root's strings, as they are */
        const int n = sch->nodes[sch->root].n_lit;
        s->match = 3;
        s->kpos = 0;
        s->cand = n >= 64 ? ~0ull : (1ull << n) - 1;
    }
}

static bool fail(struct okv_json_state *s)
{
    s->failed = 1;
    return false;
}

/* ---- the schema's side (s->sch set): which values, names and closings the schema allows ---- */

static const struct snode *snode(const struct okv_json_state *s, int id) { return id >= 0 ? &s->sch->nodes[id] : NULL; }

/* the node of the container at the top (NULL: unconstrained) */
static const struct snode *top_node(const struct okv_json_state *s)
{
    return s->sch && s->depth > 0 && s->depth <= OKV_JSON_SCHEMA_DEPTH ? snode(s, s->node[s->depth - 1]) : NULL;
}

/* an object's properties that may come next: from pos on, up to and including the first required one */
static uint64_t next_props(const struct snode *n, const okv_json_schema *sch, int pos)
{
    uint64_t m = 0;
    for (int j = pos; j < n->n_props; j++) {
        m |= 1ull << j;
        if (sch->props[n->first_prop + j].required)
            break;
    }
    return m;
}

static bool required_left(const struct snode *n, const okv_json_schema *sch, int pos)
{
    for (int j = pos; j < n->n_props; j++)
        if (sch->props[n->first_prop + j].required)
            return true;
    return false;
}

/* candidate i's bytes (a property name, an enum string, a choice) */
static const char *cand_text(const struct okv_json_state *s, int i, int32_t *len)
{
    const struct snode *n = s->match == 1 ? top_node(s) : s->match == 3 ? snode(s, s->sch->root) : snode(s, s->val);
    if (s->match == 1) {
        const struct sprop *p = &s->sch->props[n->first_prop + i];
        *len = p->name_len;
        return s->sch->lit + p->name_off;
    }
    const struct slit *l = &s->sch->lits[n->first_lit + i];
    *len = l->len;
    return s->sch->lit + l->off;
}

/* a string byte (between the quotes, as written) narrows the candidates */
static bool match_byte(struct okv_json_state *s, uint8_t c)
{
    uint64_t keep = 0;
    for (uint64_t m = s->cand; m; m &= m - 1) {
        const int i = __builtin_ctzll(m);
        int32_t len;
        const char *t = cand_text(s, i, &len);
        if (s->kpos < len && (uint8_t)t[s->kpos] == c)
            keep |= 1ull << i;
    }
    s->cand = keep;
    s->kpos++;
    return keep ? true : fail(s);
}

/* the closing quote: the candidate that the string spelled out whole (names and values are distinct) */
static int match_end(struct okv_json_state *s)
{
    for (uint64_t m = s->cand; m; m &= m - 1) {
        const int i = __builtin_ctzll(m);
        int32_t len;
        cand_text(s, i, &len);
        if (len == s->kpos)
            return i;
    }
    return -1;
}

/* the node a value starting with byte c must follow: s->val, through a union by c's type; -2 when the
 * schema has no value of that type there */
static int value_node(const struct okv_json_state *s, uint8_t c)
{
    const int t = c == '{' ? T_OBJECT : c == '[' ? T_ARRAY : c == '"' ? T_STRING : c == 't' || c == 'f' ? T_BOOLEAN
                  : c == 'n' ? T_NULL : T_NUMBER;
    const struct snode *n = snode(s, s->val);
    if (!n || n->kind == N_ANY)
        return -1;
    if (n->kind == N_UNION) {
        const int a = n->alt[t];
        return a < 0 ? -2 : a;
    }
    return node_type(n->kind) == t ? s->val : -2;
}

static void value_done(struct okv_json_state *s)
{
    s->lex = L_NONE;
    s->expect = s->depth == 0 ? E_DONE : E_AFTER;
}

static bool top_is_object(const struct okv_json_state *s) { return (s->stack >> (s->depth - 1)) & 1; }

static bool push(struct okv_json_state *s, bool object, int node)
{
    if (s->depth >= OKV_JSON_MAX_DEPTH || (s->sch && s->depth >= OKV_JSON_SCHEMA_DEPTH))
        return fail(s);
    if (object)
        s->stack |= 1ull << s->depth;
    else
        s->stack &= ~(1ull << s->depth);
    if (s->sch) {
        const struct snode *n = snode(s, node);
        if (n && n->kind == N_OBJECT && n->open)
            node = -1, n = NULL;   /* an object the schema leaves open: unconstrained inside */
        s->node[s->depth] = (int16_t)node;
        s->pos[s->depth] = 0;
        s->val = (int16_t)(!object && n ? n->items : -1);   /* an array's first item */
    }
    s->depth++;
    s->expect = object ? E_KEY_OR_END : E_VALUE_OR_END;
    return true;
}

static bool close_container(struct okv_json_state *s)
{
    const struct snode *n = top_node(s);
    if (n && ((n->kind == N_OBJECT && required_left(n, s->sch, s->pos[s->depth - 1])) || n->kind == N_OBJUNION))
        return fail(s);   /* a required property is missing (an alternative's discriminator too) */
    if (n && n->kind == N_ARRAY && s->pos[s->depth - 1] < n->min_items)
        return fail(s);
    s->depth--;
    value_done(s);
    return true;
}

static bool start_value(struct okv_json_state *s, uint8_t c)
{
    if (s->depth == 0 && s->object_only && c != '{')
        return fail(s);
    int node = -1;
    if (s->sch) {
        const struct snode *top = top_node(s);
        if (top && top->kind == N_ARRAY && s->pos[s->depth - 1]++ >= top->max_items)
            return fail(s);   /* one item too many */
        if ((node = value_node(s, c)) == -2)
            return fail(s);
        const struct snode *n = snode(s, node);
        s->integer = n && n->kind == N_INTEGER;
        s->match = 0;
        if (n && n->kind == N_STRING && n->n_lit > 0) {   /* an enum: the string must spell one of them */
            s->val = (int16_t)node;
            s->match = 2;
            s->kpos = 0;
            s->cand = n->n_lit >= 64 ? ~0ull : (1ull << n->n_lit) - 1;
        } else if (n && n->kind == N_STRING && n->rx >= 0 && c == '"') {   /* pattern / lengths: the content's DFA */
            s->val = (int16_t)node;
            s->match = 5;
            s->kpos = (uint16_t)okv_regex_start(s->sch->rxs[n->rx]);
        }
    }
    switch (c) {
    case '{': return push(s, true, node);
    case '[': return push(s, false, node);
    case '"': s->lex = L_STR; s->is_key = 0; return true;
    case '-': s->lex = L_MINUS; return true;
    case '0': s->lex = L_ZERO; return true;
    case 't': s->lex = L_LIT; s->aux2 = 0; s->aux = 1; return true;
    case 'f': s->lex = L_LIT; s->aux2 = 1; s->aux = 1; return true;
    case 'n': s->lex = L_LIT; s->aux2 = 2; s->aux = 1; return true;
    default:
        if (c >= '1' && c <= '9') {
            s->lex = L_INT;
            return true;
        }
        return fail(s);
    }
}

/* structure: whitespace, punctuation, the start of a value */
static bool structural(struct okv_json_state *s, uint8_t c)
{
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        if (s->expect == E_DONE || ++s->ws > OKV_JSON_MAX_WS)
            return fail(s);
        return true;
    }
    s->ws = 0;
    switch (s->expect) {
    case E_VALUE_OR_END:
        if (c == ']')
            return close_container(s);
        return start_value(s, c);
    case E_VALUE:
        return start_value(s, c);
    case E_KEY_OR_END:
        if (c == '}')
            return close_container(s);
        /* fall through */
    case E_KEY: {
        if (c != '"')
            return fail(s);
        s->lex = L_STR;
        s->is_key = 1;
        s->match = 0;
        const struct snode *n = top_node(s);
        if (n && (n->kind == N_OBJECT || n->kind == N_OBJUNION)) {   /* a name among the properties that may come next */
            s->match = 1;
            s->kpos = 0;
            s->cand = next_props(n, s->sch, s->pos[s->depth - 1]);
            if (!s->cand)
                return fail(s);
        }
        return true;
    }
    case E_COLON:
        if (c != ':')
            return fail(s);
        s->expect = E_VALUE;
        return true;
    case E_AFTER:
        if (c == ',') {
            const struct snode *n = top_node(s);
            if (n && n->kind == N_OBJECT && s->pos[s->depth - 1] >= n->n_props)
                return fail(s);   /* no property left to write */
            if (n && n->kind == N_ARRAY) {
                if (s->pos[s->depth - 1] >= n->max_items)
                    return fail(s);
                s->val = (int16_t)n->items;
            } else if (s->sch && !top_is_object(s)) {
                s->val = -1;   /* an unconstrained array's next item */
            }
            s->expect = top_is_object(s) ? E_KEY : E_VALUE;
            return true;
        }
        if ((c == '}' && top_is_object(s)) || (c == ']' && !top_is_object(s)))
            return close_container(s);
        return fail(s);
    default:   /* E_DONE: nothing follows a complete value */
        return fail(s);
    }
}

static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool okv_json_feed(struct okv_json_state *s, uint8_t c)
{
    if (s->failed)
        return false;
    if (s->match == 3)   /* a choice among strings: the text itself narrows the candidates */
        return match_byte(s, c);
    if (s->match == 4 || s->match == 6) {
        const int next = s->match == 4 ? okv_regex_next(s->sch->regex, s->kpos, c)
                                       : okv_grammar_next(s->sch->grammar, s->kpos, c);
        if (next < 0)
            return fail(s);
        s->kpos = (uint16_t)next;
        return true;
    }
    if (s->match == 5 && s->lex != L_NONE) {   /* a string under a pattern: its content's bytes, escapes decoded */
        int b = -1;
        if ((s->lex == L_STR && c != '"' && c != '\\') || s->lex == L_UTF8) {
            b = c;
        } else if (s->lex == L_ESC) {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *at = c ? strchr(from, c) : NULL;
            if (!at)   /* \uXXXX is not written under a pattern (the character itself is) */
                return fail(s);
            b = (uint8_t)to[at - from];
        }
        if (b >= 0) {
            const int next = okv_regex_next(s->sch->rxs[snode(s, s->val)->rx], s->kpos, (uint8_t)b);
            if (next < 0)
                return fail(s);
            s->kpos = (uint16_t)next;
        } else if (s->lex == L_STR && c == '\\') {   /* an escape only where one of them may come */
            bool any = false;
            for (const char *e = "\"\\/\b\f\n\r\t"; *e && !any; e++)
                any = okv_regex_next(s->sch->rxs[snode(s, s->val)->rx], s->kpos, (uint8_t)*e) >= 0;
            if (!any)
                return fail(s);
        }
    }
    /* a property name or an enum value: every byte between the quotes, as written, narrows the candidates */
    if (s->match && s->match != 5 && (s->lex == L_ESC || s->lex == L_UHEX || s->lex == L_UTF8 || (s->lex == L_STR && c != '"')) &&
        !match_byte(s, c))
        return false;
    switch (s->lex) {
    case L_NONE:
        return structural(s, c);
    case L_STR:
        if (c == '"') {
            if (s->match == 5) {   /* the content must match as a whole */
                if (!okv_regex_accepting(s->sch->rxs[snode(s, s->val)->rx], s->kpos))
                    return fail(s);
                s->match = 0;
            } else if (s->match) {
                const int i = match_end(s);
                if (i < 0)
                    return fail(s);
                if (s->match == 1) {   /* the property's value follows; the next name comes after it */
                    const struct snode *n = top_node(s);
                    s->pos[s->depth - 1] = (int16_t)(i + 1);
                    s->val = (int16_t)s->sch->props[n->first_prop + i].node;
                } else if (s->match == 2 && !s->is_key) {
                    const struct snode *t = top_node(s);
                    if (t && t->kind == N_OBJUNION)   /* the discriminator's value: its alternative goes on */
                        s->node[s->depth - 1] = (int16_t)s->sch->lits[snode(s, s->val)->first_lit + i].alt;
                }
                s->match = 0;
            } else if (s->sch && s->is_key) {
                s->val = -1;   /* a name in an unconstrained object: any value */
            }
            if (s->is_key) {
                s->lex = L_NONE;
                s->expect = E_COLON;
            } else {
                value_done(s);
            }
            return true;
        }
        if (c == '\\') {
            s->lex = L_ESC;
            return true;
        }
        if (c < 0x20)
            return fail(s);
        if (c < 0x80)
            return true;
        /* a UTF-8 lead byte: continuation bytes left, and the first one's range (aux2: 0 80-BF,
         * 1 A0-BF, 2 80-9F, 3 90-BF, 4 80-8F: no overlong forms, surrogates or code points past
         * U+10FFFF) */
        if (c >= 0xC2 && c <= 0xDF)
            s->aux = 1, s->aux2 = 0;
        else if (c == 0xE0)
            s->aux = 2, s->aux2 = 1;
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
            s->aux = 2, s->aux2 = 0;
        else if (c == 0xED)
            s->aux = 2, s->aux2 = 2;
        else if (c == 0xF0)
            s->aux = 3, s->aux2 = 3;
        else if (c >= 0xF1 && c <= 0xF3)
            s->aux = 3, s->aux2 = 0;
        else if (c == 0xF4)
            s->aux = 3, s->aux2 = 4;
        else
            return fail(s);
        s->lex = L_UTF8;
        return true;
    case L_UTF8: {
        static const uint8_t lo[5] = {0x80, 0xA0, 0x80, 0x90, 0x80}, hi[5] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
        if (c < lo[s->aux2] || c > hi[s->aux2])
            return fail(s);
        s->aux2 = 0;
        if (--s->aux == 0)
            s->lex = L_STR;
        return true;
    }
    case L_ESC:
        if (c == 'u') {
            s->lex = L_UHEX;
            s->aux = 4;
            return true;
        }
        if (!strchr("\"\\/bfnrt", c) || c == 0)
            return fail(s);
        s->lex = L_STR;
        return true;
    case L_UHEX:
        if (!is_hex(c))
            return fail(s);
        if (--s->aux == 0)
            s->lex = L_STR;
        return true;
    case L_LIT: {
        const char *w = k_lit[s->aux2];
        if (c != (uint8_t)w[s->aux])
            return fail(s);
        if (w[++s->aux] == 0)
            value_done(s);
        return true;
    }
    case L_MINUS:
        if (c == '0')
            s->lex = L_ZERO;
        else if (is_digit(c))
            s->lex = L_INT;
        else
            return fail(s);
        return true;
    case L_DOT:
        if (!is_digit(c))
            return fail(s);
        s->lex = L_FRAC;
        return true;
    case L_E:
        if (c == '+' || c == '-')
            s->lex = L_ESIGN;
        else if (is_digit(c))
            s->lex = L_EXP;
        else
            return fail(s);
        return true;
    case L_ESIGN:
        if (!is_digit(c))
            return fail(s);
        s->lex = L_EXP;
        return true;
    case L_ZERO:
    case L_INT:
    case L_FRAC:
    case L_EXP:
        if (is_digit(c) && s->lex != L_ZERO)
            return true;
        if (c == '.' && (s->lex == L_ZERO || s->lex == L_INT)) {
            if (s->integer)
                return fail(s);
            s->lex = L_DOT;
            return true;
        }
        if ((c == 'e' || c == 'E') && s->lex != L_EXP) {
            if (s->integer)
                return fail(s);
            s->lex = L_E;
            return true;
        }
        /* the number ends here; the byte is structure (a digit after a leading 0 is not) */
        if (is_digit(c))
            return fail(s);
        value_done(s);
        return structural(s, c);
    default:
        return fail(s);
    }
}

bool okv_json_feed_n(struct okv_json_state *s, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!okv_json_feed(s, p[i]))
            return false;
    return true;
}

bool okv_json_overflowed(const struct okv_json_state *s)
{
    return s->match == 6 && s->sch && okv_grammar_overflowed(s->sch->grammar);
}

bool okv_json_complete(const struct okv_json_state *s)
{
    if (s->failed)
        return false;
    if (s->match == 3)
        return match_end((struct okv_json_state *)s) >= 0;
    if (s->match == 4)
        return okv_regex_accepting(s->sch->regex, s->kpos);
    if (s->match == 6)
        return okv_grammar_accepting(s->sch->grammar, s->kpos);
    if (s->lex == L_NONE)
        return s->expect == E_DONE;
    /* a top-level number is complete where it may end */
    return s->depth == 0 && (s->lex == L_ZERO || s->lex == L_INT || s->lex == L_FRAC || s->lex == L_EXP);
}

/* ---- the vocabulary's trie ---- */

struct trie_node {
    int32_t first_edge, n_edges;   /* into edges[] (sorted by byte) */
    int32_t first_tok, n_tok;      /* into toks[]: ids whose bytes end here */
};

struct okv_token_trie {
    struct trie_node *nodes;
    int32_t n_nodes;
    uint8_t *edge_byte;
    int32_t *edge_node;
    int32_t *toks;
    int n_vocab;
    uint8_t *bytes;      /* every token's bytes, one after the other */
    int64_t *off;        /* [n_vocab + 1] */
    int max_len;
};

struct tok_ent {
    const uint8_t *p;
    int n;
    int32_t id;
};

static int ent_cmp(const void *a, const void *b)
{
    const struct tok_ent *x = a, *y = b;
    const int m = x->n < y->n ? x->n : y->n;
    const int c = memcmp(x->p, y->p, (size_t)m);
    if (c)
        return c;
    if (x->n != y->n)
        return x->n - y->n;
    return x->id - y->id;
}

void okv_token_trie_free(okv_token_trie *t)
{
    if (!t)
        return;
    okv_free(t->nodes);
    okv_free(t->edge_byte);
    okv_free(t->edge_node);
    okv_free(t->toks);
    okv_free(t->bytes);
    okv_free(t->off);
    okv_free(t);
}

const uint8_t *okv_token_trie_bytes(const okv_token_trie *t, int32_t id, int *n)
{
    if (!t || id < 0 || id >= t->n_vocab) {
        *n = 0;
        return NULL;
    }
    *n = (int)(t->off[id + 1] - t->off[id]);
    return t->bytes + t->off[id];
}

/* The trie of the sorted entries [lo, hi) that share their first `depth` bytes, as node
 * `node` (its edges and tokens filled in); children are numbered from *next_node and
 * their edges from *next_edge. Sorted input makes every node's children contiguous. */
static void build_node(okv_token_trie *t, const struct tok_ent *e, int lo, int hi, int depth, int32_t node,
                       int32_t *next_node, int32_t *next_edge, int32_t *next_tok)
{
    struct trie_node *nd = &t->nodes[node];
    nd->first_tok = *next_tok;
    int i = lo;
    for (; i < hi && e[i].n == depth; i++)
        t->toks[(*next_tok)++] = e[i].id;
    nd->n_tok = *next_tok - nd->first_tok;
    /* children: runs of equal byte at position depth */
    int n_children = 0;
    for (int j = i; j < hi;) {
        int k = j;
        while (k < hi && e[k].p[depth] == e[j].p[depth])
            k++;
        n_children++;
        j = k;
    }
    nd->first_edge = *next_edge;
    nd->n_edges = n_children;
    *next_edge += n_children;
    int32_t child0 = *next_node;
    *next_node += n_children;
    int c = 0;
    for (int j = i; j < hi; c++) {
        int k = j;
        while (k < hi && e[k].p[depth] == e[j].p[depth])
            k++;
        t->edge_byte[nd->first_edge + c] = e[j].p[depth];
        t->edge_node[nd->first_edge + c] = child0 + c;
        build_node(t, e, j, k, depth + 1, child0 + c, next_node, next_edge, next_tok);
        nd = &t->nodes[node];
        j = k;
    }
}

enum okv_status okv_token_trie_build(const okv_tokenizer *tok, okv_token_trie **out)
{
    *out = NULL;
    const int n = okv_tokenizer_n_vocab(tok);
    okv_token_trie *t = okv_calloc(1, sizeof *t, OKV_TAG_ENGINE);
    struct tok_ent *e = okv_malloc(sizeof *e * (size_t)(n > 0 ? n : 1), OKV_TAG_ENGINE);
    if (!t || !e || !(t->off = okv_malloc(sizeof(int64_t) * (size_t)(n + 1), OKV_TAG_ENGINE))) {
        okv_free(e);
        okv_token_trie_free(t);
        return okv_set_error(OKV_ERR_NO_MEMORY, "structured output: no memory for the vocabulary trie");
    }
    t->n_vocab = n;
    /* every token's bytes; special tokens (no text without their specialness) get none */
    size_t cap = 1 << 20, used = 0;
    t->bytes = okv_malloc(cap, OKV_TAG_ENGINE);
    int n_ent = 0;
    for (int32_t id = 0; id < n && t->bytes; id++) {
        t->off[id] = (int64_t)used;
        /* the token's text as it runs in the output (a SentencePiece token's leading space kept: the whole
         * text's decode drops it at the start, the streamed text does not) */
        bool special = false;
        size_t ls = 0;
        const char *skip = okv_tokenizer_piece(tok, id, &ls, &special);
        if (special)
            ls = 0;
        if (ls > 0) {   /* ls == 0: a special token (or an empty one): never allowed by the grammar */
            if (used + ls > cap) {
                while (used + ls > cap)
                    cap *= 2;
                uint8_t *nb = okv_realloc(t->bytes, cap, OKV_TAG_ENGINE);
                if (!nb) {
                    okv_free(t->bytes);
                    t->bytes = NULL;
                }
                t->bytes = nb;
            }
            if (t->bytes) {
                memcpy(t->bytes + used, skip, ls);
                used += ls;
                n_ent++;
                if ((int)ls > t->max_len)
                    t->max_len = (int)ls;
            }
        }
    }
    t->off[n] = (int64_t)used;
    if (!t->bytes) {
        okv_free(e);
        okv_token_trie_free(t);
        return okv_set_error(OKV_ERR_NO_MEMORY, "structured output: no memory for the vocabulary's bytes");
    }
    int k = 0;
    for (int32_t id = 0; id < n; id++)
        if (t->off[id + 1] > t->off[id])
            e[k++] = (struct tok_ent){t->bytes + t->off[id], (int)(t->off[id + 1] - t->off[id]), id};
    qsort(e, (size_t)k, sizeof *e, ent_cmp);
    /* nodes: at most 1 + the total bytes; edges: one a non-root node */
    const size_t max_nodes = used + 1;
    t->nodes = okv_calloc(max_nodes, sizeof *t->nodes, OKV_TAG_ENGINE);
    t->edge_byte = okv_malloc(max_nodes, OKV_TAG_ENGINE);
    t->edge_node = okv_malloc(sizeof(int32_t) * max_nodes, OKV_TAG_ENGINE);
    t->toks = okv_malloc(sizeof(int32_t) * (size_t)(k > 0 ? k : 1), OKV_TAG_ENGINE);
    if (!t->nodes || !t->edge_byte || !t->edge_node || !t->toks) {
        okv_free(e);
        okv_token_trie_free(t);
        return okv_set_error(OKV_ERR_NO_MEMORY, "structured output: no memory for the vocabulary trie");
    }
    int32_t next_node = 1, next_edge = 0, next_tok = 0;
    build_node(t, e, 0, k, 0, 0, &next_node, &next_edge, &next_tok);
    t->n_nodes = next_node;
    okv_free(e);
    *out = t;
    return OKV_OK;
}

/* The ids allowed after state s as a bitset (bits[(n + 63) / 64], cleared first): a walk of the
 * trie carrying the recognizer's state, pruned at the first byte that fails; the end-of-generation
 * ids once the text is complete. Returns the number allowed, -1 when out of memory. Reads t and s
 * only: several threads may walk at once. */
static int mask_bits(const struct okv_json_state *s, const okv_token_trie *t, const int32_t *eog, int n_eog,
                     uint64_t *bits, int n)
{
    memset(bits, 0, sizeof(uint64_t) * (((size_t)n + 63) / 64));
    struct frame {
        int32_t node;
        int32_t edge;   /* next edge to try */
        struct okv_json_state st;
    } *stk = okv_malloc(sizeof *stk * (size_t)(t->max_len + 2), OKV_TAG_ENGINE);
    if (!stk)
        return -1;
    int sp = s->failed ? -1 : 0;
    if (sp == 0)
        stk[0] = (struct frame){0, 0, *s};
    while (sp >= 0) {
        struct frame *f = &stk[sp];
        const struct trie_node *nd = &t->nodes[f->node];
        if (f->edge >= nd->n_edges) {
            sp--;
            continue;
        }
        const int32_t ei = nd->first_edge + f->edge++;
        struct okv_json_state st = f->st;
        if (!okv_json_feed(&st, t->edge_byte[ei]))
            continue;
        const int32_t child = t->edge_node[ei];
        const struct trie_node *cn = &t->nodes[child];
        for (int32_t j = 0; j < cn->n_tok; j++) {
            const int32_t id = t->toks[cn->first_tok + j];
            if (id < n)
                bits[id >> 6] |= 1ull << (id & 63);
        }
        stk[++sp] = (struct frame){child, 0, st};
    }
    okv_free(stk);
    const bool done = okv_json_complete(s);
    for (int i = 0; i < n_eog; i++)
        if (eog[i] >= 0 && eog[i] < n) {
            if (done)
                bits[eog[i] >> 6] |= 1ull << (eog[i] & 63);
            else
                bits[eog[i] >> 6] &= ~(1ull << (eog[i] & 63));
        }
    int allowed = 0;
    for (size_t w = 0; w < ((size_t)n + 63) / 64; w++)
        allowed += __builtin_popcountll(bits[w]);
    return allowed;
}

/* logits[i] = -inf where bit i is clear */
static void apply_bits(const uint64_t *bits, float *logits, int n)
{
    for (int i = 0; i < n; i++)
        if (!((bits[i >> 6] >> (i & 63)) & 1))
            logits[i] = -INFINITY;
}

int okv_json_mask(const struct okv_json_state *s, const okv_token_trie *t, const int32_t *eog, int n_eog, float *logits,
                  int n)
{
    uint64_t *bits = okv_malloc(sizeof(uint64_t) * (((size_t)n + 63) / 64 + 1), OKV_TAG_ENGINE);
    const int allowed = bits ? mask_bits(s, t, eog, n_eog, bits, n) : -1;
    if (allowed < 0) {   /* out of memory: nothing allowed (the request ends) */
        for (int i = 0; i < n; i++)
            logits[i] = -INFINITY;
        okv_free(bits);
        return 0;
    }
    apply_bits(bits, logits, n);
    okv_free(bits);
    return allowed;
}

/* ---- masks by state ---- */

struct mask_entry {
    bool used;
    int n_eog, allowed;
    struct okv_json_state key;
    uint64_t *bits;
};

struct okv_json_mask_cache {
    int n_vocab, slots;
    struct mask_entry *e;
    uint64_t *bits;   /* slots x words */
    size_t words;
    uint64_t hits, misses;
};

enum okv_status okv_json_mask_cache_create(int n_vocab, int slots, okv_json_mask_cache **out)
{
    *out = NULL;
    okv_json_mask_cache *c = okv_calloc(1, sizeof *c, OKV_TAG_ENGINE);
    if (!c)
        return okv_set_error(OKV_ERR_NO_MEMORY, "structured output: no memory for the mask cache");
    c->n_vocab = n_vocab;
    c->slots = slots > 0 ? slots : 1;
    c->words = ((size_t)n_vocab + 63) / 64;
    c->e = okv_calloc((size_t)c->slots, sizeof *c->e, OKV_TAG_ENGINE);
    c->bits = okv_malloc(sizeof(uint64_t) * c->words * (size_t)c->slots, OKV_TAG_ENGINE);
    if (!c->e || !c->bits) {
        okv_json_mask_cache_free(c);
        return okv_set_error(OKV_ERR_NO_MEMORY, "structured output: no memory for the mask cache");
    }
    for (int i = 0; i < c->slots; i++)
        c->e[i].bits = c->bits + c->words * (size_t)i;
    *out = c;
    return OKV_OK;
}

void okv_json_mask_cache_free(okv_json_mask_cache *c)
{
    if (!c)
        return;
    okv_free(c->e);
    okv_free(c->bits);
    okv_free(c);
}

void okv_json_mask_cache_stats(const okv_json_mask_cache *c, uint64_t *hits, uint64_t *misses)
{
    *hits = c ? c->hits : 0;
    *misses = c ? c->misses : 0;
}

/* the state as a key: its fields, not its padding (so that equal states compare equal) */
static void state_key(const struct okv_json_state *s, struct okv_json_state *k)
{
    memset(k, 0, sizeof *k);
    k->stack = s->stack;
    k->depth = s->depth;
    k->expect = s->expect;
    k->lex = s->lex;
    k->aux = s->aux;
    k->aux2 = s->aux2;
    k->is_key = s->is_key;
    k->ws = s->ws;
    k->object_only = s->object_only;
    k->failed = s->failed;
    k->sch = s->sch ? (const okv_json_schema *)(uintptr_t)s->sch->id : NULL;   /* the schema's id, not its address */
    if (s->sch)
        for (int d = 0; d < s->depth && d < OKV_JSON_SCHEMA_DEPTH; d++) {
            k->node[d] = s->node[d];
            k->pos[d] = s->pos[d];
        }
    k->val = s->val;
    k->match = s->match;
    k->integer = s->integer;
    k->kpos = s->kpos;
    k->cand = s->cand;
}

/* the slot of state s (its key in *k) */
static struct mask_entry *slot_of(const okv_json_mask_cache *c, const struct okv_json_state *s, int n_eog,
                                  struct okv_json_state *k)
{
    state_key(s, k);
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n_eog;   /* FNV-1a over the key's bytes */
    const uint8_t *p = (const uint8_t *)k;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return &c->e[h % (uint64_t)c->slots];
}

static bool slot_holds(const struct mask_entry *e, const struct okv_json_state *k, int n_eog)
{
    return e->used && e->n_eog == n_eog && memcmp(&e->key, k, sizeof *k) == 0;
}

int okv_json_mask_cached(okv_json_mask_cache *c, const struct okv_json_state *s, const okv_token_trie *t,
                         const int32_t *eog, int n_eog, float *logits, int n)
{
    if (!c || n != c->n_vocab)
        return okv_json_mask(s, t, eog, n_eog, logits, n);
    struct okv_json_state k;
    struct mask_entry *e = slot_of(c, s, n_eog, &k);
    if (slot_holds(e, &k, n_eog)) {
        c->hits++;
        apply_bits(e->bits, logits, n);
        return e->allowed;
    }
    c->misses++;
    e->used = false;
    const int allowed = mask_bits(s, t, eog, n_eog, e->bits, n);
    if (allowed < 0)
        return okv_json_mask(s, t, eog, n_eog, logits, n);   /* out of memory: its own answer (nothing allowed) */
    apply_bits(e->bits, logits, n);
    e->used = true;
    e->n_eog = n_eog;
    e->allowed = allowed;
    e->key = k;
    return allowed;
}

int okv_json_mask_lookup(const okv_json_mask_cache *c, const struct okv_json_state *s, int n_eog, float *logits, int n)
{
    if (!c || n != c->n_vocab)
        return -1;
    struct okv_json_state k;
    const struct mask_entry *e = slot_of(c, s, n_eog, &k);
    if (!slot_holds(e, &k, n_eog))
        return -1;
    apply_bits(e->bits, logits, n);
    return e->allowed;
}

/* ---- filling the cache on several threads ---- */

struct fill_job {
    const okv_token_trie *t;
    const int32_t *eog;
    int n_eog, n;
    const struct okv_json_state *const *st;   /* the missing states */
    uint64_t *bits;                           /* [n_miss][words] */
    int *allowed;
    size_t words;
};

static void fill_one(void *ctx, int64_t i)
{
    struct fill_job *f = ctx;
    f->allowed[i] = mask_bits(f->st[i], f->t, f->eog, f->n_eog, f->bits + f->words * (size_t)i, f->n);
}

int okv_json_mask_cache_fill(okv_json_mask_cache *c, const struct okv_json_state *const *s, int n_states,
                             const okv_token_trie *t, const int32_t *eog, int n_eog, struct okv_threadpool *pool)
{
    if (!c || n_states <= 0)
        return 0;
    const struct okv_json_state **miss = okv_malloc(sizeof *miss * (size_t)n_states, OKV_TAG_ENGINE);
    struct okv_json_state *keys = okv_malloc(sizeof *keys * (size_t)n_states, OKV_TAG_ENGINE);
    struct mask_entry **slots = okv_malloc(sizeof *slots * (size_t)n_states, OKV_TAG_ENGINE);
    int n_miss = 0;
    if (miss && keys && slots)
        for (int i = 0; i < n_states; i++) {
            struct mask_entry *e = slot_of(c, s[i], n_eog, &keys[n_miss]);
            if (slot_holds(e, &keys[n_miss], n_eog))
                continue;
            bool dup = false;   /* two requests in one state: one walk */
            for (int m = 0; m < n_miss && !dup; m++)
                dup = memcmp(&keys[m], &keys[n_miss], sizeof *keys) == 0;
            if (dup)
                continue;
            slots[n_miss] = e;
            miss[n_miss++] = s[i];
        }
    uint64_t *bits = n_miss ? okv_malloc(sizeof(uint64_t) * c->words * (size_t)n_miss, OKV_TAG_ENGINE) : NULL;
    int *allowed = n_miss ? okv_malloc(sizeof(int) * (size_t)n_miss, OKV_TAG_ENGINE) : NULL;
    int filled = 0;
    if (bits && allowed) {
        struct fill_job f = {t, eog, n_eog, c->n_vocab, miss, bits, allowed, c->words};
        okv_parallel_for(pool, n_miss, fill_one, &f);
        for (int m = 0; m < n_miss; m++) {   /* two misses of one slot: the later one stays */
            if (allowed[m] < 0)
                continue;
            struct mask_entry *e = slots[m];
            memcpy(e->bits, bits + c->words * (size_t)m, sizeof(uint64_t) * c->words);
            e->used = true;
            e->n_eog = n_eog;
            e->allowed = allowed[m];
            e->key = keys[m];
            filled++;
        }
    }
    okv_free(bits);
    okv_free(allowed);
    okv_free(miss);
    okv_free(keys);
    okv_free(slots);
    return filled;
}
