/* oasiskv generate: one prompt, streamed text or one JSON object. */
#include "cli.h"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/generate.h"
#include "oasiskv/structured.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *help =
    "usage: oasiskv generate [-m PATH] (-p TEXT | --prompt-file FILE | --prompt-tokens 1,2,3) [options]\n"
    "\n"
    "  -m, --model PATH       .gguf file or Hugging Face folder (default: the SmolLM2-135M-Instruct model in models/)\n"
    "  -p, --prompt TEXT      prompt text\n"
    "  --prompt-file FILE     prompt text from FILE (- for standard input): prompts longer than a command\n"
    "                         line allows (Linux caps one argument at 128 KiB)\n"
    "  --prompt-tokens IDS    prompt as comma-separated token ids; @FILE reads them from FILE\n"
    "  -n, --max-tokens N     tokens to generate (default 128)\n"
    "  --temp T               temperature; 0 is greedy (default 0.8)\n"
    "  --top-p P              nucleus sampling (default 0.95; 1 = off)\n"
    "  --top-k K              top-k sampling (default 40; 0 = off)\n"
    "  --seed S               random seed (default: from the clock)\n"
    "  --stop TEXT            stop string (repeatable)\n"
    "  --ignore-eos           keep generating through end-of-generation tokens\n"
    "  --chat                 wrap the prompt in the model's chat template\n"
    "  --system TEXT          system message for --chat\n"
    "  --chat-template T      the chat template for --chat: a file of it (Jinja), or the text itself\n"
    "  --chat-template-kwargs JSON  the template's variables for --chat: enable_thinking, date_string, e.g.\n"
    "                         '{\"enable_thinking\": false}'\n"
    "  --threads N            CPU threads (default: all cores)\n"
    "  --device NAME          cpu or cuda (default: cuda when a GPU is present)\n"
    "  --tensor-parallel-size N     shard the model over N GPUs (tensor parallelism; default 1)\n"
    "  --ctx N                context length to serve (default: the model's)\n"
    "  --block-size N         KV block size in tokens (default 16)\n"
    "  --prefill-chunk N      prompt tokens per forward pass (default 512)\n"
    "  --kv-budget N|dense    OasisKV: tokens of sink + window + selected KV blocks per (layer, KV head)\n"
    "                         (default 2048); dense: attend to every block\n"
    "  --predict MODE         current | lookahead | oracle | layer-ahead | layer-ahead-attn: which queries\n"
    "                         choose the next step's blocks (oracle: each layer's own, inline; layer-ahead:\n"
    "                         estimated a layer early, at its start; layer-ahead-attn: after its attention)\n"
    "                         (default lookahead; oracle is for evaluation)\n"
    "  --dense-layers N       keep the first N layers dense (default 0)\n"
    "  --kv-cache-factor F    device units per selected block (default 1; 2 keeps twice the selection, LRU)\n"
    "  --kv-sticky F          sticky selection (0 to 0.5, default 0): F*k more blocks per prediction\n"
    "                         (and layer-ahead selection), resident first\n"
    "  --kv-host-dtype T      host KV tier storage: auto (the device tier's precision, default) or fp8 (E4M3)\n"
    "  --kv-key-codes B       per-token key codes of B bits a channel (1, 2, 4; default 0: none): blocks are\n"
    "                         scored by half their keys' max product as the codes see them, half Quest's bound\n"
    "  --kv-device-mb M       byte budget of the device KV tier in MiB (default: sized for the request)\n"
    "  --recall               measure prediction recall (scores every step twice)\n"
    "  --draft D              speculative decoding: ngram (prompt lookup), self (the model with a streaming\n"
    "                         256-token KV) or model:PATH (a draft model with the same vocabulary)\n"
    "  --spec-tokens K        draft tokens per step with --draft (default 4, at most 32)\n"
    "  --spec-adaptive        with --draft: draft 0..K tokens a step, the number that maximizes the expected\n"
    "                         tokens over the step's cost (the running acceptance, the measured forward and\n"
    "                         draft times); at least 1 where drafted rows choose blocks (lookahead,\n"
    "                         --kv-verify-inline)\n"
    "  --kv-verify-inline     sparse with --draft: a verify step selects its blocks with its own rows' queries\n"
    "                         (fetching what the prediction missed) instead of its previous step's prediction\n"
    "  --kv-merge auto|share|rank\n"
    "                         sparse, how several rows' selections become one: share gives half the budget to\n"
    "                         the first row's own top blocks and the rest to the rows' best scores; rank takes each\n"
    "                         row's own top blocks in turn; auto (default) ranks a step's own rows (verify steps\n"
    "                         with --kv-verify-inline) and shares drafted rows' predictions (bench/ACCURACY.md)\n"
    "  --kv-verify-defer, --no-kv-verify-defer\n"
    "                         sparse with --draft, greedy: a verify step whose drafted rows read the predicted set\n"
    "                         drops its own token and runs its last accepted draft again on a fresh prediction,\n"
    "                         the dropped token drafted again after it (default: on)\n"
    "  --json-object          structured output: the text is a JSON object (the server's response_format\n"
    "                         json_object); not with --draft\n"
    "  --json-schema FILE     structured output: the text is an instance of the JSON schema in FILE (the subset\n"
    "                         the server takes; - for standard input)\n"
    "  --regex PATTERN        structured output: the whole text fully matches the regular expression (the server's\n"
    "                         guided_regex; Python re syntax, a subset); not with --draft\n"
    "  --grammar FILE         structured output: the whole text is a sentence of the grammar in FILE, GBNF (start\n"
    "                         rule root) or Lark (start rule start; the server's guided_grammar; - for standard\n"
    "                         input); not with --draft\n"
    "  --load-format dummy    random weights from PATH's config.json alone (timing only)\n"
    "  --json                 print one JSON object instead of streaming text\n";

