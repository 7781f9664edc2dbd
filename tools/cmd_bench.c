/* oasiskv bench: `bench serve`, an HTTP load generator for OpenAI-compatible
 * servers that prints the report `vllm bench serve` prints, and
 * `bench throughput`, an offline in-process run through the scheduler that prints
 * vLLM's throughput line. */
#include "cli.h"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/sched.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------- bench serve ---------------- */

static const char *serve_help =
    "usage: oasiskv bench serve [options]\n"
    "\n"
    "  --base-url URL            server (default http://127.0.0.1:8000)\n"
    "  --endpoint PATH           /v1/completions (default) or /v1/chat/completions\n"
    "  --model NAME              model name (default: the first of /v1/models)\n"
    "  --num-prompts N           requests to send (default 100)\n"
    "  --max-concurrency C       requests in flight at most (default: num-prompts)\n"
    "  --request-rate R          Poisson arrivals per second (default inf: all at once)\n"
    "  --random-input-len I      words of each random prompt (default 128)\n"
    "  --random-output-len O     max_tokens of each request (default 128)\n"
    "  --dataset FILE            prompts from a file: JSON lines with a \"prompt\" field, or a ShareGPT\n"
    "                            JSON array (first human turn); cycled to num-prompts\n"
    "  --dataset-name NAME       random (default; or the file of --dataset) or prefix_repetition: num-prompts\n"
    "                            prompts made of one of --prefix-repetition-num-prefixes K (default 10)\n"
    "                            shared prefixes of --prefix-repetition-prefix-len P words (default 256) and\n"
    "                            --prefix-repetition-suffix-len S words of their own (default 256), shuffled;\n"
    "                            --prefix-repetition-output-len O sets max_tokens (default 128)\n"
    "  --no-ignore-eos           let requests stop at end-of-generation (default: ignore_eos true)\n"
    "  --seed S                  random seed (default 0)\n"
    "  --max-duration S          end the run after S seconds: requests not sent by then are not sent, those\n"
    "                            in flight are cut (the connection closed, which cancels them on the server);\n"
    "                            the report counts both apart from failures and adds the output throughput with\n"
    "                            the tokens the cut requests had received (their usage streamed in every chunk:\n"
    "                            stream_options.continuous_usage_stats, as vLLM's)\n"
    "  --json FILE               also write the results as JSON (also --result-filename; with --save-result and\n"
    "                            --result-dir DIR, a file of its own name in DIR)\n"
    "  --tokenizer PATH          random prompts of exactly --random-input-len tokens of this tokenizer (random\n"
    "                            ids, decoded to text, as vLLM's random dataset) instead of that many words\n"
    "  --random-range-ratio R    input and output lengths drawn in [L(1-R), L(1+R)] (default 0: all L)\n"
    "  --percentile-metrics LIST which of ttft,tpot,itl,e2el get percentiles (default ttft,tpot,itl)\n"
    "  --metric-percentiles LIST the percentiles printed (default 99), e.g. 50,90,99\n"
    "  vLLM's --backend (vllm, openai: completions; openai-chat: chat), --host / --port (instead of --base-url),\n"
    "  --label, --trust-remote-code and --seed are taken as vLLM takes them\n"
    "  The API key, if any, comes from $OPENAI_API_KEY.\n";

/* curl's timeout may end a transfer a little before the deadline: a request ended or
 * about to start this close to it counts as cut / not sent */
#define DEADLINE_SLACK_S 0.05

struct bres {
    bool ok;
    bool cut;          /* in flight at --max-duration */
    bool not_sent;     /* not sent before --max-duration */
    int n_chunks;      /* chunks with text received */
    double ttft, latency;
    double *itl;
    int n_itl, cap_itl;
    int prompt_tokens, output_tokens;
    char err[160];
};

struct bjob {
    /* SSE parse state */
    char *buf;
    size_t len, cap;
    double start, last;
    bool got_first, done;
    struct bres *r;
    bool chat;
};

struct bench {
    const char *url, *model, *api_key;
    bool chat, ignore_eos;
    double deadline;   /* okv_now() of the end of the run (--max-duration), or INFINITY */
    int n, out_len;
    int *out_lens;     /* [n] max_tokens of each request (--random-range-ratio), or NULL: out_len */
    char **prompts;
    double *arrival;
    atomic_int next, done;
    double t0;
    struct bres *res;
    pthread_mutex_t print_mu;
};

static void itl_push(struct bres *r, double v)
{
    if (r->n_itl == r->cap_itl) {
        r->cap_itl = r->cap_itl ? r->cap_itl * 2 : 64;
        r->itl = realloc(r->itl, sizeof(double) * (size_t)r->cap_itl);
        if (!r->itl)
            cli_die("out of memory");
    }
    r->itl[r->n_itl++] = v;
}

static void sse_event(struct bjob *j, const char *data)
{
    if (!strcmp(data, "[DONE]")) {
        j->done = true;
        return;
    }
    cJSON *o = cJSON_Parse(data);
    if (!o)
        return;
    const cJSON *err = cJSON_GetObjectItem(o, "error");
    if (err) {
        const cJSON *m = cJSON_GetObjectItem(err, "message");
        snprintf(j->r->err, sizeof j->r->err, "%s", cJSON_IsString(m) ? m->valuestring : "server error");
    }
    const cJSON *choices = cJSON_GetObjectItem(o, "choices");
    const cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    const char *text = NULL;
    if (c0) {
        const cJSON *t = cJSON_GetObjectItem(c0, "text");
        if (!t) {
            const cJSON *d = cJSON_GetObjectItem(c0, "delta");
            t = d ? cJSON_GetObjectItem(d, "content") : NULL;
        }
        if (cJSON_IsString(t))
            text = t->valuestring;
    }
    if (text && *text) {
        j->r->n_chunks++;
        double now = okv_now();
        if (!j->got_first) {
            j->got_first = true;
            j->r->ttft = now - j->start;
        } else {
            itl_push(j->r, now - j->last);
        }
        j->last = now;
    }
    const cJSON *u = cJSON_GetObjectItem(o, "usage");
    if (cJSON_IsObject(u)) {
        const cJSON *pt = cJSON_GetObjectItem(u, "prompt_tokens"), *ct = cJSON_GetObjectItem(u, "completion_tokens");
        if (cJSON_IsNumber(pt))
            j->r->prompt_tokens = pt->valueint;
        if (cJSON_IsNumber(ct))
            j->r->output_tokens = ct->valueint;
    }
    cJSON_Delete(o);
}

