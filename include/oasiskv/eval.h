/* Accuracy evaluation of OasisKV against dense attention: RULER-style long-context
 * tasks generated from a seed, their scoring, a runner that decodes every sample
 * under several engine configurations (dense, and budgets x predict modes), and a
 * teacher-forced generation-fidelity measure.
 *
 * Tasks (okv_eval_tasks lists them; each sample is deterministic in (task, context
 * length, seed, index) for a given tokenizer and the text files present):
 *   niah_single_text    one needle (key -> 7-digit number) in real English text
 *   niah_single_filler  one needle in a repeated filler ("The grass is green. ...")
 *   niah_single_essay   one needle in essay-like prose (the Debian manifesto, social
 *                       contract and constitution; the licenses when doc-debian is absent)
 *   niah_multikey       one of four needles with different keys is asked
 *   niah_multivalue     four numbers for one key: all are asked
 *   niah_multiquery     four keys asked at once
 *   vt                  variable tracking: VAR A = 12345, VAR B = A, ...: name every variable equal to the value
 *   cwe                 common-words extraction from a numbered word list: the 10 most frequent
 *   fwe                 frequent-words extraction from Zipf-distributed coded words: the 3 most frequent
 *   qa                  question answering over a window of real text: "which word follows the phrase '...'?"
 *   chain               a reasoning-style workload: follow a chain of lookups through a table in the
 *                       prompt, printing every step, then the final code (exact match of the final answer)
 *
 * Haystack texts are real English shipped by Debian: /usr/share/common-licenses (on every
 * Debian system) and the doc-debian package (/usr/share/doc/debian). Every text used here is
 * held out: okv_eval_text_sources marks which files a training script must avoid.
 *
 * Scoring normalises case, punctuation and whitespace and matches references on word
 * boundaries: a sample is correct when every reference is found (niah, vt, cwe, fwe), any
 * reference is found (qa), or the final answer equals the reference (chain). */
#ifndef OASISKV_EVAL_H
#define OASISKV_EVAL_H

#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "oasiskv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* chain_long has 128 steps, each a needle (its table line) and an answer (its code) */
#define OKV_EVAL_MAX_NEEDLES 160
#define OKV_EVAL_MAX_ANSWERS 160

enum okv_eval_score_kind {
    OKV_EVAL_SCORE_ALL = 0,   /* every reference must appear in the output */
    OKV_EVAL_SCORE_ANY,       /* one reference is enough */
    OKV_EVAL_SCORE_FINAL,     /* the final answer ("Final: X", else the last "-> X") equals the last reference */
};

struct okv_eval_task_info {
    const char *name;
    const char *desc;
    enum okv_eval_score_kind score;
    int max_tokens;           /* default tokens to generate */
};

/* All tasks (static storage); *n set. */
const struct okv_eval_task_info *okv_eval_tasks(int *n);
/* The task of that name, NULL if none. */
const struct okv_eval_task_info *okv_eval_task_find(const char *name);

/* A text file the tasks read. held_out: used for evaluation; a training script must not
 * train on it. */
struct okv_eval_text_source {
    const char *path;
    const char *set;          /* "licenses" or "essay" */
    bool held_out;
};
const struct okv_eval_text_source *okv_eval_text_sources(int *n);

/* The text, word lists and tokenizer the generators share. Immutable after creation. */
typedef struct okv_eval_ctx okv_eval_ctx;

/* Load the texts (OKV_ERR_IO when no license text is readable). tok is borrowed and must
 * outlive the context. The caller owns *out. */
enum okv_status okv_eval_ctx_create(const okv_tokenizer *tok, okv_eval_ctx **out);
void okv_eval_ctx_free(okv_eval_ctx *c);   /* NULL is fine */
/* As okv_eval_ctx_create, but every real-text haystack (niah_single_text, niah_single_essay,
 * the multi-needle tasks, qa) and the word list (keys, cwe words, chain codes) come from the
 * given files instead of the held-out Debian texts: for making training data (train/). A
 * held-out file (okv_eval_text_sources, or anything under /usr/share/common-licenses or
 * /usr/share/doc/debian) is refused with OKV_ERR_INVALID_ARG; OKV_ERR_IO when the files hold
 * too little text. Samples report haystack "text". */
