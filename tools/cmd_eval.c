/* oasiskv eval: accuracy of OasisKV against dense attention on long-context tasks,
 * and the teacher-forced generation fidelity (--task fidelity). One configuration, or
 * a sweep (--sweep) over comma lists of tasks, context lengths, budgets and predict
 * modes that prints one markdown table (and writes JSON with --json). */
#include "cli.h"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/eval.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cmd_eval(int argc, char **argv);

static const char *help =
    "usage: oasiskv eval --task NAME [options]\n"
    "\n"
    "  --task NAME            a task (see below) or fidelity; with --sweep a comma list, or all\n"
    "  -m, --model PATH       model (default: the SmolLM2-135M-Instruct model in models/)\n"
    "  --context-len L        tokens of prompt + answer (default 2048); with --sweep a comma list\n"
    "  --num-samples N        samples per cell (default 10)\n"
    "  --kv-budget B|dense    OasisKV budget in tokens, or dense (default 2048); with --sweep a comma list\n"
    "  --predict MODE         current | lookahead | oracle | layer-ahead | layer-ahead-attn (default\n"
    "                         lookahead); with --sweep a comma list; layer-ahead: each layer's blocks are\n"
    "                         chosen at the previous layer's start with its queries estimated from that\n"
    "                         layer's input; layer-ahead-attn: after the previous layer's attention, from\n"
    "                         its input with that attention's output added (closer; needed on 2 layers);\n"
    "                         current-from-prompt, lookahead-from-prompt: the prompt's last token also\n"
    "                         predicts the first answer token's blocks (by default that step selects inline)\n"
    "                         (lookahead drafts by n-gram prompt lookup unless --draft says otherwise)\n"
    "  --dense-layers N       keep the first N layers dense (default 0)\n"
    "  --kv-cache-factor F    device units per selected block (default 1; accuracy is the same, fetches fewer)\n"
    "  --kv-sticky F          sticky selection (0 to 0.5, default 0): F*k more blocks per prediction\n"
    "                         (and layer-ahead selection), resident first\n"
    "  --kv-host-dtype T      host KV tier storage: auto (the device tier's precision, default) or fp8 (E4M3)\n"
    "  --kv-key-codes B       per-token key codes of B bits a channel (1, 2, 4; default 0: none): blocks are\n"
    "                         scored by half their keys' max product as the codes see them, half Quest's bound\n"
    "  --kv-verify-inline     when speculating (--draft, or lookahead's n-gram drafts): a verify step selects its\n"
    "                         blocks with its own rows' queries (and fetches what the prediction missed)\n"
    "                         instead of its previous step's prediction\n"
    "  --kv-merge auto|share|rank\n"
    "                         sparse, how several rows' selections become one: share gives half the budget to\n"
    "                         the first row's own top blocks and the rest to the rows' best scores; rank takes each\n"
    "                         row's own top blocks in turn; auto (default) ranks a step's own rows (verify steps\n"
    "                         with --kv-verify-inline) and shares drafted rows' predictions (bench/ACCURACY.md)\n"
    "  --kv-verify-defer, --no-kv-verify-defer\n"
    "                         when speculating, greedy: a verify step whose drafted rows read the predicted set\n"
    "                         drops its own token and runs its last accepted draft again on a fresh prediction,\n"
    "                         the dropped token drafted again after it (default: on)\n"
    "  --draft D              speculative decoding in every configuration: ngram, self or model:PATH\n"
    "  --spec-tokens K        draft tokens per step with --draft or lookahead's n-gram drafts (default 4)\n"
    "  --spec-adaptive        draft 0..K tokens a step, as the running acceptance and the measured costs choose\n"
    "                         (at least 1 where drafted rows choose blocks: lookahead, --kv-verify-inline);\n"
    "                         the lengths follow measured times, so sparse cells may vary from run to run\n"
    "  --max-tokens N         tokens to generate per sample (default: the task's)\n"
    "  --seed S               seed of the samples (default 0); same seed, same samples and results\n"
    "  --first-index I        start at sample I of the seed (default 0): samples I .. I+N-1, numbered\n"
    "                         as in a run from 0 (to rerun one sample of a larger run)\n"
    "  --sweep                evaluate every combination of the lists and print one table\n"
    "  --no-reuse             also run budgets that cover the context (they equal dense; by default\n"
    "                         dense's results are reused for them)\n"
    "  --fidelity-steps N     fidelity: teacher-forced steps (default 128; use >= 1000 for the report)\n"
    "  --recall               fidelity: also measure prediction recall\n"
    "  --json FILE            write the results as JSON (rewritten as cells finish): the table's rows and\n"
    "                         every sample's answer under each configuration (samples: row, index, output)\n"
    "  --threads T            CPU threads (default: all cores)\n"
    "  --device NAME          cpu or cuda (default: cuda when a GPU is present)\n"
    "  --list                 list the tasks\n"
    "  --print-samples        print the samples (prompt, answers, needle spans) and run nothing\n"
    "\n"
    "Training data (train/README.md): write samples as JSON lines and run nothing. -m may be a\n"
    "tokenizer folder (tokenizer.json + tokenizer_config.json); tasks and context lengths may be lists.\n"
    "  --dump-samples FILE    one JSON object per sample (FILE - is stdout): prompt_tokens, target (the\n"
    "                         reference continuation), target_tokens, answers, needles (byte spans)\n"
    "  --text-dir DIR         haystack texts and word lists from DIR's files (sorted by name) instead of\n"
    "                         the held-out evaluation texts; held-out files are refused\n"

    "  --dump-text            also write the prompt text (\"prompt\")\n"
    "\n"
    "Progress goes to stderr; the table to stdout.\n";