static size_t on_data(char *p, size_t sz, size_t nm, void *user)
{
    struct bjob *j = user;
    size_t n = sz * nm;
    if (j->len + n + 1 > j->cap) {
        j->cap = (j->len + n + 1) * 2;
        j->buf = realloc(j->buf, j->cap);
        if (!j->buf)
            cli_die("out of memory");
    }
    memcpy(j->buf + j->len, p, n);
    j->len += n;
    j->buf[j->len] = 0;
    char *start = j->buf, *sep;
    while ((sep = strstr(start, "\n\n"))) {
        *sep = 0;
        for (char *line = start; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            if (!strncmp(line, "data: ", 6))
                sse_event(j, line + 6);
            else if (!strncmp(line, "data:", 5))
                sse_event(j, line + 5);
            line = nl ? nl + 1 : NULL;
        }
        start = sep + 2;
    }
    size_t rest = j->len - (size_t)(start - j->buf);
    memmove(j->buf, start, rest);
    j->len = rest;
    j->buf[j->len] = 0;
    return n;
}

static void one_request(struct bench *b, CURL *h, int i)
{
    struct bres *r = &b->res[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", b->model);
    if (b->chat) {
        cJSON *msgs = cJSON_AddArrayToObject(o, "messages");
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", b->prompts[i]);
        cJSON_AddItemToArray(msgs, m);
    } else {
        cJSON_AddStringToObject(o, "prompt", b->prompts[i]);
    }
    cJSON_AddNumberToObject(o, "max_tokens", b->out_lens ? b->out_lens[i] : b->out_len);
    cJSON_AddNumberToObject(o, "temperature", 0);
    cJSON_AddBoolToObject(o, "stream", 1);
    cJSON_AddBoolToObject(o, "ignore_eos", b->ignore_eos);
    cJSON *so = cJSON_AddObjectToObject(o, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", 1);
    if (isfinite(b->deadline))   /* the tokens of a request cut at the deadline */
        cJSON_AddBoolToObject(so, "continuous_usage_stats", 1);
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);

    char url[1024], auth[600];
    snprintf(url, sizeof url, "%s", b->url);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    if (b->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", b->api_key);
        hd = curl_slist_append(hd, auth);
    }
    struct bjob j = {.r = r, .chat = b->chat};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &j);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    j.start = okv_now();
    long left_ms = 0;   /* 0: no limit */
    if (isfinite(b->deadline)) {
        const double left = ceil((b->deadline - j.start) * 1e3);
        left_ms = left < 1 ? 1 : (long)left;
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left_ms);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OPERATION_TIMEDOUT && isfinite(b->deadline) && okv_now() >= b->deadline - DEADLINE_SLACK_S)
        r->cut = true;
    r->latency = okv_now() - j.start;
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK)
        snprintf(r->err, sizeof r->err, "%s", curl_easy_strerror(cc));
    else if (status != 200 && !r->err[0])
        snprintf(r->err, sizeof r->err, "HTTP %ld: %.120s", status, j.buf ? j.buf : "");
    else if (!j.done && !r->err[0])
        snprintf(r->err, sizeof r->err, "the stream ended without [DONE]");
    r->ok = !r->cut && !r->err[0] && j.got_first;
    if (!r->ok && !r->err[0])
        snprintf(r->err, sizeof r->err, "no text generated");
    curl_slist_free_all(hd);
    free(body);
    free(j.buf);
}

