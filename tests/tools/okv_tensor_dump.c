/* okv_tensor_dump: every tensor of a GGUF file converted to float32 by the loader
 * (okv_tensor_to_f32), for tests/py/check_gguf_quants.py to compare with the `gguf`
 * package's own dequantization.
 *
 * usage: okv_tensor_dump FILE.gguf OUT_DIR
 * writes OUT_DIR/<tensor name>.f32 (raw little-endian floats) for each tensor and prints
 * one line per tensor: "<name> <dtype> <elements>"; a tensor the loader refuses prints
 * "<name> error <message>". Exit status 0 when every tensor converted. */
#include "oasiskv/gguf.h"
#include "oasiskv/tensor.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE.gguf OUT_DIR\n", argv[0]);
        return 2;
    }
    okv_gguf *g = NULL;
    if (okv_gguf_open(argv[1], &g) != OKV_OK) {
        fprintf(stderr, "%s\n", okv_last_error());
        return 1;
    }
    int bad = 0;
    for (int64_t i = 0; i < okv_gguf_n_tensors(g); i++) {
        struct okv_tensor_view v;
        if (okv_gguf_tensor(g, i, &v) != OKV_OK) {
            printf("? error %s\n", okv_last_error());
            bad = 1;
            continue;
        }
        const int64_t n = okv_tensor_nelements(&v);
        float *buf = malloc(sizeof(float) * (size_t)(n ? n : 1));
        if (!buf || okv_tensor_to_f32(&v, 0, n, buf) != OKV_OK) {
            printf("%s error %s\n", v.name, buf ? okv_last_error() : "out of memory");
            free(buf);
            bad = 1;
            continue;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.f32", argv[2], v.name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, sizeof(float), (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "cannot write %s\n", path);
            bad = 1;
        }
        if (f)
            fclose(f);
        free(buf);
        printf("%s %s %lld\n", v.name, okv_dtype_name(v.dtype), (long long)n);
    }
    okv_gguf_close(g);
    return bad;
}