#define MAX_LIST 32

struct list {
    const char *v[MAX_LIST];
    int n;
    char *buf;
};

static void lists_free(struct list *a, struct list *b, struct list *c, struct list *d)
{
    free(a->buf);
    free(b->buf);
    free(c->buf);
    free(d->buf);
}

static void split(const char *flag, const char *s, struct list *l)
{
    free(l->buf);
    l->buf = strdup(s);
    l->n = 0;
    char *save = NULL;
    for (char *t = strtok_r(l->buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (l->n == MAX_LIST)
            cli_die("%s: at most %d values", flag, MAX_LIST);
        l->v[l->n++] = t;
    }
    if (!l->n)
        cli_die("%s: empty list", flag);
}

static void on_progress(void *user, const char *line) { fprintf(stderr, "[eval] %s\n", line); }

/* Per-sample records of a single (non-sweep) run, for the JSON. */
struct rec {
    int cfg, index;
    char *output;
    char *answers;
    double partial;
    bool correct;
    int n_tokens;
    double depth;
    int row;            /* its table row (rows[]): task, context and configuration */
};
struct recs {
    struct rec *r;
    int n, cap;
    int row_base;       /* the rows[] index of the running okv_eval_run's first configuration */
};

static void on_sample(void *user, int cfg, int index, const struct okv_eval_sample *s, const char *output,
                      double partial, bool correct)
{
    struct recs *rs = user;
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 64;
        rs->r = realloc(rs->r, sizeof *rs->r * (size_t)rs->cap);
        if (!rs->r)
            cli_die("out of memory");
    }
    size_t al = 1;
    for (int i = 0; i < s->n_answers; i++)
        al += strlen(s->answers[i]) + 1;
    char *ans = malloc(al);
    ans[0] = 0;
    for (int i = 0; i < s->n_answers; i++) {
        if (i)
            strcat(ans, "|");
        strcat(ans, s->answers[i]);
    }
    rs->r[rs->n++] = (struct rec){cfg, index, strdup(output ? output : ""), ans, partial, correct, s->n_tokens, s->depth,
                                  rs->row_base + cfg};
}

struct row {
    const char *task;
    int ctx;
    struct okv_eval_cell cell;
    bool fid;
    struct okv_eval_fid_cell fcell;
};

struct opts {
    const char *model_path;
    int num_samples;
    int first_index;
    uint64_t seed;
    int fid_steps;
    const char *json_path;
};