enum okv_status okv_eval_ctx_create_files(const okv_tokenizer *tok, const char *const *paths, int n_paths,
                                          okv_eval_ctx **out);
/* Whether the essay set (doc-debian) was found; niah_single_essay and the multi-needle
 * tasks fall back to the licenses when it was not. */
bool okv_eval_ctx_has_essays(const okv_eval_ctx *c);

struct okv_eval_gen {
    const char *task;
    int context_len;          /* prompt tokens + max_tokens stay within this */
    uint64_t seed;
    int index;                /* sample index */
    double depth;             /* depth of the (asked) needle in [0, 1]; < 0: drawn from the seed */
    int max_tokens;           /* 0: the task's default */
};

struct okv_eval_sample {
    char *prompt;             /* the prompt text as encoded (chat template and answer prefix applied) */
    int32_t *tokens;          /* [n_tokens] its token ids */
    int n_tokens;
    int max_tokens;
    enum okv_eval_score_kind score;
    char *answers[OKV_EVAL_MAX_ANSWERS];   /* references */
    int n_answers;
    /* byte spans of the inserted needles (or answer spans) inside prompt; the asked one first */
    size_t needle_off[OKV_EVAL_MAX_NEEDLES], needle_len[OKV_EVAL_MAX_NEEDLES];
    double needle_depth[OKV_EVAL_MAX_NEEDLES];   /* the depth each was asked to stand at, in [0, 1] of the haystack */
    int n_needles;
    double depth;             /* the depth the asked needle was placed at */
    const char *haystack;     /* "licenses", "essay", "filler", "none" (static) */
};

/* Generate one sample. OKV_ERR_INVALID_ARG for an unknown task or a context too small for
 * it. The caller frees *out with okv_eval_sample_free. */
enum okv_status okv_eval_sample_make(const okv_eval_ctx *c, const struct okv_eval_gen *g, struct okv_eval_sample *out);
void okv_eval_sample_free(struct okv_eval_sample *s);
/* The reference continuation of a sample of that task: what a correct model writes right after
 * the prompt (which ends with the answer prefix), e.g. " 1234567." for niah, " b\nb -> c\n...
 * Final: e" for chain; okv_eval_score counts it correct. NULL for an unknown task or no memory.
 * Caller frees (okv_free). For training data (train/). */
char *okv_eval_reference_output(const char *task, const struct okv_eval_sample *s);

/* Score an output against references: returns the share of references matched (chain: the
 * share of chain steps printed correctly) and sets *correct by the task's rule. */
double okv_eval_score(enum okv_eval_score_kind kind, const char *const *answers, int n_answers, const char *output,
                      bool *correct);
/* Normalise for matching: lower case, punctuation to spaces (except commas between digits,
 * which are dropped), one space between words, no leading or trailing space. Caller frees (okv_free). */
char *okv_eval_normalize(const char *s);

/* Wilson score interval (95%) of k successes in n trials. */
void okv_eval_wilson(int k, int n, double *lo, double *hi);

/* One engine configuration to evaluate. */
struct okv_eval_config {
    int kv_budget;            /* 0: dense */
    enum okv_predict predict;
    int dense_layers;
    const char *draft;        /* speculative decoding: "ngram", "self", "model:PATH"; NULL: none, except that
                                 lookahead without a drafter drafts by n-gram (okv_eval_run_params.lookahead_draft) */
    int spec_tokens;          /* 0: 4 */
    float cache_factor;       /* device units per selected block; 0: 1 (okv_engine_params.cache_factor) */
    bool predict_from_prompt; /* okv_engine_params.predict_from_prompt */
    float sticky;             /* okv_engine_params.sticky */
    int key_code_bits;        /* okv_engine_params.key_code_bits */
    bool host_fp8;            /* okv_engine_params.host_fp8 */
    bool verify_inline;       /* okv_engine_params.verify_inline */
    bool verify_defer;        /* okv_engine_params.verify_defer */
    bool ahead_after_attention; /* okv_engine_params.ahead_after_attention ("layer-ahead-attn") */
    enum okv_merge merge;     /* okv_engine_params.merge */
    bool spec_adaptive;       /* okv_gen_params.spec_adaptive: 0..spec_tokens drafts a step */
};

