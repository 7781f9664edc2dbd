/* oasiskv generate: one prompt, streamed text or one JSON object. */
#include "cli.h"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/generate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *help =
    "usage: oasiskv generate [-m PATH] (-p TEXT | --prompt-tokens 1,2,3) [options]\n"
    "\n"
    "  -m, --model PATH       .gguf file or Hugging Face folder (default: the SmolLM2-135M-Instruct model in models/)\n"
    "  -p, --prompt TEXT      prompt text\n"
    "  --prompt-tokens IDS    prompt as comma-separated token ids\n"
    "  -n, --max-tokens N     tokens to generate (default 128)\n"
    "  --temp T               temperature; 0 is greedy (default 0.8)\n"
    "  --top-p P              nucleus sampling (default 0.95; 1 = off)\n"
    "  --top-k K              top-k sampling (default 40; 0 = off)\n"
    "  --seed S               random seed (default: from the clock)\n"
    "  --stop TEXT            stop string (repeatable)\n"
    "  --ignore-eos           keep generating through end-of-generation tokens\n"
    "  --chat                 wrap the prompt in the model's chat template\n"
    "  --system TEXT          system message for --chat\n"
    "  --threads N            CPU threads (default: all cores)\n"
    "  --device NAME          cpu or cuda (default cpu)\n"
    "  --ctx N                context length to serve (default: the model's)\n"
    "  --block-size N         KV block size in tokens (default 16)\n"
    "  --prefill-chunk N      prompt tokens per forward pass (default 512)\n"
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
    const char *model_path = NULL, *prompt = NULL, *prompt_ids = NULL, *system = NULL, *device = "cpu";
    struct okv_gen_params gp = {.max_tokens = 128, .sampling = {0.8f, 40, 0.95f, 0}};
    bool seed_set = false, chat = false, json = false;
    int threads = 0, ctx = 0, block = 16, chunk = 512;
    const char *stops[16];
    int n_stop = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            prompt = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--prompt-tokens")) {
            prompt_ids = cli_value(argc, argv, &i);
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
        } else if (!strcmp(a, "--threads")) {
            threads = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--device")) {
            device = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--ctx")) {
            ctx = cli_int(a, cli_value(argc, argv, &i), 16, 1 << 22);
        } else if (!strcmp(a, "--block-size")) {
            block = cli_int(a, cli_value(argc, argv, &i), 1, 256);
        } else if (!strcmp(a, "--prefill-chunk")) {
            chunk = cli_int(a, cli_value(argc, argv, &i), 1, 1 << 16);
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            cli_die("generate: unknown option '%s' (see oasiskv generate --help)", a);
        }
    }
    if (!prompt == !prompt_ids)
        cli_die("generate: give exactly one of -p TEXT or --prompt-tokens IDS");
    if (chat && !prompt)
        cli_die("generate: --chat needs -p TEXT");
    if (!seed_set)
        gp.sampling.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    gp.stop = stops;
    gp.n_stop = n_stop;
    gp.prefill_chunk = chunk;
    if (!model_path)
        model_path = cli_default_model();

    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load(model_path, &m, &tok);

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
                msgs[nm++] = (struct okv_chat_msg){"system", system};
            msgs[nm++] = (struct okv_chat_msg){"user", prompt};
            if ((st = okv_tokenizer_apply_chat(tok, msgs, nm, true, &text)) != OKV_OK)
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

    struct okv_backend_params bp = {threads};
    okv_backend *be = NULL;
    if ((st = okv_backend_create(device, &bp, &be)) != OKV_OK)
        cli_die("%s", okv_last_error());
    int need = (int)n_ids + gp.max_tokens;
    if (need > max_ctx)
        need = max_ctx;
    struct okv_engine_params ep = {.block_size = block, .kv_slots = (need + block - 1) / block + 1,
                                   .max_ctx = max_ctx, .max_batch_tokens = chunk};
    okv_engine *e = NULL;
    if ((st = okv_engine_create(m, be, &ep, &e)) != OKV_OK)
        cli_die("cannot build the engine: %s", okv_last_error());

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
               "\"prefill_tokens_per_s\": %.2f, \"decode_tokens_per_s\": %.2f}}\n",
               res.finish_reason, res.prompt_tokens, res.n_tokens, pf, dc);
    } else {
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "[prompt %d tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | finish: %s]\n",
                res.prompt_tokens, pf, res.n_tokens, dc, res.finish_reason);
    }
    okv_gen_result_free(&res);
    okv_free(ids);
    okv_engine_free(e);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