/* drafted tokens a step of a configuration (0: it does not speculate) */
static int drafted_tokens(const struct okv_eval_config *c)
{
    return c->draft || (c->kv_budget && c->predict == OKV_PREDICT_LOOKAHEAD) ? (c->spec_tokens ? c->spec_tokens : 4) : 0;
}
static void write_json(const struct opts *o, const struct row *rows, int n_rows, const struct recs *rs)
{
    if (!o->json_path)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->json_path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        cli_die("--json: cannot write %s", tmp);
    fprintf(f, "{\"model\": ");
    cli_json_str(f, o->model_path, strlen(o->model_path));
    fprintf(f, ", \"seed\": %llu, \"num_samples\": %d, \"first_index\": %d, \"rows\": [", (unsigned long long)o->seed,
            o->num_samples, o->first_index);
    for (int i = 0; i < n_rows; i++) {
        const struct row *r = &rows[i];
        fprintf(f, "%s\n  {\"task\": \"%s\", \"context_len\": %d, ", i ? "," : "", r->task, r->ctx);
        if (r->fid) {
            const struct okv_eval_fid_cell *c = &r->fcell;
            fprintf(f, "\"kv_budget\": %d, \"predict\": \"%s\", \"merge\": \"%s\", \"spec_tokens\": %d, \"steps\": %d, "
                       "\"top1_agreement\": %.5f, \"mean_kl\": %.6f, \"recall\": %.5f, \"fetch_kib_per_step\": %.2f, "
                       "\"resident_in_time\": %.5f, \"seconds\": %.2f}",
                    c->cfg.kv_budget, c->cfg.kv_budget ? okv_eval_predict_name(&c->cfg) : "dense", okv_merge_name(c->cfg.merge),
                    drafted_tokens(&c->cfg), c->steps, c->top1, c->mean_kl, c->recall, c->fetch_kib_per_step, c->resident_in_time,
                    c->seconds);
        } else {
            const struct okv_eval_cell *c = &r->cell;
            fprintf(f, "\"kv_budget\": %d, \"predict\": \"%s\", \"draft\": ", c->cfg.kv_budget,
                    c->cfg.kv_budget ? okv_eval_predict_name(&c->cfg) : "dense");
            if (c->cfg.draft)
                cli_json_str(f, c->cfg.draft, strlen(c->cfg.draft));
            else
                fprintf(f, "null");
            fprintf(f, ", \"dense_layers\": %d, \"cache_factor\": %g, \"sticky\": %g, \"key_code_bits\": %d, \"verify_inline\": %s, \"verify_defer\": %s, \"merge\": \"%s\", \"spec_tokens\": %d, \"host_kv\": \"%s\", \"n\": %d, \"correct\": %d, "
                       "\"accuracy\": %.5f, \"ci95\": [%.5f, %.5f], "
                       "\"partial\": %.5f, \"same_as_dense\": %d, \"copied_from_dense\": %s, \"gen_tokens\": %lld, "
                       "\"seconds\": %.2f, \"fetch_bytes\": %lld, \"resident_in_time\": %.5f, \"spec_acceptance\": %.4f, "
                       "\"spec_adaptive\": %s, \"drafts_per_step\": %.3f, "
                       "\"prompt_tokens_mean\": %.1f}",
                    c->cfg.dense_layers, c->cfg.cache_factor > 0 ? (double)c->cfg.cache_factor : 1.0, (double)c->cfg.sticky,
                    c->cfg.key_code_bits, c->cfg.verify_inline ? "true" : "false", c->cfg.verify_defer ? "true" : "false", okv_merge_name(c->cfg.merge), drafted_tokens(&c->cfg), c->cfg.host_fp8 ? "fp8" : "auto", c->n, c->correct, c->n ? (double)c->correct / c->n : 0, c->lo, c->hi,
                    c->partial, c->same_as_dense, c->copied_from_dense ? "true" : "false", (long long)c->gen_tokens,
                    c->seconds, (long long)c->fetch_bytes, c->resident_in_time, c->accept_rate,
                    c->cfg.spec_adaptive ? "true" : "false", c->drafts_per_step,
                    c->n ? (double)c->prompt_tokens / c->n : 0.0);
        }
    }
    fprintf(f, "\n]");
    if (rs) {   /* one record per sample and configuration: what each answered (row: its table row) */
        fprintf(f, ", \"samples\": [");
        for (int i = 0; i < rs->n; i++) {
            const struct rec *r = &rs->r[i];
            const struct row *w = &rows[r->row];
            const struct okv_eval_cell *c = &w->cell;
            fprintf(f, "%s\n  {\"row\": %d, \"task\": \"%s\", \"context_len\": %d, \"config\": %d, \"kv_budget\": %d, "
                       "\"predict\": \"%s\", \"index\": %d, \"prompt_tokens\": %d, \"depth\": %.4f, \"answers\": ",
                    i ? "," : "", r->row, w->task, w->ctx, r->cfg, c->cfg.kv_budget,
                    c->cfg.kv_budget ? okv_eval_predict_name(&c->cfg) : "dense", r->index, r->n_tokens, r->depth);
            cli_json_str(f, r->answers, strlen(r->answers));
            fprintf(f, ", \"output\": ");
            cli_json_str(f, r->output, strlen(r->output));
            fprintf(f, ", \"partial\": %.4f, \"correct\": %s}", r->partial, r->correct ? "true" : "false");
        }
        fprintf(f, "\n]");
    }
    fprintf(f, "}\n");
    fclose(f);
    if (rename(tmp, o->json_path) != 0)
        cli_die("--json: cannot write %s", o->json_path);
}

