/* Private state of the evaluation: the loaded texts and word lists the task
 * generators share (eval_text.c), used by eval_tasks.c and eval_run.c. */
#ifndef OKV_EVAL_INTERNAL_H
#define OKV_EVAL_INTERNAL_H

#include "oasiskv/eval.h"
#include "oasiskv/sampling.h"
#include "util/strbuf.h"

/* A text with its whitespace collapsed, cut into sentence units:
 * unit i is text[off[i], off[i + 1]) (off has n_units + 1 entries). */
struct eval_corpus {
    char *text;
    size_t len;
    uint32_t *off;
    int n_units;
};

struct okv_eval_ctx {
    const okv_tokenizer *tok;
    struct eval_corpus lic;     /* the held-out license texts */
    struct eval_corpus essay;   /* doc-debian prose, or a copy of lic when absent */
    bool has_essay;
    bool custom;                /* texts from okv_eval_ctx_create_files (training data), not the held-out set */
    char **words;               /* distinct lower-case words (4-9 letters) of the texts, sorted */
    int n_words;
};

/* Uniform integer in [0, n). */
int eval_rand(struct okv_rng *r, int n);

#endif
