/* Byte-level BPE tokenizer (GPT-2 family): vocabularies and merges from GGUF
 * metadata or a Hugging Face tokenizer.json; pre-tokenizers of GPT-2, SmolLM,
 * Llama-3 and Qwen2 (PCRE2 with UTF and UCP); added/special tokens matched before
 * BPE; streaming decode that emits only complete UTF-8; chat templates (ChatML,
 * Llama-3) chosen from the model's metadata.
 *
 * A tokenizer is immutable after loading: encode/decode may be called from many
 * threads at once. */
#ifndef OASISKV_TOKENIZER_H
#define OASISKV_TOKENIZER_H

#include "oasiskv/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_gguf okv_gguf;
typedef struct okv_tokenizer okv_tokenizer;

enum okv_pretok {
    OKV_PRETOK_GPT2 = 0,
    OKV_PRETOK_SMOLLM,   /* digits split one by one, then the GPT-2 pattern */
    OKV_PRETOK_LLAMA3,
    OKV_PRETOK_QWEN2,
};

enum okv_chat_format {
    OKV_CHAT_FORMAT_NONE = 0,
    OKV_CHAT_FORMAT_CHATML,   /* <|im_start|>role\ncontent<|im_end|>\n */
    OKV_CHAT_FORMAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
    OKV_CHAT_FORMAT_LLAMA2,   /* <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] assistant </s> */
    OKV_CHAT_FORMAT_MISTRAL,  /* <s>[INST] user [/INST]assistant</s> (Mistral 7B Instruct v0.1 / v0.2) */
    OKV_CHAT_FORMAT_MISTRAL3, /* <s>[INST] user[/INST] assistant</s>, the system message in the last user turn (v0.3) */
    OKV_CHAT_FORMAT_DEEPSEEK_R1, /* {bos}{system}<｜User｜>user<｜Assistant｜>answer<｜end▁of▁sentence｜>...<｜Assistant｜><think>\n
                                    (DeepSeek-R1 and its Qwen / Llama distills) */
};

/* Load from GGUF metadata (tokenizer.ggml.*). The caller owns *out. */
enum okv_status okv_tokenizer_from_gguf(const okv_gguf *g, okv_tokenizer **out);
/* Load from a folder's tokenizer.json (+ tokenizer_config.json for the chat template,
 * bos/eos and add_bos). The caller owns *out. */
enum okv_status okv_tokenizer_from_hf_dir(const char *dir, okv_tokenizer **out);
/* Load from one tokenizer.json file (no tokenizer_config.json). */
enum okv_status okv_tokenizer_from_json_file(const char *path, okv_tokenizer **out);
void okv_tokenizer_free(okv_tokenizer *t);   /* NULL is fine */

int okv_tokenizer_n_vocab(const okv_tokenizer *t);
int32_t okv_tokenizer_bos(const okv_tokenizer *t);   /* -1 if none */
int32_t okv_tokenizer_eos(const okv_tokenizer *t);   /* -1 if none */
bool okv_tokenizer_add_bos(const okv_tokenizer *t);  /* whether encode adds BOS by default */
/* True for end-of-generation tokens: eos, <|im_end|>, <|eot_id|>, <|endoftext|>, ... */
bool okv_tokenizer_is_eog(const okv_tokenizer *t, int32_t id);
/* The end-of-generation ids below n_ids (a model's vocabulary may be smaller), ascending, into out
 * (NULL: only counted); returns their number. */
int okv_tokenizer_eog_ids(const okv_tokenizer *t, int n_ids, int32_t *out);
enum okv_pretok okv_tokenizer_pretok(const okv_tokenizer *t);
enum okv_chat_format okv_tokenizer_chat_format(const okv_tokenizer *t);
/* Replace the model's chat template (vLLM's --chat-template): its format and tool format are read again. */
enum okv_status okv_tokenizer_set_chat_template(okv_tokenizer *t, const char *tpl, size_t len);
/* The token's vocabulary string (byte-level form), NULL when out of range. */
const char *okv_tokenizer_token_str(const okv_tokenizer *t, int32_t id);
/* The bytes a token stands for in running text (*len of them; a SentencePiece token's U+2581 as a
 * space, a byte token as its byte, nothing stripped), NULL when out of range; *special (may be
 * NULL) is set for control tokens, which have no text of their own. */
const char *okv_tokenizer_piece(const okv_tokenizer *t, int32_t id, size_t *len, bool *special);

/* Encode text (len bytes; need not be valid UTF-8). With add_bos the BOS id is
 * prepended when the model has one. With parse_special, added/special tokens in
 * the text are matched as themselves; otherwise they are encoded as plain text.
 * *ids is allocated (okv_free) and *n set. */
enum okv_status okv_tokenizer_encode(const okv_tokenizer *t, const char *text, size_t len,
                                     bool add_bos, bool parse_special,
                                     int32_t **ids, size_t *n);

/* Decode ids to bytes (special tokens are rendered as their text unless
 * skip_special). *out is NUL-terminated, allocated (okv_free); *len excludes NUL. */
enum okv_status okv_tokenizer_decode(const okv_tokenizer *t, const int32_t *ids, size_t n,
                                     bool skip_special, char **out, size_t *len);

/* Streaming decoder: holds the bytes of an incomplete UTF-8 character between
 * tokens. Initialise with {0}. */
