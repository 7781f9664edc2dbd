/* oasiskv serve: the OpenAI-compatible HTTP server over the scheduler. */
#include "cli.h"
#include "oasiskv/spec.h"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/sched.h"
#include "oasiskv/server.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *help =
    "usage: oasiskv serve [-m PATH | PATH] [options]\n"
    "\n"
    "  -m, --model PATH             .gguf file or Hugging Face folder (default: the SmolLM2-135M-Instruct model in models/);\n"
    "                               also as the first argument, as in `vllm serve PATH`\n"
    "  --host ADDR                  address to bind (default 127.0.0.1)\n"
    "  --port N                     port (default 8000; 0: any free port, printed on stderr)\n"
    "  --served-model-name NAME     model name of the API (default: the model file's name)\n"
    "  --api-key KEY                require 'Authorization: Bearer KEY' on /v1/ endpoints\n"
    "  --max-num-seqs N             requests running at once (default 256 on one GPU; 32 on the CPU and with\n"
    "                               --tensor-parallel-size)\n"
    "  --max-num-batched-tokens N   rows of one step: prefill chunks + decode rows (default 512)\n"
    "  --kv-budget N|dense          sparse KV: tokens kept on the device per (sequence, layer, KV head); dense: all (default)\n"
    "  --enable-prefix-caching, --no-enable-prefix-caching\n"
    "                               requests that start with the same tokens share those full KV blocks instead of\n"
    "                               computing them again (default: on, except with --kv-host-dtype fp8; sparse\n"
    "                               serving shares host blocks and copies the sink and window to the device;\n"
    "                               bench/RESULTS.md section 20)\n"
    "  --kv-pool-gb G               device KV pool size in GiB (default: on a GPU, what --gpu-memory-utilization leaves;\n"
    "                               on the CPU max-num-seqs full contexts, at most 2 GiB)\n"
    "  --gpu-memory-utilization U   instead of --kv-pool-gb on a GPU, as vLLM: the share of the GPU's memory this server\n"
    "                               may use (weights, activations, KV; default 0.9); the device KV pool takes what the\n"
    "                               weights and activations (estimated) leave of it\n"
    "  --dense-while-room, --no-dense-while-room\n"
    "                               sparse mode: a request reads its whole context (dense attention, nothing fetched)\n"
    "                               while the device pool has room for it, and turns sparse when the pool runs short\n"
    "                               (the requests holding the most blocks first). Default: on; off: sparse from the\n"
    "                               start, so a request's output does not depend on the load\n"
    "  --async-scheduling, --no-async-scheduling\n"
    "                               queue each decode step before the host has the tokens of the one before (the\n"
    "                               device samples them and the next step reads them there), so that the host's\n"
    "                               work of a step overlaps the device's (default: on; off with --draft)\n"
    "  --scheduling-policy fcfs|priority\n"
    "                               priority: requests wait in the order of their \"priority\" (lower first, then\n"
    "                               arrival) and the last in that order is preempted when the KV pool runs out\n"
    "                               (vLLM's); fcfs (default): first come, first served, and a request that gives\n"
    "                               a priority other than 0 is refused\n"
    "  --max-stored-responses N     the Responses API keeps its last N responses made with \"store\" (the default),\n"
    "                               for previous_response_id and GET/DELETE /v1/responses/{id} (default 1024, at\n"
    "                               most 256 MiB of their text; 0: none kept, \"store\" is then false)\n"
    "  --draft ngram                speculative decoding with prompt-lookup drafts\n"
    "  --load-format dummy          random weights from the model folder's config.json (timing only)\n"
    "  --tokenizer PATH             tokenizer folder, tokenizer.json or .gguf (default: the model's)\n"
    "  --chat-template T            the chat template: a file of it (Jinja), or the text itself (default: the\n"
    "                               tokenizer's); ChatML, Llama 3, Llama 2 and Mistral [INST] are rendered, with\n"
    "                               tools in the Hermes and Llama 3.1 formats\n"
    "  --reasoning-parser P         deepseek_r1 | qwen3: a chat reply's <think>...</think> part comes back as\n"
    "                               \"reasoning_content\" (streamed as such deltas), the rest as the content\n"
    "  --enable-prompt-tokens-details   replies' usage says how many prompt tokens the prefix cache gave\n"
    "                               (prompt_tokens_details.cached_tokens, as vLLM's flag)\n"
    "  --default-chat-template-kwargs JSON   the template's variables for requests without chat_template_kwargs,\n"
    "                               e.g. '{\"enable_thinking\": false}' (Qwen3: answers without thinking); also\n"
    "                               date_string (Llama 3.x's \"Today Date\")\n"
    "  --spec-tokens K              drafts per step (default 4)\n"
    "  --spec-adaptive              each request drafts 0..K tokens a step: the number that maximizes its expected\n"
    "                               tokens over the step's cost (its running acceptance, the measured step and\n"
    "                               draft times); at least 1 where drafted rows choose blocks (--kv-verify-inline)\n"
    "  --kv-verify-inline           sparse with --draft: a verify step selects its blocks with its own rows'\n"
    "                               queries (fetching what the prediction missed) instead of its previous step's\n"
    "                               prediction, whose queries stand behind the drafted rows (bench/ACCURACY.md)\n"
    "  --kv-merge auto|share|rank   sparse, how several rows' selections become one: share gives half the budget to\n"
    "                               the first row's own top blocks and the rest to the rows' best scores; rank takes each\n"
    "                               row's own top blocks in turn; auto (default) ranks a step's own rows (verify steps\n"
    "                               with --kv-verify-inline) and shares drafted rows' predictions (bench/ACCURACY.md)\n"
    "  --kv-verify-defer, --no-kv-verify-defer\n"
    "                               sparse with --draft, greedy requests: a verify step whose drafted rows read the\n"
    "                               predicted set drops its own token (it came from such a row) and runs its last\n"
    "                               accepted draft again on a fresh prediction, the dropped token drafted again\n"
    "                               after it (no wait; bench/ACCURACY.md; default: on)\n"
    "  --predict MODE               sparse: which queries choose each layer's blocks: lookahead (default: the\n"
    "                               step's own token and its drafts, a step ahead; without --draft the token\n"
    "                               alone), current (the token alone, drafts or not), layer-ahead (during the step\n"
    "                               itself, each layer's queries estimated from the previous layer's input: closer\n"
    "                               to dense, one more query projection a layer and a shorter fetch lead;\n"
    "                               bench/ACCURACY.md), layer-ahead-attn (the same, estimated after the previous\n"
    "                               layer's attention: closer still, the fetch behind its MLP alone, which on a\n"
    "                               small model's GPU step does not hide it), oracle (each layer's own queries,\n"
    "                               inline: evaluation)\n"
    "  --kv-host-gb G               host KV tier (sparse mode; default: max-num-seqs full contexts)\n"
    "  --kv-host-dtype T            host KV tier storage: auto (the device tier's precision, default) or fp8\n"
    "                               (E4M3: half the host memory and half the PCIe bytes a fetch moves; the device\n"
    "                               tier keeps its precision; bench/ACCURACY.md)\n"
    "  --kv-cache-factor F          device units per selected block (default 2: the selection and as many recently\n"
    "                               selected blocks, so that one leaving and coming back is not fetched again; 1: the\n"
    "                               selection alone, more sequences in the pool; bench/RESULTS.md section 11)\n"
    "  --kv-sticky F                sticky selection: select F*k more blocks per prediction (and per\n"
    "                               layer-ahead selection) and keep, of all but\n"
    "                               the best k - F*k, those already on the device first (0 to 0.5; default 0.25;\n"
    "                               0: off; bench/RESULTS.md section 11)\n"
    "  --kv-key-codes B             per-token key codes of B bits a channel (1, 2, 4; default 0: none): blocks are\n"
    "                               scored by half their keys' max product as the codes see them and half Quest's\n"
    "                               bound (bench/ACCURACY.md)\n"
    "  --ctx N, --max-model-len N   context length to serve (default: the model's)\n"
    "  --generation-config auto|vllm|DIR  default sampling parameters (temperature, top_p, top_k, min_p,\n"
    "                               repetition_penalty, max_new_tokens as max_tokens) from generation_config.json: auto\n"
    "                               (default) the model folder's, DIR another folder's, vllm none (vLLM's flag)\n"
    "  --seed S                     requests without a seed sample with seeds derived from S in arrival order, so that\n"
    "                               a run is reproducible (default: seeds from the clock)\n"
    "  --block-size N               KV block size in tokens (default 16)\n"
    "  --threads N                  CPU threads (default: all cores)\n"
    "  --device NAME                cpu or cuda (default: cuda when a GPU is present)\n"
    "  --tensor-parallel-size N     shard the model over N GPUs (tensor parallelism; default 1)\n"
    "  -v, --verbose                log requests and scheduler events\n"
    "  --tool-call-parser hermes|llama3_json   the format of the chat template's tool calls, as vLLM names it: checked\n"
    "                               against the template's (the template decides how calls are read; a template\n"
    "                               without tools, or of the other format, is an error that says which it has)\n"
    "  --max-logprobs N             the most alternatives a request's logprobs / top_logprobs / prompt_logprobs may ask\n"
    "                               for (0-20, default 20)\n"
    "  --return-tokens-as-token-ids logprobs' tokens as \"token_id:N\" unless the request says otherwise\n"
    "  --response-role R            the role of chat replies (default assistant)\n"
    "  --enforce-eager              no CUDA graphs: every op launched when called (OKV_CUDA_GRAPHS=0)\n"
    "  --allowed-origins JSON, --allowed-methods JSON, --allowed-headers JSON, --allow-credentials\n"
    "                               CORS, as vLLM's (default: every origin, method and header, no credentials);\n"
    "                               --allowed-origins '[]' turns it off\n"
    "  --ssl-keyfile F --ssl-certfile F   serve HTTPS with this PEM key and certificate\n"
    "  vLLM launch options taken as they are: --dtype auto|bfloat16 (other precisions: a note, and the\n"
    "  backend's own: bf16 on the GPU, fp32 on the CPU), --trust-remote-code (no code is run: the\n"
    "  architecture must be one this engine has), --enable-chunked-prefill (always on),\n"
    "  --enable-auto-tool-choice (tools are always read from replies), --kv-cache-dtype auto (the device tier\n"
    "  holds the backend's precision; fp8 is refused: see --kv-host-dtype), --quantization Q (the weights' file\n"
    "  decides), --guided-decoding-backend B (this engine's own), --swap-space N (preempted requests are\n"
    "  recomputed), --max-seq-len-to-capture N, --tokenizer-mode auto|hf, --revision R, --download-dir D,\n"
    "  --pipeline-parallel-size 1, --data-parallel-size 1, --cpu-offload-gb 0, --root-path P,\n"
    "  --uvicorn-log-level L, --disable-frontend-multiprocessing, --limit-mm-per-prompt L, --enable-log-requests\n"
    "  (= -v), --disable-log-requests, --disable-log-stats, --disable-uvicorn-access-log (no effect)\n";

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    unsigned char c = (unsigned char)sig;
    ssize_t r = write(sig_pipe[1], &c, 1);
    (void)r;
}

