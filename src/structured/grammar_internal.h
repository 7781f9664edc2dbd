/* The GBNF grammar module's two halves (grammar.h): grammar_parse.c reads the text into the
 * flat rule tables below and checks them; grammar.c runs them, one byte at a time. Not for use
 * outside src/structured/grammar*.c. */
#ifndef OKV_STRUCTURED_GRAMMAR_INTERNAL_H
#define OKV_STRUCTURED_GRAMMAR_INTERNAL_H

#include "oasiskv/common.h"

#include <stdarg.h>

#define GRAM_MAX_CP 0x10ffffu
#define GRAM_INF_LEN (1 << 30)   /* a length that saturates here means "no finite text" */

enum { GE_CHAR, GE_REF, GE_END };

/* One position in a rule: read a character of set v (GE_CHAR), derive rule v (GE_REF), or the
 * end of an alternative (GE_END). */
struct gram_elem {
    int32_t kind;
    int32_t v;
};

struct gram_range { uint32_t lo, hi; };   /* code points lo..hi, inclusive */

/* The compiled rules, immutable once made. Every alternative of every rule is a run of
 * elements in elems ending in GE_END; the rules reachable from the start rule derive a finite
 * text, none is left-recursive through a push (see grammar_parse.c), every set is non-empty
 * and holds no surrogate (U+D800..U+DFFF), so a set meets a code point range iff it holds a
 * valid character of it. */
struct gram_rules {
    struct gram_elem *elems;   /* (n_elems) */
    int32_t *pos_min;          /* (n_elems): the fewest bytes from an element to the end of its alternative */
    int32_t n_elems;
    int32_t n_rules;
    int32_t *alt_off;          /* (n_rules + 1): rule r's alternatives are alt_pos[alt_off[r] .. alt_off[r+1]) */
    int32_t *alt_pos;          /* the element where each alternative starts */
    int32_t *set_off;          /* (n_sets + 1): set s is ranges[set_off[s] .. set_off[s+1]), sorted, disjoint */
    struct gram_range *ranges;
    int32_t n_sets;
    int32_t root;              /* the start rule */
};

/* Parse and check text[0..len) (grammar.h's okv_grammar_compile, without the states). On an
 * error sets the thread's message, leaves *out empty and returns the status. lark_lines > 0: the
 * text is gram_lark_to_gbnf's, whose lines 1..lark_lines hold the rules of those lines of the Lark
 * text: messages name those lines (not the columns, which are the GBNF's), and no line past them. */
enum okv_status gram_parse(const char *text, size_t len, const char *root_rule, int lark_lines,
                           struct gram_rules *out);
void gram_rules_free(struct gram_rules *r);

/* The thread's error message for byte at of text[0..len): "WHAT: line L, column C: " and fmt's text (the parsers'
 * messages; what: "grammar", "grammar (Lark)"); lines_only > 0: "WHAT: line L: " for a line up to lines_only, and
 * "WHAT: " past it (gram_parse's lark_lines). */
void gram_error(const char *what, const char *text, size_t len, size_t at, int lines_only, const char *fmt,
                va_list ap);

/* Lark grammars (grammar_lark.c): whether text[0..len) is one (rule heads "name:" or %statements, no "::="), and
 * its GBNF, whose start rule is lark-top (*out, okv_free; errors name the Lark text's line and column). */
bool gram_is_lark(const char *text, size_t len);
enum okv_status gram_lark_to_gbnf(const char *text, size_t len, char **out);

#endif