static void print_table(const struct row *rows, int n_rows)
{
    bool any_acc = false, any_fid = false;
    for (int i = 0; i < n_rows; i++)
        rows[i].fid ? (any_fid = true) : (any_acc = true);
    if (any_acc) {
        printf("| task | context | budget | predict | N | accuracy | 95%% CI | = dense | partial | note |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < n_rows; i++) {
            if (rows[i].fid)
                continue;
            const struct okv_eval_cell *c = &rows[i].cell;
            char budget[32], same[32];
            if (c->cfg.kv_budget)
                snprintf(budget, sizeof budget, "%d", c->cfg.kv_budget);
            else
                snprintf(budget, sizeof budget, "dense");
            if (c->same_as_dense >= 0 && c->cfg.kv_budget)
                snprintf(same, sizeof same, "%d/%d", c->same_as_dense, c->n);
            else
                snprintf(same, sizeof same, "-");
            /* say so when the prompts fall short of the context less the answer's room (a task
             * whose material runs out) */
            char note[192] = "";
            double mean_prompt = c->n ? (double)c->prompt_tokens / c->n : 0;
            if (c->n && c->prompt_tokens < 0.9 * (double)c->prompt_room)
                snprintf(note, sizeof note, "prompts %.0f tokens on average (the task's material runs out)", mean_prompt);
            if (c->copied_from_dense)
                snprintf(note + strlen(note), sizeof note - strlen(note), "%sbudget >= context: runs dense",
                         note[0] ? "; " : "");
            if (c->accept_rate > 0 || c->cfg.draft)
                snprintf(note + strlen(note), sizeof note - strlen(note), "%sdrafts accepted %.2f%s", note[0] ? "; " : "",
                         c->accept_rate, c->cfg.verify_inline ? ", verify steps select inline"
                                         : c->cfg.verify_defer ? ", stale own tokens deferred" : "");
            const bool own_rows = drafted_tokens(&c->cfg) && (c->cfg.verify_inline || c->cfg.predict == OKV_PREDICT_ORACLE ||
                                                              c->cfg.predict == OKV_PREDICT_LAYER_AHEAD);
            if (c->cfg.merge != OKV_MERGE_AUTO)
                snprintf(note + strlen(note), sizeof note - strlen(note), "%srows merged by %s", note[0] ? "; " : "",
                         okv_merge_name(c->cfg.merge));
            else if (own_rows)   /* --kv-merge auto's rule for a step's own rows */
                snprintf(note + strlen(note), sizeof note - strlen(note), "%sown rows merged by rank", note[0] ? "; " : "");
            printf("| %s | %d | %s | %s | %d | %.3f | [%.3f, %.3f] | %s | %.3f | %s |\n", rows[i].task, rows[i].ctx,
                   budget, c->cfg.kv_budget ? okv_eval_predict_name(&c->cfg) : "-", c->n,
                   c->n ? (double)c->correct / c->n : 0, c->lo, c->hi, same, c->partial, note);
        }
    }
    /* a hint where Quest's bound alone loses dense's answers: the block score, not the budget, is
     * what a lookup of one token's content in a block of text defeats (bench/ACCURACY.md, "Where the
     * bound loses, and why") */
    /* and where, with the codes, a selection predicted from the last step's queries loses them: a
     * list's next item or a chain's next line is a block the last step's query had no reason to want
     * (bench/ACCURACY.md, "Run 14's matrix at 32K"); layer-ahead's estimate at a layer's start needs
     * depth: on a 2-layer model the second layer's queries come from the embeddings alone, and the
     * estimate after the first layer's attention keeps them ("chain_long: a model") */
    int bound_lost = 0, late_lost = 0;
    for (int i = 0; i < n_rows; i++) {
        const struct okv_eval_cell *c = &rows[i].cell;
        const bool lost = !rows[i].fid && c->cfg.kv_budget && !c->copied_from_dense && c->n >= 4 &&
                          c->same_as_dense >= 0 && c->same_as_dense < 0.75 * c->n;
        bound_lost += lost && c->cfg.key_code_bits == 0;
        late_lost += lost && c->cfg.key_code_bits > 0 &&
                     (c->cfg.predict == OKV_PREDICT_CURRENT || c->cfg.predict == OKV_PREDICT_LOOKAHEAD);
    }
    if (bound_lost)
        printf("\nnote: %d sparse cell%s with Quest's bound alone wrote dense's answers in under 3/4 of the samples; "
               "per-token key codes (--kv-key-codes 2) keep lookups that the bound misses (bench/ACCURACY.md)\n",
               bound_lost, bound_lost > 1 ? "s" : "");
    if (late_lost)
        printf("\nnote: %d sparse cell%s selecting with the last step's queries wrote dense's answers in under 3/4 of "
               "the samples; --predict layer-ahead (this step's queries, estimated a layer early) keeps lists and "
               "chains that they miss; layer-ahead-attn (estimated after the previous layer's attention) also on "
               "shallow models (bench/ACCURACY.md)\n",
               late_lost, late_lost > 1 ? "s" : "");
    if (any_fid) {
        if (any_acc)
            printf("\n");
        printf("| context | steps | budget | predict | top-1 = dense | mean KL | recall | fetched KiB/step | in time |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < n_rows; i++) {
            if (!rows[i].fid)
                continue;
            const struct okv_eval_fid_cell *c = &rows[i].fcell;
            char rec[32];
            if (c->recall >= 0)
                snprintf(rec, sizeof rec, "%.3f", c->recall);
            else
                snprintf(rec, sizeof rec, "-");
            char budget[32];
            if (c->cfg.kv_budget)
                snprintf(budget, sizeof budget, "%d", c->cfg.kv_budget);
            else
                snprintf(budget, sizeof budget, "dense");
            printf("| %d | %d | %s | %s | %.4f | %.5f | %s | %.1f | %.3f |\n", rows[i].ctx, c->steps, budget,
                   c->cfg.kv_budget ? okv_eval_predict_name(&c->cfg) : "-", c->top1, c->mean_kl, rec,
                   c->fetch_kib_per_step, c->resident_in_time);
        }
    }
    fflush(stdout);
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The regular files of dir, sorted by name (the caller frees each and the array). */
static char **list_dir(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        cli_die("--text-dir: cannot open %s", dir);
    char **v = NULL;
    int cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            free(p);
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            v = realloc(v, sizeof *v * (size_t)cap);
            if (!v)
                cli_die("out of memory");
        }
        v[(*n)++] = p;
    }
    closedir(d);
    if (!*n)
        cli_die("--text-dir: no files in %s", dir);
    qsort(v, (size_t)*n, sizeof *v, cmp_cstr);
    return v;
}

