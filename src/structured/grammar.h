/* Structured output: a context-free grammar in GBNF (llama.cpp's grammar format, which
 * xgrammar, vLLM's grammar backend, also reads) recognized one byte at a time, for generation
 * constrained so that the whole text is a sentence of the grammar (vLLM's guided_grammar).
 *
 * The syntax (a summary; the details are at the top of grammar_parse.c):
 *   root  ::= "{" ws pair ("," ws pair)* "}"     # a rule; it runs until the next `name ::=`
 *   pair  ::= [a-z_]+ ws "=" ws value
 *   value ::= [0-9]+ | "\"" [^"\\]* "\"" | . | [α-ω]{2,5}
 *   ws    ::= [ \t\n]*
 * with | ( ) * + ? {m} {m,} {m,n}, "literals" and [classes] with the escapes \n \r \t \\ \"
 * \[ \] \xHH \uHHHH \UHHHHHHHH, . for any character, and # comments. The text is UTF-8 and
 * classes, . and literals are over code points; what is not valid UTF-8 never matches.
 *
 * Lark's syntax (start: ..., ?rule:, TERMINAL:, /regex/, %import common.NAME, %ignore; vLLM's
 * documentation writes its grammars so) is read too: grammar_lark.c turns it into this GBNF.
 *
 * A grammar is not a finite automaton, so the states are found as they are reached: a state
 * is a set of parse stacks (positions in the rules) plus the part of a UTF-8 character read so
 * far, numbered the first time some text leads to it, and each (state, byte) transition is
 * remembered. Stacks are at most OKV_GRAMMAR_MAX_DEPTH deep, a state holds at most
 * OKV_GRAMMAR_MAX_STACKS of them and there are at most OKV_GRAMMAR_MAX_STATES states (so that
 * a state fits a uint16_t). A text that needs more gets -1 from okv_grammar_next, and
 * okv_grammar_overflowed turns true, so that the caller can tell "too deep for generation"
 * from "not in the language".
 *
 * Threads: any number of threads may call okv_grammar_start, _next, _accepting,
 * _min_to_accept, _n_states and _overflowed on one okv_grammar at once. A transition already
 * taken is read without a lock (two loads); one taken for the first time is computed under a
 * mutex inside the grammar.
 * State numbers never change once given, so they can be cached. okv_grammar_free must not
 * race with the other calls. */
#ifndef OKV_STRUCTURED_GRAMMAR_H
#define OKV_STRUCTURED_GRAMMAR_H

#include "oasiskv/common.h"

#define OKV_GRAMMAR_MAX_STATES 65534   /* states 0 .. 65533: a uint16_t holds one, with room to spare */
#define OKV_GRAMMAR_MAX_DEPTH 64       /* rules open within rules, along one parse */
#define OKV_GRAMMAR_MAX_STACKS 16384   /* parses alive at once in one state: each alternative
                                          * of a large alternation of literals is one */
#define OKV_GRAMMAR_MAX_REPEAT 1000    /* the largest m or n in {m,n} */

typedef struct okv_grammar okv_grammar;

/* Compile the GBNF grammar text[0..len), whose start rule is root_rule (NULL: "root").
 * *out (owned by the caller, okv_grammar_free) is set on OKV_OK and NULL otherwise.
 * OKV_ERR_INVALID_ARG, with a message that names the problem and its line and column: a
 * syntax error, an undefined rule (named), no start rule, an empty grammar, left recursion
 * (the rule named; a rule that comes back to itself only last in an alternative, as
 * R ::= "a"? R | does, is taken), a rule that derives no finite text (named), repetition
 * bounds out of order or past OKV_GRAMMAR_MAX_REPEAT, a grammar too large once repetitions
 * are expanded, Lark syntax inside a GBNF grammar, or a start rule that nests rules deeper than
 * OKV_GRAMMAR_MAX_DEPTH or has more than OKV_GRAMMAR_MAX_STACKS parses before its first
 * character; OKV_ERR_NO_MEMORY. */
enum okv_status okv_grammar_compile(const char *text, size_t len, const char *root_rule, okv_grammar **out);
void okv_grammar_free(okv_grammar *g);   /* NULL is fine */

/* The state before any text (>= 0). */
int okv_grammar_start(okv_grammar *g);
/* The state after byte c from state s, or -1 when no text that starts with what was read plus
 * c is a sentence, or when the limits above would be passed (then okv_grammar_overflowed is
 * true from now on). Every state returned can still reach a complete sentence. */
int okv_grammar_next(okv_grammar *g, int s, uint8_t c);
/* The text read so far, ending in state s, is a complete sentence of the start rule. */
bool okv_grammar_accepting(const okv_grammar *g, int s);
/* The fewest bytes that, read from state s, complete a sentence (0 when s is accepting), or
 * -1 for a state that does not exist. A byte that leads to a state with one less exists, so
 * following such bytes finishes a text (a caller may do that near a length limit). Takes the
 * grammar's lock: not for the hot path. */
int okv_grammar_min_to_accept(okv_grammar *g, int s);
/* States numbered so far (grows as texts reach new ones). */
int okv_grammar_n_states(const okv_grammar *g);
/* Some transition hit a limit (depth, stacks, states or memory) and gave -1 although the
 * text might have gone on. Sticky. */
bool okv_grammar_overflowed(const okv_grammar *g);

#endif