static char *base_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    char *s = okv_malloc(n - b + 1, OKV_TAG_MISC);
    memcpy(s, path + b, n - b);
    s[n - b] = 0;
    return s;
}

/* The most sequences, up to max_seqs, whose sparse engine fits limit bytes of device pool;
 * sets ep->max_seqs and ep->host_blocks and returns the estimate, above limit when not even
 * one fits. The host tier follows the count: running sequences never hold more than max_seqs
 * full contexts of host blocks (preemption recomputes), and every host block costs its
 * summaries on the device, so host blocks past that would only take device memory from
 * sequences. host_cap: the blocks the host may take (half the RAM when sized automatically,
 * --kv-host-gb's when given). */
static size_t fit_pool(struct okv_engine_params *ep, const struct okv_model_config *dev_cfg, size_t unit_bytes,
                       size_t limit, int max_seqs, int ctx_blocks, double host_cap)
{
    for (ep->max_seqs = max_seqs;; ep->max_seqs--) {
        const double want = (double)ep->max_seqs * ctx_blocks;
        ep->host_blocks = (int)(want < host_cap ? want : host_cap);
        const size_t need = okv_engine_estimate_device_bytes(dev_cfg, unit_bytes, ep);
        if (need <= limit || ep->max_seqs == 1)
            return need;
    }
}

