/* Shared pieces of the oasiskv command: argument parsing helpers, the default
 * model path, loading a model with its tokenizer, JSON output helpers. */
#ifndef OKV_TOOLS_CLI_H
#define OKV_TOOLS_CLI_H

#include "oasiskv/common.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "oasiskv/tokenizer.h"

#include <stdio.h>

/* Exit with a message on stderr (tools may exit; the library never does). */
void cli_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* The value of a flag at argv[*i] (advances *i); dies when missing. */
const char *cli_value(int argc, char **argv, int *i);
int cli_int(const char *flag, const char *s, long lo, long hi);
double cli_double(const char *flag, const char *s, double lo, double hi);
/* --kv-host-dtype: "auto" (the device tier's precision) -> false, "fp8" or "fp8_e4m3" -> true; else exits */
bool cli_host_fp8(const char *flag, const char *s);
/* --predict: current | lookahead | oracle | layer-ahead; with from_prompt, also current-from-prompt and
 * lookahead-from-prompt (*from_prompt set: the prompt's last token predicts the first decode step) */
/* --predict's value; *after_attn (may be NULL) is set for layer-ahead-attn, *from_prompt (NULL: not
 * accepted) for the -from-prompt modes */
enum okv_predict cli_predict(const char *s, bool *from_prompt, bool *after_attn);
/* --kv-merge's value: true for rank, false for share */
enum okv_merge cli_merge(const char *flag, const char *s);
uint64_t cli_u64(const char *flag, const char *s);
/* Comma-separated token ids; *n set; dies on a bad list. Caller frees (okv_free). */
int32_t *cli_token_list(const char *flag, const char *s, size_t *n);
/* The whole of a text file ("-": standard input), NUL-terminated (okv_free it); dies naming flag and
 * path when it cannot be read or is not text. */
char *cli_read_text(const char *flag, const char *path);

/* The default model path: $OKV_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf
 * beside the working directory or beside the executable's parent folder. */
const char *cli_default_model(void);
/* Load model and tokenizer (tokenizer NULL when a folder has no tokenizer.json);
 * dies with the library's message on failure. */
void cli_load(const char *path, struct okv_model **m, okv_tokenizer **tok);
/* As cli_load; with dummy, random weights from PATH's config.json and no tokenizer
 * (--load-format dummy). */
void cli_load_format(const char *path, bool dummy, struct okv_model **m, okv_tokenizer **tok);
/* Load a tokenizer from a folder (tokenizer.json + tokenizer_config.json), a
 * tokenizer.json file or a .gguf file (--tokenizer); dies on failure. */
okv_tokenizer *cli_load_tokenizer(const char *path);
/* --chat-template ARG: a file of the Jinja template, or the template itself; dies naming what is wrong. */
void cli_chat_template(okv_tokenizer *tok, const char *arg);
/* Parses a --load-format value: "auto" (false) or "dummy" (true); dies otherwise. */
bool cli_load_format_arg(const char *v);

/* The backend of --device and --tensor-parallel-size (tp > 1: the tensor-parallel
 * backend over tp ranks, GPUs 0..tp-1); dies with the library's message. */
struct okv_backend;
struct okv_backend *cli_backend(const char *device, int threads, int tp, const struct okv_model_config *cfg);

/* Print s as a JSON string literal (with quotes). */
void cli_json_str(FILE *f, const char *s, size_t len);

int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
