/* oasiskv info: architecture and hyper-parameters of a model. */
#include "cli.h"

#include <string.h>

int cmd_info(int argc, char **argv)
{
    const char *model_path = NULL;
    bool dummy = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs("usage: oasiskv info [-m PATH] [--load-format auto|dummy]\n\n"
                  "  -m, --model PATH       .gguf file or Hugging Face folder (default: the SmolLM2 model in models/)\n"
                  "  --load-format dummy    random weights from PATH's config.json alone\n", stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = cli_value(argc, argv, &i);
        } else if (!strcmp(a, "--load-format")) {
            dummy = cli_load_format_arg(cli_value(argc, argv, &i));
        } else {
            cli_die("info: unknown option '%s' (see oasiskv info --help)", a);
        }
    }
    if (!model_path)
        model_path = cli_default_model();
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    cli_load_format(model_path, dummy, &m, &tok);
    static char buf[16384];
    okv_model_describe(m, buf, sizeof buf);
    fputs(buf, stdout);
    if (tok)
        printf("tokenizer: byte-level BPE, %d tokens, bos %d, eos %d, chat format %s\n", okv_tokenizer_n_vocab(tok),
               okv_tokenizer_bos(tok), okv_tokenizer_eos(tok),
               okv_tokenizer_chat_format(tok) == OKV_CHAT_FORMAT_CHATML   ? "chatml"
               : okv_tokenizer_chat_format(tok) == OKV_CHAT_FORMAT_LLAMA3 ? "llama3"
                                                                          : "none");
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
