/* Status strings, the thread-local error message, logging and assertions. */
#include "oasiskv/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Thread_local char g_err[1024];

const char *okv_status_str(enum okv_status st)
{
    switch (st) {
    case OKV_OK: return "ok";
    case OKV_ERR_INVALID_ARG: return "invalid argument";
    case OKV_ERR_IO: return "I/O error";
    case OKV_ERR_FORMAT: return "malformed input";
    case OKV_ERR_UNSUPPORTED: return "unsupported";
    case OKV_ERR_NO_MEMORY: return "out of memory";
    case OKV_ERR_NO_KV_SPACE: return "no KV space";
    case OKV_ERR_CONTEXT: return "context length exceeded";
    case OKV_ERR_BACKEND: return "backend error";
    case OKV_ERR_NOT_FOUND: return "not found";
    case OKV_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *okv_last_error(void) { return g_err; }

enum okv_status okv_set_error(enum okv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return st;
}

static okv_log_fn g_log_fn;
static void *g_log_user;
static enum okv_log_level g_log_max = OKV_LOG_LEVEL_WARN;

void okv_log_set(okv_log_fn fn, void *user, enum okv_log_level max_level)
{
    g_log_fn = fn;
    g_log_user = user;
    g_log_max = max_level;
}

void okv_log(enum okv_log_level level, const char *fmt, ...)
{
    if (level > g_log_max)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (g_log_fn) {
        g_log_fn(level, buf, g_log_user);
        return;
    }
    static const char *names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "oasiskv %s: %s\n", names[level], buf);
}

void okv_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "oasiskv: internal invariant failed: %s at %s:%d\n", expr, file, line);
    abort();
}

double okv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