struct stream_ctx {
    bool json;
};

static bool on_token(void *user, int32_t token, const char *text, size_t len)
{
    struct stream_ctx *c = user;
    if (!c->json && len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
    return true;
}

int cmd_generate(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *prompt_ids = NULL, *system = NULL, *device = NULL;
    char *prompt_buf = NULL, *ids_buf = NULL;   /* --prompt-file's text, --prompt-tokens @FILE's ids */
    int tp = 1;
    struct okv_gen_params gp = {.max_tokens = 128, .sampling = {0.8f, 40, 0.95f, 0}};
    bool seed_set = false, chat = false, json = false;
    const char *chat_tpl = NULL;
    struct okv_chat_opts chat_opts = {.add_generation_prompt = true, .enable_thinking = -1};
    bool chat_kwargs = false;
    int threads = 0, ctx = 0, block = 16, chunk = 512;
    int kv_budget = 2048, dense_layers = 0;
    double kv_device_mb = 0, cache_factor = 1, sticky = 0;
    int key_code_bits = 0;
    bool host_fp8 = false;
    bool recall = false, dummy = false;
    enum okv_predict predict = OKV_PREDICT_LOOKAHEAD;
    const char *draft = NULL;   /* speculative decoding */
    int spec_tokens = 0;
    bool spec_adaptive = false;
    bool after_attn = false;   /* --predict layer-ahead-attn */
    enum okv_merge merge = OKV_MERGE_AUTO;   /* --kv-merge */
    bool verify_inline = false, verify_defer = true;   /* deferring by default: speculation keeps the accuracy */
    const char *stops[16];
    int n_stop = 0;
    char *schema_text = NULL;   /* --json-schema FILE's text */
    const char *regex = NULL;   /* --regex */
    char *grammar_text = NULL;  /* --grammar FILE's text */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (prompt)
                cli_die("generate: give exactly one of -p TEXT, --prompt-file FILE or --prompt-tokens IDS");
            prompt = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--prompt-file")) {
            if (prompt)
                cli_die("generate: give exactly one of -p TEXT, --prompt-file FILE or --prompt-tokens IDS");
            prompt = prompt_buf = cli_read_text(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--prompt-tokens")) {
            prompt_ids = cli_value(argc, argv, &i);
            if (prompt_ids[0] == '@') {
                /* ids from a file: commas, spaces and newlines all separate them */
                char *t = ids_buf = cli_read_text(a, prompt_ids + 1), *w = t;
                for (const char *c = t; *c; c++) {
                    const bool sep = *c == ',' || *c == ' ' || *c == '\n' || *c == '\r' || *c == '\t';
                    if (!sep)
                        *w++ = *c;
                    else if (w > t && w[-1] != ',')
                        *w++ = ',';
                }
                if (w > t && w[-1] == ',')
                    w--;
                *w = 0;
                prompt_ids = t;
            }
        } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) {
            gp.max_tokens = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 24);
        } else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
            gp.sampling.temperature = (float)cli_double(a, cli_value(argc, argv, &i), 0, 100);
        } else if (!strcmp(a, "--top-p")) {
            gp.sampling.top_p = (float)cli_double(a, cli_value(argc, argv, &i), 1e-6, 1);
        } else if (!strcmp(a, "--top-k")) {
            gp.sampling.top_k = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 24);
        } else if (!strcmp(a, "--seed")) {
            gp.sampling.seed = cli_u64(a, cli_value(argc, argv, &i));
            seed_set = true;
        } else if (!strcmp(a, "--stop")) {
            if (n_stop == 16)
                cli_die("--stop: at most 16 stop strings");
            stops[n_stop] = cli_value(argc, argv, &i);
            if (!*stops[n_stop])
                cli_die("--stop: empty stop string");
            n_stop++;
        } else if (!strcmp(a, "--ignore-eos")) {
            gp.ignore_eos = true;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else if (!strcmp(a, "--system")) {
            system = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--chat-template")) {
            chat_tpl = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--chat-template-kwargs")) {
            const char *v = cli_value(argc, argv, &i);
            if (okv_chat_template_kwargs(v, strlen(v), &chat_opts) != OKV_OK)
                cli_die("--chat-template-kwargs: %s", okv_last_error());
            chat_kwargs = true;
        } else if (!strcmp(a, "--threads")) {
            threads = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--tensor-parallel-size") || !strcmp(a, "-tp")) {
            tp = cli_int(a, cli_value(argc, argv, &i), 1, 16);
        } else if (!strcmp(a, "--device")) {
            device = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--ctx")) {
            ctx = cli_int(a, cli_value(argc, argv, &i), 16, 1 << 22);
        } else if (!strcmp(a, "--block-size")) {
            block = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--prefill-chunk")) {
            chunk = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 16);
        } else if (!strcmp(a, "--json-object")) {
            gp.json_object = true;
        } else if (!strcmp(a, "--json-schema")) {
            okv_free(schema_text);
    okv_free(grammar_text);
            schema_text = cli_read_text(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--regex")) {
            regex = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--grammar")) {
            okv_free(grammar_text);
            grammar_text = cli_read_text(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--kv-budget")) {
            const char *v = cli_value(argc, argv, &i);
            kv_budget = !strcmp(v, "dense") ? 0 : cli_int(a, v, 1, 1 << 24);
        } else if (!strcmp(a, "--predict")) {
            predict = cli_predict(cli_value(argc, argv, &i), NULL, &after_attn);
        } else if (!strcmp(a, "--kv-host-dtype")) {
            host_fp8 = cli_host_fp8(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-key-codes")) {
            key_code_bits = cli_int(a, cli_value(argc, argv, &i), 0, 4);
        } else if (!strcmp(a, "--kv-sticky")) {
            sticky = cli_double(a, cli_value(argc, argv, &i), 0, 0.5);
        } else if (!strcmp(a, "--kv-cache-factor")) {
            cache_factor = cli_double(a, cli_value(argc, argv, &i), 1, 64);
        } else if (!strcmp(a, "--dense-layers")) {
            dense_layers = cli_int(a, cli_value(argc, argv, &i), 0, 1 << 16);
        } else if (!strcmp(a, "--kv-device-mb")) {
            kv_device_mb = cli_double(a, cli_value(argc, argv, &i), 0.001, 1 << 24);
        } else if (!strcmp(a, "--recall")) {
            recall = true;
        } else if (!strcmp(a, "--load-format")) {
            dummy = cli_load_format_arg(cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-verify-inline")) {
            verify_inline = true;
        } else if (!strcmp(a, "--kv-merge")) {
            merge = cli_merge(a, cli_value(argc, argv, &i));
        } else if (!strcmp(a, "--kv-verify-defer") || !strcmp(a, "--no-kv-verify-defer")) {
            verify_defer = a[2] == 'k';
        } else if (!strcmp(a, "--draft")) {
            draft = cli_value(argc, argv, &i);
            if (strcmp(draft, "ngram") && strcmp(draft, "self") && (strncmp(draft, "model:", 6) || !draft[6]))
                cli_die("--draft: '%s' is not one of ngram, self, model:PATH", draft);
        } else if (!strcmp(a, "--spec-tokens")) {
            spec_tokens = cli_int(a, cli_value(argc, argv, &i), 1, OKV_SPEC_MAX_TOKENS);
        } else if (!strcmp(a, "--spec-adaptive")) {
            spec_adaptive = true;
        } else {
            cli_die("generate: unknown option '%s' (see oasiskv generate --help)", a);
        }
    }
    if (!prompt == !prompt_ids)
        cli_die("generate: give exactly one of -p TEXT, --prompt-file FILE or --prompt-tokens IDS");
    if (chat && !prompt)
        cli_die("generate: --chat needs -p TEXT or --prompt-file FILE");
    if (chat_tpl && !chat)
        cli_die("generate: --chat-template needs --chat");
    if (chat_kwargs && !chat)
        cli_die("generate: --chat-template-kwargs needs --chat");
    if (spec_tokens && !draft)
        cli_die("generate: --spec-tokens needs --draft");
    if (spec_adaptive && !draft)
        cli_die("generate: --spec-adaptive needs --draft");
    if (!seed_set)
        gp.sampling.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    gp.stop = stops;
    gp.n_stop = n_stop;
    gp.prefill_chunk = chunk;
    if (!model_path)
        model_path = cli_default_model();

    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load_format(model_path, dummy, &m, &tok);
    if (chat_tpl)
        cli_chat_template(tok, chat_tpl);

    int32_t *ids = NULL;
    size_t n_ids = 0;
    enum okv_status st;
    if (prompt) {
        if (!tok)
            cli_die("%s has no tokenizer (tokenizer.json): use --prompt-tokens", model_path);
        char *text = NULL;
        if (chat) {
            struct okv_chat_msg msgs[2];
            size_t nm = 0;
            if (system)
                msgs[nm++] = (struct okv_chat_msg){.role = "system", .content = system};
            msgs[nm++] = (struct okv_chat_msg){.role = "user", .content = prompt};
            if ((st = okv_tokenizer_render_chat(tok, msgs, nm, &chat_opts, &text)) != OKV_OK)
                cli_die("--chat: %s", okv_last_error());
        }
        const char *src = text ? text : prompt;
        /* a chat template already carries its special tokens and BOS, if any */
        st = okv_tokenizer_encode(tok, src, strlen(src), !chat && okv_tokenizer_add_bos(tok), chat, &ids, &n_ids);
        okv_free(text);
        if (st != OKV_OK)
            cli_die("cannot tokenize the prompt: %s", okv_last_error());
    } else {
        ids = cli_token_list("--prompt-tokens", prompt_ids, &n_ids);
        for (size_t i = 0; i < n_ids; i++)
            if (ids[i] >= m->cfg.vocab_size)
                cli_die("--prompt-tokens: token id %d is out of the vocabulary (size %d)", ids[i], m->cfg.vocab_size);
    }
    if (n_ids == 0)
        cli_die("the prompt is empty after tokenization");
    int max_ctx = ctx > 0 ? ctx : m->cfg.max_ctx;
    if ((int)n_ids >= max_ctx)
        cli_die("the prompt has %zu tokens; the context length is %d (it must leave room for at least one generated token)",
                n_ids, max_ctx);

    if (host_fp8 && kv_budget == 0)
        fprintf(stderr, "oasiskv generate: note: --kv-host-dtype fp8 applies to the host tier of sparse mode (--kv-budget N); dense "
                        "generation has none\n");
    okv_json_schema *schema = NULL;
    if (schema_text) {
        if (okv_json_schema_compile(schema_text, strlen(schema_text), &schema) != OKV_OK)
            cli_die("--json-schema: %s", okv_last_error());
        gp.json_schema = schema;
    }
    if (regex) {
        if (schema || gp.json_object)
            cli_die("--regex and --json-object / --json-schema: give one");
        if (okv_json_regex_compile(regex, strlen(regex), &schema) != OKV_OK)
            cli_die("--regex: %s", okv_last_error());
        gp.json_schema = schema;
    }
    if (grammar_text) {
        if (schema || gp.json_object)
            cli_die("--grammar and --json-object / --json-schema / --regex: give one");
        if (okv_json_grammar_compile(grammar_text, strlen(grammar_text), &schema) != OKV_OK)
            cli_die("--grammar: %s", okv_last_error());
        gp.json_schema = schema;
    }
    if ((gp.json_object || schema) && !tok)
        cli_die("--json-object / --json-schema / --regex / --grammar: %s has no tokenizer (tokenizer.json)", model_path);
    if ((gp.json_object || schema) && draft)
        cli_die("--json-object / --json-schema / --regex / --grammar run without --draft");
    okv_backend *be = cli_backend(device, threads, tp, &m->cfg);
    int need = (int)n_ids + gp.max_tokens;
    if (need > max_ctx)
        need = max_ctx;
    if (dense_layers > m->cfg.n_layers)
        cli_die("--dense-layers: %d is more than the model's %d layers", dense_layers, m->cfg.n_layers);
    struct okv_engine_params ep = {.block_size = block, .max_ctx = max_ctx, .max_batch_tokens = chunk,
                                   .kv_budget = kv_budget, .dense_layers = dense_layers, .predict = predict,
                                   .ahead_after_attention = after_attn,
                                   .track_recall = recall, .device_bytes_limit = (size_t)(kv_device_mb * 1048576.0),
                                   .cache_factor = (float)cache_factor, .sticky = (float)sticky,
                                   .key_code_bits = key_code_bits, .host_fp8 = host_fp8, .verify_inline = verify_inline,
                                   .verify_defer = verify_defer, .merge = merge};
    if (kv_budget == 0 && kv_device_mb == 0)
        ep.kv_slots = (need + block - 1) / block + 1;
    else if (kv_budget > 0)
        ep.host_blocks = (need + block - 1) / block + 1;
    okv_engine *e = NULL;
    if ((st = okv_engine_create(m, be, &ep, &e)) != OKV_OK)
        cli_die("cannot build the engine: %s", okv_last_error());
    okv_drafter *drafter = NULL;
    if (draft) {
        struct okv_drafter_params dp = {.max_ctx = max_ctx, .max_batch_tokens = chunk};
        if ((st = okv_drafter_create(draft, m, be, &dp, &drafter)) != OKV_OK)
            cli_die("--draft %s: %s", draft, okv_last_error());
        gp.drafter = drafter;
        gp.spec_tokens = spec_tokens ? spec_tokens : 4;
        gp.spec_adaptive = spec_adaptive;
    }

    struct stream_ctx sc = {json};
    struct okv_gen_result res;
    if ((st = okv_generate(e, tok, ids, (int)n_ids, &gp, on_token, &sc, &res)) != OKV_OK)
        cli_die("generation failed: %s", okv_last_error());

    double pf = res.prefill_s > 0 ? res.prompt_tokens / res.prefill_s : 0;
    double dc = res.decode_s > 0 && res.n_tokens > 1 ? (res.n_tokens - 1) / res.decode_s : 0;
    if (json) {
        printf("{\"prompt_tokens\": [");
        for (size_t i = 0; i < n_ids; i++)
            printf("%s%d", i ? ", " : "", ids[i]);
        printf("], \"tokens\": [");
        for (int i = 0; i < res.n_tokens; i++)
            printf("%s%d", i ? ", " : "", res.tokens[i]);
        printf("], \"text\": ");
        cli_json_str(stdout, res.text, res.text_len);
        printf(", \"finish_reason\": \"%s\", \"stats\": {\"prompt_tokens\": %d, \"generated_tokens\": %d, "
               "\"prefill_tokens_per_s\": %.2f, \"decode_tokens_per_s\": %.2f",
               res.finish_reason, res.prompt_tokens, res.n_tokens, pf, dc);
        struct okv_engine_stats ks;
        okv_engine_stats_get(e, &ks);
        printf(", \"kv\": {\"budget_tokens\": %d, \"device_bytes_peak\": %zu, \"host_bytes\": %zu, "
               "\"blocks_fetched\": %lld, \"fetch_bytes\": %lld, \"resident_in_time\": %.4f, \"stall_ms\": %.3f, "
               "\"prediction_recall\": ",
               kv_budget, ks.device_bytes_peak, ks.host_bytes_peak, (long long)ks.units_fetched, (long long)ks.fetch_bytes,
               ks.units_selected ? (double)ks.units_in_time / (double)ks.units_selected : 1.0, ks.stall_s * 1e3);
        if (ks.recall_total)
            printf("%.4f}", (double)ks.recall_hits / (double)ks.recall_total);
        else
            printf("null}");
        printf("}");
        if (drafter)
            printf(", \"spec\": {\"drafts\": %lld, \"draft_tokens\": %lld, \"accepted_tokens\": %lld, "
                   "\"acceptance_rate\": %.4f, \"mean_acceptance_length\": %.4f, \"deferred\": %lld, \"draft_s\": %.4f}",
                   (long long)res.spec.drafts, (long long)res.spec.draft_tokens, (long long)res.spec.accepted_tokens,
                   res.spec.acceptance_rate, res.spec.mean_acceptance_length, (long long)res.spec.deferred, res.spec.draft_s);
        printf("}\n");
    } else {
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "[prompt %d tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | finish: %s]\n",
                res.prompt_tokens, pf, res.n_tokens, dc, res.finish_reason);
        if (drafter)
            fprintf(stderr, "[draft %s: %lld steps, %lld/%lld drafts accepted (%.3f), %.2f tokens per step]\n", draft,
                    (long long)res.spec.drafts, (long long)res.spec.accepted_tokens, (long long)res.spec.draft_tokens,
                    res.spec.acceptance_rate, res.spec.mean_acceptance_length);
    }
    okv_gen_result_free(&res);
    okv_free(ids);
    okv_free(prompt_buf);
    okv_free(ids_buf);
    okv_free(schema_text);
    okv_free(grammar_text);
    okv_json_schema_free(schema);
    okv_drafter_free(drafter);
    okv_engine_free(e);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