/* sleep for s seconds (any length: usleep's argument is 32 bits of microseconds) */
static void sleep_s(double s)
{
    if (!(s > 0))
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void *bench_worker(void *arg)
{
    struct bench *b = arg;
    CURL *h = curl_easy_init();
    if (!h)
        cli_die("curl_easy_init failed");
    for (;;) {
        int i = atomic_fetch_add(&b->next, 1);
        if (i >= b->n)
            break;
        double wait = b->t0 + b->arrival[i] - okv_now();
        if (isfinite(b->deadline) && okv_now() + (wait > 0 ? wait : 0) >= b->deadline - DEADLINE_SLACK_S) {
            b->res[i].not_sent = true;
            if (wait > 0 && b->deadline > okv_now())   /* the run lasts until its deadline, as with requests in flight */
                sleep_s(b->deadline - okv_now());
        } else {
            if (wait > 0)
                sleep_s(wait);
            one_request(b, h, i);
        }
        int d = atomic_fetch_add(&b->done, 1) + 1;
        pthread_mutex_lock(&b->print_mu);
        fprintf(stderr, "\r  %d/%d requests done", d, b->n);
        if (d == b->n)
            fputc('\n', stderr);
        fflush(stderr);
        pthread_mutex_unlock(&b->print_mu);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* GET url into a malloc'ed string (NULL on failure). */
struct mem { char *s; size_t n; };
static size_t mem_write(char *p, size_t sz, size_t nm, void *user)
{
    struct mem *m = user;
    size_t n = sz * nm;
    char *q = realloc(m->s, m->n + n + 1);
    if (!q)
        return 0;
    m->s = q;
    memcpy(m->s + m->n, p, n);
    m->n += n;
    m->s[m->n] = 0;
    return n;
}

static char *http_get(const char *url, const char *api_key)
{
    CURL *h = curl_easy_init();
    struct mem m = {0};
    char auth[600];
    struct curl_slist *hd = NULL;
    if (api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", api_key);
        hd = curl_slist_append(hd, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mem_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK || status != 200) {
        free(m.s);
        return NULL;
    }
    return m.s ? m.s : calloc(1, 1);
}

/* Sum of the samples of a Prometheus counter (any labels). */
static double prom_value(const char *text, const char *name)
{
    double sum = 0;
    size_t nl = strlen(name);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, name, nl) && (p[nl] == '{' || p[nl] == ' ')) {
            const char *v = strchr(p, ' ');
            const char *brace = strchr(p, '}');
            const char *eol = strchr(p, '\n');
            if (brace && (!eol || brace < eol))
                v = strchr(brace, ' ');
            if (v)
                sum += strtod(v + 1, NULL);
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return sum;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy.percentile with linear interpolation over a sorted array. */
static double pct(const double *v, int n, double q)
{
    if (n == 0)
        return 0;
    double pos = q / 100.0 * (n - 1);
    int lo = (int)floor(pos), hi = (int)ceil(pos);
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

#define MAX_PCTS 16
struct stats { double mean, median, std, p[MAX_PCTS]; };
/* mean, median, (population) std and the percentiles q[nq] of v[n], sorted in place (as numpy) */
static struct stats stats_of(double *v, int n, const double *q, int nq)
{
    struct stats s = {0};
    if (n == 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.std = sqrt(sq / n);
    s.median = pct(v, n, 50);
    for (int k = 0; k < nq; k++)
        s.p[k] = pct(v, n, q[k]);
    return s;
}

/* vLLM's name of a percentile: 99 -> "99", 99.9 -> "99.9" */
static void pct_name(double q, char *out, size_t cap)
{
    if (q == floor(q))
        snprintf(out, cap, "%d", (int)q);
    else
        snprintf(out, cap, "%g", q);
}

static const char *words[] = {
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "as", "be", "at", "by",
    "this", "from", "or", "an", "are", "not", "but", "all", "which", "one", "have", "they", "you", "were",
    "her", "his", "their", "we", "there", "been", "has", "when", "who", "will", "more", "no", "if", "out",
    "so", "said", "what", "up", "its", "about", "into", "than", "them", "can", "only", "other", "new",
    "some", "could", "time", "these", "two", "may", "then", "do", "first", "any", "my", "now", "such",
    "like", "our", "over", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before",
    "must", "through", "back", "years", "where", "much", "your", "way", "well", "down", "should", "because",
    "each", "just", "those", "people", "how", "too", "little", "state", "good", "very", "make", "world",
    "still", "own", "see", "men", "work", "long", "get", "here", "between", "both", "life", "being", "under",
    "never", "day", "same", "another", "know", "while", "last", "might", "us", "great", "old", "year", "off",
    "come", "since", "against", "go", "came", "right", "used", "take", "three", "house", "water", "sea",
};

static char *random_prompt(struct okv_rng *r, int n_words)
{
    size_t cap = (size_t)n_words * 12 + 1, len = 0;
    char *s = malloc(cap);
    if (!s)
        cli_die("out of memory");
    s[0] = 0;
    const int nw = (int)(sizeof words / sizeof words[0]);
    for (int i = 0; i < n_words; i++) {
        const char *w = words[okv_rng_next(r) % (uint64_t)nw];
        len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? " " : "", w);
    }
    return s;
}

/* Prompts from a file: JSON lines with "prompt", or a ShareGPT array. */
/* A prompt of n tokens of tok (vLLM's random dataset: random ids decoded to text), adjusted until
 * its encoding (without BOS) has n tokens, as far as a few rounds get it. */
static char *random_token_prompt(struct okv_rng *r, const okv_tokenizer *tok, int n)
{
    const int nv = okv_tokenizer_n_vocab(tok);
    int32_t *ids = malloc(sizeof *ids * (size_t)(2 * n + 16));
    if (!ids)
        cli_die("out of memory");
    int k = 0;
    char *text = NULL;
    for (int round = 0; round < 6; round++) {
        while (k < n)
            ids[k++] = (int32_t)(okv_rng_next(r) % (uint64_t)nv);
        okv_free(text);
        text = NULL;
        size_t tl = 0, ne = 0;
        int32_t *enc = NULL;
        if (okv_tokenizer_decode(tok, ids, (size_t)k, true, &text, &tl) != OKV_OK ||
            okv_tokenizer_encode(tok, text, tl, false, false, &enc, &ne) != OKV_OK)
            cli_die("--tokenizer: %s", okv_last_error());
        /* go on from what the text encodes to: cut to n, or draw more */
        k = (int)(ne < (size_t)n ? ne : (size_t)n);
        memcpy(ids, enc, sizeof *ids * (size_t)k);
        okv_free(enc);
        if (ne == (size_t)n)
            break;
    }
    free(ids);
    char *out = strdup(text ? text : "");
    okv_free(text);
    if (!out)
        cli_die("out of memory");
    return out;
}

static int load_dataset(const char *path, char ***out)
{
    char *text = cli_read_text("--dataset", path);
    int n = 0, cap = 0;
    char **v = NULL;
    cJSON *arr = cJSON_Parse(text);
    if (cJSON_IsArray(arr)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
            const cJSON *conv = cJSON_GetObjectItem(e, "conversations");
            const cJSON *t = NULL;
            const cJSON *turn;
            if (cJSON_IsArray(conv))
                cJSON_ArrayForEach(turn, conv) {
                    const cJSON *from = cJSON_GetObjectItem(turn, "from");
                    if (cJSON_IsString(from) && !strcmp(from->valuestring, "human")) {
                        t = cJSON_GetObjectItem(turn, "value");
                        break;
                    }
                }
            if (!t)
                t = cJSON_GetObjectItem(e, "prompt");
            if (cJSON_IsString(t) && *t->valuestring) {
                if (n == cap)
                    v = realloc(v, sizeof *v * (size_t)(cap = cap ? cap * 2 : 256));
                v[n++] = strdup(t->valuestring);
            }
        }
    } else {
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *o = cJSON_Parse(line);
            const cJSON *t = o ? cJSON_GetObjectItem(o, "prompt") : NULL;
            if (cJSON_IsString(t) && *t->valuestring) {
                if (n == cap)
                    v = realloc(v, sizeof *v * (size_t)(cap = cap ? cap * 2 : 256));
                v[n++] = strdup(t->valuestring);
            }
            cJSON_Delete(o);
        }
    }
    cJSON_Delete(arr);
    okv_free(text);
    if (n == 0)
        cli_die("--dataset: no prompts in %s (JSON lines with \"prompt\", or a ShareGPT array)", path);
    *out = v;
    return n;
}

static int bench_serve(int argc, char **argv)
{
    const char *base = "http://127.0.0.1:8000", *endpoint = "/v1/completions", *model = NULL, *dataset = NULL;
    bool base_given = false;
    char base_buf[512];
    const char *json_path = NULL;
    int n = 100, conc = 0, in_len = 128, out_len = 128;
    int px_len = 256, px_suffix = 256, px_num = 10;
    bool prefix_rep = false;
    double rate = INFINITY, max_dur = INFINITY, range_ratio = 0;
    uint64_t seed = 0;
    const char *tok_path = NULL, *host = NULL, *result_dir = NULL;
    int port = 0;
    bool save_result = false;
    const char *pct_metrics = "ttft,tpot,itl", *pct_list = "99";
    bool ignore_eos = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(serve_help, stdout);
            return 0;
        } else if (!strcmp(a, "--base-url")) {
            base = cli_value(argc, argv, &i);
            base_given = true;
        } else if (!strcmp(a, "--endpoint")) {
            endpoint = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--model")) {
            model = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--num-prompts")) {
            n = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 24);
        } else if (!strcmp(a, "--max-concurrency")) {
            conc = cli_int(a, cli_value(argc, argv, &i), 1, 4096);
        } else if (!strcmp(a, "--request-rate")) {
            const char *v = cli_value(argc, argv, &i);
            rate = !strcmp(v, "inf") ? INFINITY : cli_double(a, v, 1e-6, 1e9);
        } else if (!strcmp(a, "--random-input-len")) {
            in_len = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 20);
        } else if (!strcmp(a, "--random-output-len")) {
            out_len = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 20);
        } else if (!strcmp(a, "--dataset") || !strcmp(a, "--dataset-path")) {
            dataset = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--dataset-name")) {
            const char *v = cli_value(argc, argv, &i);
            if (!strcmp(v, "prefix_repetition"))
                prefix_rep = true;
            else if (!strcmp(v, "random") || !strcmp(v, "custom") || !strcmp(v, "sharegpt"))
                prefix_rep = false;
            else
                cli_die("--dataset-name: '%s' is not supported (random, prefix_repetition; a file: --dataset)", v);
        } else if (!strcmp(a, "--prefix-repetition-prefix-len")) {
            px_len = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 20);
        } else if (!strcmp(a, "--prefix-repetition-suffix-len")) {
            px_suffix = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 20);
        } else if (!strcmp(a, "--prefix-repetition-num-prefixes")) {
            px_num = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 20);
        } else if (!strcmp(a, "--prefix-repetition-output-len")) {
            out_len = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 20);
        } else if (!strcmp(a, "--json") || !strcmp(a, "--result-filename")) {
            json_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--seed")) {
            seed = cli_u64(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--tokenizer")) {
            tok_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--random-range-ratio")) {
            range_ratio = cli_double(a, cli_value(argc, argv, &i), 0, 0.999);
        } else if (!strcmp(a, "--percentile-metrics")) {
            pct_metrics = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--metric-percentiles")) {
            pct_list = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--save-result")) {
            save_result = true;
        } else if (!strcmp(a, "--result-dir")) {
            result_dir = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--host")) {
            host = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--port")) {
            port = cli_int(a, cli_value(argc, argv, &i), 1, 65535);
        } else if (!strcmp(a, "--backend")) {
            const char *v = cli_value(argc, argv, &i);
            if (!strcmp(v, "openai-chat"))
                endpoint = "/v1/chat/completions";
            else if (strcmp(v, "vllm") != 0 && strcmp(v, "openai") != 0)
                cli_die("--backend '%s': vllm, openai (completions) or openai-chat (chat completions)", v);
        } else if (!strcmp(a, "--label")) {
            (void)cli_value(argc, argv, &i);   /* a name for vLLM's result files */
        } else if (!strcmp(a, "--trust-remote-code")) {
            /* nothing to trust: no code is loaded */
        } else if (!strcmp(a, "--max-duration")) {
            max_dur = cli_double(a, cli_value(argc, argv, &i), 1e-3, 1e9);
        } else if (!strcmp(a, "--no-ignore-eos")) {
            ignore_eos = false;
        } else if (!strcmp(a, "--ignore-eos")) {
            ignore_eos = true;
        } else {
            cli_die("bench serve: unknown option '%s' (see oasiskv bench serve --help)", a);
        }
    }
    if (conc <= 0 || conc > n)
        conc = n;
    if (!base_given && (host || port)) {   /* vLLM's --host / --port */
        snprintf(base_buf, sizeof base_buf, "http://%s:%d", host ? host : "127.0.0.1", port ? port : 8000);
        base = base_buf;
    }
    /* --percentile-metrics and --metric-percentiles */
    static const char *const metric_names[4] = {"ttft", "tpot", "itl", "e2el"};
    bool want_pct[4] = {false};
    {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", pct_metrics);
        for (char *sv = NULL, *t = strtok_r(tmp, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            int k = 0;
            while (k < 4 && strcmp(t, metric_names[k]) != 0)
                k++;
            if (k == 4)
                cli_die("--percentile-metrics: '%s' is not one of ttft, tpot, itl, e2el", t);
            want_pct[k] = true;
        }
    }
    double pcts[MAX_PCTS];
    int n_pcts = 0;
    {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", pct_list);
        for (char *sv = NULL, *t = strtok_r(tmp, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            if (n_pcts == MAX_PCTS)
                cli_die("--metric-percentiles: at most %d", MAX_PCTS);
            pcts[n_pcts++] = cli_double("--metric-percentiles", t, 0, 100);
        }
        if (n_pcts == 0)
            cli_die("--metric-percentiles: give at least one, e.g. 99");
    }
    okv_tokenizer *btok = tok_path ? cli_load_tokenizer(tok_path) : NULL;
    if (prefix_rep && dataset)
        cli_die("--dataset-name prefix_repetition makes its own prompts: leave out --dataset");
    if (prefix_rep && px_len + px_suffix == 0)
        cli_die("--dataset-name prefix_repetition: prefix and suffix lengths are both 0");
    const char *api_key = getenv("OPENAI_API_KEY");
    if (api_key && !*api_key)
        api_key = NULL;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    char url[1024], murl[1024], models_url[1024];
    snprintf(url, sizeof url, "%.*s%s", (int)bl, base, endpoint);
    snprintf(murl, sizeof murl, "%.*s/metrics", (int)bl, base);
    snprintf(models_url, sizeof models_url, "%.*s/v1/models", (int)bl, base);
    char *model_owned = NULL;
    if (!model) {
        char *js = http_get(models_url, api_key);
        cJSON *o = js ? cJSON_Parse(js) : NULL;
        const cJSON *d = o ? cJSON_GetObjectItem(o, "data") : NULL;
        const cJSON *id = cJSON_IsArray(d) && cJSON_GetArraySize(d) > 0 ? cJSON_GetObjectItem(cJSON_GetArrayItem(d, 0), "id") : NULL;
        if (!cJSON_IsString(id))
            cli_die("cannot read the model name from %s (is the server up? give --model)", models_url);
        model = model_owned = strdup(id->valuestring);
        cJSON_Delete(o);
        free(js);
    }

    struct bench b = {.url = url, .model = model, .api_key = api_key, .chat = strstr(endpoint, "chat") != NULL,
                      .ignore_eos = ignore_eos, .n = n, .out_len = out_len, .deadline = INFINITY};
    pthread_mutex_init(&b.print_mu, NULL);
    b.prompts = calloc((size_t)n, sizeof *b.prompts);
    b.arrival = calloc((size_t)n, sizeof *b.arrival);
    b.res = calloc((size_t)n, sizeof *b.res);
    if (!b.prompts || !b.arrival || !b.res)
        cli_die("out of memory");
    struct okv_rng rng;
    okv_rng_seed(&rng, seed);
    char **ds = NULL;
    int n_ds = dataset ? load_dataset(dataset, &ds) : 0;
    if (prefix_rep) {
        /* as vLLM's prefix_repetition: num-prompts / K suffixes for each of K prefixes, shuffled */
        char **px = calloc((size_t)px_num, sizeof *px);
        if (!px)
            cli_die("out of memory");
        for (int k = 0; k < px_num; k++)
            px[k] = random_prompt(&rng, px_len);
        for (int i = 0; i < n; i++) {
            char *sfx = random_prompt(&rng, px_suffix);
            const size_t len = strlen(px[i % px_num]) + strlen(sfx) + 2;
            b.prompts[i] = malloc(len);
            if (!b.prompts[i])
                cli_die("out of memory");
            snprintf(b.prompts[i], len, "%s%s%s", px[i % px_num], *px[i % px_num] && *sfx ? " " : "", sfx);
            free(sfx);
        }
        for (int i = n - 1; i > 0; i--) {
            const int j = (int)(okv_rng_next(&rng) % (uint64_t)(i + 1));
            char *t = b.prompts[i];
            b.prompts[i] = b.prompts[j];
            b.prompts[j] = t;
        }
        for (int k = 0; k < px_num; k++)
            free(px[k]);
        free(px);
    } else {
        for (int i = 0; i < n; i++) {
            int len = in_len;
            if (range_ratio > 0) {   /* vLLM: uniform in [L(1-R), L(1+R)] */
                const int lo = (int)(in_len * (1 - range_ratio)), hi = (int)(in_len * (1 + range_ratio));
                len = lo + (int)(okv_rng_next(&rng) % (uint64_t)(hi - lo + 1));
                len = len < 1 ? 1 : len;
            }
            b.prompts[i] = ds ? strdup(ds[i % n_ds]) : btok ? random_token_prompt(&rng, btok, len) : random_prompt(&rng, len);
            if (!b.prompts[i])
                cli_die("out of memory");
        }
    }
    if (range_ratio > 0) {
        if (!(b.out_lens = calloc((size_t)n, sizeof *b.out_lens)))
            cli_die("out of memory");
        const int lo = (int)(out_len * (1 - range_ratio)), hi = (int)(out_len * (1 + range_ratio));
        for (int i = 0; i < n; i++) {
            b.out_lens[i] = lo + (int)(okv_rng_next(&rng) % (uint64_t)(hi - lo + 1));
            b.out_lens[i] = b.out_lens[i] < 1 ? 1 : b.out_lens[i];
        }
    }
    okv_tokenizer_free(btok);
    double t = 0;
    for (int i = 0; i < n; i++) {
        b.arrival[i] = isinf(rate) ? 0 : t;
        if (!isinf(rate))
            t += -log(1.0 - okv_rng_uniform(&rng)) / rate;
    }

    char *m0 = http_get(murl, api_key);
    fprintf(stderr, "bench serve: %d requests to %s (model %s), max concurrency %d, request rate %s\n", n, url, model,
            conc, isinf(rate) ? "inf" : "finite");
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    b.t0 = okv_now();
    if (isfinite(max_dur))
        b.deadline = b.t0 + max_dur;
    for (int i = 0; i < conc; i++)
        if (pthread_create(&th[i], NULL, bench_worker, &b) != 0)
            cli_die("cannot start a client thread");
    for (int i = 0; i < conc; i++)
        pthread_join(th[i], NULL);
    double dur = okv_now() - b.t0;
    char *m1 = http_get(murl, api_key);

    int ok = 0, failed = 0, n_itl = 0, n_cut = 0, n_unsent = 0;
    long in_tok = 0, out_tok = 0, cut_tok = 0;
    for (int i = 0; i < n; i++)
        if (b.res[i].ok) {
            ok++;
            in_tok += b.res[i].prompt_tokens;
            out_tok += b.res[i].output_tokens;
            n_itl += b.res[i].n_itl;
        } else if (b.res[i].cut) {
            /* the usage streamed with each chunk; a server without it: one token a text chunk */
            n_cut++;
            cut_tok += b.res[i].output_tokens > 0 ? b.res[i].output_tokens : b.res[i].n_chunks;
        } else if (b.res[i].not_sent) {
            n_unsent++;
        } else {
            failed++;
        }
    double *ttft = calloc((size_t)n + 1, sizeof *ttft), *tpot = calloc((size_t)n + 1, sizeof *tpot);
    double *itl = calloc((size_t)n_itl + 1, sizeof *itl);
    int nt = 0, np = 0, ni = 0;
    for (int i = 0; i < n; i++) {
        struct bres *r = &b.res[i];
        if (!r->ok)
            continue;
        ttft[nt++] = r->ttft;
        if (r->output_tokens > 1)
            tpot[np++] = (r->latency - r->ttft) / (r->output_tokens - 1);
        for (int k = 0; k < r->n_itl; k++)
            itl[ni++] = r->itl[k];
    }
    double *e2el = calloc((size_t)n + 1, sizeof *e2el);
    int ne = 0;
    for (int i = 0; i < n; i++)
        if (b.res[i].ok)
            e2el[ne++] = b.res[i].latency;
    /* ttft, tpot, itl, e2el; p99 always computed (our JSON's p99 fields), the chosen ones printed */
    double qs[MAX_PCTS + 1];
    memcpy(qs, pcts, sizeof(double) * (size_t)n_pcts);
    qs[n_pcts] = 99;
    struct stats st[4] = {stats_of(ttft, nt, qs, n_pcts + 1), stats_of(tpot, np, qs, n_pcts + 1),
                          stats_of(itl, ni, qs, n_pcts + 1), stats_of(e2el, ne, qs, n_pcts + 1)};
    static const char *const metric_head[4] = {"Time to First Token", "Time per Output Token (excl. 1st token)",
                                               "Inter-token Latency", "End-to-end Latency"};
    static const char *const metric_up[4] = {"TTFT", "TPOT", "ITL", "E2EL"};
    int shown = 0;
    for (int i = 0; i < n && shown < 3; i++)
        if (!b.res[i].ok && !b.res[i].cut && !b.res[i].not_sent) {
            fprintf(stderr, "bench serve: request %d failed: %s\n", i, b.res[i].err);
            shown++;
        }

    printf("============ Serving Benchmark Result ============\n");
    printf("%-40s %-10d\n", "Successful requests:", ok);
    printf("%-40s %-10d\n", "Failed requests:", failed);
    if (isfinite(max_dur)) {
        printf("%-40s %-10d\n", "Requests cut at --max-duration:", n_cut);
        printf("%-40s %-10d\n", "Requests not sent by --max-duration:", n_unsent);
    }
    printf("%-40s %-10d\n", "Maximum request concurrency:", conc);
    if (!isinf(rate))
        printf("%-40s %-10.2f\n", "Request rate configured (RPS):", rate);
    printf("%-40s %-10.2f\n", "Benchmark duration (s):", dur);
    printf("%-40s %-10ld\n", "Total input tokens:", in_tok);
    printf("%-40s %-10ld\n", "Total generated tokens:", out_tok);
    printf("%-40s %-10.2f\n", "Request throughput (req/s):", ok / dur);
    printf("%-40s %-10.2f\n", "Output token throughput (tok/s):", out_tok / dur);
    if (isfinite(max_dur)) {
        printf("%-40s %-10ld\n", "Tokens generated for cut requests:", cut_tok);
        printf("%-40s %-10.2f\n", "Output tok/s incl. cut requests:", (out_tok + cut_tok) / dur);
    }
    printf("%-40s %-10.2f\n", "Total Token throughput (tok/s):", (in_tok + out_tok) / dur);
    for (int k = 0; k < 4; k++) {
        if (!want_pct[k])
            continue;
        /* the header centred in 50 columns of '-' (Python's "{:-^50}") */
        const int hl = (int)strlen(metric_head[k]), left = (50 - hl) / 2, right = 50 - hl - left;
        printf("%.*s%s%.*s\n", left, "--------------------------------------------------", metric_head[k], right,
               "--------------------------------------------------");
        char lab[64], q[16];
        snprintf(lab, sizeof lab, "Mean %s (ms):", metric_up[k]);
        printf("%-40s %-10.2f\n", lab, st[k].mean * 1e3);
        snprintf(lab, sizeof lab, "Median %s (ms):", metric_up[k]);
        printf("%-40s %-10.2f\n", lab, st[k].median * 1e3);
        for (int j = 0; j < n_pcts; j++) {
            pct_name(pcts[j], q, sizeof q);
            snprintf(lab, sizeof lab, "P%s %s (ms):", q, metric_up[k]);
            printf("%-40s %-10.2f\n", lab, st[k].p[j] * 1e3);
        }
    }
    double drafts = 0, draft_toks = 0, accepted = 0;
    if (m0 && m1) {
        drafts = prom_value(m1, "vllm:spec_decode_num_drafts_total") - prom_value(m0, "vllm:spec_decode_num_drafts_total");
        draft_toks = prom_value(m1, "vllm:spec_decode_num_draft_tokens_total") -
                     prom_value(m0, "vllm:spec_decode_num_draft_tokens_total");
        accepted = prom_value(m1, "vllm:spec_decode_num_accepted_tokens_total") -
                   prom_value(m0, "vllm:spec_decode_num_accepted_tokens_total");
    }
    double pc_q = 0, pc_h = 0;
    if (m0 && m1) {
        pc_q = prom_value(m1, "vllm:prefix_cache_queries_total") - prom_value(m0, "vllm:prefix_cache_queries_total");
        pc_h = prom_value(m1, "vllm:prefix_cache_hits_total") - prom_value(m0, "vllm:prefix_cache_hits_total");
    }
    if (pc_q > 0) {
        printf("%s\n", "------------------Prefix Caching------------------");
        printf("%-40s %-10.2f\n", "Prefix cache hit rate (%):", pc_h / pc_q * 100);
    }
    if (drafts > 0) {
        printf("%s\n", "---------------Speculative Decoding---------------");
        printf("%-40s %-10.2f\n", "Acceptance rate (%):", draft_toks > 0 ? accepted / draft_toks * 100 : 0);
        printf("%-40s %-10.2f\n", "Acceptance length:", 1 + accepted / drafts);
        printf("%-40s %-10.0f\n", "Drafts:", drafts);
        printf("%-40s %-10.0f\n", "Draft tokens:", draft_toks);
        printf("%-40s %-10.0f\n", "Accepted tokens:", accepted);
    }
    printf("==================================================\n");
    fflush(stdout);

    char result_path[1024];
    if (save_result && !json_path) {   /* vLLM's --save-result: a name of its own, in --result-dir */
        char when[32];
        const time_t now_t = time(NULL);
        struct tm tmv;
        strftime(when, sizeof when, "%Y%m%d-%H%M%S", localtime_r(&now_t, &tmv));
        char rate_s[32];
        snprintf(rate_s, sizeof rate_s, isinf(rate) ? "inf" : "%g", rate);
        snprintf(result_path, sizeof result_path, "%s%soasiskv-%sqps-concurrency%d-%s.json", result_dir ? result_dir : "",
                 result_dir ? "/" : "", rate_s, conc, when);
        json_path = result_path;
    } else if (json_path && result_dir && json_path[0] != '/') {
        snprintf(result_path, sizeof result_path, "%s/%s", result_dir, json_path);
        json_path = result_path;
    }
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (!f)
            cli_die("--json: cannot write %s", json_path);
        fprintf(f, "{\"model_id\": ");
        cli_json_str(f, model, strlen(model));
        fprintf(f, ", \"num_prompts\": %d, \"max_concurrency\": %d, \"request_rate\": %s, \"duration\": %.6f, "
                   "\"completed\": %d, \"failed\": %d, \"total_input_tokens\": %ld, \"total_output_tokens\": %ld, "
                   "\"request_throughput\": %.6f, \"output_throughput\": %.6f, \"total_token_throughput\": %.6f, "
                   "\"mean_ttft_ms\": %.4f, \"median_ttft_ms\": %.4f, \"p99_ttft_ms\": %.4f, "
                   "\"mean_tpot_ms\": %.4f, \"median_tpot_ms\": %.4f, \"p99_tpot_ms\": %.4f, "
                   "\"mean_itl_ms\": %.4f, \"median_itl_ms\": %.4f, \"p99_itl_ms\": %.4f",
                n, conc, isinf(rate) ? "\"inf\"" : "null", dur, ok, failed, in_tok, out_tok, ok / dur, out_tok / dur,
                (in_tok + out_tok) / dur, st[0].mean * 1e3, st[0].median * 1e3, st[0].p[n_pcts] * 1e3,
                st[1].mean * 1e3, st[1].median * 1e3, st[1].p[n_pcts] * 1e3, st[2].mean * 1e3, st[2].median * 1e3,
                st[2].p[n_pcts] * 1e3);
        for (int k = 0; k < 4; k++) {   /* vLLM's keys for the chosen metrics: std and every percentile */
            if (!want_pct[k])
                continue;
            if (k == 3)
                fprintf(f, ", \"mean_e2el_ms\": %.4f, \"median_e2el_ms\": %.4f", st[k].mean * 1e3, st[k].median * 1e3);
            fprintf(f, ", \"std_%s_ms\": %.4f", metric_names[k], st[k].std * 1e3);
            for (int j = 0; j < n_pcts; j++) {
                char q[16];
                pct_name(pcts[j], q, sizeof q);
                if (strcmp(q, "99") != 0 || k == 3)
                    fprintf(f, ", \"p%s_%s_ms\": %.4f", q, metric_names[k], st[k].p[j] * 1e3);
            }
        }
        if (!isinf(rate))
            fprintf(f, ", \"request_rate_value\": %.6f", rate);
        if (isfinite(max_dur))
            fprintf(f, ", \"max_duration\": %.3f, \"cut_requests\": %d, \"not_sent_requests\": %d, "
                       "\"cut_output_tokens\": %ld, \"output_throughput_with_cut\": %.6f",
                    max_dur, n_cut, n_unsent, cut_tok, (out_tok + cut_tok) / dur);
        if (pc_q > 0)
            fprintf(f, ", \"prefix_cache_hit_rate\": %.4f", pc_h / pc_q * 100);
        if (drafts > 0)
            fprintf(f, ", \"spec_decode_acceptance_rate\": %.4f, \"spec_decode_acceptance_length\": %.4f, "
                       "\"spec_decode_num_drafts\": %.0f, \"spec_decode_draft_tokens\": %.0f, "
                       "\"spec_decode_accepted_tokens\": %.0f",
                    draft_toks > 0 ? accepted / draft_toks * 100 : 0, 1 + accepted / drafts, drafts, draft_toks, accepted);
        fprintf(f, "}\n");
        fclose(f);
    }

    for (int i = 0; i < n; i++) {
        free(b.prompts[i]);
        free(b.res[i].itl);
    }
    for (int i = 0; i < n_ds; i++)
        free(ds[i]);
    free(ds);
    free(b.prompts);
    free(b.arrival);
    free(b.res);
    free(th);
    free(ttft);
    free(tpot);
    free(itl);
    free(e2el);
    free(b.out_lens);
    free(m0);
    free(m1);
    free(model_owned);
    pthread_mutex_destroy(&b.print_mu);
    curl_global_cleanup();
    return failed ? 1 : 0;
}

