/* oasiskv tokenize: token ids of a text. */
#include "cli.h"

#include <string.h>

static const char *help =
    "usage: oasiskv tokenize [-m PATH] -p TEXT [--json] [--no-bos] [--special]\n"
    "\n"
    "  -m, --model PATH   .gguf file or Hugging Face folder (default: the SmolLM2 model in models/)\n"
    "  -p, --prompt TEXT  the text\n"
    "  --no-bos           never add the BOS token\n"
    "  --special          match special tokens written in the text (<|im_start|>, ...)\n"
    "  --json             print {\"tokens\": [...]}; otherwise one 'id<TAB>piece' per line\n";

int cmd_tokenize(int argc, char **argv)
{
    const char *model_path = NULL, *text = NULL;
    bool json = false, no_bos = false, special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            text = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else {
            cli_die("tokenize: unknown option '%s' (see oasiskv tokenize --help)", a);
        }
    }
    if (!text)
        cli_die("tokenize: -p TEXT is required");
    if (!model_path)
        model_path = cli_default_model();
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load(model_path, &m, &tok);
    if (!tok)
        cli_die("%s has no tokenizer (tokenizer.json)", model_path);
    int32_t *ids = NULL;
    size_t n = 0;
    if (okv_tokenizer_encode(tok, text, strlen(text), !no_bos && okv_tokenizer_add_bos(tok), special, &ids, &n) != OKV_OK)
        cli_die("cannot tokenize: %s", okv_last_error());
    if (json) {
        printf("{\"tokens\": [");
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? ", " : "", ids[i]);
        printf("]}\n");
    } else {
        for (size_t i = 0; i < n; i++) {
            const char *s = okv_tokenizer_token_str(tok, ids[i]);
            printf("%d\t%s\n", ids[i], s ? s : "");
        }
    }
    okv_free(ids);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
