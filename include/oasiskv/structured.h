/* Structured output: generation constrained to valid JSON (the OpenAI API's
 * response_format {"type": "json_object"}).
 *
 * An incremental, byte-level JSON recognizer (RFC 8259) decides whether a byte can extend
 * what was generated so far; a trie of the vocabulary's byte strings turns that into a
 * token mask for each step, so that every sampled token keeps the text a prefix of some
 * valid JSON text and end-of-generation is allowed once (and only once) it is complete. */
#ifndef OASISKV_STRUCTURED_H
#define OASISKV_STRUCTURED_H

#include "oasiskv/common.h"
#include "oasiskv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OKV_JSON_MAX_DEPTH 64   /* nesting of objects and arrays */
#define OKV_JSON_MAX_WS 64      /* whitespace bytes in a row (a model that pads forever is cut off) */
#define OKV_JSON_SCHEMA_DEPTH 16 /* nesting under a JSON schema */

/* A JSON schema compiled for generation (the OpenAI API's response_format json_schema, vLLM's
 * guided_json). The subset: "type" (one or a list), "properties" (generated in their order;
 * "required" ones always, the others may be left out; no property the schema does not name),
 * "required", "additionalProperties" (extra properties are never generated), "items",
 * "minItems", "maxItems", "enum" and "const" of strings, "anyOf" / "oneOf" whose alternatives
 * are of different JSON types (Optional[X]) or are objects told apart by a discriminator (a property all of
 * them require, with enum / const strings no two share; generated first in each), "$ref" to "#/$defs/..." or
 * "#/definitions/...",
 * and the annotations (title, description, default, examples, format: not enforced). Any other
 * keyword is refused by name: a constraint that is not enforced is not accepted. Strings that
 * the schema names (property names, enum values) are generated as their minimal JSON escape. */
typedef struct okv_json_schema okv_json_schema;
enum okv_status okv_json_schema_compile(const char *text, size_t len, okv_json_schema **out);
/* vLLM's guided_choice: the whole text is one of n (1..64) non-empty strings, as they are (not
 * JSON); a state made from it (okv_json_init_schema) is complete once it spells one of them. */
enum okv_status okv_json_choice_compile(const char *const *choices, int n, okv_json_schema **out);
/* vLLM's guided_regex: the whole text (raw, not JSON) fully matches a regular expression (Python re syntax, the
 * subset of src/structured/regex.h: a construct outside it is refused by name); a state made from it is complete
 * once the text matches. */
enum okv_status okv_json_regex_compile(const char *pattern, size_t len, okv_json_schema **out);
/* vLLM's guided_grammar: the whole text (raw) is a sentence of a GBNF grammar (llama.cpp's format, which vLLM's
 * xgrammar backend reads; src/structured/grammar.h), start rule "root"; a state made from it is complete once the
 * text is a sentence. */
enum okv_status okv_json_grammar_compile(const char *text, size_t len, okv_json_schema **out);
void okv_json_schema_free(okv_json_schema *s);   /* NULL is fine */

/* The recognizer's state: copyable by value (the schema is borrowed and never written). */
struct okv_json_state {
    uint64_t stack;        /* bit d: container at depth d is an object (1) or an array (0) */
    int8_t depth;
    uint8_t expect;        /* what may come next outside a scalar (internal) */
    uint8_t lex;           /* the scalar being read: string, number or literal state (internal) */
    uint8_t aux;           /* literal position, \u digits left, UTF-8 bytes left (internal) */
    uint8_t aux2;          /* which literal; the first continuation byte's bounds (internal) */
    uint8_t is_key;        /* the string being read is an object key */
    uint8_t ws;            /* whitespace bytes in a row */
    uint8_t object_only;   /* the top-level value must be an object */
    uint8_t failed;
    /* under a schema (NULL: any JSON): the schema node of each container, and its progress (an
     * object's next property, an array's items), the node of the next value, the names or
     * values a string being read may still become (match 1: a property name, 2: an enum) */
    const okv_json_schema *sch;
    int16_t node[OKV_JSON_SCHEMA_DEPTH];
    int16_t pos[OKV_JSON_SCHEMA_DEPTH];
    int16_t val;
    uint8_t match;
    uint8_t integer;
    uint16_t kpos;
    uint64_t cand;
};