/* ---------------- bench throughput ---------------- */

static const char *tput_help =
    "usage: oasiskv bench throughput [-m PATH] [options]\n"
    "\n"
    "  -m, --model PATH             model (default: the SmolLM2-135M-Instruct model in models/)\n"
    "  --load-format dummy          random weights from PATH's config.json alone (timing only)\n"
    "  --num-prompts N              requests (default 64)\n"
    "  --input-len I                prompt tokens of each (random ids; default 128)\n"
    "  --output-len O               tokens generated by each, ignoring end-of-generation (default 128)\n"
    "  --max-num-seqs N             requests running at once (default: num-prompts, at most 256)\n"
    "  --max-num-batched-tokens N   rows of one step (default 512)\n"
    "  --kv-budget N|dense          sparse KV budget (default dense)\n"
    "  --kv-pool-gb G               device KV pool (default: enough for every running request, at most 2 GiB)\n"
    "  --threads N                  CPU threads (default: all cores)\n"
    "  --device NAME                cpu or cuda (default: cuda when a GPU is present)\n"
    "  --tensor-parallel-size N     shard the model over N GPUs (tensor parallelism; default 1)\n"
    "  --async-scheduling, --no-async-scheduling\n"
    "                               overlap decode steps (the default) or run each to its end before the next\n"
    "  --seed S                     random seed (default 0)\n";