/* --gpu-memory-utilization U: the device KV pool in GiB, as vLLM sizes its cache: U of the
 * device's memory, less what is used already (other processes, this context), the weights
 * and an estimate of the activations and workspaces (the engine's step buffers in fp32, a
 * row of logits per batched token, and 1.5 GiB for cuBLAS, staging rings and graphs). */
static double pool_from_util(okv_backend *be, const struct okv_model *m, const struct okv_model_config *c, double util,
                             int max_batched, int tp, bool by_default)
{
    if (!be->ops->device_mem)
        cli_die("--gpu-memory-utilization: the %s backend has no device memory of its own to share out%s; size the KV "
                "pool with --kv-pool-gb", be->ops->name, tp > 1 ? " (with --tensor-parallel-size, not yet)" : "");
    size_t free_b = 0, total_b = 0;
    if (be->ops->device_mem(be, &free_b, &total_b) != OKV_OK)
        cli_die("--gpu-memory-utilization: %s", okv_last_error());
    const double gib = (double)(1ull << 30), T = max_batched;
    const double qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
    const double act = 4.0 * T * (5.0 * c->dim + 2.0 * qd + 2.0 * kvd + 2.0 * c->ffn_dim + c->vocab_size) + 1.5 * gib;
    /* the device holds the weights in bf16; with tensor parallelism about 1/tp of them */
    const double weights = 2.0 * (double)okv_model_n_params(m) / (tp > 1 ? tp : 1);
    const double used = (double)(total_b - free_b);
    const double pool = util * (double)total_b - used - weights - act;
    fprintf(stderr, "oasiskv serve: --gpu-memory-utilization %g of %.1f GiB: %.1f GiB in use, weights %.1f GiB, "
                    "activations and workspaces ~%.1f GiB: device KV pool %.2f GiB\n",
            util, total_b / gib, used / gib, weights / gib, act / gib, pool > 0 ? pool / gib : 0.0);
    if (pool < 0.05 * gib)
        cli_die("--gpu-memory-utilization %g%s leaves no room for the KV cache (%.1f GiB of %.1f in use, weights %.1f GiB, "
                "activations ~%.1f GiB): raise it, or give --kv-pool-gb",
                util, by_default ? " (the default on a GPU)" : "", used / gib, total_b / gib, weights / gib, act / gib);
    return pool / gib;
}