void okv_json_init(struct okv_json_state *s, bool object_only);
/* The recognizer for documents of schema sch (borrowed: it must outlive the state). */
void okv_json_init_schema(struct okv_json_state *s, const okv_json_schema *sch);
/* Feed one byte: true when the text stays a prefix of a valid JSON text (the state
 * advances), false when it cannot (the state is then marked failed). */
bool okv_json_feed(struct okv_json_state *s, uint8_t c);
bool okv_json_feed_n(struct okv_json_state *s, const uint8_t *p, size_t n);
/* The text so far is one complete JSON value (nothing may follow but the end). */
bool okv_json_complete(const struct okv_json_state *s);
/* Under a grammar whose parses outgrew their limits (nesting deeper than the grammar module allows, or more states
 * than a state's 16 bits number): a text that stops here was cut by the limit, not by the grammar. */
bool okv_json_overflowed(const struct okv_json_state *s);

/* The vocabulary as a trie of byte strings (built once per tokenizer). */
typedef struct okv_token_trie okv_token_trie;
enum okv_status okv_token_trie_build(const okv_tokenizer *tok, okv_token_trie **out);
void okv_token_trie_free(okv_token_trie *t);   /* NULL is fine */
/* The bytes of a token (special tokens have none: n = 0); NULL when out of range. */
const uint8_t *okv_token_trie_bytes(const okv_token_trie *t, int32_t id, int *n);

/* Set logits[id] to -inf for every id that cannot follow state s: a token whose bytes do
 * not keep the text a valid prefix, a special token, an empty one, and the end-of-generation
 * ids eog[n_eog] until the text is complete (then they are the only ones left). Returns the
 * number of ids left allowed. */
int okv_json_mask(const struct okv_json_state *s, const okv_token_trie *t, const int32_t *eog, int n_eog, float *logits,
                  int n);

/* A cache of masks by recognizer state: generation revisits the same states (inside a string,
 * after a property's colon, ...), whose masks are then a copy instead of a trie walk. Direct-mapped
 * by a hash of the state's bytes and the end-of-generation ids' count; an entry holds the allowed
 * ids as a bitset. Not thread-safe: one cache a thread (the scheduler's). */
typedef struct okv_json_mask_cache okv_json_mask_cache;
enum okv_status okv_json_mask_cache_create(int n_vocab, int slots, okv_json_mask_cache **out);
void okv_json_mask_cache_free(okv_json_mask_cache *c);   /* NULL is fine */
/* okv_json_mask through the cache (the same result); hits and misses are counted */
int okv_json_mask_cached(okv_json_mask_cache *c, const struct okv_json_state *s, const okv_token_trie *t,
                         const int32_t *eog, int n_eog, float *logits, int n);
void okv_json_mask_cache_stats(const okv_json_mask_cache *c, uint64_t *hits, uint64_t *misses);
/* The cached mask of state s applied to logits, its count of allowed ids returned; -1 (logits
 * untouched) when the cache lacks it. Reads the cache only (nothing counted): several threads may
 * look up at once while none changes it. */
int okv_json_mask_lookup(const okv_json_mask_cache *c, const struct okv_json_state *s, int n_eog, float *logits, int n);
/* Put the masks of the states s[0..n_states) that the cache lacks into it, walking the trie for
 * each distinct one on pool's threads (NULL: this thread alone), so that a step's requests then
 * find their masks there (unless two of them fall in one slot). Returns the number of masks put. */
struct okv_threadpool;
int okv_json_mask_cache_fill(okv_json_mask_cache *c, const struct okv_json_state *const *s, int n_states,
                             const okv_token_trie *t, const int32_t *eog, int n_eog, struct okv_threadpool *pool);

#ifdef __cplusplus
}
#endif
#endif
