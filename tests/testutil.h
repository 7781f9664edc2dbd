/* Tiny test helpers shared by the C test programs: checks that count failures,
 * reading files, locating the repository. Header-only so each test stays one file. */
#ifndef OKV_TESTUTIL_H
#define OKV_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tu_failures, tu_checks;

/* Built with ThreadSanitizer (scripts/test.sh runs a few tests so after the plain suite): such a build
 * checks the threads' interplay, and a test may leave out a part that only repeats, 5-20 times slower, what
 * its plain run checks on the same threads (a larger model, another distribution test); it says so. */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif

#define CHECK(cond, ...) do { tu_checks++; if (!(cond)) { tu_failures++; \
    fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static inline const char *tu_src_dir(void)
{
    const char *s = getenv("OKV_SOURCE_DIR");
    return s ? s : ".";
}

/* Read a whole file; NULL if missing. Caller frees with free(). */
static inline char *tu_read_file(const char *path, size_t *len)
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
        buf[n] = 0;
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

/* The rows of a step: nq[s] rows of each of ns sequences, the last positions before kvlen[s],
 * sequence by sequence; seq, pos and slot (zeros) allocated here (free() them). Returns the rows. */
static inline int tu_step_rows(int ns, const int32_t *nq, const int32_t *kvlen, int32_t **seq, int32_t **pos, int32_t **slot)
{
    int n = 0;
    for (int s = 0; s < ns; s++)
        n += nq[s];
    *seq = malloc(4 * (size_t)n + 4);
    *pos = malloc(4 * (size_t)n + 4);
    *slot = calloc((size_t)n + 1, 4);
    for (int s = 0, t = 0; s < ns; s++)
        for (int i = 0; i < nq[s]; i++, t++) {
            (*seq)[t] = s;
            (*pos)[t] = kvlen[s] - nq[s] + i;
        }
    return n;
}

static inline int tu_finish(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}

#endif