int cmd_serve(int argc, char **argv)
{
    const char *model_path = NULL, *host = "127.0.0.1", *name = NULL, *api_key = NULL, *device = NULL;
    int tp = 1;
    const char *draft = NULL, *tok_path = NULL, *chat_tpl = NULL, *chat_kwargs = NULL;
    enum okv_reasoning reasoning = OKV_REASONING_NONE;
    bool prompt_details = false;
    bool dummy = false;
    int port = 8000, max_seqs = 32, max_batched = 512, threads = 0, ctx = 0, block = 16, kv_budget = 0, spec_k = 4;
    bool spec_adaptive = false;
    double pool_gb = 0, host_gb = 0, cache_factor = 2, gpu_util = 0;
    uint64_t seed = 0;
    bool has_seed = false;
    const char *gen_config = "auto";   /* vLLM's --generation-config: auto (the model folder's), vllm (none), or a folder */
    bool cache_factor_set = false, max_seqs_set = false;
    double sticky = 0.25;
    int key_code_bits = 0;
    bool after_attn = false;   /* --predict layer-ahead-attn */
    enum okv_merge merge = OKV_MERGE_AUTO;   /* --kv-merge */
    bool verify_inline = false, verify_defer = true;   /* deferring by default: speculation keeps the accuracy */
    enum okv_predict predict = OKV_PREDICT_LOOKAHEAD;
    bool host_fp8 = false;
    bool async_sched = true, prio_policy = false;
    int max_stored = 0;   /* --max-stored-responses: 0 the default, -1 none */
    const char *tool_parser = NULL, *response_role = NULL, *ssl_key = NULL, *ssl_cert = NULL;
    const char *cors_origins = NULL, *cors_methods = NULL, *cors_headers = NULL;
    bool tokens_as_ids = false, cors_credentials = false;
    int max_logprobs = 20;
    bool dense_while_room = true;
    int prefix_caching = -1;   /* -1: the default (on, except over an fp8 host tier) */
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--host")) {
            host = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--port")) {
            port = cli_int(a, cli_value(argc, argv, &i), 0, 65535);
        } else if (!strcmp(a, "--served-model-name")) {
            name = cli_value(argc, argv, &i);
            if (!*name)
                cli_die("--served-model-name: empty name");
        } else if (!strcmp(a, "--api-key")) {
            api_key = cli_value(argc, argv, &i);
            if (!*api_key)
                cli_die("--api-key: empty key");
        } else if (!strcmp(a, "--max-num-seqs")) {
            max_seqs = cli_int(a, cli_value(argc, argv, &i), 1, 4096);
            max_seqs_set = true;
        } else if (!strcmp(a, "--max-num-batched-tokens")) {
            max_batched = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 16);
        } else if (!strcmp(a, "--kv-budget")) {
            const char *v = cli_value(argc, argv, &i);
            kv_budget = !strcmp(v, "dense") ? 0 : cli_int(a, v, 1, 1 << 24);
        } else if (!strcmp(a, "--kv-pool-gb")) {
            pool_gb = cli_double(a, cli_value(argc, argv, &i), 0.001, 4096);
        } else if (!strcmp(a, "--enable-prefix-caching")) {
            prefix_caching = 1;
        } else if (!strcmp(a, "--no-enable-prefix-caching")) {
            prefix_caching = 0;
        } else if (!strcmp(a, "--dense-while-room")) {
            dense_while_room = true;
        } else if (!strcmp(a, "--no-dense-while-room")) {
            dense_while_room = false;
        } else if (!strcmp(a, "--async-scheduling")) {
            async_sched = true;
        } else if (!strcmp(a, "--no-async-scheduling")) {
            async_sched = false;
        } else if (!strcmp(a, "--scheduling-policy")) {
            const char *v = cli_value(argc, argv, &i);
            if (strcmp(v, "fcfs") && strcmp(v, "priority"))
                cli_die("--scheduling-policy: '%s' is not fcfs or priority", v);
            prio_policy = !strcmp(v, "priority");
        } else if (!strcmp(a, "--max-stored-responses")) {
            const char *v = cli_value(argc, argv, &i);
            char *end;
            const long n = strtol(v, &end, 10);
            if (!*v || *end || n < 0 || n > 1000000)
                cli_die("--max-stored-responses: '%s' is not a number from 0 to 1000000", v);
            max_stored = n ? (int)n : -1;
        } else if (!strcmp(a, "--draft")) {
            draft = cli_value(argc, argv, &i);
            if (strcmp(draft, "ngram"))
                cli_die("--draft %s: the server supports the ngram drafter (self and model: drafters keep per-sequence "
                        "engines; use them with oasiskv generate)", draft);
        } else if (!strcmp(a, "--load-format")) {
            dummy = cli_load_format_arg(cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--tokenizer")) {
            tok_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--chat-template")) {
            chat_tpl = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--default-chat-template-kwargs")) {
            chat_kwargs = cli_value(argc, argv, &i);
            struct okv_chat_opts o = {.enable_thinking = -1};
            if (okv_chat_template_kwargs(chat_kwargs, strlen(chat_kwargs), &o) != OKV_OK)
                cli_die("--default-chat-template-kwargs: %s", okv_last_error());
        } else if (!strcmp(a, "--enable-prompt-tokens-details")) {
            prompt_details = true;
        } else if (!strcmp(a, "--reasoning-parser")) {
            const char *v = cli_value(argc, argv, &i);
            if (!strcmp(v, "deepseek_r1"))
                reasoning = OKV_REASONING_DEEPSEEK_R1;
            else if (!strcmp(v, "qwen3"))
                reasoning = OKV_REASONING_QWEN3;
            else
                cli_die("--reasoning-parser %s: not one of deepseek_r1, qwen3", v);
        } else if (!strcmp(a, "--predict")) {
            predict = cli_predict(cli_value(argc, argv, &i), NULL, &after_attn);
        } else if (!strcmp(a, "--kv-verify-inline")) {
            verify_inline = true;
        } else if (!strcmp(a, "--kv-merge")) {
            merge = cli_merge(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-verify-defer") || !strcmp(a, "--no-kv-verify-defer")) {
            verify_defer = a[2] == 'k';
        } else if (!strcmp(a, "--spec-tokens")) {
            spec_k = cli_int(a, cli_value(argc, argv, &i), 1, 32);
        } else if (!strcmp(a, "--spec-adaptive")) {
            spec_adaptive = true;
        } else if (!strcmp(a, "--kv-cache-factor")) {
            cache_factor = cli_double(a, cli_value(argc, argv, &i), 1, 64);
            cache_factor_set = true;
        } else if (!strcmp(a, "--kv-host-dtype")) {
            host_fp8 = cli_host_fp8(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-key-codes")) {
            key_code_bits = cli_int(a, cli_value(argc, argv, &i), 0, 4);
        } else if (!strcmp(a, "--kv-sticky")) {
            sticky = cli_double(a, cli_value(argc, argv, &i), 0, 0.5);
        } else if (!strcmp(a, "--kv-host-gb")) {
            host_gb = cli_double(a, cli_value(argc, argv, &i), 0.001, 1 << 20);
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "--max-model-len")) {
            ctx = cli_int(a, cli_value(argc, argv, &i), 16, 1 << 22);
        } else if (!strcmp(a, "--block-size")) {
            block = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--threads")) {
            threads = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--tensor-parallel-size") || !strcmp(a, "-tp")) {
            tp = cli_int(a, cli_value(argc, argv, &i), 1, 16);
        } else if (!strcmp(a, "--device")) {
            device = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else if (!strcmp(a, "--dtype")) {
            const char *v = cli_value(argc, argv, &i);
            if (strcmp(v, "auto") != 0 && strcmp(v, "bfloat16") != 0 && strcmp(v, "bf16") != 0) {
                if (strcmp(v, "float16") != 0 && strcmp(v, "half") != 0 && strcmp(v, "float32") != 0 &&
                    strcmp(v, "float") != 0)
                    cli_die("--dtype '%s': expected auto, bfloat16, float16, half, float32 or float", v);
                fprintf(stderr, "oasiskv serve: note: --dtype %s: this engine computes in bfloat16 on the GPU and float32 "
                                "on the CPU, whatever the checkpoint's precision; going on with that\n", v);
            }
        } else if (!strcmp(a, "--trust-remote-code") || !strcmp(a, "--enable-chunked-prefill") ||
                   !strcmp(a, "--disable-log-requests") || !strcmp(a, "--disable-log-stats") ||
                   !strcmp(a, "--disable-uvicorn-access-log") || !strcmp(a, "--enable-auto-tool-choice") ||
                   !strcmp(a, "--disable-frontend-multiprocessing")) {
            /* vLLM's, nothing to do here (see --help) */
        } else if (!strcmp(a, "--enable-log-requests")) {
            verbose = true;
        } else if (!strcmp(a, "--swap-space") || !strcmp(a, "--max-seq-len-to-capture") || !strcmp(a, "--revision") ||
                   !strcmp(a, "--download-dir") || !strcmp(a, "--root-path") || !strcmp(a, "--uvicorn-log-level") ||
                   !strcmp(a, "--limit-mm-per-prompt") || !strcmp(a, "--guided-decoding-backend") ||
                   !strcmp(a, "--quantization") || !strcmp(a, "-q")) {
            (void)cli_value(argc, argv, &i);   /* vLLM's, with a value and nothing to do here (see --help) */
        } else if (!strcmp(a, "--tokenizer-mode")) {
            const char *v = cli_value(argc, argv, &i);
            if (strcmp(v, "auto") && strcmp(v, "hf") && strcmp(v, "slow"))
                cli_die("--tokenizer-mode %s: this server reads tokenizer.json or a GGUF's vocabulary (auto, hf)", v);
        } else if (!strcmp(a, "--pipeline-parallel-size") || !strcmp(a, "-pp") || !strcmp(a, "--data-parallel-size") ||
                   !strcmp(a, "-dp")) {
            if (cli_int(a, cli_value(argc, argv, &i), 1, 1024) != 1)
                cli_die("%s: only 1 (one process; --tensor-parallel-size N shards over N GPUs)", a);
        } else if (!strcmp(a, "--cpu-offload-gb")) {
            if (cli_double(a, cli_value(argc, argv, &i), 0, 1 << 20) != 0)
                cli_die("--cpu-offload-gb: the weights stay on the device; what this engine keeps in host memory is the KV "
                        "cache (--kv-budget N with --kv-host-gb)");
        } else if (!strcmp(a, "--kv-cache-dtype")) {
            const char *v = cli_value(argc, argv, &i);
            if (strcmp(v, "auto"))
                cli_die("--kv-cache-dtype %s: the device KV tier holds the backend's precision (auto); the host tier of "
                        "sparse mode can hold FP8 E4M3 (--kv-host-dtype fp8)", v);
        } else if (!strcmp(a, "--enforce-eager")) {
            setenv("OKV_CUDA_GRAPHS", "0", 1);   /* read when the CUDA backend starts */
        } else if (!strcmp(a, "--tool-call-parser")) {
            tool_parser = cli_value(argc, argv, &i);
            if (strcmp(tool_parser, "hermes") && strcmp(tool_parser, "llama3_json"))
                cli_die("--tool-call-parser %s: this server reads hermes (<tool_call> blocks: Qwen2.5, Qwen3, Hermes) and "
                        "llama3_json (Llama 3.1-3.3) calls", tool_parser);
        } else if (!strcmp(a, "--max-logprobs")) {
            max_logprobs = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 20);
            if (max_logprobs > 20)
                cli_die("--max-logprobs %d: at most 20 alternatives a token are computed", max_logprobs);
        } else if (!strcmp(a, "--return-tokens-as-token-ids")) {
            tokens_as_ids = true;
        } else if (!strcmp(a, "--response-role")) {
            response_role = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--allowed-origins")) {
            cors_origins = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--allowed-methods")) {
            cors_methods = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--allowed-headers")) {
            cors_headers = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--allow-credentials")) {
            cors_credentials = true;
        } else if (!strcmp(a, "--ssl-keyfile")) {
            ssl_key = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--ssl-certfile")) {
            ssl_cert = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--seed")) {
            seed = cli_u64(a, cli_value(argc, argv, &i));
            has_seed = true;
        } else if (!strcmp(a, "--generation-config")) {
            gen_config = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--gpu-memory-utilization")) {
            gpu_util = cli_double(a, cli_value(argc, argv, &i), 0.01, 1.0);
        } else if (a[0] != '-' && i == 1 && !model_path) {
            model_path = a;   /* `oasiskv serve PATH`, as `vllm serve PATH` */
        } else {
            cli_die("serve: unknown option '%s' (see oasiskv serve --help)", a);
        }
    }
    if (!model_path)
        model_path = cli_default_model();
    if (verbose && !getenv("OKV_LOG_LEVEL"))   /* the variable, when set, chose the level already */
        okv_log_set(NULL, NULL, OKV_LOG_LEVEL_INFO);

    /* SIGINT/SIGTERM: the handler writes the signal to a pipe that the main
     * thread waits on. The threads started below (BLAS, engine, HTTP) inherit a
     * mask that blocks both, so that the main thread is the one to take them (a
     * thread stuck in a futex would defer a handler under TSan); threads started
     * before main, like sanitizers', still reach the handler. */
    if (pipe(sig_pipe) != 0)
        cli_die("serve: cannot create a pipe");
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!device)
        device = okv_backend_default_name();
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load_format(model_path, dummy, &m, &tok);
    if (tok_path) {
        okv_tokenizer_free(tok);
        tok = cli_load_tokenizer(tok_path);
        if (okv_tokenizer_n_vocab(tok) > m->cfg.vocab_size)
            cli_die("--tokenizer %s: %d tokens do not fit the model's vocabulary of %d", tok_path, okv_tokenizer_n_vocab(tok),
                    m->cfg.vocab_size);
        if (dummy && okv_tokenizer_n_vocab(tok) < m->cfg.vocab_size)
            fprintf(stderr,
                    "oasiskv serve: warning: --tokenizer %s has %d tokens, the model %d: random weights will also pick ids "
                    "that decode to no text (benchmark clients count such requests as failed); use a tokenizer of the "
                    "model's full vocabulary\n",
                    tok_path, okv_tokenizer_n_vocab(tok), m->cfg.vocab_size);
    }
    if (!tok)
        cli_die("%s has no tokenizer (tokenizer.json): the server needs one", model_path);
    if (chat_tpl)
        cli_chat_template(tok, chat_tpl);
    if (tool_parser) {   /* vLLM's parser name, against the format the template writes */
        const enum okv_chat_tools tf = okv_tokenizer_chat_tools(tok);
        const enum okv_chat_tools want = !strcmp(tool_parser, "hermes") ? OKV_CHAT_TOOLS_HERMES : OKV_CHAT_TOOLS_LLAMA31;
        if (tf != want)
            cli_die("--tool-call-parser %s: the chat template %s; give --chat-template with a template of that format",
                    tool_parser, tf == OKV_CHAT_TOOLS_NONE     ? "offers no tools"
                                 : tf == OKV_CHAT_TOOLS_HERMES ? "writes hermes calls (<tool_call> blocks)"
                                                               : "writes llama3_json calls");
    }
    if ((ssl_key == NULL) != (ssl_cert == NULL))
        cli_die("--ssl-keyfile and --ssl-certfile go together");
    const struct okv_model_config *cfg = &m->cfg;
    int max_ctx = ctx > 0 ? ctx : (cfg->max_ctx > 0 ? cfg->max_ctx : 4096);

    /* Device tier: --kv-pool-gb bytes (sized in the backend's own precision), else
     * max_seqs full contexts capped at 2 GiB of float KV on the CPU. Sparse mode
     * sizes it from the budget and max_seqs, and --kv-pool-gb is its limit. */
    okv_backend *be = cli_backend(device, threads, tp, cfg);
    /* On a GPU the default is vLLM's: 0.9 of its memory, and up to 256 requests running */
    const bool util_default = be->ops->device_mem && gpu_util <= 0 && pool_gb <= 0;
    if (util_default)
        gpu_util = 0.9;
    if (be->ops->device_mem && !max_seqs_set)
        max_seqs = 256;
    if (gpu_util > 0) {
        if (pool_gb > 0)
            cli_die("--gpu-memory-utilization and --kv-pool-gb both size the device KV pool: give one");
        pool_gb = pool_from_util(be, m, cfg, gpu_util, max_batched, tp, util_default);
    }
    size_t slot_bytes = (size_t)cfg->n_layers * (size_t)cfg->n_kv_heads * 2 * (size_t)block * (size_t)cfg->head_dim * sizeof(float);
    int ctx_blocks = (max_ctx + block - 1) / block;
    long slots = 0;
    if (pool_gb <= 0 && kv_budget == 0) {
        slots = (long)max_seqs * ctx_blocks;
        long cap = (long)(((size_t)2 << 30) / slot_bytes);
        if (slots > cap)
            slots = cap > ctx_blocks ? cap : ctx_blocks;
    }
    int host_blocks = 0;
    enum okv_status st;
    /* a host block (every layer and KV head) in the host tier's storage */
    size_t host_block_bytes = 0;
    if (kv_budget > 0) {
        const size_t hub = okv_engine_host_unit_bytes(be, cfg, block, host_fp8);
        if (!hub)
            cli_die("cannot size the host KV tier: %s", okv_last_error());
        host_block_bytes = hub * (size_t)cfg->n_kv_heads * (size_t)cfg->n_layers;
    }
    if (host_fp8 && kv_budget == 0)
        fprintf(stderr, "oasiskv serve: note: --kv-host-dtype fp8 applies to the host tier of sparse mode (--kv-budget N); dense "
                        "serving has none\n");
    if (kv_budget > 0 && host_gb > 0) {
        host_blocks = (int)(host_gb * (double)(1ull << 30) / (double)host_block_bytes);
        if (host_blocks < ctx_blocks)
            cli_die("--kv-host-gb %g holds %d blocks: not even one full context (%d blocks)", host_gb, host_blocks, ctx_blocks);
    }

    struct okv_engine_params ep = {.block_size = block, .kv_slots = (int)slots, .max_seqs = max_seqs,
                                   .max_ctx = max_ctx, .max_batch_tokens = max_batched, .kv_budget = kv_budget,
                                   .predict = predict, .ahead_after_attention = after_attn,
                                   .host_blocks = host_blocks, .tight_device = true,
                                   .cache_factor = (float)cache_factor, .sticky = (float)sticky,
                                   .key_code_bits = key_code_bits, .host_fp8 = host_fp8, .dense_while_room = dense_while_room,
                                   .verify_inline = verify_inline, .verify_defer = verify_defer, .merge = merge,
                                   .prefix_caching = prefix_caching < 0 ? !(kv_budget > 0 && host_fp8) : prefix_caching == 1,
                                   .device_bytes_limit = (size_t)(pool_gb * (double)(1ull << 30))};
    if (kv_budget > 0) {
        /* sparse: as many sequences as the device pool holds (each needs its budget,
         * window and selection quota), and a host tier of at most half the RAM */
        size_t ub = okv_engine_unit_bytes(be, cfg, block);
        if (!ub)
            cli_die("cannot size the KV tiers: %s", okv_last_error());
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        double host_cap = ram / 2 / (double)host_block_bytes;
        bool host_auto = !host_blocks;
        const int host_given = host_blocks;
        if (!host_auto)
            host_cap = host_blocks;
        {
            double want = (double)max_seqs * ctx_blocks;
            host_blocks = (int)(want < host_cap ? want : host_cap);
            if (host_blocks < ctx_blocks)
                cli_die("the host has too little memory for one full context of KV");
        }
        ep.host_blocks = host_blocks;
        if (pool_gb > 0) {
            size_t limit = (size_t)(pool_gb * (double)(1ull << 30));
            /* the pool is per device: with tensor parallelism a device holds some KV heads */
            struct okv_model_config dev_cfg = *cfg;
            dev_cfg.n_kv_heads = okv_backend_kv_heads_per_device(be, cfg->n_kv_heads);
            size_t need = fit_pool(&ep, &dev_cfg, ub, limit, max_seqs, ctx_blocks, host_cap);
            if (need > limit && !cache_factor_set && ep.cache_factor > 1.0f) {
                /* the default cache factor is a speed choice: a pool too small for one
                 * sequence with it takes the selection alone */
                ep.cache_factor = 1.0f;
                need = fit_pool(&ep, &dev_cfg, ub, limit, max_seqs, ctx_blocks, host_cap);
                if (need <= limit)
                    fprintf(stderr, "oasiskv serve: the %g GiB device pool is too small for the default --kv-cache-factor %g; "
                                    "using 1\n", pool_gb, cache_factor);
            }
            if (need > limit) {
                /* not even one sequence: say what takes the room (the summaries of a large
                 * host tier live on the device) */
                const double summ = (double)ep.host_blocks * cfg->n_layers * dev_cfg.n_kv_heads * (double)(ub / (size_t)block);
                cli_die("--kv-pool-gb %g cannot hold one sparse sequence at budget %d: it needs %.1f MiB, of which %.1f MiB "
                        "are the block summaries of the %.1f GiB host tier (raise --kv-pool-gb%s%s)",
                        pool_gb, kv_budget, (double)need / 1048576.0, summ / 1048576.0,
                        (double)ep.host_blocks * (double)host_block_bytes / (double)(1ull << 30),
                        host_auto ? "" : " or lower --kv-host-gb", ep.cache_factor > 1.0f ? " or --kv-cache-factor" : "");
            }
            if (ep.max_seqs < max_seqs)
                fprintf(stderr, "oasiskv serve: the %g GiB device pool holds %d sparse sequences at budget %d\n", pool_gb,
                        ep.max_seqs, kv_budget);
            max_seqs = ep.max_seqs;
        }
        if (!host_auto && ep.host_blocks < host_given)
            fprintf(stderr, "oasiskv serve: --kv-host-gb %g: %d sequences of %d blocks use %.1f GiB of it; the host tier takes "
                            "that (each host block's summaries live on the device)\n", host_gb, max_seqs, ctx_blocks,
                    (double)ep.host_blocks * (double)host_block_bytes / (double)(1ull << 30));
        /* pinning a large host tier takes a while (H200 host: 85 GiB in ~60 s): say so */
        double gib = (double)ep.host_blocks * (double)host_block_bytes / (double)(1ull << 30);
        if (gib >= 1.0)
            fprintf(stderr, "oasiskv serve: allocating the host KV tier: %.1f GiB for %d blocks of %d tokens (--kv-host-gb "
                            "bounds it; pinned memory on a GPU takes about a second per GiB)\n",
                    gib, ep.host_blocks, block);
    }
    okv_engine *e = NULL;
    st = okv_engine_create(m, be, &ep, &e);
    /* the pool was sized by an estimate: should the allocation still exceed the pool, one
     * sequence fewer (twice at most) rather than no server */
    for (int retry = 0; st == OKV_ERR_NO_KV_SPACE && kv_budget > 0 && pool_gb > 0 && ep.max_seqs > 1 && retry < 2; retry++) {
        fprintf(stderr, "oasiskv serve: %s; trying %d sequences\n", okv_last_error(), ep.max_seqs - 1);
        max_seqs = --ep.max_seqs;
        st = okv_engine_create(m, be, &ep, &e);
    }
    /* the pool of --gpu-memory-utilization came from an estimate of the rest: out of device
     * memory, a pool 15% smaller (three times at most) rather than no server */
    for (int retry = 0; st == OKV_ERR_NO_MEMORY && gpu_util > 0 && retry < 3; retry++) {
        ep.device_bytes_limit = ep.device_bytes_limit / 100 * 85;
        fprintf(stderr, "oasiskv serve: %s; trying a device KV pool of %.2f GiB\n", okv_last_error(),
                (double)ep.device_bytes_limit / (double)(1ull << 30));
        st = okv_engine_create(m, be, &ep, &e);
    }
    if (st != OKV_OK)
        cli_die("cannot build the engine: %s", okv_last_error());
    if (spec_adaptive && !draft)
        cli_die("serve: --spec-adaptive needs --draft");
    okv_drafter *drafter = NULL;
    if (draft && (st = okv_drafter_ngram_create(NULL, &drafter)) != OKV_OK)
        cli_die("--draft: %s", okv_last_error());
    struct okv_sched_params sp = {.max_num_seqs = max_seqs, .max_num_batched_tokens = max_batched, .drafter = drafter,
                                  .spec_tokens = spec_k, .spec_adaptive = spec_adaptive, .sync_steps = !async_sched,
                                  .priority_policy = prio_policy};
    okv_sched *s = NULL;
    struct okv_engine_stats es;   /* read before the scheduler's thread runs the engine */
    okv_engine_stats_get(e, &es);
    if ((st = okv_sched_create(e, tok, &sp, &s)) != OKV_OK || (st = okv_sched_start(s)) != OKV_OK)
        cli_die("cannot start the scheduler: %s", okv_last_error());

    char *default_name = base_name(model_path);
    struct okv_server_params srv = {.host = host, .port = port, .model_name = name ? name : default_name,
                                    .model_alias = name ? NULL : model_path, .model_root = model_path,
                                    .api_key = api_key, .max_ctx = okv_engine_max_ctx(e), .has_seed = has_seed,
                                    .seed = seed, .reasoning = reasoning, .chat_template_kwargs = chat_kwargs,
                                    .prompt_tokens_details = prompt_details, .priority_policy = prio_policy,
                                    .max_stored_responses = max_stored, .max_logprobs = max_logprobs ? max_logprobs : -1,
                                    .tokens_as_ids = tokens_as_ids, .response_role = response_role,
                                    .cors_origins = cors_origins, .cors_methods = cors_methods,
                                    .cors_headers = cors_headers, .cors_credentials = cors_credentials,
                                    .tls_key_file = ssl_key, .tls_cert_file = ssl_cert};
    /* the model's sampling defaults, as vLLM takes them (generation_config.json beside the weights) */
    {
        struct stat gs;
        const char *gdir = strcmp(gen_config, "vllm") == 0                        ? NULL
                           : strcmp(gen_config, "auto") != 0                      ? gen_config
                           : stat(model_path, &gs) == 0 && S_ISDIR(gs.st_mode) ? model_path
                                                                               : NULL;
        if (strcmp(gen_config, "auto") != 0 && strcmp(gen_config, "vllm") != 0 &&
            !(stat(gen_config, &gs) == 0 && S_ISDIR(gs.st_mode)))
            cli_die("--generation-config %s: not auto, vllm or a folder", gen_config);
        if (gdir && okv_gen_defaults_load(gdir, &srv.gen) != OKV_OK)
            cli_die("%s", okv_last_error());
        char line[256];
        if (okv_gen_defaults_describe(&srv.gen, line, sizeof line))
            fprintf(stderr, "oasiskv serve: default sampling parameters from %s/generation_config.json (as vLLM):%s; "
                            "requests override them, --generation-config vllm ignores the file\n", gdir, line);
    }
    okv_server *sv = NULL;
    if ((st = okv_server_create(s, tok, &srv, &sv)) != OKV_OK)
        cli_die("%s", okv_last_error());
    fprintf(stderr, "oasiskv serve: model %s (%s), context %d, device KV tier %.0f MiB (%d group blocks of %d tokens), "
                    "max %d running, %s%s%s%s\n",
            srv.model_name, model_path, okv_engine_max_ctx(e), (double)es.device_bytes_capacity / (1 << 20),
            okv_engine_blocks_total(e), block, max_seqs,
            okv_engine_sparse(e) ? (okv_engine_prefix_caching(e) ? "sparse KV (OasisKV), prefix caching" : "sparse KV (OasisKV)")
                                 : okv_engine_prefix_caching(e) ? "dense KV, prefix caching" : "dense KV",
            okv_engine_dense_while_room(e) ? ", dense while room" : "", drafter ? ", ngram drafts" : "",
            okv_sched_overlaps(s) ? ", async scheduling" : "");
    fprintf(stderr, "oasiskv serve: listening on %s://%s:%d\n", ssl_key ? "https" : "http", host, okv_server_port(sv));
    fflush(stderr);

    pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
    /* poll with a timeout, not a bare read: a sanitizer that defers handlers
     * runs them at its next intercepted call */
    unsigned char sig = 0;
    for (;;) {
        struct pollfd pfd = {.fd = sig_pipe[0], .events = POLLIN};
        if (poll(&pfd, 1, 500) > 0 && read(sig_pipe[0], &sig, 1) == 1)
            break;
    }
    fprintf(stderr, "oasiskv serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    okv_server_free(sv);
    okv_sched_free(s);
    okv_drafter_free(drafter);
    okv_engine_free(e);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    okv_free(default_name);
    int64_t live = okv_alloc_live_count(OKV_TAG_SERVER);
    if (live)
        fprintf(stderr, "oasiskv serve: warning: %lld server allocations still live\n", (long long)live);
    fprintf(stderr, "oasiskv serve: stopped\n");
    return 0;
}
