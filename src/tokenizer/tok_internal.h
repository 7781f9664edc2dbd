/* Tokenizer internals shared by the loaders (GGUF, tokenizer.json), the encoder,
 * the decoder and the chat renderer. Not a public header: tests include it to
 * check the byte mapping and the builder directly.
 *
 * Life of a tokenizer: a loader calls okv_tok_create(n_vocab), sets every token
 * (okv_tok_set_token), indexes the vocabulary (okv_tok_index_vocab), adds merges in
 * rank order (okv_tok_add_merge), sets bos/eos/flags and the chat template, then
 * calls okv_tok_finalize, which compiles the pre-tokenizer regex and derives the
 * tables the encoder and decoder read. After that nothing is written again, so
 * encode/decode may run from many threads at once. */
#ifndef OKV_TOK_INTERNAL_H
#define OKV_TOK_INTERNAL_H

#include "oasiskv/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Kinds of token (GGUF token_type numbering where it has one). */
enum okv_tok_attr {
    OKV_TOK_ATTR_UNUSED = 0,    /* an id no source defined: never produced */
    OKV_TOK_ATTR_NORMAL = 1,    /* a byte-level BPE token */
    OKV_TOK_ATTR_CONTROL = 3,   /* special added token: matched only with parse_special */
    OKV_TOK_ATTR_USER = 4,      /* non-special added token: always matched as itself */
    OKV_TOK_ATTR_BYTE = 6,
};

enum okv_spm_prepend {
    OKV_SPM_PREPEND_NONE = 0,
    OKV_SPM_PREPEND_NORMALIZER, /* normalizer Prepend("\u2581") (Llama 2): every segment, always */
    OKV_SPM_PREPEND_ALWAYS,     /* Metaspace "always": every segment not starting with U+2581 */
    OKV_SPM_PREPEND_FIRST,      /* Metaspace "first" (Mistral): the segment at the text's start only, likewise */
};

/* One pre-tokenizer regex: the compiled pattern, shared read-only by all threads. */
struct okv_pretok_re {
    pcre2_code *code;
    bool jit;                   /* pcre2_jit_compile succeeded */
};

struct okv_added_tok {
    int32_t id;
    bool special;               /* CONTROL: only with parse_special */
    uint32_t len;               /* bytes of the raw text */
    const char *text;           /* raw text (points into the token arena) */
};

struct okv_merge_slot {
    uint64_t key;               /* (left id << 32 | right id) + 1; 0 = empty */
    int32_t rank;
    int32_t result;             /* id of the merged token */
};

struct okv_tokenizer {
    char src[256];              /* file the tokenizer came from, for messages */
    int32_t n_vocab;

    /* Token strings, NUL-terminated, in one arena: token i is arena + tok_off[i],
     * tok_len[i] bytes. Byte-level form for normal tokens, raw text for added ones. */
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t *tok_off;          /* (n_vocab) */
    uint32_t *tok_len;          /* (n_vocab) */
    uint8_t *tok_attr;          /* (n_vocab) enum okv_tok_attr */
    uint8_t *tok_eog;           /* (n_vocab) 1 for end-of-generation tokens */

    /* Decoded bytes of each token (byte-level mapping undone), one arena. */
    char *piece;
    uint32_t *piece_off;        /* (n_vocab + 1) */

    /* string -> id (open addressing over ids, -1 = empty). */
    int32_t *vocab_map;
    uint32_t vocab_map_mask;

    /* (left, right) -> (rank, result). */
    struct okv_merge_slot *merges;
    uint32_t merge_mask;
    int32_t n_merges;

    int32_t byte_to_id[256];    /* id of the single-byte token, -1 if none */

    /* Added tokens sorted by first byte, then by length descending; first[b] ..
     * first[b + 1] is the range starting with byte b. */
    struct okv_added_tok *added;
    int32_t n_added;
    int32_t added_first[257];

    enum okv_pretok pretok;
    struct okv_pretok_re re;    /* the main pattern */
    struct okv_pretok_re re_digit;  /* SmolLM: \p{N} split before the main pattern */
    pcre2_general_context *re_gctx; /* routes PCRE2's allocations through okv_malloc */
    bool ignore_merges;         /* a pre-token that is itself in the vocab is emitted whole */

    int32_t bos, eos, unk;
    bool add_bos;

