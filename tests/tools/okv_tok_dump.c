/* okv_tok_dump: encode a JSON list of strings with the C tokenizer and print the ids
 * as JSON, for tests/py/test_tokenizer_ref.py to compare with Hugging Face tokenizers.
 *
 * usage: okv_tok_dump SOURCE CORPUS.json
 *   SOURCE: a .gguf file, a tokenizer.json file, or a folder with tokenizer.json
 * prints {"n_vocab": N, "pretok": P, "plain": [[ids]...], "special": [[ids]...],
 *         "roundtrip_fail": [indices], "encode_seconds": s}
 * plain: parse_special off; special: parse_special on; both without BOS.
 * roundtrip_fail: strings where decode(encode(s)) != s (either mode); decoded_hex: decode of the
 * special mode's ids (special tokens kept), in hex. */
#include "oasiskv/gguf.h"
#include "oasiskv/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

static int load(const char *src, okv_tokenizer **t, okv_gguf **g)
{
    size_t n = strlen(src);
    struct stat sb;
    enum okv_status st;
    *g = NULL;
    if (n > 5 && strcmp(src + n - 5, ".gguf") == 0) {
        if ((st = okv_gguf_open(src, g)) != OKV_OK)
            return st;
        return okv_tokenizer_from_gguf(*g, t);
    }
    if (stat(src, &sb) == 0 && S_ISDIR(sb.st_mode))
        return okv_tokenizer_from_hf_dir(src, t);
    return okv_tokenizer_from_json_file(src, t);
}

static void print_ids(const int32_t *ids, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    putchar(']');
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SOURCE CORPUS.json\n", argv[0]);
        return 2;
    }
    okv_tokenizer *t = NULL;
    okv_gguf *g = NULL;
    if (load(argv[1], &t, &g) != OKV_OK) {
        fprintf(stderr, "okv_tok_dump: %s\n", okv_last_error());
        okv_gguf_close(g);
        return 1;
    }
    size_t len;
    char *text = slurp(argv[2], &len);
    cJSON *corpus = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    if (!cJSON_IsArray(corpus)) {
        fprintf(stderr, "okv_tok_dump: %s: not a JSON list\n", argv[2]);
        return 1;
    }
    int n_items = cJSON_GetArraySize(corpus);
    char *fails = calloc((size_t)n_items + 1, 1);
    char **decoded = calloc((size_t)n_items + 1, sizeof(char *));   /* special mode's decode, hex */
    double secs = 0;
    printf("{\"n_vocab\": %d, \"pretok\": %d", okv_tokenizer_n_vocab(t), (int)okv_tokenizer_pretok(t));
    for (int mode = 0; mode < 2; mode++) {
        printf(",\n\"%s\": [", mode ? "special" : "plain");
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, corpus) {
            const char *s = cJSON_IsString(e) ? e->valuestring : "";
            size_t sl = strlen(s), n, dl;
            int32_t *ids;
            char *back;
            double t0 = okv_now();
            if (okv_tokenizer_encode(t, s, sl, false, mode == 1, &ids, &n) != OKV_OK) {
                fprintf(stderr, "okv_tok_dump: encode item %d: %s\n", i, okv_last_error());
                return 1;
            }
            secs += okv_now() - t0;
            if (okv_tokenizer_decode(t, ids, n, false, &back, &dl) != OKV_OK) {
                fprintf(stderr, "okv_tok_dump: decode item %d: %s\n", i, okv_last_error());
                return 1;
            }
            if (dl != sl || memcmp(back, s, sl) != 0)
                fails[i] = 1;
            if (mode == 1 && (decoded[i] = malloc(2 * dl + 1))) {
                for (size_t k = 0; k < dl; k++)
                    sprintf(decoded[i] + 2 * k, "%02x", (unsigned char)back[k]);
                decoded[i][2 * dl] = 0;
            }
            printf(i ? ",\n" : "\n");
            print_ids(ids, n);
            okv_free(ids);
            okv_free(back);
            i++;
        }
        printf("]");
    }
    printf(",\n\"roundtrip_fail\": [");
    for (int i = 0, k = 0; i < n_items; i++)
        if (fails[i])
            printf(k++ ? ",%d" : "%d", i);
    printf("],\n\"decoded_hex\": [");
    for (int i = 0; i < n_items; i++) {
        printf(i ? ",\"%s\"" : "\"%s\"", decoded[i] ? decoded[i] : "");
        free(decoded[i]);
    }
    free(decoded);
    printf("],\n\"encode_seconds\": %.6f}\n", secs);
    free(fails);
    cJSON_Delete(corpus);
    okv_tokenizer_free(t);
    okv_gguf_close(g);
    return 0;
}