struct tput_ctx {
    int finished, failed;
};

static void tput_finish(void *user, const struct okv_sched_result *r)
{
    struct tput_ctx *c = user;
    c->finished++;
    if (r->reason == OKV_FINISH_ERROR || r->reason == OKV_FINISH_ABORT)
        c->failed++;
}

static int bench_throughput(int argc, char **argv)
{
    const char *model_path = NULL, *device = NULL;
    int tp = 1;
    int n = 64, in_len = 128, out_len = 128, max_seqs = 0, max_batched = 512, threads = 0, kv_budget = 0;
    double pool_gb = 0;
    uint64_t seed = 0;
    bool sync_steps = false;
    bool dummy = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(tput_help, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--load-format")) {
            dummy = cli_load_format_arg(cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--num-prompts")) {
            n = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 20);
        } else if (!strcmp(a, "--input-len")) {
            in_len = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 22);
        } else if (!strcmp(a, "--output-len")) {
            out_len = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 22);
        } else if (!strcmp(a, "--max-num-seqs")) {
            max_seqs = cli_int(a, cli_value(argc, argv, &i), 1, 4096);
        } else if (!strcmp(a, "--max-num-batched-tokens")) {
            max_batched = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 16);
        } else if (!strcmp(a, "--kv-budget")) {
            const char *v = cli_value(argc, argv, &i);
            kv_budget = !strcmp(v, "dense") ? 0 : cli_int(a, v, 1, 1 << 24);
        } else if (!strcmp(a, "--kv-pool-gb")) {
            pool_gb = cli_double(a, cli_value(argc, argv, &i), 0.001, 4096);
        } else if (!strcmp(a, "--threads")) {
            threads = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--tensor-parallel-size") || !strcmp(a, "-tp")) {
            tp = cli_int(a, cli_value(argc, argv, &i), 1, 16);
        } else if (!strcmp(a, "--device")) {
            device = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--seed")) {
            seed = cli_u64(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--no-async-scheduling")) {
            sync_steps = true;
        } else if (!strcmp(a, "--async-scheduling")) {
            sync_steps = false;
        } else {
            cli_die("bench throughput: unknown option '%s' (see oasiskv bench throughput --help)", a);
        }
    }
    if (max_seqs <= 0)
        max_seqs = n < 256 ? n : 256;
    if (!model_path)
        model_path = cli_default_model();
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load_format(model_path, dummy, &m, &tok);
    const struct okv_model_config *cfg = &m->cfg;
    const int block = 16;
    int max_ctx = cfg->max_ctx > 0 ? cfg->max_ctx : 4096;
    if (in_len + out_len > max_ctx)
        cli_die("--input-len %d + --output-len %d exceed the context length %d", in_len, out_len, max_ctx);
    /* per device: with tensor parallelism a device holds some of the KV heads */
    int dev_heads = cfg->n_kv_heads >= tp ? cfg->n_kv_heads / tp : 1;
    size_t slot_bytes = (size_t)cfg->n_layers * (size_t)dev_heads * 2 * (size_t)block * (size_t)cfg->head_dim * sizeof(float);
    int per_req = (in_len + out_len + block - 1) / block;
    long slots = pool_gb > 0 ? (long)(pool_gb * (double)(1ull << 30) / (double)slot_bytes) : (long)max_seqs * per_req;
    long cap = (long)(((size_t)2 << 30) / slot_bytes);
    if (pool_gb <= 0 && slots > cap)
        slots = cap;
    if (slots < per_req)
        cli_die("the KV pool (%ld blocks) cannot hold one request (%d blocks): raise --kv-pool-gb", slots, per_req);

    enum okv_status st;
    okv_backend *be = cli_backend(device, threads, tp, cfg);
    struct okv_engine_params ep = {.block_size = block, .kv_slots = (int)slots, .max_seqs = max_seqs,
                                   .max_ctx = max_ctx, .max_batch_tokens = max_batched, .kv_budget = kv_budget};
    okv_engine *e = NULL;
    if ((st = okv_engine_create(m, be, &ep, &e)) != OKV_OK)
        cli_die("cannot build the engine: %s", okv_last_error());
    struct okv_sched_params sp = {.max_num_seqs = max_seqs, .max_num_batched_tokens = max_batched, .sync_steps = sync_steps};
    okv_sched *s = NULL;
    if ((st = okv_sched_create(e, tok, &sp, &s)) != OKV_OK)
        cli_die("cannot build the scheduler: %s", okv_last_error());

    struct okv_rng rng;
    okv_rng_seed(&rng, seed);
    int32_t *ids = okv_malloc(sizeof(int32_t) * (size_t)in_len, OKV_TAG_MISC);
    struct tput_ctx ctx = {0};
    double t0 = okv_now();
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < in_len; k++)
            ids[k] = (int32_t)(okv_rng_next(&rng) % (uint64_t)cfg->vocab_size);
        struct okv_sched_request rq = {.prompt = ids, .n_prompt = in_len, .max_tokens = out_len,
                                       .sampling = {.temperature = 0, .seed = seed + (uint64_t)i},
                                       .ignore_eos = true, .on_finish = tput_finish, .user = &ctx};
        uint64_t id;
        if ((st = okv_sched_submit(s, &rq, &id)) != OKV_OK)
            cli_die("request %d: %s", i, okv_last_error());
    }
    bool busy = true;
    int last = -1;
    while (busy) {
        if ((st = okv_sched_step(s, &busy)) != OKV_OK)
            cli_die("scheduler: %s", okv_last_error());
        if (ctx.finished != last) {
            last = ctx.finished;
            fprintf(stderr, "\r  %d/%d requests done", ctx.finished, n);
        }
    }
    double dur = okv_now() - t0;
    fputc('\n', stderr);
    struct okv_sched_metrics mt;
    okv_sched_metrics(s, &mt);
    if (ctx.failed)
        fprintf(stderr, "bench throughput: %d requests failed\n", ctx.failed);
    double in_tok = (double)mt.prompt_tokens_total, out_tok = (double)mt.generation_tokens_total;
    printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n", (n - ctx.failed) / dur,
           (in_tok + out_tok) / dur, out_tok / dur);
    printf("Total num prompt tokens:  %.0f\nTotal num output tokens:  %.0f\n", in_tok, out_tok);
    if (mt.num_preemptions_total)
        printf("Preemptions: %llu\n", (unsigned long long)mt.num_preemptions_total);
    okv_free(ids);
    okv_sched_free(s);
    okv_engine_free(e);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return ctx.failed ? 1 : 0;
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs("usage: oasiskv bench serve|throughput [options] (see oasiskv bench serve --help)\n",
              argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "serve"))
        return bench_serve(argc - 1, argv + 1);
    if (!strcmp(argv[1], "throughput"))
        return bench_throughput(argc - 1, argv + 1);
    cli_die("bench: unknown mode '%s' (serve or throughput)", argv[1]);
}