static void dump_ids(FILE *f, const int32_t *ids, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, i ? ",%d" : "%d", ids[i]);
    fputc(']', f);
}

/* --dump-samples: one JSON line per sample. */
static void dump_samples(const char *path, const okv_tokenizer *tok, const okv_eval_ctx *ec, const struct list *tasks,
                         const int *ctx_v, int n_ctx, int first, int num, uint64_t seed, int max_tokens, bool text)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f)
        cli_die("--dump-samples: cannot write %s", path);
    for (int ti = 0; ti < tasks->n; ti++)
        for (int ci = 0; ci < n_ctx; ci++)
            for (int i = first; i < first + num; i++) {
                struct okv_eval_sample s;
                struct okv_eval_gen g = {tasks->v[ti], ctx_v[ci], seed, i, -1, max_tokens};
                if (okv_eval_sample_make(ec, &g, &s) != OKV_OK)
                    cli_die("%s", okv_last_error());
                char *ref = okv_eval_reference_output(tasks->v[ti], &s);
                bool correct = false;
                if (!ref)
                    cli_die("eval: no reference output for %s", tasks->v[ti]);
                okv_eval_score(s.score, (const char *const *)s.answers, s.n_answers, ref, &correct);
                if (!correct)
                    cli_die("eval: the reference output of %s sample %d is not scored correct", tasks->v[ti], i);
                int32_t *tid;
                size_t n_tid;
                if (okv_tokenizer_encode(tok, ref, strlen(ref), false, false, &tid, &n_tid) != OKV_OK)
                    cli_die("%s", okv_last_error());
                fprintf(f, "{\"task\": \"%s\", \"context_len\": %d, \"seed\": %llu, \"index\": %d, "
                           "\"haystack\": \"%s\", \"depth\": %.6f, \"max_tokens\": %d, \"prompt_tokens\": ",
                        tasks->v[ti], ctx_v[ci], (unsigned long long)seed, i, s.haystack, s.depth, s.max_tokens);
                dump_ids(f, s.tokens, (size_t)s.n_tokens);
                fprintf(f, ", \"target\": ");
                cli_json_str(f, ref, strlen(ref));
                fprintf(f, ", \"target_tokens\": ");
                dump_ids(f, tid, n_tid);
                fprintf(f, ", \"answers\": [");
                for (int k = 0; k < s.n_answers; k++) {
                    fprintf(f, k ? ", " : "");
                    cli_json_str(f, s.answers[k], strlen(s.answers[k]));
                }
                fprintf(f, "], \"needles\": [");
                for (int k = 0; k < s.n_needles; k++)
                    fprintf(f, "%s[%zu, %zu]", k ? ", " : "", s.needle_off[k], s.needle_len[k]);
                fprintf(f, "]");
                if (text) {
                    fprintf(f, ", \"prompt\": ");
                    cli_json_str(f, s.prompt, strlen(s.prompt));
                }
                fprintf(f, "}\n");
                okv_free(tid);
                okv_free(ref);
                okv_eval_sample_free(&s);
            }
    if (f != stdout ? fclose(f) != 0 : fflush(f) != 0)
        cli_die("--dump-samples: cannot write %s", path);
}