/* "current", "lookahead", "oracle", "layer-ahead", "layer-ahead-attn", "current-from-prompt" or
 * "lookahead-from-prompt". */
const char *okv_eval_predict_name(const struct okv_eval_config *c);

/* The result of one configuration over the samples. */
struct okv_eval_cell {
    struct okv_eval_config cfg;
    int n;                    /* samples */
    int correct;
    double partial;           /* mean share of references matched */
    int same_as_dense;        /* outputs identical to dense's; -1 when dense was not run */
    bool copied_from_dense;   /* budget >= context: the engine runs dense, so dense's outputs were reused */
    double lo, hi;            /* Wilson 95% of correct / n */
    int64_t gen_tokens;
    double seconds;
    int64_t fetch_bytes;      /* KV traffic (sparse) */
    double resident_in_time;  /* share of selected units resident when attention started (1 when none) */
    double accept_rate;       /* speculative acceptance (0 without a drafter) */
    double drafts_per_step;   /* drafted tokens per verify step (0 without a drafter) */
    int64_t prompt_tokens;    /* the samples' prompt tokens, summed: a task whose material runs out (chain's table
                               * is bounded by its word list) makes prompts shorter than the context asked for */
    int64_t prompt_room;      /* the samples' room for a prompt (context - max_tokens), summed */
};

/* Per-sample report: config index, sample index (in the seed: first_index + i), its output and score. */
typedef void (*okv_eval_sample_fn)(void *user, int cfg, int index, const struct okv_eval_sample *s, const char *output,
                                   double partial, bool correct);
/* Progress lines (for stderr). */
typedef void (*okv_eval_progress_fn)(void *user, const char *line);

struct okv_eval_run_params {
    const char *task;
    int context_len;
    int num_samples;
    int first_index;          /* samples first_index .. first_index + num_samples - 1 of the seed */
    uint64_t seed;
    int max_tokens;           /* 0: the task's default */
    int prefill_chunk;        /* 0: 512 */
    bool reuse_full_budget;   /* copy dense's results for configs whose budget covers the context */
    const char *lookahead_draft;   /* drafter for lookahead configs without one; NULL: "ngram" */
    okv_eval_sample_fn on_sample;
    okv_eval_progress_fn progress;
    void *user;
};

/* Evaluate n_cfgs configurations on the same samples (dense configurations run first so
 * that the others can be compared with them). out[i] answers cfgs[i]. Greedy decoding. */
enum okv_status okv_eval_run(const struct okv_model *m, const okv_tokenizer *tok, okv_backend *be,
                             const okv_eval_ctx *c, const struct okv_eval_run_params *p,
                             const struct okv_eval_config *cfgs, int n_cfgs, struct okv_eval_cell *out);

/* Teacher-forced generation fidelity: dense decodes steps tokens greedily after the prompt;
 * each configuration is fed dense's tokens and compared step by step. */
struct okv_eval_fid_cell {
    struct okv_eval_config cfg;
    int steps;
    double top1;              /* share of steps whose greedy token equals dense's */
    double mean_kl;           /* mean KL(dense || config) of the next-token distribution */
    double recall;            /* prediction recall against the step's true queries; -1 when not measured */
    double fetch_kib_per_step;
    double resident_in_time;
    double stall_ms_per_step;
    size_t device_bytes_peak;
    double seconds;
};
/* The text of the evaluation's long real-text prompt (the licenses, held out), okv_malloc'd. */
enum okv_status okv_eval_fidelity_text(const okv_eval_ctx *c, char **text, size_t *len);
enum okv_status okv_eval_fidelity(const struct okv_model *m, okv_backend *be, const int32_t *prompt, int n_prompt,
                                  int steps, const struct okv_eval_config *cfgs, int n_cfgs, bool track_recall,
                                  okv_eval_progress_fn progress, void *user, struct okv_eval_fid_cell *out);

#ifdef __cplusplus
}
#endif
#endif