    /* SentencePiece-style BPE (Llama 2, Mistral 7B, ...): no byte-level mapping; spaces are
     * "\xE2\x96\x81" (U+2581) in the vocabulary, merges start from characters, a character the
     * vocabulary lacks falls back to its bytes' "<0xNN>" tokens (byte_to_id). spm_prepend: when a
     * segment of text (between added tokens) gets a leading U+2581; spm_split: Metaspace's split
     * (each U+2581 starts a piece); spm_strip: decoding drops the first token's leading space. */
    bool spm;
    int32_t *spm_score_rank;    /* GGUF "llama" vocabularies (llama.cpp's SentencePiece BPE): no merges list;
                                 * two symbols merge when their concatenation is a token, the pair whose
                                 * token scores highest first (this: the dense rank of the scores, 0 =
                                 * highest), leftmost on ties; NULL when merges come from a list */
    uint8_t spm_prepend;        /* enum okv_spm_prepend */
    bool spm_split;
    bool spm_strip;

    char *chat_template;        /* NUL-terminated copy, or NULL */
    enum okv_chat_format chat_format;
    char *chat_default_system;  /* ChatML default system prompt found in the template, or NULL */
    bool chat_llama31;          /* Llama-3.1 template: system header with dates */
    bool chat_today;            /* Llama 3.2's: the date is today's (strftime_now), not 26 Jul 2024 */
    enum okv_chat_tools chat_tools;   /* how the template offers tools (none: it does not) */
    bool chat_think_history;    /* ChatML as Qwen3's: an answer's thinking rendered only after the last user query */
    bool chat_think_switch;     /* the template reads enable_thinking (false: an empty <think> block in the prompt) */
    bool chat_think_opens;      /* the generation prompt opens a <think> block (Qwen3-Thinking-2507's) */
    char *bos_text;             /* raw text of bos (templates render it), or NULL */
};

/* GPT-2 bytes_to_unicode: the code point byte b is written as, and back (-1 when
 * cp is not one of the 256). */
uint32_t okv_tok_byte_to_cp(uint8_t b);
int okv_tok_cp_to_byte(uint32_t cp);

/* UTF-8 helpers. okv_utf8_decode reads one character at s (n bytes left) and
 * returns its length, or 0 when the bytes there are not valid UTF-8 (*cp unset). */
int okv_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
int okv_utf8_encode(uint32_t cp, char *out);

/* Builder (see the head comment). Messages name t->src. */
enum okv_status okv_tok_create(int32_t n_vocab, const char *src, okv_tokenizer **out);
enum okv_status okv_tok_set_token(okv_tokenizer *t, int32_t id, const char *s, size_t len,
                                  enum okv_tok_attr attr);
enum okv_status okv_tok_index_vocab(okv_tokenizer *t);
enum okv_status okv_tok_reserve_merges(okv_tokenizer *t, size_t n);
/* Merge rank = the order of calls. what names the entry for messages ("merges[12]"). */
enum okv_status okv_tok_add_merge(okv_tokenizer *t, const char *a, size_t alen,
                                  const char *b, size_t blen, const char *what);
enum okv_status okv_tok_set_chat_template(okv_tokenizer *t, const char *s, size_t len);
enum okv_status okv_tok_finalize(okv_tokenizer *t);

/* Vocabulary lookup of a token string: its id or -1. */
int32_t okv_tok_lookup(const okv_tokenizer *t, const char *s, size_t len);

/* Pre-tokenizer (pretok.c). okv_pretok_compile sets t->re (and t->re_digit) for
 * t->pretok. okv_pretok_split calls fn for each pre-token of text[0..len) in order;
 * bytes no pattern item matches (invalid UTF-8) become pre-tokens of their own. */
enum okv_status okv_pretok_compile(okv_tokenizer *t);
void okv_pretok_release(okv_tokenizer *t);
typedef enum okv_status (*okv_pretok_fn)(void *user, const char *s, size_t len);
enum okv_status okv_pretok_split(const okv_tokenizer *t, const char *text, size_t len,
                                 okv_pretok_fn fn, void *user);
/* The regex source of a pre-tokenizer (for tokenizer.json detection). */
const char *okv_pretok_pattern(enum okv_pretok p);

/* Chat (chat.c): derive chat_format and the template's details from the template
 * string and the vocabulary. */
void okv_chat_detect(okv_tokenizer *t);

#endif
