/* OasisKV common definitions: status codes, logging, allocation accounting.
 *
 * Every function of the library that can fail on input or resources returns an
 * enum okv_status and leaves a message that names the file, field or request at
 * fault in a thread-local buffer (okv_last_error()). The library never exits and
 * prints nothing to stdout; diagnostics go through the settable log callback. */
#ifndef OASISKV_COMMON_H
#define OASISKV_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OKV_VERSION_STRING "0.1.0"   /* oasiskv --version, GET /version */

enum okv_status {
    OKV_OK = 0,
    OKV_ERR_INVALID_ARG = -1,   /* a bad argument or flag value */
    OKV_ERR_IO = -2,            /* a file cannot be opened or read */
    OKV_ERR_FORMAT = -3,        /* a file is truncated, corrupt or malformed */
    OKV_ERR_UNSUPPORTED = -4,   /* a valid input we do not support (arch, dtype) */
    OKV_ERR_NO_MEMORY = -5,     /* host allocation failed */
    OKV_ERR_NO_KV_SPACE = -6,   /* the KV pool has no free block: queue or preempt */
    OKV_ERR_CONTEXT = -7,       /* a sequence would exceed the context length */
    OKV_ERR_BACKEND = -8,       /* a backend (CUDA, cuBLAS) call failed */
    OKV_ERR_NOT_FOUND = -9,     /* a named tensor, key or token is missing */
    OKV_ERR_INTERNAL = -10,
};

/* Short constant name of a status ("invalid argument", ...). */
const char *okv_status_str(enum okv_status st);

/* The message of the last error set on this thread ("" if none). Valid until the
 * next library call on this thread. */
const char *okv_last_error(void);

/* Set the thread's last error message (printf-style) and return st, so that
 * callers can write `return okv_set_error(OKV_ERR_FORMAT, "%s: bad magic", path);` */
enum okv_status okv_set_error(enum okv_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

enum okv_log_level { OKV_LOG_LEVEL_ERROR = 0, OKV_LOG_LEVEL_WARN, OKV_LOG_LEVEL_INFO, OKV_LOG_LEVEL_DEBUG };
typedef void (*okv_log_fn)(enum okv_log_level level, const char *msg, void *user);

/* Install a log callback (NULL restores the default: stderr, WARN and above).
 * Not thread-safe against concurrent logging; call once at start. */
void okv_log_set(okv_log_fn fn, void *user, enum okv_log_level max_level);
void okv_log(enum okv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define OKV_LOG_ERROR(...) okv_log(OKV_LOG_LEVEL_ERROR, __VA_ARGS__)
#define OKV_LOG_WARN(...)  okv_log(OKV_LOG_LEVEL_WARN, __VA_ARGS__)
#define OKV_LOG_INFO(...)  okv_log(OKV_LOG_LEVEL_INFO, __VA_ARGS__)
#define OKV_LOG_DEBUG(...) okv_log(OKV_LOG_LEVEL_DEBUG, __VA_ARGS__)

/* Invariants only, never input validation: aborts with file and line. */
void okv_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define OKV_ASSERT(x) do { if (!(x)) okv_assert_fail(#x, __FILE__, __LINE__); } while (0)

/* Counted allocation. Every allocation of the library goes through these with a
 * tag, so that tests can prove nothing leaked (okv_alloc_live(tag) == 0). */
enum okv_alloc_tag {
    OKV_TAG_MISC = 0, OKV_TAG_MODEL, OKV_TAG_TOKENIZER, OKV_TAG_BACKEND,
    OKV_TAG_KV, OKV_TAG_ENGINE, OKV_TAG_SERVER, OKV_TAG_COUNT
};
void *okv_malloc(size_t n, enum okv_alloc_tag tag);
void *okv_calloc(size_t count, size_t n, enum okv_alloc_tag tag);
void *okv_realloc(void *p, size_t n, enum okv_alloc_tag tag);
void okv_free(void *p);                      /* NULL is fine */
char *okv_strdup(const char *s, enum okv_alloc_tag tag);
/* Bytes currently live under a tag, and live allocations (count). */
int64_t okv_alloc_live_bytes(enum okv_alloc_tag tag);
int64_t okv_alloc_live_count(enum okv_alloc_tag tag);

/* Half-precision conversions (IEEE fp16 and bfloat16), round to nearest even. */
float okv_fp16_to_f32(uint16_t h);
uint16_t okv_f32_to_fp16(float f);
float okv_bf16_to_f32(uint16_t h);
uint16_t okv_f32_to_bf16(float f);
/* FP8 E4M3 (OCP "fn": bias 7, largest finite 448, no infinities, NaN 0x7f/0xff), round to
 * nearest even, saturating: finite values and infinities past 448 become +-448, NaN stays
 * NaN. A float goes through bfloat16 first (okv_f32_to_e4m3), so that the CPU and CUDA
 * backends, which hold KV in float and bfloat16, store the same bytes in an fp8 host tier. */
uint8_t okv_bf16_to_e4m3(uint16_t b);
uint8_t okv_f32_to_e4m3(float f);
float okv_e4m3_to_f32(uint8_t x);

/* Monotonic clock in seconds. */
double okv_now(void);

#ifdef __cplusplus
}
#endif
#endif
