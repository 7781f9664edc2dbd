/* oasiskv: the command-line entry point. Subcommands live in cmd_*.c. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: oasiskv COMMAND [options]\n"
          "\n"
          "commands:\n"
          "  generate   generate text from a prompt\n"
          "  tokenize   print the token ids of a text\n"
          "  info       print a model's architecture and hyper-parameters\n"
          "  serve      serve an OpenAI-compatible HTTP API\n"
          "  bench      benchmark a server (bench serve) or the engine offline (bench throughput)\n"
          "  eval       accuracy of OasisKV against dense attention on long-context tasks\n"
          "\n"
          "Run 'oasiskv COMMAND --help' for the options of a command.\n"
          "\n"
          "environment:\n"
          "  OKV_LOG_LEVEL   error | warn (default) | info | debug: the messages printed to stderr\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    const char *lvl = getenv("OKV_LOG_LEVEL");
    if (lvl && *lvl) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        int l = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(lvl, names[i]))
                l = i;
        if (l < 0) {
            fprintf(stderr, "oasiskv: OKV_LOG_LEVEL '%s' is not one of error, warn, info, debug\n", lvl);
            return 2;
        }
        okv_log_set(NULL, NULL, (enum okv_log_level)l);
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("oasiskv %s\n", OKV_VERSION_STRING);
        return 0;
    }
    if (!strcmp(cmd, "generate"))
        return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize"))
        return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) { int cmd_eval(int, char **); return cmd_eval(argc - 1, argv + 1); }   /* accuracy evaluation */
    fprintf(stderr, "oasiskv: error: unknown command '%s'\n", cmd);
    usage(stderr);
    return 1;
}