int cmd_eval(int argc, char **argv)
{
    struct opts o = {.num_samples = 10, .fid_steps = 128};
    const char *device = NULL, *draft = NULL;
    struct list tasks = {0}, ctxs = {0}, budgets = {0}, modes = {0};
    split("--context-len", "2048", &ctxs);
    split("--kv-budget", "2048", &budgets);
    split("--predict", "lookahead", &modes);
    int threads = 0, dense_layers = 0, spec_tokens = 0, max_tokens = 0;
    bool spec_adaptive = false;
    double cache_factor = 1, sticky = 0;
    int key_code_bits = 0;
    enum okv_merge merge = OKV_MERGE_AUTO;   /* --kv-merge */
    bool verify_inline = false, verify_defer = true;   /* deferring by default: speculation keeps the accuracy */
    bool host_fp8 = false;
    bool sweep = false, reuse = true, recall = false, print_samples = false, dump_text = false;
    const char *dump_path = NULL, *text_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            int n;
            const struct okv_eval_task_info *t = okv_eval_tasks(&n);
            printf("\ntasks:\n");
            for (int k = 0; k < n; k++)
                printf("  %-20s %s\n", t[k].name, t[k].desc);
            printf("  %-20s %s\n", "fidelity", "teacher-forced top-1 agreement and KL against dense on real text");
            lists_free(&tasks, &ctxs, &budgets, &modes);
            return 0;
        } else if (!strcmp(a, "--list")) {
            int n;
            const struct okv_eval_task_info *t = okv_eval_tasks(&n);
            for (int k = 0; k < n; k++)
                printf("%s\n", t[k].name);
            printf("fidelity\n");
            lists_free(&tasks, &ctxs, &budgets, &modes);
            return 0;
        } else if (!strcmp(a, "--task")) {
            split(a, cli_value(argc, argv, &i), &tasks);
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o.model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--context-len")) {
            split(a, cli_value(argc, argv, &i), &ctxs);
        } else if (!strcmp(a, "--num-samples")) {
            o.num_samples = cli_int(a, cli_value(argc, argv, &i), 1, 100000);
        } else if (!strcmp(a, "--kv-budget")) {
            split(a, cli_value(argc, argv, &i), &budgets);
        } else if (!strcmp(a, "--predict")) {
            split(a, cli_value(argc, argv, &i), &modes);
        } else if (!strcmp(a, "--kv-host-dtype")) {
            host_fp8 = cli_host_fp8(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-verify-inline")) {
            verify_inline = true;
        } else if (!strcmp(a, "--kv-merge")) {
            merge = cli_merge(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-verify-defer") || !strcmp(a, "--no-kv-verify-defer")) {
            verify_defer = a[2] == 'k';
        } else if (!strcmp(a, "--kv-key-codes")) {
            key_code_bits = cli_int(a, cli_value(argc, argv, &i), 0, 4);
        } else if (!strcmp(a, "--kv-sticky")) {
            sticky = cli_double(a, cli_value(argc, argv, &i), 0, 0.5);
        } else if (!strcmp(a, "--kv-cache-factor")) {
            cache_factor = cli_double(a, cli_value(argc, argv, &i), 1, 64);
        } else if (!strcmp(a, "--dense-layers")) {
            dense_layers = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 16);
        } else if (!strcmp(a, "--draft")) {
            draft = cli_value(argc, argv, &i);
            if (strcmp(draft, "ngram") && strcmp(draft, "self") && (strncmp(draft, "model:", 6) || !draft[6]))
                cli_die("--draft: '%s' is not one of ngram, self, model:PATH", draft);
        } else if (!strcmp(a, "--spec-tokens")) {
            spec_tokens = cli_int(a, cli_value(argc, argv, &i), 1, 32);
        } else if (!strcmp(a, "--spec-adaptive")) {
            spec_adaptive = true;
        } else if (!strcmp(a, "--max-tokens")) {
            max_tokens = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 16);
        } else if (!strcmp(a, "--seed")) {
            o.seed = cli_u64(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--print-samples")) {
            print_samples = true;
        } else if (!strcmp(a, "--dump-samples")) {
            dump_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--text-dir")) {
            text_dir = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--first-index")) {
            o.first_index = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 30);
        } else if (!strcmp(a, "--dump-text")) {
            dump_text = true;
        } else if (!strcmp(a, "--sweep")) {
            sweep = true;
        } else if (!strcmp(a, "--no-reuse")) {
            reuse = false;
        } else if (!strcmp(a, "--fidelity-steps")) {
            o.fid_steps = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 20);
        } else if (!strcmp(a, "--recall")) {
            recall = true;
        } else if (!strcmp(a, "--json")) {
            o.json_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--threads")) {
            threads = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--device")) {
            device = cli_value(argc, argv, &i);
        } else {
            cli_die("eval: unknown option '%s' (see oasiskv eval --help)", a);
        }
    }
    if (!tasks.n)
        cli_die("eval: --task is required (see oasiskv eval --help)");
    /* without --draft only lookahead drafts (by n-gram): --spec-tokens sets how many a step */
    bool any_lookahead = false;
    for (int k = 0; k < modes.n; k++)
        any_lookahead |= !strncmp(modes.v[k], "lookahead", 9);
    if (spec_tokens && !draft && !any_lookahead)
        cli_die("eval: --spec-tokens needs --draft (or --predict lookahead, whose n-gram drafts it counts)");
    if (spec_adaptive && !draft && !any_lookahead)
        cli_die("eval: --spec-adaptive needs --draft (or --predict lookahead)");
    for (int k = 0; k < tasks.n; k++)
        if (!strcmp(tasks.v[k], "fidelity") && (spec_adaptive || (spec_tokens && spec_tokens != 4)))
            cli_die("eval: fidelity drafts 4 tokens a step, teacher-forced (nothing is verified): --spec-tokens other than 4 "
                    "and --spec-adaptive do not apply to it");
    if (!sweep && !dump_path && (tasks.n > 1 || ctxs.n > 1 || budgets.n > 1 || modes.n > 1))
        cli_die("eval: comma lists need --sweep");
    if (tasks.n == 1 && !strcmp(tasks.v[0], "all")) {
        int n;
        const struct okv_eval_task_info *t = okv_eval_tasks(&n);
        tasks.n = 0;
        for (int k = 0; k < n && k < MAX_LIST; k++)
            tasks.v[tasks.n++] = t[k].name;
    }
    for (int k = 0; k < tasks.n; k++)
        if (strcmp(tasks.v[k], "fidelity") && !okv_eval_task_find(tasks.v[k]))
            cli_die("--task: unknown task '%s' (oasiskv eval --list)", tasks.v[k]);
    int ctx_v[MAX_LIST];
    for (int k = 0; k < ctxs.n; k++)
        ctx_v[k] = cli_int("--context-len", ctxs.v[k], 16, 1 << 22);
    if ((text_dir || dump_text) && !dump_path)
        cli_die("eval: --text-dir and --dump-text need --dump-samples");
    if (dump_path) {
        for (int k = 0; k < tasks.n; k++)
            if (!strcmp(tasks.v[k], "fidelity"))
                cli_die("--dump-samples: fidelity has no samples");
        if (!o.model_path)
            o.model_path = cli_default_model();
        struct stat sb;
        okv_tokenizer *tok = NULL;
        struct okv_model *m = NULL;
        bool tok_dir = stat(o.model_path, &sb) == 0 && S_ISDIR(sb.st_mode);
        if (tok_dir)
            tok = cli_load_tokenizer(o.model_path);   /* the tokenizer alone: no weights needed */
        else
            cli_load(o.model_path, &m, &tok);
        if (!tok)
            cli_die("%s has no tokenizer: eval needs one", o.model_path);
        okv_eval_ctx *ec = NULL;
        if (text_dir) {
            int nf;
            char **files = list_dir(text_dir, &nf);
            if (okv_eval_ctx_create_files(tok, (const char *const *)files, nf, &ec) != OKV_OK)
                cli_die("%s", okv_last_error());
            for (int k = 0; k < nf; k++)
                free(files[k]);
            free(files);
        } else if (okv_eval_ctx_create(tok, &ec) != OKV_OK) {
            cli_die("%s", okv_last_error());
        }
        dump_samples(dump_path, tok, ec, &tasks, ctx_v, ctxs.n, o.first_index, o.num_samples, o.seed, max_tokens,
                     dump_text);
        okv_eval_ctx_free(ec);
        okv_tokenizer_free(tok);
        okv_model_free(m);
        lists_free(&tasks, &ctxs, &budgets, &modes);
        return 0;
    }
    /* configurations: dense once, each budget under each predict mode */
    struct okv_eval_config cfgs[MAX_LIST * 3 + 1];
    int n_cfgs = 0;
    enum okv_predict pm[MAX_LIST];
    bool pfp[MAX_LIST], paa[MAX_LIST];
    for (int k = 0; k < modes.n; k++)
        pm[k] = cli_predict(modes.v[k], &pfp[k], &paa[k]);
    for (int b = 0; b < budgets.n; b++) {
        int budget = !strcmp(budgets.v[b], "dense") ? 0 : cli_int("--kv-budget", budgets.v[b], 1, 1 << 24);
        for (int k = 0; k < (budget ? modes.n : 1); k++) {
            if (n_cfgs == (int)(sizeof cfgs / sizeof cfgs[0]))
                cli_die("eval: too many configurations");
            cfgs[n_cfgs++] = (struct okv_eval_config){budget, budget ? pm[k] : OKV_PREDICT_CURRENT, dense_layers,
                                                      draft, spec_tokens, (float)cache_factor, budget && pfp[k],
                                                      (float)sticky, budget ? key_code_bits : 0, budget && host_fp8,
                                                      budget && verify_inline, budget && verify_defer,
                                                      budget && paa[k], budget ? merge : OKV_MERGE_AUTO, spec_adaptive};
        }
    }
    if (!o.model_path)
        o.model_path = cli_default_model();
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load(o.model_path, &m, &tok);
    if (!tok)
        cli_die("%s has no tokenizer: eval needs one", o.model_path);
    if (dense_layers > m->cfg.n_layers)
        cli_die("--dense-layers: %d is more than the model's %d layers", dense_layers, m->cfg.n_layers);
    for (int k = 0; k < ctxs.n; k++)
        if (m->cfg.max_ctx > 0 && ctx_v[k] > m->cfg.max_ctx)
            cli_die("--context-len: %d exceeds the model's context length %d", ctx_v[k], m->cfg.max_ctx);
    struct okv_backend_params bp = {.n_threads = threads};
    okv_backend *be = NULL;
    if (okv_backend_create(device, &bp, &be) != OKV_OK)
        cli_die("%s", okv_last_error());
    okv_eval_ctx *ec = NULL;
    if (okv_eval_ctx_create(tok, &ec) != OKV_OK)
        cli_die("%s", okv_last_error());
    if (!okv_eval_ctx_has_essays(ec))
        fprintf(stderr, "[eval] note: doc-debian is not installed; essay haystacks use the license texts\n");

    if (print_samples) {
        for (int ti = 0; ti < tasks.n; ti++)
            for (int ci = 0; ci < ctxs.n; ci++)
                for (int i = 0; i < o.num_samples && strcmp(tasks.v[ti], "fidelity"); i++) {
                    struct okv_eval_sample s;
                    struct okv_eval_gen g = {tasks.v[ti], ctx_v[ci], o.seed, o.first_index + i, -1, max_tokens};
                    if (okv_eval_sample_make(ec, &g, &s) != OKV_OK)
                        cli_die("%s", okv_last_error());
                    printf("=== %s context %d sample %d: %d prompt tokens, max %d new, haystack %s, depth %.3f\n%s\n"
                           "=== answers:", tasks.v[ti], ctx_v[ci], i, s.n_tokens, s.max_tokens, s.haystack, s.depth,
                           s.prompt);
                    for (int k = 0; k < s.n_answers; k++)
                        printf(" [%s]", s.answers[k]);
                    printf("\n=== needles:");
                    for (int k = 0; k < s.n_needles; k++)
                        printf(" [%.*s]@%zu", (int)s.needle_len[k], s.prompt + s.needle_off[k], s.needle_off[k]);
                    printf("\n");
                    okv_eval_sample_free(&s);
                }
        okv_eval_ctx_free(ec);
        okv_backend_free(be);
        okv_tokenizer_free(tok);
        okv_model_free(m);
        lists_free(&tasks, &ctxs, &budgets, &modes);
        return 0;
    }
    int cap_rows = tasks.n * ctxs.n * n_cfgs;
    struct row *rows = calloc((size_t)cap_rows, sizeof *rows);
    int n_rows = 0;
    struct recs rs = {0};
    double t_start = okv_now();
    for (int ti = 0; ti < tasks.n; ti++) {
        for (int ci = 0; ci < ctxs.n; ci++) {
            const int ctx = ctx_v[ci];
            if (!strcmp(tasks.v[ti], "fidelity")) {
                if (o.fid_steps >= ctx)
                    cli_die("fidelity: --fidelity-steps %d must be below the context length %d", o.fid_steps, ctx);
                char *text;
                size_t len;
                int32_t *ids;
                size_t n_ids;
                if (okv_eval_fidelity_text(ec, &text, &len) != OKV_OK ||
                    okv_tokenizer_encode(tok, text, len, okv_tokenizer_add_bos(tok), false, &ids, &n_ids) != OKV_OK)
                    cli_die("fidelity: %s", okv_last_error());
                okv_free(text);
                int P = ctx - o.fid_steps;
                if ((size_t)P > n_ids)
                    cli_die("fidelity: the text has only %zu tokens (asked %d)", n_ids, P);
                struct okv_eval_fid_cell fc[MAX_LIST * 3 + 1];
                if (okv_eval_fidelity(m, be, ids, P, o.fid_steps, cfgs, n_cfgs, recall, on_progress, NULL, fc) != OKV_OK)
                    cli_die("fidelity: %s", okv_last_error());
                okv_free(ids);
                for (int k = 0; k < n_cfgs; k++)
                    rows[n_rows++] = (struct row){.task = "fidelity", .ctx = ctx, .fid = true, .fcell = fc[k]};
                write_json(&o, rows, n_rows, &rs);
                continue;
            }
            struct okv_eval_run_params rp = {.task = tasks.v[ti], .context_len = ctx, .num_samples = o.num_samples,
                                             .first_index = o.first_index,
                                             .seed = o.seed, .max_tokens = max_tokens, .reuse_full_budget = reuse,
                                             .on_sample = on_sample, .progress = on_progress,
                                             .user = &rs};
            struct okv_eval_cell cells[MAX_LIST * 3 + 1];
            rs.row_base = n_rows;   /* this run's configurations become rows n_rows ... */
            if (okv_eval_run(m, tok, be, ec, &rp, cfgs, n_cfgs, cells) != OKV_OK)
                cli_die("eval %s at context %d: %s", tasks.v[ti], ctx, okv_last_error());
            for (int k = 0; k < n_cfgs; k++)
                rows[n_rows++] = (struct row){.task = tasks.v[ti], .ctx = ctx, .cell = cells[k]};
            write_json(&o, rows, n_rows, &rs);
        }
    }
    print_table(rows, n_rows);
    fprintf(stderr, "[eval] done in %.1f s\n", okv_now() - t_start);
    for (int i = 0; i < rs.n; i++) {
        free(rs.r[i].output);
        free(rs.r[i].answers);
    }
    free(rs.r);
    free(rows);
    lists_free(&tasks, &ctxs, &budgets, &modes);
    okv_eval_ctx_free(ec);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