struct okv_detok {
    unsigned char pending[8];
    int n_pending;
};
/* Append the text of token id; writes only complete UTF-8 characters to out
 * (cap bytes, NUL-terminated) and returns the number of bytes written, or -1 if
 * cap is too small. Bytes that can never form a valid character are emitted as
 * U+FFFD. */
int okv_detok_push(const okv_tokenizer *t, struct okv_detok *d, int32_t id, bool skip_special,
                   char *out, size_t cap);
/* Flush what is pending at the end of a generation (as U+FFFD). */
int okv_detok_flush(struct okv_detok *d, char *out, size_t cap);

/* A function call an assistant message made (OpenAI's tool_calls): its name and its arguments as
 * the JSON text the template writes (transformers' tojson: Python's json.dumps). */
struct okv_chat_tool_call {
    const char *name;
    const char *arguments;
};

struct okv_chat_msg {
    const char *role;     /* "system", "user", "assistant", "tool" (a tool's result: templates with tools) */
    const char *content;
    const struct okv_chat_tool_call *tool_calls;   /* an assistant message's calls (templates with tools) */
    int n_tool_calls;
    const char *reasoning_content;   /* an assistant message's thinking given apart from its content (OpenAI-style
                                        APIs' "reasoning_content"), or NULL; templates that render earlier
                                        thinking (Qwen3's) read it, the others drop it as theirs do */
};

/* How the model's template offers tools and how its replies call them. */
enum okv_chat_tools {
    OKV_CHAT_TOOLS_NONE = 0,
    OKV_CHAT_TOOLS_HERMES,   /* ChatML with a "# Tools" system block listing them in <tools></tools>, calls written
                                as <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen2.5, Qwen3,
                                Hermes 2 Pro), results as <tool_response> in a user turn */
    OKV_CHAT_TOOLS_LLAMA31,  /* Llama 3.1 / 3.2 / 3.3 JSON calls: "Environment: ipython" in the system block, the tools
                                (tojson(indent=4)) and instructions in the first user turn, one call an assistant
                                turn written {"name": ..., "parameters": {...}}, results in ipython turns. The
                                template writes a tool result's text as JSON (tojson of the string): the caller
                                passes a "tool" message's content so encoded, and each tool as json.dumps(indent=4) */
};
enum okv_chat_tools okv_tokenizer_chat_tools(const okv_tokenizer *t);
/* Render messages with the model's chat template; with add_generation_prompt the
 * assistant header is appended. *out allocated (okv_free). OKV_ERR_UNSUPPORTED when
 * the model has no known chat format. Like transformers' apply_chat_template, the
 * text holds the special tokens (and, for Llama-3, the BOS text): encode it with
 * parse_special and without add_bos. */
enum okv_status okv_tokenizer_apply_chat(const okv_tokenizer *t, const struct okv_chat_msg *msgs,
                                         size_t n, bool add_generation_prompt, char **out);
/* The same with tools offered: tools[0..n_tools) are the tool definitions as JSON text (transformers' tojson
 * of each, e.g. {"type": "function", "function": {...}}). Messages with tool calls or of role "tool", and
 * n_tools > 0, need a template with tools (okv_tokenizer_chat_tools); others are refused with
 * OKV_ERR_UNSUPPORTED. */
enum okv_status okv_tokenizer_apply_chat_tools(const okv_tokenizer *t, const struct okv_chat_msg *msgs, size_t n,
                                               const char *const *tools, size_t n_tools, bool add_generation_prompt,
                                               char **out);

/* Everything a rendering takes besides the messages (transformers' apply_chat_template arguments). */
struct okv_chat_opts {
    const char *const *tools;   /* as okv_tokenizer_apply_chat_tools takes them */
    size_t n_tools;
    bool add_generation_prompt;
    int enable_thinking;        /* the template variable enable_thinking: -1 not given (the template's default),
                                   0 false, 1 true; templates that do not read it ignore it, as Jinja does */
    bool continue_final_message;   /* leave the last message open, to be continued (transformers' argument: the
                                      text is cut after the message's content, trailing whitespace the
                                      template trimmed left out); OKV_ERR_INVALID_ARG when the template drops
                                      the end of that content */
    char date_string[64];       /* Llama 3.x's date_string, the system block's "Today Date": "" the template's own
                                   (Llama 3.2's: today, as transformers' strftime_now("%d %b %Y") gives it;
                                   3.1's and 3.3's: 26 Jul 2024) */
};
enum okv_status okv_tokenizer_render_chat(const okv_tokenizer *t, const struct okv_chat_msg *msgs, size_t n,
                                          const struct okv_chat_opts *opts, char **out);
/* Whether the model's template reads enable_thinking (Qwen3's: false closes an empty <think> block in the
 * generation prompt, so the reply is an answer without thinking). */
bool okv_tokenizer_chat_thinking_switch(const okv_tokenizer *t);
/* Template variables given as a JSON object (vLLM's and SGLang's chat_template_kwargs): we render templates in C,
 * so only those our renderers read are taken - "enable_thinking": true|false and "date_string": "..." (under 64
 * bytes), into *opts (fields the object does not hold left as they are). Any other key, or a value of the wrong
 * type, is OKV_ERR_INVALID_ARG naming it. */
enum okv_status okv_chat_template_kwargs(const char *json, size_t len, struct okv_chat_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
