/* Structured output: a regular expression compiled to a byte-level DFA, for generation
 * constrained so that the whole text matches (vLLM's guided_regex).
 *
 * The pattern is Python `re` syntax (a subset, listed at the top of regex.c) and is matched
 * as re.fullmatch with the re.ASCII flag would: \d \w \s are the ASCII sets, while ., [^...]
 * and \D \W \S take every other Unicode code point. The text is UTF-8 and the automaton reads
 * it one byte at a time; whatever is not valid UTF-8 (overlong forms, surrogates, past
 * U+10FFFF, a stray continuation byte) never matches.
 *
 * Threads: a compiled okv_regex is immutable; any number of threads may call the query
 * functions on it at once. okv_regex_free must not race with them. */
#ifndef OKV_STRUCTURED_REGEX_H
#define OKV_STRUCTURED_REGEX_H

#include "oasiskv/common.h"

#define OKV_REGEX_MAX_STATES 4096   /* a pattern whose DFA needs more is refused */

typedef struct okv_regex okv_regex;

/* Compile pattern[0..len) for a full match. *out (owned by the caller, okv_regex_free) is set
 * on OKV_OK. OKV_ERR_INVALID_ARG: a syntax error or a construct outside the subset, named
 * with its byte offset, or a pattern that no text matches; OKV_ERR_UNSUPPORTED: the DFA would
 * need more than OKV_REGEX_MAX_STATES states (or the automaton grows too large on the way);
 * OKV_ERR_NO_MEMORY. */
enum okv_status okv_regex_compile(const char *pattern, size_t len, okv_regex **out);
void okv_regex_free(okv_regex *re);   /* NULL is fine */

/* The same pattern as a GBNF expression (grammar.h's syntax: classes of code points, groups,
 * | and {m,n}), for Lark grammars, whose terminals may be /regex/. flags: OKV_REGEX_ICASE (Lark's
 * /.../i: ASCII letters match either case; Python folds other letters too) and OKV_REGEX_DOTALL
 * (/.../s: . takes \n too). *out (okv_free) on OKV_OK; the errors of okv_regex_compile's parse. */
#define OKV_REGEX_ICASE 1u
#define OKV_REGEX_DOTALL 2u
#define OKV_REGEX_UNICODE 4u   /* \s as Python's str patterns read it; \d \w \D \W on the safe side (regex.c) */
enum okv_status okv_regex_to_gbnf(const char *pattern, size_t len, unsigned flags, char **out);

/* The state before any text (>= 0). */
int okv_regex_start(const okv_regex *re);
/* The state after byte c from state s, or -1 when no text that starts with what was read
 * plus c matches. Every state returned can still reach a full match. */
int okv_regex_next(const okv_regex *re, int s, uint8_t c);
/* The text read so far, ending in state s, matches as a whole. */
bool okv_regex_accepting(const okv_regex *re, int s);
int okv_regex_n_states(const okv_regex *re);

#endif
